"""``--check`` as a CI runs it: ``[tool.wp-rewrite]`` in pyproject.toml and ``--exclude``/``--extend-exclude`` with
ruff's names and meanings (the table under the command line's options, ruff's default exclusions, patterns by name or
by path from the table's folder, paths named kept unless ``--force-exclude``), ``--isolated``, and unreadable tables
refused as usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.emitted import run_cli

HAZARD = """import warp as wp


@wp.kernel
def compact(x: wp.array(dtype=float), count: wp.array(dtype=int), out: wp.array(dtype=float)):
    out[wp.atomic_add(count, 0, 1)] = x[wp.tid()]
"""
NO_BACKWARD = HAZARD.replace("@wp.kernel\n", "@wp.kernel(enable_backward=False)\n")


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project with a hazard in its code, its tests, a generated file, a file of an environment folder and one
    of a hidden folder, and a kernel without a backward pass (WR101)."""
    files = {
        "src/sim.py": HAZARD,
        "src/quiet.py": NO_BACKWARD,
        "src/sim_generated.py": HAZARD,
        "tests/test_sim.py": HAZARD,
        "tests/data/case.py": HAZARD,
        ".venv/lib/site.py": HAZARD,
        "dist/built.py": HAZARD,
        ".cache/x.py": HAZARD,
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def reported(capsys, *argv: str) -> tuple[int, list[str]]:
    status, out, _ = run_cli(capsys, "--check", *argv)
    return status, sorted({f"{line.split(':')[0]} {line.split(': ')[1].split()[0]}" for line in out.splitlines()})


def test_ruffs_default_exclusions_and_the_command_line_patterns(project, capsys):
    assert reported(capsys, ".") == (
        1,
        ["src/sim.py WR001", "src/sim_generated.py WR001", "tests/data/case.py WR001", "tests/test_sim.py WR001"],
    )
    assert reported(capsys, ".", "--extend-exclude", "tests,*_generated.py")[1] == ["src/sim.py WR001"]
    assert reported(capsys, ".", "--extend-exclude", "tests/data")[1] == [
        "src/sim.py WR001",
        "src/sim_generated.py WR001",
        "tests/test_sim.py WR001",
    ]  # a pattern with a slash is a path from the project's folder: tests/data, not any data/
    assert "dist/built.py WR001" in reported(capsys, ".", "--exclude", ".venv")[1]  # --exclude replaces the defaults
    named = reported(capsys, "tests/test_sim.py", "--extend-exclude", "tests")
    assert named == (1, ["tests/test_sim.py WR001"])  # a file named is checked, as ruff checks it
    assert reported(capsys, "tests/test_sim.py", "--extend-exclude", "tests", "--force-exclude") == (0, [])


def test_the_table_of_pyproject_toml_under_the_command_line_options(project, capsys, monkeypatch):
    (project / "pyproject.toml").write_text(
        '[project]\nname = "sim"\n\n[tool.wp-rewrite]\nextend-exclude = ["tests"]\nextend-select = ["WR101"]\n'
    )
    assert reported(capsys, ".") == (1, ["src/quiet.py WR101", "src/sim.py WR001", "src/sim_generated.py WR001"])
    assert reported(capsys, ".", "--select", "WR001")[1] == ["src/sim.py WR001", "src/sim_generated.py WR001"]
    assert reported(capsys, ".", "--ignore", "WR001") == (0, ["src/quiet.py WR101"])
    assert "tests/test_sim.py WR001" in reported(capsys, ".", "--isolated")[1]
    monkeypatch.chdir(project / "src")  # found from a folder below, its paths still from the table's folder
    assert reported(capsys, ".", "--extend-exclude", "src/sim_generated.py")[1] == [
        "quiet.py WR101",
        "sim.py WR001",
    ]
    (project / "pyproject.toml").write_text(
        '[tool.wp-rewrite]\nselect = ["WR1"]\noutput-format = "github"\n'
        'force-exclude = true\nextend-exclude = ["tests"]\n'
    )
    monkeypatch.chdir(project)
    status, out, err = run_cli(capsys, "--check", "tests/test_sim.py")  # force-exclude: even a file named
    assert (status, out) == (0, "") and "every path named is excluded" in err
    status, out, _ = run_cli(capsys, "--check", "src")
    assert status == 0 and out.startswith("::error file=") and out.count("\n") == 1 and "(WR101)" in out


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('extend_exclude = ["tests"]', "[tool.wp-rewrite]: unknown option extend_exclude (known: exclude,"),
        ('exclude = "tests"', "[tool.wp-rewrite]: exclude must be a list of strings"),
        ('select = ["WR9"]', "unknown rule selector 'WR9'"),
        ('output-format = "xml"', "output-format: 'xml' is not one of concise, json, github"),
        ("select = [", "cannot read"),
    ],
)
def test_a_table_that_cannot_be_read_is_a_usage_error(project, capsys, table, message):
    (project / "pyproject.toml").write_text(f"[tool.wp-rewrite]\n{table}\n")
    status, _, err = run_cli(capsys, "--check", ".")
    assert status == 2 and message in err and "pyproject.toml" in err
