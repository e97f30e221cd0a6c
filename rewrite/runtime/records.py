# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""What a launch of a rewritten kernel allocates: its records (with the room loops get), the shadows and slices of
exact float returns, the status of the device's checks, and the arguments the generated kernels take after the
kernel's own."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import warp as wp

from .abi import RecordKind
from .arguments import argument_at, requires_grad_path
from .device import STATUS_TRIPS
from .errors import RewriteError
from .exact import ExactTarget, Shadow
from .memory import written_first
from .specs import KernelSpec, LoopSpec, RecordSpec

_EXACT_ONLY = frozenset({RecordKind.VALUES, RecordKind.ORDER, RecordKind.ADDRESSES, RecordKind.COMPARES})


def is_stand_in(record: RecordSpec, exact: frozenset[str]) -> bool:
    """Whether a record is an empty stand-in: exact-return records of a target with no exact returns this launch."""
    return record.kind in _EXACT_ONLY and record.target not in exact


def capacities_of(spec: KernelSpec, max_records: int | None, args: Sequence[Any]) -> dict[int, int | None]:
    """Records per execution of each loop: compiled in, given by the launch's arguments, ``max_records``, or None (to be
    counted by a dry run)."""
    return {loop.id: _capacity(spec, loop, max_records, args) for loop in spec.loops}


def _capacity(spec: KernelSpec, loop: LoopSpec, max_records: int | None, args: Sequence[Any]) -> int | None:
    if loop.room is not None:
        return loop.room
    if not loop.counted:
        return loop.trips or 1
    return loop.argument_trips(spec.parameters, args) if loop.argument_range else max_records


@dataclass
class LaunchRecords:
    """What one launch allocates for the generated kernels."""

    extra: list[Any]  # the arguments both kernels take after the kernel's own
    status: wp.array | None  # the device's checks (see ``check``), where the kernels take one
    shadows: list[Shadow]  # the shadows of targets with exact float returns
    exact: list[ExactTarget]  # the targets whose float returns get exact gradients in this launch


def phase_arguments(
    spec: KernelSpec,
    args: Sequence[Any],
    shape: tuple[int, ...],
    capacities: dict[int, int],
    device: wp.Device,
    exact: frozenset[str] = frozenset(),
) -> LaunchRecords:
    """The arguments the generated kernels take after the kernel's own, allocated from bounds known at launch.

    They are: the records, the capacities of loops whose kernels do not have them compiled in, the status (for
    loops of unknown length and exact float returns), and the launch shape (for kernels unpacking ``wp.tid()``
    into several indices: they compute their row from it). ``exact``: targets whose float returns need exact
    gradients in this launch: each one's records are slices of one allocation, which the exact backward reads
    whole; the other targets' exact-return records are empty (their returns are exact as constants).
    """
    threads = 1
    for extent in shape:
        threads *= extent
    sizes = {}
    for record in spec.records:
        sizes[record.name] = threads
        for loop in record.loops:
            sizes[record.name] *= capacities[loop]
    shadows = {}
    for record in spec.records:
        if record.kind == RecordKind.SHADOW:
            assert record.target is not None  # (a shadow is its target's)
            shadows[record.target] = Shadow(argument_at(spec.parameters, args, record.target), device)
    targets = []
    for path in sorted(exact):
        sites = [(index, site) for index, site in enumerate(spec.sites) if site.exact and site.target == path]
        targets.append(ExactTarget(path, shadows[path], sites, sizes, device))
    sliced = {name: array for target in targets for name, array in target.slices().items()}
    extra: list[Any] = []  # records, capacities (ints), the status and the launch shape (a vec4i)
    empties = {}  # zero-size stand-ins are never written: one per (shape, dtype) serves every record
    for record in spec.records:
        array: Any = argument_at(spec.parameters, args, record.target) if record.target else None
        if record.name in sliced:
            extra.append(sliced[record.name])
        elif record.kind == RecordKind.SHADOW and record.target is not None:  # (a shadow is its target's)
            extra.append(shadows[record.target].words)
        elif record.kind == RecordKind.MARKS:  # zeroed: the record kernel marks what the launch reads and writes
            checked = any(
                site.pool and site.target == record.target and requires_grad_path(spec.parameters, args, site)
                for site in spec.sites
            )
            extra.append(wp.zeros(array.size if checked else 0, dtype=wp.int32, device=device))
        elif is_stand_in(record, exact):
            empty = (0, 0) if record.kind == RecordKind.ORDER else (0,)
            dtype = array.dtype if record.kind in (RecordKind.VALUES, RecordKind.COMPARES) else wp.int32
            if (empty, dtype) not in empties:
                empties[empty, dtype] = wp.empty(empty, dtype=dtype, device=device)
            extra.append(empties[empty, dtype])
        else:
            dtype = array.dtype if record.kind == RecordKind.RETURNED else record.dtype or wp.int32
            # The replay reads only records the record kernel wrote, so they need no zero fill.
            try:
                extra.append(written_first(sizes[record.name], dtype, device))
            except (ValueError, RuntimeError) as error:  # too many elements, or out of memory
                raise unallocated(spec, record, sizes[record.name], threads, capacities, error) from error
    # The capacities not compiled in, in loop order: the kernels' trip_capacity<id> parameters.
    extra += [capacities[loop.id] for loop in spec.loops if loop.counted and loop.room is None]
    status = None
    if spec.has_status:
        status = wp.zeros(STATUS_TRIPS + len(spec.loops), dtype=wp.int32, device=device)
        extra.append(status)
    if spec.launch_arity > 1:
        extra.append(wp.vec4i(*shape, *(1,) * (4 - len(shape))))
    return LaunchRecords(extra, status, list(shadows.values()), targets)


@dataclass(frozen=True)
class Capacities:
    """Records per execution of each loop, by loop id, as this launch allocates them."""

    rooms: dict[int, int]
    # by a dry run, or from the launch's arguments (``LoopSpec.argument_range``): they depend on more than its signature
    from_values: bool


def unallocated(
    spec: KernelSpec, record: RecordSpec, size: int, threads: int, capacities: dict[int, int], error: Exception
) -> RewriteError:
    """The refusal of a launch whose records cannot be allocated: which record, and the room that sized it."""
    loops = {loop.id: loop for loop in spec.loops}
    rooms = [
        f"room for {capacities[loop]} per execution of the loop at {loops[loop].location}" for loop in record.loops
    ]
    sized = " × ".join([f"{threads} threads", *rooms])
    return RewriteError(
        spec.key,
        loops[record.loops[-1]].location if record.loops else spec.location,
        f"the launch's record '{record.name}' needs {size} values ({sized}) and cannot be allocated: {error}",
        "Pass a smaller max_records (to wp_rewrite, or to the launch), or launch fewer threads"
        if record.loops
        else "Launch fewer threads",
    )
