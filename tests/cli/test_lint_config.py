"""Emitted code passes the user's own lint configuration: the nearest ``pyproject.toml``
(``[tool.ruff]``), ``ruff.toml`` or ``.ruff.toml`` above the file gives the line length and isort's settings; the
imports that copied helpers need join the file's own import of their module (a second ``from helpers import`` line
is ruff's I001), wrapped to the line length, and the generated lines fit it. Checked with ruff itself on small
trees; the emitted module's gradients against finite differences of the original."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import warp as wp

from tests.support.emitted import import_file, run_cli, through
from tests.support.harness import Case, check, f64, i32
from warp_rewrite.cli.import_placement import DEFAULT_LINE_LENGTH, LintConfig

HELPERS = """import warp as wp

LIMIT = wp.constant(1000)


@wp.func
def offset(i: int) -> int:
    return i + 0


@wp.func
def take_slot(count: wp.array(dtype=wp.int32)) -> int:
    slot = wp.atomic_add(count, 0, 1)
    return offset(slot) % LIMIT
"""
KERNELS = """import warp as wp

from lint_helpers import take_slot


@wp.kernel
def compact(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    out[take_slot(count)] = x[tid] * x[tid]
"""
N = 5


def ruff(*argv, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *map(str, argv)], cwd=cwd, capture_output=True, text=True, check=False
    )


def project(root, config_name: str, config: str):
    (root / config_name).write_text(config)
    (root / "lint_helpers.py").write_text(HELPERS)
    (root / "lint_kernels.py").write_text(KERNELS)


def test_helper_imports_join_the_files_own_import_and_pass_ruff(tmp_path, capsys):
    project(
        tmp_path, "pyproject.toml", '[tool.ruff]\nline-length = 120\n\n[tool.ruff.lint]\nselect = ["E", "F", "I"]\n'
    )
    status, _, err = run_cli(capsys, tmp_path / "lint_kernels.py", "--in-place")
    assert status == 0, err
    text = (tmp_path / "lint_kernels.py").read_text()
    assert "from lint_helpers import LIMIT, offset, take_slot\n" in text and text.count("from lint_helpers") == 1
    checked = ruff("check", "--no-cache", "lint_kernels.py", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout
    formatted = ruff("format", "--check", "--diff", "--no-cache", "lint_kernels.py", cwd=tmp_path)
    assert formatted.returncode == 0, formatted.stdout

    emitted = import_file(tmp_path / "lint_kernels.py", "lint_kernels")
    x = np.array([0.5, -1.5, 2.0, 0.25, 1.25])
    check(
        Case(
            None,
            N,
            lambda: [f64(x, True), i32([0]), wp.zeros(N, dtype=wp.float64, requires_grad=True)],
            [2],
            [0],
            program=through(emitted, "compact", N),
        )
    )


@pytest.mark.parametrize(
    ("config_name", "config", "expected"),
    [
        ("ruff.toml", "line-length = 40\n", "from lint_helpers import (\n    LIMIT,\n    offset,\n    take_slot,\n)\n"),
        (
            ".ruff.toml",
            "[lint.isort]\nforce-single-line = true\n",
            "from lint_helpers import LIMIT\nfrom lint_helpers import offset\nfrom lint_helpers import take_slot\n",
        ),
        (
            "pyproject.toml",
            "[tool.ruff.lint.isort]\norder-by-type = false\n",
            "from lint_helpers import LIMIT, offset, take_slot\n",
        ),
    ],
    ids=["wrapped-to-the-line-length", "force-single-line", "order-by-type-off"],
)
def test_isort_settings_of_the_users_config(tmp_path, capsys, config_name, config, expected):
    select = "[tool.ruff.lint]" if config_name == "pyproject.toml" else "[lint]"
    project(tmp_path, config_name, f'{config}\n{select}\nselect = ["I"]\n')
    assert run_cli(capsys, tmp_path / "lint_kernels.py", "--in-place")[0] == 0
    text = (tmp_path / "lint_kernels.py").read_text()
    assert expected in text
    checked = ruff("check", "--no-cache", "lint_kernels.py", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout  # I001: the imports are as isort writes them


def test_without_tomllib_the_configs_folder_is_found_with_rufs_defaults(tmp_path, monkeypatch):
    (tmp_path / "ruff.toml").write_text("line-length = 100\n")
    assert LintConfig.for_folder(tmp_path).line_length == 100
    monkeypatch.setitem(sys.modules, "tomllib", None)  # Python 3.10: no tomllib, no dependency added for it
    assert LintConfig.for_folder(tmp_path) == LintConfig(tmp_path, DEFAULT_LINE_LENGTH)


@pytest.mark.parametrize(
    "config",
    ["line-length = 60\n", 'line-length = 50\n\n[format]\nquote-style = "single"\n', "line-length = 88\n"],
    ids=["60", "50-single-quotes", "88"],
)
def test_a_formatted_file_stays_formatted(tmp_path, capsys, config):
    """The user's files formatted by ruff under their configuration: the rewritten one is still formatted (its
    generated lines laid out to the line length, in the configured quotes) and adds no finding."""
    project(tmp_path, "ruff.toml", config)
    assert ruff("format", "--no-cache", ".", cwd=tmp_path).returncode == 0
    status, _, err = run_cli(capsys, tmp_path / "lint_kernels.py", "--in-place")
    assert status == 0, err
    formatted = ruff("format", "--check", "--diff", "--no-cache", "lint_kernels.py", cwd=tmp_path)
    assert formatted.returncode == 0, formatted.stdout
    checked = ruff("check", "--no-cache", "lint_kernels.py", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout


def test_without_a_configuration_ruffs_defaults_hold(tmp_path, capsys):
    """No ruff configuration above the file: the generated lines are laid out to ruff's default line length, 88, and
    the merged import as isort writes it there; ``ruff check --isolated`` (with isort's rule) and ``ruff format
    --isolated`` find nothing to change."""
    (tmp_path / "lint_helpers.py").write_text(HELPERS)
    (tmp_path / "lint_kernels.py").write_text(KERNELS)
    assert ruff("format", "--isolated", "--no-cache", ".", cwd=tmp_path).returncode == 0
    assert LintConfig.for_folder(tmp_path) == LintConfig()
    status, _, err = run_cli(capsys, tmp_path / "lint_kernels.py", "--in-place")
    assert status == 0, err
    checked = ruff("check", "--isolated", "--extend-select", "I", "--no-cache", "lint_kernels.py", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout
    formatted = ruff("format", "--isolated", "--check", "--diff", "--no-cache", "lint_kernels.py", cwd=tmp_path)
    assert formatted.returncode == 0, formatted.stdout
    text = (tmp_path / "lint_kernels.py").read_text()
    assert max(len(line) for line in text.splitlines() if not line.lstrip().startswith("#")) <= DEFAULT_LINE_LENGTH
