"""Running the command line from tests and importing what it wrote: shared by the tests of tests/cli and those that
check a pass through the command line too."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import warp as wp

from tests.support import harness
from tests.support.harness import Case, check
from warp_rewrite.cli.main import main


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


def emitted_fixture(module: ModuleType):
    """A module-scoped fixture ``emitted``: ``module``'s file rewritten by the command line, compiled once for all
    the tests of a file. Assign it to a module-level name of the test file."""

    @pytest.fixture(scope="module", name="emitted")
    def emitted(tmp_path_factory):
        return rewritten_copy(module, tmp_path_factory.mktemp(module.__name__.rpartition(".")[2]))

    return emitted


@dataclass(frozen=True)
class Pattern:
    """How to check one kernel of a support module end to end: fresh arguments, the indices of the arrays the
    loss weighs and of those differentiated."""

    make: Callable[[], list[Any]]
    loss: list[int]
    wrt: list[int]


def end_to_end_tests(module: ModuleType, dim: int, patterns: dict[str, Pattern]):
    """The two tests every pattern gets, against finite differences of the original forward: through
    ``wp_rewrite``, and through the ``launch_<name>`` of the command line's copy of ``module`` (the ``emitted``
    fixture, which the test file binds with ``emitted_fixture``). Assign both to module-level names of the test
    file: ``test_through_the_api, test_through_the_command_line = end_to_end_tests(...)``."""

    @pytest.mark.parametrize("name", sorted(patterns))
    def test_through_the_api(name):
        pattern = patterns[name]
        check(Case(getattr(module, name), dim, pattern.make, pattern.loss, pattern.wrt))

    @pytest.mark.parametrize("name", sorted(patterns))
    def test_through_the_command_line(emitted, name):
        pattern = patterns[name]
        check(Case(None, dim, pattern.make, pattern.loss, pattern.wrt, program=through(emitted, name, dim)))

    return test_through_the_api, test_through_the_command_line
