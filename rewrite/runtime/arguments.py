# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""A launch's arguments by path (``"state.count"``: struct fields too), and the refusal of arguments that share
memory the kernel writes."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import warp as wp

from .errors import RewriteError
from .memory import is_float_dtype, requires_float_grad
from .specs import KernelSpec, SiteSpec


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


# What ``scratch_copy`` gives for an array the launch writes that cannot be copied (an argument may itself be None:
# Warp takes None for an array the kernel does not touch).
UNCOPYABLE = object()


def scratch_copy(value: Any, path: str, written: frozenset[str]) -> Any:
    """What a dry run may run on in place of ``value`` (the argument at ``path``): a copy of each array the launch
    writes, struct fields copied likewise; everything else as it is (the kernel never writes it); ``UNCOPYABLE``
    for an array it writes that cannot be copied."""
    if isinstance(value, wp._src.codegen.StructInstance):
        copy = type(value)()  # type: ignore[call-arg]  # Warp declares StructInstance(ctype); a struct takes none
        for name in value._cls.vars:  # type: ignore[attr-defined]  # (as in argument_arrays)
            field = scratch_copy(getattr(value, name), f"{path}.{name}", written)
            if field is UNCOPYABLE:
                return UNCOPYABLE
            setattr(copy, name, field)
        return copy
    if path not in written:
        return value
    if isinstance(value, wp.array):
        return wp.clone(value, requires_grad=False)
    if isinstance(value, wp.indexedarray):
        # The ignore: Warp declares indexedarray's data Optional and its indices a list of None.
        return wp.indexedarray(wp.clone(value.data, requires_grad=False), value.indices[: value.ndim])  # type: ignore[arg-type]
    return UNCOPYABLE if value is not None else None  # (the caller refuses what cannot be copied)


@dataclass
class AdjointStandIns:
    """What an adjoint launch runs both phases on instead of the arguments (``adjoint_stand_ins``), and the adjoints
    to write back afterwards: (the user's adjoint, the contiguous copy of it the stand-in carried)."""

    args: list[Any]
    write_backs: list[tuple[wp.array, wp.array]] = field(default_factory=list)

    def write_back(self) -> None:
        for adjoint, carried in self.write_backs:
            adjoint.assign(carried)


def adjoint_stand_ins(
    kernel: str, location: str, parameters: Sequence[str], args: Sequence[Any], adjoints: Sequence[Any]
) -> AdjointStandIns:
    """Copies of the arguments, each array carrying the adjoint given for its parameter as its gradient (a struct's
    arrays, the adjoint struct's fields): what ``adjoint=True`` runs both phases on. Memory stays as it was, an array
    passed for two parameters takes each one's adjoint, and what requires grad is exactly what was given an
    adjoint, as in Warp's adjoint launch, which reads neither ``requires_grad`` nor ``.grad``. Raises
    ``RewriteError`` for an adjoint a copy cannot carry (an indexed array's)."""
    stand_ins = AdjointStandIns([])
    for path, value, adjoint in zip(parameters, args, adjoints, strict=True):
        stand_ins.args.append(_stand_in(kernel, location, path, value, adjoint, stand_ins))
    return stand_ins


def _stand_in(kernel: str, location: str, path: str, value: Any, adjoint: Any, stand_ins: AdjointStandIns) -> Any:
    if isinstance(value, wp._src.codegen.StructInstance):
        copy = type(value)()  # type: ignore[call-arg]  # (as in scratch_copy)
        for name in value._cls.vars:  # type: ignore[attr-defined]  # (as in argument_arrays)
            field_adjoint = getattr(adjoint, name, None) if adjoint is not None else None
            setattr(
                copy,
                name,
                _stand_in(kernel, location, f"{path}.{name}", getattr(value, name), field_adjoint, stand_ins),
            )
        return copy
    if not isinstance(value, wp._src.types.Array):
        return value  # a value: Warp's adjoint of it goes nowhere the caller sees
    given = isinstance(adjoint, wp.array) and adjoint.size > 0
    if given and type(value) is not wp.array:
        raise RewriteError(
            kernel,
            location,
            f"an adjoint launch was given an adjoint for '{path}', a {type(value).__name__}, which cannot carry one",
            f"Pass None for its adjoint, or pass '{path}' as a wp.array",
        )
    copy = scratch_copy(value, path, frozenset({path}))
    if copy is None:
        raise RewriteError(
            kernel,
            location,
            f"an adjoint launch runs the forward on a copy of its arguments, and '{path}', a {type(value).__name__}, "
            "cannot be copied",
            "Pass a wp.array, or launch forward on a wp.Tape and call tape.backward()",
        )
    if given:
        carried = adjoint if adjoint.strides == copy.strides else wp.clone(adjoint)
        if carried is not adjoint:
            stand_ins.write_backs.append((adjoint, carried))
        copy.grad = carried
    return copy


def requires_grad_path(parameters: Sequence[str], args: Sequence[Any], site: SiteSpec) -> str | None:
    """The path of an array requiring grad that a float return may be differentiable in, if any."""
    if not is_float_dtype(argument_at(parameters, args, site.target).dtype):
        return None
    if site.gradient_sources is None:
        candidates = list(argument_arrays(parameters, args))
    else:
        candidates = [(path, argument_at(parameters, args, path)) for path in site.gradient_sources]
    for path, value in candidates:
        if requires_float_grad(value):
            return path
    return None
