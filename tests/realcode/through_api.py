"""``wp_rewrite`` on real kernels, and a CPU compile of what it generated: the kernels of the modules ``--check`` has
findings in, and those their factories make (``factories.py``)."""

from __future__ import annotations

import contextlib
import importlib
import io
import traceback
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import warp as wp
from outcomes import CRASH, GENERIC, LEFT, ORIGINAL_FAILS, REFUSED, REWRITTEN, Outcome, refusal_reason
from trees import Tree
from warp._src.types import type_is_generic  # what makes a kernel generic, by Warp's own test (no public alias)

from warp_rewrite import RewriteError, RewriteWarning, RewrittenKernel, wp_rewrite
from warp_rewrite.api import generate
from warp_rewrite.runtime import KernelPair

WAY = "wp_rewrite"


@dataclass(frozen=True)
class RealKernel:
    """A live kernel and its name in the outcomes: ``module.name``, or ``module.factory(args)/name``.

    ``launch_types``: the types its callers pass for its generic parameters (``Any``), by name. Warp compiles a
    generic kernel only per overload, which a launch makes from its arguments: without them there is nothing to
    compile.
    """

    name: str
    kernel: wp.Kernel
    launch_types: Mapping[str, Any] = field(default_factory=dict, compare=False)


def import_quietly(module: str):
    """Import a module of the tree (examples print on import)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return importlib.import_module(module)


def unimportable(tree: Tree, module_names: Iterable[str]) -> list[Outcome]:
    """The modules that do not import here, each an outcome of its own: an example importing a package this
    environment lacks (scipy, jax, Pillow, OpenUSD), a test that needs a debug build of Warp. Their kernels are not
    there to rewrite; the command line still rewrites their files, whose import fails the same way."""
    found = []
    for name in module_names:
        try:
            import_quietly(name)
        except Exception as error:
            found.append(Outcome(tree.name, WAY, name, ORIGINAL_FAILS, f"does not import: {_first_line(error)}"))
    return found


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
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RewriteWarning)  # (said once a kernel: .left says it every time)
                rewritten = wp_rewrite(real.kernel)
        except RewriteError as error:
            outcomes[real.name] = outcome(real, REFUSED, refusal_reason(str(error)))
            continue
        except Exception:
            outcomes[real.name] = outcome(real, CRASH, traceback.format_exc(limit=-3))
            continue
        if rewritten.left is not None:
            outcomes[real.name] = outcome(real, LEFT, refusal_reason(str(rewritten.left)))
        if rewritten.pair is None:
            continue
        if real.kernel.is_generic:
            generic = _overload_generic(real, rewritten.pair)
            if generic is not None:
                outcomes[real.name] = outcome(real, *generic)
                continue
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
        pair = generate(real.kernel, module_suffix=suffix).pair
        for kernel in _generated(pair) if real.kernel.is_generic else ():
            _overload(kernel, real.launch_types)
        pair.record.module.load(cpu)
        pair.replay.module.load(cpu)
    except Exception as error:
        try:
            real.kernel.module.load(cpu)
        except Exception as original:
            return ORIGINAL_FAILS, _first_line(original)
        return CRASH, _first_line(error)
    return REWRITTEN, "compiles alone, not beside the module's other kernels"


def _generated(pair: KernelPair) -> tuple[wp.Kernel, ...]:
    return (pair.record, pair.replay, *((pair.count,) if pair.count is not None else ()))


def _generic_parameters(kernel: wp.Kernel) -> list[str]:
    return [arg.label for arg in kernel.adj.args if type_is_generic(arg.type)]


def _overload(kernel: wp.Kernel, launch_types: Mapping[str, Any]) -> wp.Kernel:
    """The overload of ``kernel`` a launch with arguments of ``launch_types`` makes (``wp.launch`` infers it from
    the arguments; ``wp.overload`` is the public way to make it without them)."""
    return wp.overload(kernel, {name: launch_types[name] for name in _generic_parameters(kernel)})


def _overload_generic(real: RealKernel, pair: KernelPair) -> tuple[str, str] | None:
    """Give the generic kernel ``real`` and the kernels generated from it the overloads launches with
    ``real.launch_types`` make, and compile the original's, which proves those types right (the generated kernels
    compile with the others of their module). The outcome where that cannot be done, None where it is.

    The generated kernels' parameters after the kernel's own (the records) have concrete types where the launch
    allocates them from the kernel's declarations; one still generic needs a launch type as well.
    """
    kernels = (real.kernel, *_generated(pair))
    unknown = sorted({name for kernel in kernels for name in _generic_parameters(kernel)} - set(real.launch_types))
    if unknown:
        return GENERIC, f"no launch types known for its generic parameter(s) {', '.join(unknown)}"
    try:
        _overload(real.kernel, real.launch_types)
        real.kernel.module.load(wp.get_device("cpu"))
    except Exception as error:  # the types or the kernel are at fault, not the rewrite
        return ORIGINAL_FAILS, _first_line(error)
    try:
        for kernel in kernels[1:]:
            _overload(kernel, real.launch_types)
    except Exception:
        return CRASH, traceback.format_exc(limit=-3)
    return None


def _first_line(error: Exception) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {' '.join(lines[:3])}"
