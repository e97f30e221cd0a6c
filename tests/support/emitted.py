"""Running the command line from tests and importing what it wrote: shared by the tests of tests/cli and those that
check a pass through the command line too."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import warp as wp

from tests.support import harness
from warp_rewrite.cli import main


def zeros(shape, dtype=wp.float64):
    return wp.zeros(shape, dtype=dtype, requires_grad=dtype is not wp.int32, device="cpu")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def import_file(path: Path, name: str):
    """Import an emitted module as its own folder's code would: with the runtime written beside it importable."""
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def rewritten_copy(module, folder: Path):
    """``module``'s file rewritten by the command line into ``folder`` and imported from there."""
    name = f"{module.__name__.rpartition('.')[2]}_rewritten"
    assert main([module.__file__, "-o", str(folder / f"{name}.py"), "-q"]) == 0
    return import_file(folder / f"{name}.py", name)


def through(module, name: str, dim, pack=None):
    """A harness program: the original kernel for ground truth, the emitted ``launch_<name>`` otherwise."""

    def program(args, launcher):
        inputs = pack(module, args) if pack else args
        if launcher is harness.launch_original:
            wp.launch(getattr(module, name), dim, inputs=inputs, device="cpu")
        else:
            getattr(module, f"launch_{name}")(dim, inputs=inputs, device="cpu")

    return program
