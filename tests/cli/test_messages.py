"""Messages that say what to do: every code's fix, the command line's own flags, honest summaries
(informational findings apart, unreadable files, no Python files), no temporary file names, WR005 naming what it
calls, and files too deeply nested for Python's parser reported rather than a traceback."""

from __future__ import annotations

import errno
import re
import tempfile

import pytest

from warp_rewrite.cli.lint import CODES
from warp_rewrite.cli.main import main


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


FIXES = re.compile(r"(wp-rewrite|wp_rewrite\(\w*\)|# noqa: WR\d+|nothing to fix|instead)")


@pytest.mark.parametrize("code", [code for code in CODES if code.startswith("WR")])
def test_every_codes_message_ends_with_its_fix(code):
    fields = dict.fromkeys(re.findall(r"\{(\w+)\}", CODES[code]), "x")
    message = CODES[code].format(**fields)
    last = re.split(r"; |: (?!WR)", message)[-1]  # the last clause; a noqa code is not one
    assert FIXES.search(last), f"{code} ends with {last!r}"


def test_a_refusal_names_the_command_line_flag(capsys, tmp_path):
    path = tmp_path / "running.py"
    path.write_text(
        "import warp as wp\n\n\n@wp.kernel\n"
        "def running(x: wp.array[float], acc: wp.array[float], out: wp.array[float]):\n"
        "    tid = wp.tid()\n    previous = wp.atomic_add(acc, 0, x[tid])\n    out[tid] = previous + acc[0]\n"
    )
    status, _, err = run_cli(capsys, path, "-o", tmp_path / "out.py")
    assert status == 1
    assert "kernel 'running': a plain read of 'acc'" in err and "or rewrite with --detach-returns" in err
    assert "detach_returns=True" not in err
    assert run_cli(capsys, path, "-o", tmp_path / "out.py", "--detach-returns")[0] == 0  # the flag it names works


INFORMATIONAL = """import warp as wp


@wp.kernel(enable_backward=False)
def counted(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0
"""
HAZARD = """import warp as wp


@wp.kernel
def compact(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0
"""


def test_select_all_counts_informational_findings_apart(capsys, tmp_path):
    (tmp_path / "informational.py").write_text(INFORMATIONAL)
    status, out, err = run_cli(capsys, "--check", "--select", "ALL", tmp_path / "informational.py")
    assert status == 0 and " WR101 " in out
    assert err == "All checks passed; 1 informational finding printed (not a hazard).\n"
    (tmp_path / "hazard.py").write_text(HAZARD)
    status, out, err = run_cli(capsys, "--check", "--select", "ALL", tmp_path)
    assert status == 1 and " WR101 " in out and " WR001 " in out
    assert err == "Found 1 error; 1 informational finding printed (not a hazard).\n"
    assert run_cli(capsys, "--check", tmp_path)[2] == "Found 1 error.\n"


def test_an_unreadable_file_is_no_pass(capsys, tmp_path):
    (tmp_path / "fine.py").write_text("x = 1\n")
    (tmp_path / "broken.py").write_bytes(b"# -*- coding: no-such-codec -*-\nx = 1\n")
    status, _, err = run_cli(capsys, "--check", tmp_path)
    assert status == 2
    assert f"wp-rewrite: error: {tmp_path / 'broken.py'}: cannot read" in err
    assert err.endswith("Found 0 errors; 1 file could not be read (see above).\n")
    assert "All checks passed" not in err


def test_a_folder_without_python_files_says_so(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    status, out, err = run_cli(capsys, "--check", tmp_path / "empty")
    assert (status, out) == (2, "")
    assert err == (
        f"wp-rewrite: warning: {tmp_path / 'empty'}: no Python files\n"
        f"wp-rewrite: error: no Python files in {tmp_path / 'empty'}: nothing to check\n"
    )
    (tmp_path / "fine.py").write_text("x = 1\n")
    status, _, err = run_cli(capsys, "--check", tmp_path / "empty", tmp_path / "fine.py")
    assert status == 0 and err.endswith("no Python files\nAll checks passed!\n")


def test_a_missing_output_folder_is_named_not_a_temporary_file(capsys, tmp_path):
    (tmp_path / "sim.py").write_text(HAZARD)
    out = tmp_path / "missing" / "sim.py"
    status, _, err = run_cli(capsys, tmp_path / "sim.py", "-o", out)
    assert status == 2
    assert err == f"wp-rewrite: error: {out}: cannot write: there is no folder {out.parent}\n"


def test_a_failed_write_names_no_temporary_file(capsys, tmp_path, monkeypatch):
    (tmp_path / "sim.py").write_text(HAZARD)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / ".wp_rewrite_runtime.x1y2z3"))

    monkeypatch.setattr(tempfile, "mkdtemp", full)
    status, _, err = run_cli(capsys, tmp_path / "sim.py", "-o", tmp_path / "out.py")
    assert status == 2
    assert err == (
        f"wp-rewrite: error: {tmp_path / 'wp_rewrite_runtime'}: cannot write the runtime: No space left on device\n"
    )


CALLEES = """import warp as wp

from not_installed import ContactData, write_contact


def make(writer):
    @wp.kernel
    def through_value(out: wp.array[float]):
        writer(out)

    return through_value


@wp.kernel
def through_imports(out: wp.array[float]):
    contact = ContactData()
    write_contact(out, contact)
"""


def test_wr005_names_what_is_called_and_is_informational_unless_selected_by_name(capsys, tmp_path):
    path = tmp_path / "callees.py"
    path.write_text(CALLEES)
    status, out, err = run_cli(capsys, "--check", path)
    assert (status, err) == (0, "All checks passed; 3 informational findings printed (not hazards).\n")
    for selector in ("WR005", "WR00"):
        assert run_cli(capsys, "--check", "--extend-select", selector, path)[::2] == (1, "Found 3 errors.\n")
    assert run_cli(capsys, "--check", "--select", "ALL", path)[0] == 0
    assert "WR005 kernel 'through_value' calls function value 'writer', a parameter of 'make'" in out
    assert "WR005 kernel 'through_imports' calls struct constructor 'ContactData', imported from 'not_installed'" in out
    assert "WR005 kernel 'through_imports' calls helper 'write_contact', imported from 'not_installed'" in out
    assert all(line.endswith("or add # noqa: WR005 if it does not") for line in out.splitlines())


def test_a_file_too_deeply_nested_to_parse_is_e999_and_refused_to_rewrite(capsys, tmp_path):
    path = tmp_path / "deep.py"
    path.write_text(
        "import warp as wp\n\n\n@wp.kernel\ndef deep(out: wp.array[float], count: wp.array[int]):\n"
        f"    out[wp.atomic_add(count, 0, 1)] = {'1.0 + ' * 20000}1.0\n"
    )
    status, out, _ = run_cli(capsys, "--check", path)
    assert status == 1
    assert out.startswith(f"{path}:1:1: E999 SyntaxError: too deeply nested to build its syntax tree")
    status, out, err = run_cli(capsys, path, "-o", tmp_path / "out.py")
    assert (status, out) == (2, "")
    assert err.startswith(f"{path}:1:1: E999 SyntaxError: too deeply nested") and "Traceback" not in err
    assert not (tmp_path / "out.py").exists()
