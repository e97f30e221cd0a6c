"""The design notes' stage list is the pipeline's declaration (``warp_rewrite.pipeline.stage_list``)."""

from pathlib import Path

from warp_rewrite.pipeline import stage_list

DESIGN = Path(__file__).resolve().parent.parent / "docs" / "design.md"


def test_the_design_notes_list_the_pipeline_stages():
    text = DESIGN.read_text()
    listed = text.split("<!-- stages -->\n", 1)[1].split("<!-- /stages -->", 1)[0]
    assert listed == stage_list(), f"docs/design.md's stage list is not pipeline.stage_list():\n{stage_list()}"
