# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The one place the runtime changes Warp: ``wp.launch``, ``wp.launch_tiled`` and ``wp.load_module`` take rewritten
kernels.

Importing this module (which importing the runtime does, first thing: ``wp_rewrite``, an emitted module's import
of its copy, or ``rewrite_launches()``) puts ``launch`` below in ``wp.launch``'s place, ``launch_tiled`` in
``wp.launch_tiled``'s (Warp's calls its own launch, not ``wp.launch``), and ``load_module`` in
``wp.load_module``'s. ``launch`` hands rewritten kernels to their own ``launch`` and everything else to the
``wp.launch`` it found (Warp's, or another copy's of the runtime: the package's and the ones written beside emitted
files each wrap the one before). For code one
cannot edit, ``warp_rewrite.rewrite_launches()`` sets ``AUTO_REWRITE``: then plain kernels that consume an
atomic's return are rewritten when launched forward on a tape.

Every ``wp.launch`` goes through ``launch``, so it costs next to nothing where there is nothing to do: without a
tape, a launch asks only whether one is active; on a tape, what ``AUTO_REWRITE`` made of the kernel is decided once
per kernel object and kept on it (``_Decision``) until Warp marks the kernel's module, or one it uses, modified (a
helper or kernel defined again, as a notebook cell run again does), when it is decided again. A kernel defined again
under the same name is another object, with a decision of its own.
"""

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import warp as wp

warp_launch = wp.launch  # what this copy found: the runtime's own launches go there, never through the hook
warp_launch_tiled = wp.launch_tiled
warp_load_module = wp.load_module
AUTO_REWRITE: Callable[[wp.Kernel], Any] | None = None

_context = wp._src.context
_Kernel = wp.Kernel
_parameters = list(inspect.signature(_context.launch).parameters)  # Warp's own (what wp.launch found may wrap it)
# Where wp.launch takes the two arguments that make a launch no forward launch on the tape, if given by position
# (the kernel is not in ``args``).
_ADJOINT = _parameters.index("adjoint") - 1
_RECORD_TAPE = _parameters.index("record_tape") - 1


@functools.wraps(warp_launch)  # wp.launch's signature and documentation: the same arguments, the same meaning
def launch(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    if type(kernel) is _Kernel:
        # The ignore: Warp declares ``context.runtime`` as None, the value it has until wp.init() replaces it.
        if AUTO_REWRITE is None or _context.runtime.tape is None:  # type: ignore[attr-defined]
            return warp_launch(kernel, *args, **kwargs)  # nothing a rewrite changes: Warp's own launch, at once
        return _on_tape(kernel, args, kwargs)
    if hasattr(kernel, "launches_rewritten"):  # a RewrittenKernel, of any copy of this module
        return kernel.launch(*args, **kwargs)
    if AUTO_REWRITE is not None and isinstance(kernel, _Kernel) and _context.runtime.tape is not None:  # type: ignore[attr-defined]
        return _on_tape(kernel, args, kwargs)
    return warp_launch(kernel, *args, **kwargs)


def _on_tape(kernel: wp.Kernel, args: tuple, kwargs: dict) -> Any:
    """A launch of ``kernel`` on a tape with ``rewrite_launches()`` on: the kernel ``AUTO_REWRITE`` made of it where
    it has one, for a forward launch the tape records (adjoint and record_tape read as wp.launch takes them, by
    position or keyword), else Warp's launch. Warp's launch reads the line of the frame that calls it (the tape's
    metadata), which costs more the further down its function the call is: so this function is short."""
    decision = getattr(kernel, _DECISION, None)
    if (
        decision is None
        or decision.hashers is not kernel.module.hashers
        or (decision.references and not decision.current())
    ):
        decision = _decide(kernel)
    if decision.rewritten is None or (
        (args[_ADJOINT] if len(args) > _ADJOINT else kwargs.get("adjoint", False))
        or not (args[_RECORD_TAPE] if len(args) > _RECORD_TAPE else kwargs.get("record_tape", True))
    ):
        return warp_launch(kernel, *args, **kwargs)
    return decision.rewritten.launch(*args, **kwargs)


@functools.wraps(warp_launch_tiled)
def launch_tiled(*args: Any, **kwargs: Any) -> Any:
    """Warp's ``launch_tiled`` appends the block size to the launch's dimensions and calls Warp's own launch, which
    knows no rewritten kernel: for one (or, with ``rewrite_launches()`` on, a plain kernel on a tape), the same
    dimensions go to ``launch`` above instead."""
    kernel = args[0] if args else kwargs.get("kernel")
    plain = type(kernel) is _Kernel and (AUTO_REWRITE is None or _context.runtime.tape is None)  # type: ignore[attr-defined]
    if plain or "dim" not in kwargs or "block_dim" not in kwargs:  # (Warp's own message for a missing one)
        return warp_launch_tiled(*args, **kwargs)
    stream = kwargs.get("stream", args[7] if len(args) > 7 else None)
    device = kwargs.get("device", args[6] if len(args) > 6 else None)
    device = stream.device if stream is not None else _context.runtime.get_device(device)  # type: ignore[attr-defined]
    block_dim = _context._resolve_launch_block_dim(device, kwargs["block_dim"])
    dim = _context._canonicalize_dim(kwargs["dim"])
    if len(dim) > 3:
        return warp_launch_tiled(*args, **kwargs)  # (Warp's own message)
    return launch(*args, **{**kwargs, "dim": [*dim, block_dim], "block_dim": block_dim})


@functools.wraps(warp_load_module)
def load_module(module: Any = None, *args: Any, **kwargs: Any) -> Any:
    """A rewritten kernel loads its generated module (a plain kernel is no module to Warp)."""
    if hasattr(module, "launches_rewritten"):
        module = module.module
    elif module is None:  # Warp's default, the calling module: one frame further up from here
        module = wp._src.context._get_caller_module_name(stack_level=2)
    return warp_load_module(module, *args, **kwargs)


@dataclass(frozen=True, slots=True)
class _Decision:
    """What ``AUTO_REWRITE`` made of a kernel object (``rewritten``; None: nothing to do, the kernel runs as it is),
    and the state of the Warp modules it was decided under: each module's ``hashers``, which Warp replaces with a new
    dictionary whenever it marks the module modified (a helper, struct or kernel defined again in it, as a notebook
    cell run again does), for the kernel's module and every module whose helpers or structs it uses."""

    rewritten: Any
    hashers: dict
    references: tuple[tuple[Any, dict], ...]

    def current(self) -> bool:
        """Whether the modules the kernel uses are as they were (its own module: checked by ``launch``)."""
        return all(module.hashers is hashers for module, hashers in self.references)


# Where a kernel object keeps this copy's decision (each copy of the runtime its own): an attribute of the kernel,
# so that it goes with it and a launch finds it without hashing.
_DECISION = f"_wp_rewrite_decision_{__name__.replace('.', '_')}"


def _decide(kernel: wp.Kernel) -> _Decision:
    """What a forward launch on a tape runs for ``kernel``: its ``RewrittenKernel`` where it needs one (it consumes an
    atomic's return, or the rewrite refused it), None where the kernel itself runs (no backward pass, nothing to
    record). Kept on the kernel until its modules change."""
    module = kernel.module
    references = tuple((other, other.hashers) for other in module.references)
    rewritten = None
    if backward_enabled(kernel) and AUTO_REWRITE is not None:
        made = AUTO_REWRITE(kernel)
        if made.pair is not None or made.refusal is not None:
            rewritten = made
    decision = _Decision(rewritten, module.hashers, references)
    setattr(kernel, _DECISION, decision)
    return decision


def backward_enabled(kernel: wp.Kernel) -> bool:
    """Whether Warp generates ``kernel``'s backward pass (its own option first, then its module's)."""
    return (kernel.module.options | kernel.options).get("enable_backward", True) is not False


wp.launch = launch
wp.launch_tiled = launch_tiled
wp.load_module = load_module
