# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""warp-rewrite's runtime: what rewritten kernels call and how they are launched.

This package is everything generated code needs once it exists. It imports only warp, numpy and the standard
library (and its own modules, relatively), so that ``wp-rewrite`` can copy it whole beside the modules it emits
(as the folder ``wp_rewrite_runtime/``): an emitted module then runs without warp-rewrite installed. The API
(``warp_rewrite.wp_rewrite``) uses the same package as ``warp_rewrite.runtime``. Its modules:

- ``abi``: the contract with generated code: the version, the ABI number, the names generated code calls;
- ``specs``: what a launch needs to know about the generated kernels (``KernelSpec``...);
- ``device``: the device functions record and replay kernels call; ``exact_atomics``: the exact float atomics;
- ``checks``: the device's checks, read by the host when it can without waiting (``check``);
- ``launch``: launching both phases (``RewrittenKernel``, ``KernelRewrite``); ``arguments``: its arguments by path;
- ``exact``, ``exact_kernels``: the exact backward of floating-point atomic returns, host and device side;
- ``verify``: verify mode, which checks in backward that the memory a replay reads has not changed;
- ``hook``: ``wp.launch`` taking rewritten kernels;
- ``fingerprints``: what a generated block was made from, checked when the emitted module is imported;
- ``replays``: registers a helper's replay clone's twin as what Warp's backward runs in its place.

Importing the runtime is the one place warp-rewrite changes Warp: it installs the ``wp.launch`` hook (``hook``).
That happens when ``wp_rewrite`` or ``rewrite_launches()`` is first used, or an emitted module imports its copy;
importing ``warp_rewrite`` or its passes alone changes nothing.

The package exports exactly the ABI's names (``abi.EXPORTED``): what generated code calls and what users of an
emitted module reach through it. Generated code refers to this package by one name (``wp_rewrite_runtime`` unless
the user's module uses it), for example ``wp_rewrite_runtime.record_returned(slot, slot_records, thread)``.
"""

from typing import Any

from . import device, hook  # noqa: F401  (hook: installs the wp.launch hook, once per copy of the runtime)
from .abi import ABI, Op, RecordKind, __version__, require_abi
from .checks import check
from .device import (
    check_trips,
    flat_index,
    fresh,
    pool_read,
    pool_value,
    pool_written,
    range_length,
    record_if_room,
    record_returned,
    refused,
    replay_returned,
)
from .errors import RewriteError
from .exact_atomics import (
    exact_add,
    exact_cas,
    exact_exch,
    exact_max,
    exact_min,
    exact_returned,
    exact_sub,
    shadowed_read,
)
from .fingerprints import check_fingerprint, known_int
from .launch import KernelRewrite, RewrittenKernel, RewrittenLaunch
from .replays import replays
from .specs import ArgumentBound, ExactRecords, KernelPair, KernelSpec, LoopSpec, RecordSpec, SiteSpec

__all__ = [  # exactly the ABI's names (abi.EXPORTED), as a test checks
    "ABI",
    "Any",
    "ArgumentBound",
    "ExactRecords",
    "KernelPair",
    "KernelRewrite",
    "KernelSpec",
    "LoopSpec",
    "Op",
    "RecordKind",
    "RecordSpec",
    "RewriteError",
    "RewrittenKernel",
    "RewrittenLaunch",
    "SiteSpec",
    "__version__",
    "check",
    "check_fingerprint",
    "check_trips",
    "exact_add",
    "exact_cas",
    "exact_exch",
    "exact_max",
    "exact_min",
    "exact_returned",
    "exact_sub",
    "flat_index",
    "fresh",
    "known_int",
    "pool_read",
    "pool_value",
    "pool_written",
    "range_length",
    "record_if_room",
    "record_returned",
    "refused",
    "replay_returned",
    "replays",
    "require_abi",
    "shadowed_read",
]


def __getattr__(name: str) -> Any:
    """Readers (``recorded_float32``, ``carried_vec3d``, ...: ``abi.Reader``) are made when generated code first names
    them."""
    made = device.reader(name)
    if made is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = made
    return made
