"""Which files ``--check`` parses: in folders, only those whose code (strings and comments aside) names a
kernel, a launch or an atomic, the only ones that can hold a finding; a file named on the command line always; and
each file once, also where it is another file's helper, named in messages as the command line names it."""

from __future__ import annotations

from tests.support.emitted import run_cli

HELPERS = """import warp as wp


@wp.func
def bump(count: wp.array[int]) -> int:
    return wp.atomic_add(count, 0, 1)
"""
KERNELS = """import warp as wp

from helpers import bump


@wp.kernel
def compact(count: wp.array[int], out: wp.array[float]):
    out[bump(count)] = 1.0
"""


def test_in_a_folder_a_file_that_names_no_kernel_launch_or_atomic_is_not_parsed(tmp_path, capsys):
    (tmp_path / "broken.py").write_text("import warp as wp\nx = (1,\n")
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "helpers.py").write_text(HELPERS)
    status, out, err = run_cli(capsys, "--check", tmp_path)
    assert status == 1 and "E999" not in out and err == "Found 2 errors.\n"
    status, out, _ = run_cli(capsys, "--check", tmp_path / "broken.py")  # named: parsed, and reported
    assert status == 1 and out == f"{tmp_path / 'broken.py'}:2:5: E999 SyntaxError: '(' was never closed\n"


def test_in_a_folder_a_kernel_launch_or_atomic_named_only_in_strings_and_comments_does_not_count(tmp_path, capsys):
    broken = '"""Builds the kernel\'s inputs."""\nimport warp as wp  # no wp.launch here\nx = (1,\n'
    (tmp_path / "broken.py").write_text(broken)
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "helpers.py").write_text(HELPERS)
    status, out, err = run_cli(capsys, "--check", tmp_path)
    assert status == 1 and "E999" not in out and err == "Found 2 errors.\n"
    (tmp_path / "broken.py").write_text(broken.replace("x = (1,", "x = (wp.launch,"))  # in its code: parsed
    status, out, _ = run_cli(capsys, "--check", tmp_path)
    assert status == 1 and out.startswith(f"{tmp_path / 'broken.py'}:3:5: E999 SyntaxError: '(' was never closed\n")


def test_a_helper_file_read_first_for_a_kernel_is_named_as_the_command_line_names_it(tmp_path, capsys, monkeypatch):
    (tmp_path / "a_kernels.py").write_text(KERNELS.replace("from helpers", "from z_helpers"))
    (tmp_path / "z_helpers.py").write_text(HELPERS)
    monkeypatch.chdir(tmp_path.parent)  # where a file's name relative to the working directory differs
    status, out, _ = run_cli(capsys, "--check", tmp_path)
    assert status == 1
    assert [line.split(": ")[0].rsplit(":", 2)[0] for line in out.splitlines()] == [
        str(tmp_path / "a_kernels.py"),
        str(tmp_path / "z_helpers.py"),  # loaded as a_kernels' helper first, reported under the command line's name
    ]
    assert f"(at {tmp_path / 'z_helpers.py'}:6:12)" in out
