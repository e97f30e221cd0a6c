# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The one place the runtime changes Warp: ``wp.launch`` and ``wp.load_module`` take rewritten kernels.

Importing this module (which importing the runtime does, first thing: ``wp_rewrite``, an emitted module's import
of its copy, or ``rewrite_launches()``) puts ``launch`` below in ``wp.launch``'s place, and ``load_module`` in
``wp.load_module``'s. ``launch`` hands rewritten kernels to their own ``launch`` and everything else to the
``wp.launch`` it found (Warp's, or another copy's of the runtime: the package's and the ones written beside emitted
files each wrap the one before). For code one
cannot edit, ``warp_rewrite.rewrite_launches()`` sets ``AUTO_REWRITE``: then plain kernels that consume an
atomic's return are rewritten when launched forward on a tape.
"""

import functools
import inspect
from collections.abc import Callable
from typing import Any

import warp as wp

warp_launch = wp.launch  # what this copy found: the runtime's own launches go there, never through the hook
warp_load_module = wp.load_module
AUTO_REWRITE: Callable[[wp.Kernel], Any] | None = None


@functools.wraps(warp_launch)  # wp.launch's signature and documentation: the same arguments, the same meaning
def launch(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    if hasattr(kernel, "launches_rewritten"):  # a RewrittenKernel, of any copy of this module
        return kernel.launch(*args, **kwargs)
    if AUTO_REWRITE is not None and isinstance(kernel, wp.Kernel) and _needs_rewrite(kernel, args, kwargs):
        return AUTO_REWRITE(kernel).launch(*args, **kwargs)
    return warp_launch(kernel, *args, **kwargs)


@functools.wraps(warp_load_module)
def load_module(module: Any = None, *args: Any, **kwargs: Any) -> Any:
    """A rewritten kernel loads its generated module (a plain kernel is no module to Warp)."""
    if hasattr(module, "launches_rewritten"):
        module = module.module
    elif module is None:  # Warp's default, the calling module: one frame further up from here
        module = wp._src.context._get_caller_module_name(stack_level=2)
    return warp_load_module(module, *args, **kwargs)


def _needs_rewrite(kernel: wp.Kernel, args: tuple, kwargs: dict) -> bool:
    """Is this a forward launch on a tape, of a kernel with a backward (the only launches a rewrite changes)?"""
    bound = inspect.signature(launch).bind(kernel, *args, **kwargs).arguments
    # The ignore: Warp declares ``context.runtime`` as None, the value it has until wp.init() replaces it.
    if bound.get("adjoint") or not bound.get("record_tape", True) or wp._src.context.runtime.tape is None:  # type: ignore[attr-defined]
        return False
    return backward_enabled(kernel)


def backward_enabled(kernel: wp.Kernel) -> bool:
    """Whether Warp generates ``kernel``'s backward pass (its own option first, then its module's)."""
    return (kernel.module.options | kernel.options).get("enable_backward", True) is not False


wp.launch = launch
wp.load_module = load_module
