# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The device functions generated record and replay kernels call, beside the exact float atomics
(``exact_atomics``): record stores and reads, loop lengths, the launch's status and the readers made on demand."""

from typing import Any

import warp as wp

from .abi import Reader, reader_of


@wp.func
def record_returned(value: Any, records: wp.array(dtype=Any), index: int):
    """Store an atomic's returned value (or another int the replay needs) for the replay kernel and pass it on."""
    records[index] = value
    return value


@wp.func
def record_if_room(value: Any, records: wp.array(dtype=Any), index: int):
    """``record_returned`` inside a loop of unknown length, which may run more often than its records have room for.

    The kernel then reports the trips it needed in its status (``check_trips``); until the launch raises, the store
    past the end is only skipped, never out of bounds. Only such loops pay for the check (a few percent of a
    memory-bound kernel), and the records of helpers' clones, which check wherever they are called from so that one
    definition of a clone serves every call.
    """
    if index < records.shape[0]:
        records[index] = value
    return value


@wp.func
def replay_returned(value: Any, records: wp.array(dtype=Any), index: int):
    """Stand in for an atomic's returned value: the value recorded in forward.

    The atomic passed in as ``value`` keeps its own adjoint (d target / d value), but its side effect
    never runs: the replay kernel is only launched in backward, where Warp skips every atomic.
    """
    return records[index]


@wp.func
def fresh(value: Any):
    """``value``, in a variable of its own. A loop Warp does not unroll assigns each local it changes into the variable
    the local had before it, in place; where that variable holds what a builtin returned, the builtin's adjoint, which
    reads that value (``wp.sqrt``, ``wp.exp``, a division), would read the loop's instead. The replay hands such a
    loop this copy."""
    return value


@wp.func
def range_length(start: int, stop: int, step: int):
    """How many iterations ``range(start, stop, step)`` makes: the capacity a loop's records need."""
    if step > 0:
        return wp.max((stop - start + step - 1) // step, 0)
    return wp.max((start - stop - step - 1) // (-step), 0)


# A launch's status, written by the device and read by the host when it can without waiting (``check``):
# [why the launch is refused (0: it is not), the spec's index of the site concerned, trips needed per loop...]
STATUS_CODE, STATUS_SITE, STATUS_TRIPS = 0, 1, 2
OVERFLOW, ORDER, MISSING, CHAIN, FINAL, REPLAY_DIFFERS, UNSETTLED, POOL, CANCELLED = range(1, 10)
_STATUS_TRIPS = wp.constant(STATUS_TRIPS)
_OVERFLOW, _ORDER, _MISSING, _CHAIN, _FINAL, _REPLAY_DIFFERS, _UNSETTLED, _POOL, _CANCELLED = (
    wp.constant(code) for code in (OVERFLOW, ORDER, MISSING, CHAIN, FINAL, REPLAY_DIFFERS, UNSETTLED, POOL, CANCELLED)
)
_READ_MARK, _WRITTEN_MARK = wp.constant(1), wp.constant(2)


@wp.func
def refuse(status: wp.array(dtype=wp.int32), code: int, site: int):
    """Mark the launch refused: the first reason wins, with the site it concerns (-1: none)."""
    if wp.atomic_cas(status, 0, 0, code) == 0:
        status[1] = site


@wp.func_native("return wp::index(status, 0) != 0;")
def refused(status: wp.array(dtype=wp.int32)) -> bool:
    """Whether the launch was refused: the replay kernel and the exact backward then leave every gradient alone.

    Native, like ``_peek``: kernels that read their status and report into it have no backward to corrupt.
    """
    ...


@wp.func
def check_trips(status: wp.array(dtype=wp.int32), loop: int, trips: int, capacity: int):
    """An execution of ``loop`` about to run ``trips`` times: where that is more than its records have room for,
    the launch is refused, and the trips are reported for the next launch to make room for.

    Only then: an atomic on one address from every thread would serialize them on a GPU."""
    if trips > capacity:
        wp.atomic_max(status, _STATUS_TRIPS + loop, trips)
        refuse(status, _OVERFLOW, -1)


@wp.func
def flat_index(target: Any, i: int) -> int:
    """The flat (row-major) index of an element: the exact atomics' address, the row of the target's shadow."""
    return i


@wp.func
def flat_index(target: Any, i: int, j: int) -> int:  # noqa: F811  (Warp overloads @wp.func by signature)
    return i * target.shape[1] + j


@wp.func
def flat_index(target: Any, i: int, j: int, k: int) -> int:  # noqa: F811
    return (i * target.shape[1] + j) * target.shape[2] + k


@wp.func
def flat_index(target: Any, i: int, j: int, k: int, l: int) -> int:  # noqa: F811, E741
    return ((i * target.shape[1] + j) * target.shape[2] + k) * target.shape[3] + l


def reader(name: str) -> wp.Function | None:
    """The reader ``name`` (see ``abi.Reader``), or None if ``name`` names no reader.

    ``recorded_<dtype>(records, index)``: a record read back in the replay, with an empty gradient: records never
    need one, but a plain read would still cost the backward its adjoint. ``carried_<dtype>(value, records, index)``:
    a local a loop Warp does not unroll carries, restored from its record, whose gradient passes on to ``value``
    (the local as the replay holds it), so that it flows through the loop from one trip to the next as in the
    forward. Warp allows custom gradients only for concrete types, hence one reader per dtype, made on first use
    (see the package's ``__getattr__``) in a Warp module of their own, so that making one never makes Warp compile
    another module again.
    """
    found = reader_of(name)
    if found is None:
        return None
    family, dtype = found
    module = f"{__package__}.readers"
    if family is Reader.RECORDED:

        @wp.func(name=name, module=module)
        def recorded(records: wp.array(dtype=dtype), index: int) -> dtype:
            return records[index]

        @wp.func_grad(recorded)
        def recorded_adjoint(records: wp.array(dtype=dtype), index: int, adj_ret: dtype):
            pass

        return recorded

    @wp.func(name=name, module=module)
    def carried(value: dtype, records: wp.array(dtype=dtype), index: int) -> dtype:
        return records[index]

    @wp.func_grad(carried)
    def carried_adjoint(value: dtype, records: wp.array(dtype=dtype), index: int, adj_ret: dtype):
        wp.adjoint[value] += adj_ret

    return carried


# An append pool (``passes.memory.pool_arrays``): an array the kernel reads and writes element by element, whose
# reads carry gradients where the launch proves that it wrote no element it read. The record kernel marks each
# element it reads and each it writes, with one atomic or on the element's word: of a read and a write of one
# element, in one thread or two, in either order, the second sees the first's mark and refuses the launch. A
# launch in which no read of the pool needs a gradient passes empty marks: nothing is checked, and the replay reads
# the records.


@wp.func
def pool_read(value: Any, address: int, marks: wp.array(dtype=wp.int32), status: wp.array(dtype=wp.int32), site: int):
    """The record kernel's read of an append pool's element (``value``, read as written): marked."""
    if address < marks.shape[0]:  # noqa: SIM102  (the atomic only where there are marks)
        if wp.atomic_or(marks, address, _READ_MARK) & _WRITTEN_MARK != 0:
            refuse(status, _POOL, site)
    return value


@wp.func
def pool_written(address: int, marks: wp.array(dtype=wp.int32), status: wp.array(dtype=wp.int32), site: int):
    """The record kernel's store into an append pool's element: marked."""
    if address < marks.shape[0]:  # noqa: SIM102  (the atomic only where there are marks)
        if wp.atomic_or(marks, address, _WRITTEN_MARK) & _READ_MARK != 0:
            refuse(status, _POOL, site)


@wp.func
def pool_value(value: Any, records: wp.array(dtype=Any), index: int, marks: wp.array(dtype=wp.int32)):
    """The replay's read of an append pool's element: memory (``value``, read as written, its gradient reaching
    the pool's) where the launch checked its reads, which then saw what memory holds now; else the record."""
    if marks.shape[0] > 0:
        return value
    return records[index]
