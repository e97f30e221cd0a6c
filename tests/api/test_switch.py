"""``rewrite_launches()`` for code one cannot edit, turned on from outside the program: ``WP_REWRITE_LAUNCHES=1``
(through the ``.pth`` file the package installs, in a program that imports nothing of warp-rewrite) and ``python -m
warp_rewrite run``; ``warp_rewrite.enabled()`` says whether it is on; each rewritten kernel is announced once. The
programs run in child processes; the gradient of ``previous * x`` is the value the atomic returned (10, 11, 12 over
three launches), where plain Warp gives NaN."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import warp_rewrite

PROGRAM = """import sys

import warp as wp

wp.config.quiet = True
wp.config.log_level = wp.LOG_INFO


@wp.kernel
def scale_by_previous(x: wp.array(dtype=float), total: wp.array(dtype=float), y: wp.array(dtype=float)):
    previous = wp.atomic_add(total, 0, 1.0)
    y[0] = previous * x[0]


x = wp.array([3.0], dtype=float, requires_grad=True)
total = wp.array([10.0], dtype=float)
for _ in range(3):
    y = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale_by_previous, dim=1, inputs=[x, total, y])
    tape.backward(grads={y: wp.ones_like(y)})
    print("gradient", float(x.grad.numpy()[0]))
    tape.zero()
print("argv", " ".join(sys.argv), __name__)
"""
RIGHT = ["gradient 10.0", "gradient 11.0", "gradient 12.0"]
WRONG = ["gradient nan"] * 3
ANNOUNCED = "warp-rewrite: kernel 'scale_by_previous' rewritten"


def run(folder: Path, *argv: str, switch: str | None = None) -> list[str]:
    """The program's lines of interest (gradients, argv, announcements), run with ``argv``."""
    environ = {key: value for key, value in os.environ.items() if key != "WP_REWRITE_LAUNCHES"}
    if switch is not None:
        environ["WP_REWRITE_LAUNCHES"] = switch
    ran = subprocess.run([sys.executable, *argv], cwd=folder, env=environ, capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr
    return [line for line in ran.stdout.splitlines() if line.startswith(("gradient", "argv", "warp-rewrite", "["))]


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("switch")
    (folder / "train.py").write_text(PROGRAM)
    return folder


def test_the_environment_variable_needs_no_import(program):
    """The program imports only warp: the .pth file turns the hook on when warp is imported, and the kernel is
    announced once (its variant for launches no gradient flows through is not announced again)."""
    announced = f"{ANNOUNCED} (1 recorded value) into Warp module 'wp_rewrite.__main__'"
    assert run(program, "train.py", switch="1") == [announced, *RIGHT, "argv train.py __main__"]
    assert run(program, "train.py", switch="0") == [*WRONG, "argv train.py __main__"]


def test_the_launcher_runs_a_script_or_a_module_as_python_does(program):
    lines = run(program, "-m", "warp_rewrite", "run", "train.py", "--lr", "0.1")
    assert lines[1:] == [*RIGHT, "argv train.py --lr 0.1 __main__"] and lines[0].startswith(ANNOUNCED)
    lines = run(program, "-m", "warp_rewrite", "run", "-m", "train", "--lr", "0.1")
    assert lines[1:] == [*RIGHT, f"argv {program / 'train.py'} --lr 0.1 __main__"]


def test_a_process_that_never_imports_warp_does_not_load_it(program):
    code = "import sys; print('[', 'warp' in sys.modules, 'warp_rewrite.api' in sys.modules)"
    assert run(program, "-c", code, switch="1") == ["[ False False"]


@pytest.mark.parametrize(
    "first",
    ["import warp_rewrite", "import warp_rewrite.runtime", "from warp_rewrite import wp_rewrite", "import warp"],
)
def test_enabled_says_so_whatever_is_imported_first(program, first):
    """With the variable set, ``enabled()`` is True before and after Warp's import, and the first launch is
    rewritten also where warp-rewrite's own runtime imported Warp."""
    script = program / f"first_{first.replace(' ', '_').replace('.', '_')}.py"
    script.write_text(
        f"{first}\nimport warp_rewrite\n\nbefore = warp_rewrite.enabled()\n"
        + PROGRAM.replace('print("argv", " ".join(sys.argv), __name__)', 'print("[", before, warp_rewrite.enabled())')
    )
    assert run(program, script.name, switch="1")[1:] == [*RIGHT, "[ True True"]
    if first == "import warp_rewrite":
        assert run(program, script.name) == [*WRONG, "[ False False"]


def test_enabled_follows_rewrite_launches():
    was = warp_rewrite.enabled()
    try:
        warp_rewrite.rewrite_launches()
        assert warp_rewrite.enabled()
        warp_rewrite.rewrite_launches(False)
        assert not warp_rewrite.enabled()
    finally:
        warp_rewrite.rewrite_launches(was)
