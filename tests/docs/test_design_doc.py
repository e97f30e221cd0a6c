"""The design notes' stage list is the pipeline's declaration (``warp_rewrite.pipeline.stage_list``), their table of
forms the fence's (``warp_rewrite.passes.fence.form_list``)."""

from pathlib import Path

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
