"""``wp_rewrite`` on real kernels, and a CPU compile of what it generated: the kernels of the modules ``--check`` has
findings in, and those their factories make (``factories.py``)."""

from __future__ import annotations

import contextlib
import importlib
import io
import traceback
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import warp as wp
from outcomes import CRASH, ORIGINAL_FAILS, REFUSED, REWRITTEN, Outcome, refusal_reason
from trees import Tree

from warp_rewrite import RewriteError, RewrittenKernel, wp_rewrite
from warp_rewrite.api import generate

WAY = "wp_rewrite"


@dataclass(frozen=True)
class RealKernel:
    """A live kernel and its name in the outcomes: ``module.name``, or ``module.factory(args)/name``."""

    name: str
    kernel: wp.Kernel


def import_quietly(module: str):
    """Import a module of the tree (examples print on import)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return importlib.import_module(module)


def module_level_kernels(module_names: Iterable[str]) -> list[RealKernel]:
    """The kernels defined in the body of each module (factory-made ones are ``factories.py``'s)."""
    found = []
    for name in module_names:
        module = import_quietly(name)
        for attribute, value in vars(module).items():
            if (
                isinstance(value, wp.Kernel)
                and value.func.__module__ == name
                and "<locals>" not in value.func.__qualname__
            ):
                found.append(RealKernel(f"{name}.{attribute}", value))
    return found


def rewrite_and_compile(tree: Tree, kernels: list[RealKernel]) -> list[Outcome]:
    """``wp_rewrite`` each kernel, then load each generated Warp module once on the CPU; the kernels of a module that
    fails to load are generated again one by one into modules of their own, to tell which fails."""
    outcomes: dict[str, Outcome] = {}

    def outcome(real: RealKernel, result: str, detail: str = "") -> Outcome:
        file = Path(real.kernel.adj.filename).relative_to(tree.site_packages).as_posix()
        return Outcome(tree.name, WAY, real.name, result, detail, f"{file}:{real.kernel.func.__name__}")

    by_module: dict[str, list[tuple[RealKernel, RewrittenKernel]]] = defaultdict(list)
    for real in kernels:
        try:
            rewritten = wp_rewrite(real.kernel)
        except RewriteError as error:
            outcomes[real.name] = outcome(real, REFUSED, refusal_reason(str(error)))
            continue
        except Exception:
            outcomes[real.name] = outcome(real, CRASH, traceback.format_exc(limit=-3))
            continue
        if rewritten.pair is not None:
            by_module[rewritten.record_kernel.module.name].append((real, rewritten))
    cpu = wp.get_device("cpu")
    for members in by_module.values():
        try:
            for _, rewritten in members:
                rewritten.record_kernel.module.load(cpu)
                rewritten.replay_kernel.module.load(cpu)  # the same module, or one loaded already
        except Exception:
            for index, (real, _) in enumerate(members):
                outcomes[real.name] = outcome(real, *_compiled_alone(real, f".alone{index}"))
        else:
            for real, _ in members:
                outcomes[real.name] = outcome(real, REWRITTEN)
    return sorted(outcomes.values())


def _compiled_alone(real: RealKernel, suffix: str) -> tuple[str, str]:
    """The result of generating ``real``'s kernels into a module of their own, and compiling them."""
    cpu = wp.get_device("cpu")
    try:
        pair, _ = generate(real.kernel, module_suffix=suffix)
        pair.record.module.load(cpu)
        pair.replay.module.load(cpu)
    except Exception as error:
        try:
            real.kernel.module.load(cpu)
        except Exception as original:
            return ORIGINAL_FAILS, _first_line(original)
        return CRASH, _first_line(error)
    return REWRITTEN, "compiles alone, not beside the module's other kernels"


def _first_line(error: Exception) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {' '.join(lines[:3])}"
