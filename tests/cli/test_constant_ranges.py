"""A range bound the rewrite read as a module-level int constant (``passes.constant_ranges``) is checked when Warp
builds the generated kernel: changed since, the build stops with a message that says to generate the code again
(never a loop run other than the rewrite planned). The command line's emitted module reads the constant where the user
edits it; the API's generated code binds the kernel's namespace as it was when rewritten, and so keeps the value the
rewrite read."""

import pytest
import warp as wp

from tests.support import constant_ranges
from tests.support.emitted import import_file
from tests.support.harness import f64, i32
from warp_rewrite.cli.main import main

CHANGED = "generated this loop for a bound of 3, but it is now 4"


def _launch(kernel) -> None:
    wp.launch(kernel, 2, inputs=[f64([0.2, 0.4], True), i32([0]), f64([0.0, 0.0], True)])


def test_a_constant_changed_after_the_rewrite_stops_the_build_through_the_command_line(tmp_path):
    emitted = tmp_path / "changed_width.py"
    assert main([constant_ranges.__file__, "-o", str(emitted), "-q"]) == 0
    text = emitted.read_text()
    assert "known_int(WIDTH, 3)" in text
    emitted.write_text(text.replace("WIDTH = 3", "WIDTH = 4"))
    module = import_file(emitted, "changed_width")
    with pytest.raises(Exception, match=CHANGED):
        _launch(module.over_a_width)
