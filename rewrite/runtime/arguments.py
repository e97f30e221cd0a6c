# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""A launch's arguments by path (``"state.count"``: struct fields too), and the refusal of arguments that share
memory the kernel writes."""

from collections.abc import Sequence
from typing import Any

import warp as wp

from .errors import RewriteError
from .specs import KernelSpec


def argument_arrays(parameters: Sequence[str], args: Sequence[Any]):
    """Every array among a launch's arguments (of any of Warp's array kinds), struct fields included, with its
    path ("state.count")."""
    for path, value in zip(parameters, args, strict=True):
        if isinstance(value, wp._src.types.Array):
            yield path, value
        elif isinstance(value, wp._src.codegen.StructInstance):
            fields = value._cls.vars  # type: ignore[attr-defined]  # set on each instance; Warp declares none
            yield from argument_arrays([f"{path}.{name}" for name in fields], [getattr(value, f) for f in fields])


def argument_at(parameters: Sequence[str], args: Sequence[Any], path: str) -> Any:
    """The launch argument, or struct field of one, that ``path`` ("count", "state.count") names."""
    root, *fields = path.split(".")
    value = args[parameters.index(root)]
    for name in fields:
        value = getattr(value, name)
    return value


def memory_extent(array: Any) -> tuple[int, int] | None:
    """The bytes ``[start, end)`` an array's elements lie in (an indexed array's: its data's); None where unknown."""
    if isinstance(array, wp.indexedarray):
        array = array.data
    if not isinstance(array, wp.array) or not array.ptr or array.size == 0:
        return None
    last = sum((extent - 1) * stride for extent, stride in zip(array.shape, array.strides, strict=True))
    return array.ptr, array.ptr + last + wp._src.types.type_size_in_bytes(array.dtype)


def check_aliasing(spec: KernelSpec, args: Sequence[Any]) -> None:
    """Refuse, before anything runs, a launch that binds memory the kernel writes to two arguments (or struct fields).

    The rewrite knows what a kernel writes and reads by argument: a write through one name and a read through another
    would go unrecorded.
    """
    extents = []
    for path, array in argument_arrays(spec.parameters, args):
        extent = memory_extent(array)
        if extent is not None:
            extents.append((path, array.device, extent))
    written = set(spec.written)
    for i, (path, device, (start, end)) in enumerate(extents):
        for other, other_device, (other_start, other_end) in extents[i + 1 :]:
            shared = device == other_device and start < other_end and other_start < end
            if shared and (path in written or other in written):
                writes = path if path in written else other
                raise RewriteError(
                    spec.key,
                    spec.location,
                    f"arguments '{path}' and '{other}' share memory and the kernel writes '{writes}': the rewrite "
                    "records reads and writes per argument, so it would miss those through the other one",
                    "Pass the array once (one parameter), or pass a copy",
                )
