"""The design notes' stage list is the pipeline's declaration (``warp_rewrite.pipeline.stage_list``), their table of
forms the fence's (``warp_rewrite.passes.fence.form_list``), their tables of builtins the table of Warp's builtins
(``warp_rewrite.passes.builtins.class_list`` and ``group_list``)."""

from pathlib import Path

import pytest

from warp_rewrite.passes.builtins import class_list, group_list
from warp_rewrite.passes.fence import form_list
from warp_rewrite.pipeline import stage_list

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"


def test_the_design_notes_list_the_pipeline_stages():
    text = DESIGN.read_text()
    listed = text.split("<!-- stages -->\n", 1)[1].split("<!-- /stages -->", 1)[0]
    assert listed == stage_list(), f"docs/design.md's stage list is not pipeline.stage_list():\n{stage_list()}"


def test_the_design_notes_list_the_fence_s_forms():
    text = DESIGN.read_text()
    listed = text.split("<!-- fence -->\n", 1)[1].split("<!-- /fence -->", 1)[0]
    assert listed == form_list(), f"docs/design.md's table of forms is not fence.form_list():\n{form_list()}"


@pytest.mark.parametrize(("tag", "generated"), [("builtins", class_list), ("builtin groups", group_list)])
def test_the_design_notes_list_the_builtin_classes_and_groups(tag, generated):
    text = DESIGN.read_text()
    listed = text.split(f"<!-- {tag} -->\n", 1)[1].split(f"<!-- /{tag} -->", 1)[0]
    assert listed == generated(), f"docs/design.md's table '{tag}' is not builtins.{generated.__name__}()"
