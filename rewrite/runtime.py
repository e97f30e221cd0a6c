"""warp-rewrite's runtime: what rewritten kernels call and how they are launched.

This one module is everything generated code needs once it exists: the ``@wp.func`` helpers the record and
replay kernels call (among them the exact float atomics), the launch of both phases (``RewrittenKernel``), the
checks the device makes and the host reads later (``check``), the exact backward of floating-point atomic
returns and ``RewriteError``. It imports only warp, numpy and the standard library, so that ``wp-rewrite`` can
write it, byte for byte, beside the modules it emits (as ``wp_rewrite_runtime.py``): an emitted module then
runs without warp-rewrite installed. The API (``warp_rewrite.wp_rewrite``) uses the same module as
``warp_rewrite.runtime``.

Generated code refers to this module by one name (``wp_rewrite_runtime`` unless the user's module uses it),
for example ``wp_rewrite_runtime.record_returned(slot, slot_records, thread)``.
"""

import ctypes
import functools
import inspect
import sys
import weakref
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

__version__ = "0.3.0"


class RewriteError(Exception):
    """A kernel pattern the rewrite cannot make differentiable correctly.

    The message names the kernel, the ``file:line:col`` of the construct, what is unsupported and what
    to do instead: a clear error, never a silently wrong gradient.
    """

    def __init__(self, kernel: str, location: str, problem: str, advice: str):
        self.kernel = kernel
        self.location = location
        self.problem = problem
        self.advice = advice
        super().__init__(f"{location}: kernel '{kernel}': {problem}. {advice}")


# --- what a launch needs to know about the generated kernels ------------------------------------------------


@dataclass(frozen=True)
class ExactRecords:
    """The record parameters of an atomic whose float returns get exact gradients (see the exact backward)."""

    returned: str
    values: str  # the operands
    order: str  # each operation's place among the operations on its address, per component (-1: never ran)
    addresses: str  # the flat address each operation touched
    compares: str | None = None  # atomic_cas: the compare operands


@dataclass(frozen=True)
class SiteSpec:
    """One recorded atomic."""

    target: str  # argument path of the target array: "count", or a struct field's "state.count"
    op: str  # "add", "cas", ...; "read": a plain read of an array the launch writes
    location: str  # "file:line:col" of the atomic in the user's source
    # argument paths a float return may be differentiable in; None: any array argument
    gradient_sources: tuple[str, ...] | None = ()
    exact: ExactRecords | None = None


@dataclass(frozen=True)
class RecordSpec:
    """One record parameter of the generated kernels, which each launch allocates.

    ``kind`` says how: "returned", "values" and "compares" hold the target's dtype, "order" (one column per
    component) and "addresses" int32; a "shadow" holds the target's values and tickets while the record kernel
    runs (see ``exact_add``); "trips" (how often a loop ran) and "carried" (ints a loop hands on) have ``dtype``.
    Each but the shadow holds one entry per thread and iteration of ``loops``.
    """

    name: str
    kind: str
    target: str | None = None
    dtype: Any = None  # the Warp type of "trips" and "carried" records; None: decided by the kind
    loops: tuple[int, ...] = ()
    requires_grad: bool = False


@dataclass(frozen=True)
class LoopSpec:
    """A loop around a recorded atomic."""

    id: int
    location: str
    trips: int | None = None  # the trip count of a constant range()
    room: int | None = None  # records per execution compiled into the kernels; None: passed by each launch
    counted: bool = False  # of unknown length and replayed: needs room, and its trips are checked


@dataclass(frozen=True)
class KernelSpec:
    """What a launch of one pair of generated kernels needs to know about them."""

    key: str  # the original kernel's name, for messages
    parameters: tuple[str, ...]  # the original kernel's parameters, in order
    location: str = ""  # "file:line:col" of the kernel's definition
    written: tuple[str, ...] = ()  # argument paths of the arrays the launch writes
    # those of them a dry run copies: the ones the launch reads back (the count kernel writes no others)
    copied: tuple[str, ...] = ()
    sites: tuple[SiteSpec, ...] = ()
    records: tuple[RecordSpec, ...] = ()  # in the order of the generated kernels' record parameters
    loops: tuple[LoopSpec, ...] = ()
    launch_arity: int = 1  # how many indices the kernel unpacks wp.tid() into: the most launch dimensions
    # The adjoint launches of the replay kernel the exact backward makes: one, plus one per link of the longest
    # chain of exact returns feeding exact operands; None: found by the backward, which then reads on the host
    # whether gradient is left after each (a chain through a helper, or one that can feed back into its target).
    exact_rounds: int | None = 0

    @property
    def has_status(self) -> bool:
        """Whether both kernels take a status array: the device's checks (records overflowing, exact orders)."""
        return any(loop.counted for loop in self.loops) or any(site.exact for site in self.sites)


# --- device functions the generated kernels call ---------------------------------------------------------------


@wp.func
def record_returned(value: Any, records: wp.array(dtype=Any), index: int):
    """Store an atomic's returned value (or another int the replay needs) for the replay kernel and pass it on."""
    records[index] = value
    return value


@wp.func
def record_if_room(value: Any, records: wp.array(dtype=Any), index: int):
    """``record_returned`` inside a loop of unknown length, which may run more often than its records have room for.

    The kernel then reports the trips it needed in its status (``report_trips``); until the launch raises, the store
    past the end is only skipped, never out of bounds. Only such loops pay for the check (a few percent of a
    memory-bound kernel).
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
def range_length(start: int, stop: int, step: int):
    """How many iterations ``range(start, stop, step)`` makes: the capacity a loop's records need."""
    if step > 0:
        return wp.max((stop - start + step - 1) // step, 0)
    return wp.max((start - stop - step - 1) // (-step), 0)


# A launch's status, written by the device and read by the host when it can without waiting (``check``):
# [why the launch is refused (0: it is not), the spec's index of the site concerned, trips needed per loop...]
STATUS_CODE, STATUS_SITE, STATUS_TRIPS = 0, 1, 2
OVERFLOW, ORDER, MISSING, CHAIN, FINAL, REPLAY_DIFFERS, UNSETTLED = range(1, 8)
_STATUS_TRIPS = wp.constant(STATUS_TRIPS)
_OVERFLOW, _ORDER, _MISSING, _CHAIN, _FINAL, _REPLAY_DIFFERS, _UNSETTLED = (
    wp.constant(code) for code in (OVERFLOW, ORDER, MISSING, CHAIN, FINAL, REPLAY_DIFFERS, UNSETTLED)
)


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
def report_trips(status: wp.array(dtype=wp.int32), loop: int, trips: int):
    """An execution of ``loop`` ran ``trips`` times, more than its records have room for: the launch is refused."""
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


# --- exact float atomics: the returned value and its place in the order, from one atomic ---------------------
#
# While the record kernel runs, a target with exact float returns lives in a shadow beside it: per element and
# component a uint64 word packing (ticket << 32 | value bits) for float32, float16 and bfloat16, so that one
# 64-bit compare-and-swap gives an operation both the value it returns and its ticket, its place among the
# operations on that address. float64 takes two words, (value bits, ticket word): a 128-bit compare-and-swap on
# sm_90 and later (and on the CPU), below sm_90 a ticket lock whose ticket is taken by one atomic add. Either way
# the ticket word holds (count << 32 | count) at rest. Vectors, matrices, quaternions and transforms work per
# component, as Warp's own atomics do. The launch fills the shadow from the target before the record kernel and
# writes the values back after it; the tickets stay for the exact backward. The CPU runs this same code (its
# compare-and-swap always succeeds first: CPU launches are serial).

OP_ADD, OP_SUB, OP_MIN, OP_MAX, OP_EXCH, OP_CAS = range(6)
_LOW32 = wp.constant(wp.uint64(0xFFFFFFFF))
_SHIFT32 = wp.constant(wp.uint64(32))
_ONE = wp.constant(wp.uint64(1))
_NEXT_TICKET = wp.constant(wp.uint64(1 << 32))
Float = wp._src.types.Float  # Warp's generic float scalar


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
    return true;
#else
    return false;
#endif
"""
)
def _on_cuda() -> bool: ...


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
    return __CUDA_ARCH__ >= 900;
#else
    return true;
#endif
"""
)
def _wide_cas_available() -> bool: ...


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
    __threadfence();
#endif
"""
)
def _fence(): ...


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
    __nanosleep(32);
#endif
"""
)
def _backoff(): ...


@wp.func_native(
    r"""
wp::uint64* word = wp::address(shadow, address, column);
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 900
    unsigned long long low, high;
    asm volatile(
        "{\n\t.reg .b128 _e, _d, _s;\n\t"
        "mov.b128 _e, {%2, %3};\n\t"
        "mov.b128 _d, {%4, %5};\n\t"
        "atom.relaxed.gpu.cas.b128 _s, [%6], _e, _d;\n\t"
        "mov.b128 {%0, %1}, _s;\n\t}"
        : "=l"(low), "=l"(high)
        : "l"((unsigned long long)expected[0]), "l"((unsigned long long)expected[1]),
          "l"((unsigned long long)desired[0]), "l"((unsigned long long)desired[1]), "l"(word)
        : "memory");
    return wp::vec_t<2, wp::uint64>(low, high);
#else
    __trap();  // never called below sm_90: _wide_cas_available() is false there
    return expected;
#endif
#else
    wp::vec_t<2, wp::uint64> seen(word[0], word[1]);
    if (seen[0] == expected[0] && seen[1] == expected[1]) {
        word[0] = desired[0];
        word[1] = desired[1];
    }
    return seen;
#endif
"""
)
def _cas_pair(
    shadow: wp.array2d(dtype=wp.uint64), address: int, column: int, expected: wp.vec2ul, desired: wp.vec2ul
) -> wp.vec2ul: ...


@wp.func_native("return *wp::address(shadow, address, column);")
def _peek(shadow: wp.array2d(dtype=wp.uint64), address: int, column: int) -> wp.uint64:
    """A plain read of a shadow word: a first guess for the compare-and-swap. Native, so that Warp's check of
    reads followed by writes (``verify_autograd_array_access``) does not take the guess for a read the atomic
    then overwrites: the record kernel has no backward to corrupt."""
    ...


@wp.func
def _bits(x: wp.float32) -> wp.uint64:
    return wp.uint64(wp.cast(x, wp.uint32))


@wp.func
def _bits(x: wp.float16) -> wp.uint64:
    return wp.uint64(wp.cast(x, wp.uint16))


@wp.func
def _bits(x: wp.bfloat16) -> wp.uint64:
    return wp.uint64(wp.cast(x, wp.uint16))


@wp.func
def _bits(x: wp.float64) -> wp.uint64:
    return wp.cast(x, wp.uint64)


@wp.func
def _from_bits(bits: wp.uint64, like: wp.float32) -> wp.float32:
    return wp.cast(wp.uint32(bits & _LOW32), wp.float32)


@wp.func
def _from_bits(bits: wp.uint64, like: wp.float16) -> wp.float16:
    return wp.cast(wp.uint16(bits & _LOW32), wp.float16)


@wp.func
def _from_bits(bits: wp.uint64, like: wp.bfloat16) -> wp.bfloat16:
    return wp.cast(wp.uint16(bits & _LOW32), wp.bfloat16)


@wp.func
def _from_bits(bits: wp.uint64, like: wp.float64) -> wp.float64:
    return wp.cast(bits, wp.float64)


@wp.func
def _combine(op: int, old: Any, operand: Any, compare: Any):
    """What operation ``op`` leaves at an address holding ``old``: the arithmetic of Warp's own atomics.

    cas compares as the device's own atomic does: bit patterns on CUDA, ``==`` on the CPU.
    """
    new = operand  # exch
    if op == 0:
        new = old + operand
    elif op == 1:
        new = old - operand
    elif op == 2:
        new = wp.min(old, operand)
    elif op == 3:
        new = wp.max(old, operand)
    elif op == 5:
        new = old
        swaps = old == compare
        if _on_cuda():
            swaps = _bits(old) == _bits(compare)
        if swaps:
            new = operand
    return new


@wp.func
def _same(a: Float, b: Float) -> bool:
    """Equal, counting two NaNs as equal (their payloads may differ between compilers)."""
    return a == b or (wp.isnan(a) and wp.isnan(b))


@wp.func
def _same(a: Any, b: Any) -> bool:  # vectors, matrices, ... (after the scalars: Warp takes the first match)
    return a == b


@wp.func
def _exact_word(op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, column: int, operand: Any, compare: Any):
    """One operation on a packed (ticket << 32 | bits) word: the value it found and its ticket."""
    guess = _peek(shadow, address, column)  # a stale guess only costs a failed compare-and-swap
    return _exact_word_from(op, shadow, address, column, operand, compare, guess)


@wp.func
def _exact_word_from(
    op: int,
    shadow: wp.array2d(dtype=wp.uint64),
    address: int,
    column: int,
    operand: Any,
    compare: Any,
    guess: wp.uint64,
):
    word = guess
    old = operand
    ticket = wp.uint64(0)
    searching = bool(True)
    while searching:
        old = _from_bits(word, operand)
        ticket = word >> _SHIFT32
        new = ((ticket + _ONE) << _SHIFT32) | _bits(_combine(op, old, operand, compare))
        seen = wp.atomic_cas(shadow, address, column, word, new)
        if seen == word:
            searching = False
        else:
            word = seen
    return old, wp.int32(ticket)


@wp.func
def _exact_pair_cas(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, column: int, operand: wp.float64, compare: wp.float64
):
    """float64 on a (bits, ticket word) pair with one 128-bit compare-and-swap: the value found and its ticket."""
    guess = wp.vec2ul(_peek(shadow, address, column), _peek(shadow, address, column + 1))  # torn: fails once
    return _exact_pair_cas_from(op, shadow, address, column, operand, compare, guess)


@wp.func
def _exact_pair_cas_from(
    op: int,
    shadow: wp.array2d(dtype=wp.uint64),
    address: int,
    column: int,
    operand: wp.float64,
    compare: wp.float64,
    guess: wp.vec2ul,
):
    word = guess
    old = operand
    ticket = wp.uint64(0)
    searching = bool(True)
    while searching:
        old = _from_bits(word[0], operand)
        ticket = word[1] >> _SHIFT32
        count = ticket + _ONE
        new = wp.vec2ul(_bits(_combine(op, old, operand, compare)), (count << _SHIFT32) | count)
        seen = _cas_pair(shadow, address, column, word, new)
        if seen[0] == word[0] and seen[1] == word[1]:
            searching = False
        else:
            word = seen
    return old, wp.int32(ticket)


@wp.func
def _exact_pair_locked(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, column: int, operand: wp.float64, compare: wp.float64
):
    """float64 below sm_90: a ticket lock (next ticket << 32 | ticket served); the ticket is the place."""
    lock = wp.atomic_add(shadow, address, column + 1, _NEXT_TICKET)
    ticket = lock >> _SHIFT32
    serving = lock & _LOW32
    while serving != ticket:  # waits only for smaller tickets, whose holders already run: no deadlock
        _backoff()
        serving = wp.atomic_add(shadow, address, column + 1, wp.uint64(0)) & _LOW32
    _fence()
    old = _from_bits(wp.atomic_add(shadow, address, column, wp.uint64(0)), operand)
    wp.atomic_exch(shadow, address, column, _bits(_combine(op, old, operand, compare)))
    _fence()
    wp.atomic_add(shadow, address, column + 1, _ONE)
    return old, wp.int32(ticket)


@wp.func
def _exact_scalar(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, operand: wp.float32, compare: Any
):
    return _exact_word(op, shadow, address, component, operand, wp.float32(compare))


@wp.func
def _exact_scalar(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, operand: wp.float16, compare: Any
):
    return _exact_word(op, shadow, address, component, operand, wp.float16(compare))


@wp.func
def _exact_scalar(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, operand: wp.bfloat16, compare: Any
):
    return _exact_word(op, shadow, address, component, operand, wp.bfloat16(compare))


@wp.func
def _exact_scalar(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, operand: wp.float64, compare: Any
):
    if _wide_cas_available():
        return _exact_pair_cas(op, shadow, address, 2 * component, operand, wp.float64(compare))
    return _exact_pair_locked(op, shadow, address, 2 * component, operand, wp.float64(compare))


@wp.func
def _exact_value(
    op: int,
    shadow: wp.array2d(dtype=wp.uint64),
    address: int,
    operand: Float,
    compare: Float,
    order: wp.array2d(dtype=wp.int32),
    record_index: int,
):
    """Run one exact operation on a value: the value it found, its tickets recorded per component."""
    old, ticket = _exact_scalar(op, shadow, address, 0, operand, compare)
    if record_index < order.shape[0]:
        order[record_index, 0] = ticket
    return old


@wp.func
def _exact_value(
    op: int,
    shadow: wp.array2d(dtype=wp.uint64),
    address: int,
    operand: wp.types.vector(length=Any, dtype=Float),
    compare: wp.types.vector(length=Any, dtype=Float),
    order: wp.array2d(dtype=wp.int32),
    record_index: int,
):
    old = operand
    for c in range(len(operand)):
        value, ticket = _exact_scalar(op, shadow, address, c, operand[c], compare[c])
        old[c] = value
        if record_index < order.shape[0]:
            order[record_index, c] = ticket
    return old


@wp.func
def _exact_value(
    op: int,
    shadow: wp.array2d(dtype=wp.uint64),
    address: int,
    operand: wp.types.quaternion(dtype=Float),
    compare: wp.types.quaternion(dtype=Float),
    order: wp.array2d(dtype=wp.int32),
    record_index: int,
):
    old = operand
    for c in range(4):
        value, ticket = _exact_scalar(op, shadow, address, c, operand[c], compare[c])
        old[c] = value
        if record_index < order.shape[0]:
            order[record_index, c] = ticket
    return old


@wp.func
def _exact_value(
    op: int,
    shadow: wp.array2d(dtype=wp.uint64),
    address: int,
    operand: wp.types.transformation(dtype=Float),
    compare: wp.types.transformation(dtype=Float),
    order: wp.array2d(dtype=wp.int32),
    record_index: int,
):
    old = operand
    for c in range(7):
        value, ticket = _exact_scalar(op, shadow, address, c, operand[c], compare[c])
        old[c] = value
        if record_index < order.shape[0]:
            order[record_index, c] = ticket
    return old


@wp.func
def _exact_value(
    op: int,
    shadow: wp.array2d(dtype=wp.uint64),
    address: int,
    operand: wp.types.matrix(shape=(Any, Any), dtype=Float),
    compare: wp.types.matrix(shape=(Any, Any), dtype=Float),
    order: wp.array2d(dtype=wp.int32),
    record_index: int,
):
    old = operand
    columns = len(operand[0])
    for c in range(len(operand) * columns):
        row, column = c // columns, c % columns
        value, ticket = _exact_scalar(op, shadow, address, c, operand[row, column], compare[row, column])
        old[row, column] = value
        if record_index < order.shape[0]:
            order[record_index, c] = ticket
    return old


@wp.func
def _record_exact(
    op: int,
    address: int,
    operand: Any,
    compare: Any,
    shadow: wp.array2d(dtype=wp.uint64),
    returned: wp.array(dtype=Any),
    operands: wp.array(dtype=Any),
    order: wp.array2d(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    record_index: int,
):
    """Run an exact operation and record what the exact backward needs: its returned value, operand, tickets and
    address. A launch in which no gradient can flow through the returns passes empty arrays for all but the
    returned values."""
    old = _exact_value(op, shadow, address, operand, compare, order, record_index)
    if record_index < returned.shape[0]:  # a loop may outgrow its records: the launch then refuses
        returned[record_index] = old
    if record_index < operands.shape[0]:
        operands[record_index] = operand
        addresses[record_index] = address
    return old


@wp.func
def exact_add(
    address: int,
    value: Any,
    shadow: wp.array2d(dtype=wp.uint64),
    returned: wp.array(dtype=Any),
    operands: wp.array(dtype=Any),
    order: wp.array2d(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    record_index: int,
):
    """``wp.atomic_add(target, ..., value)`` on a target's shadow (``address = flat_index(target, ...)``), recorded
    for exact gradients through what it returns."""
    operand = returned.dtype(value)
    return _record_exact(0, address, operand, operand, shadow, returned, operands, order, addresses, record_index)


@wp.func
def exact_sub(
    address: int,
    value: Any,
    shadow: wp.array2d(dtype=wp.uint64),
    returned: wp.array(dtype=Any),
    operands: wp.array(dtype=Any),
    order: wp.array2d(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    record_index: int,
):
    """``exact_add`` for ``wp.atomic_sub``."""
    operand = returned.dtype(value)
    return _record_exact(1, address, operand, operand, shadow, returned, operands, order, addresses, record_index)


@wp.func
def exact_min(
    address: int,
    value: Any,
    shadow: wp.array2d(dtype=wp.uint64),
    returned: wp.array(dtype=Any),
    operands: wp.array(dtype=Any),
    order: wp.array2d(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    record_index: int,
):
    """``exact_add`` for ``wp.atomic_min``."""
    operand = returned.dtype(value)
    return _record_exact(2, address, operand, operand, shadow, returned, operands, order, addresses, record_index)


@wp.func
def exact_max(
    address: int,
    value: Any,
    shadow: wp.array2d(dtype=wp.uint64),
    returned: wp.array(dtype=Any),
    operands: wp.array(dtype=Any),
    order: wp.array2d(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    record_index: int,
):
    """``exact_add`` for ``wp.atomic_max``."""
    operand = returned.dtype(value)
    return _record_exact(3, address, operand, operand, shadow, returned, operands, order, addresses, record_index)


@wp.func
def exact_exch(
    address: int,
    value: Any,
    shadow: wp.array2d(dtype=wp.uint64),
    returned: wp.array(dtype=Any),
    operands: wp.array(dtype=Any),
    order: wp.array2d(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    record_index: int,
):
    """``exact_add`` for ``wp.atomic_exch``."""
    operand = returned.dtype(value)
    return _record_exact(4, address, operand, operand, shadow, returned, operands, order, addresses, record_index)


@wp.func
def exact_cas(
    address: int,
    compare: Any,
    value: Any,
    shadow: wp.array2d(dtype=wp.uint64),
    returned: wp.array(dtype=Any),
    operands: wp.array(dtype=Any),
    order: wp.array2d(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    compares: wp.array(dtype=Any),
    record_index: int,
):
    """``exact_add`` for ``wp.atomic_cas``, which also records the compare operand (it decides the swap)."""
    expected = returned.dtype(compare)
    old = _record_exact(
        5, address, returned.dtype(value), expected, shadow, returned, operands, order, addresses, record_index
    )
    if record_index < compares.shape[0]:
        compares[record_index] = expected
    return old


@wp.func
def exact_returned(value: Any, operands: wp.array(dtype=Any), returned: wp.array(dtype=Any), record_index: int):
    """Stand in for an exact float atomic in the replay kernel: its recorded returned value.

    The returned value's adjoint gathers in ``returned``'s gradient (the exact backward routes it). Storing the
    operand gives it an adjoint entry point: the exact backward's own adjoint launches seed it with the gradient
    that reaches the operand through later operations. The replay must recompute the operand the forward used;
    the exact backward checks that it did (the store replaces the recorded operand by the recomputed one).
    """
    if record_index < operands.shape[0]:
        operands[record_index] = operands.dtype(value)
    return returned[record_index]


READER_PREFIX = "recorded_"


def _reader(dtype: type) -> wp.Function:
    """``recorded_<dtype>(records, index)``: a record read back in the replay, with an empty gradient.

    Records never need a gradient, but a plain read would still cost the backward its adjoint. Warp allows
    custom gradients only for concrete types, hence one reader per dtype, made on first use (see
    ``__getattr__``) in a Warp module of their own, so that making one never makes Warp compile another
    module again.
    """

    @wp.func(name=f"{READER_PREFIX}{dtype.__name__}", module=f"{__name__}.readers")
    def recorded(records: wp.array(dtype=dtype), index: int) -> dtype:
        return records[index]

    @wp.func_grad(recorded)
    def recorded_adjoint(records: wp.array(dtype=dtype), index: int, adj_ret: dtype):
        pass

    return recorded


def reader_name(dtype: type) -> str | None:
    """The name of the reader of records of ``dtype`` (a Warp type), or None: such records are read plainly."""
    return f"{READER_PREFIX}{dtype.__name__}" if getattr(wp, dtype.__name__, None) is dtype else None


def __getattr__(name: str) -> Any:
    """Readers (``recorded_float32``, ``recorded_vec3d``, ...) are made when generated code first names them."""
    dtype = getattr(wp, name.removeprefix(READER_PREFIX), None) if name.startswith(READER_PREFIX) else None
    if not isinstance(dtype, type) or reader_name(dtype) != name:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = _reader(dtype)
    return globals()[name]


# --- the device's checks, read by the host when it can without waiting ------------------------------------------
#
# A launch that can go wrong in ways only the device sees (a loop outgrowing its records, an inconsistent exact
# order) gets a status array (``STATUS_CODE``...). Its kernels write it; the replay kernel and the exact backward
# read it and, once it says "refused", leave every gradient alone. The host copies it to host memory right after
# the work that writes it, without waiting, and reads the copy once the device has got there: at the launch's
# next checkpoint (after its forward, and after each step of its backward), at ``check()``, which waits. On the
# CPU the device is always there already, so a refusal raises at once; on a GPU it raises at the first checkpoint
# after the device got there, or at ``check()``. Nothing here synchronizes, so a launch and its backward can be
# captured in a CUDA graph: there the copies are part of the graph, and ``check()`` reads them after a replay.


def _host_view(array: wp.array) -> np.ndarray:
    """A NumPy view of a host array's int32 values (no copy, no synchronization)."""
    pointer = ctypes.cast(array.ptr, ctypes.POINTER(ctypes.c_int32))
    return np.ctypeslib.as_array(pointer, shape=array.shape)


@dataclass(eq=False)
class PendingCheck:
    """A launch's status on its way to the host, and what to make of it."""

    status: wp.array  # the device's: a launch's checks are reported once, however many copies are on their way
    host: wp.array  # the host copy (pinned memory when the status is on a GPU)
    values: np.ndarray  # a view of it
    event: Any  # a wp.Event recorded after the copy; None: already there (CPU), or in a graph capture
    explain: Callable[[np.ndarray], RewriteError | None]

    def arrived(self) -> bool:
        return self.event is None or self.event.is_complete


class DeviceChecks:
    """The statuses of launches on their way to the host (see above)."""

    def __init__(self, captured_kept: int = 256):
        self.pending: list[PendingCheck] = []
        self.captured: list[PendingCheck] = []  # read by check() after each replay of the graph
        self.captured_kept = captured_kept
        self.spare: dict[tuple, list[wp.array]] = {}  # host copies read already, by (length, pinned)

    def watch(self, status: wp.array, explain: Callable[[np.ndarray], RewriteError | None]) -> None:
        """Copy ``status`` to the host behind the work that writes it, then read what has arrived."""
        device = status.device
        spare = self.spare.setdefault((status.size, device.is_cuda), [])
        # Pinned host memory is slow to allocate: copies that have been read are used again.
        host = spare.pop() if spare else wp.empty(status.shape, dtype=wp.int32, device="cpu", pinned=device.is_cuda)
        wp.copy(host, status)
        check = PendingCheck(status, host, _host_view(host), None, explain)
        if device.is_cuda and device.is_capturing:
            self.captured = [*self.captured[-self.captured_kept + 1 :], check]
            return
        if device.is_cuda:
            check.event = device.stream.record_event()
        self.pending.append(check)
        self.poll()

    def poll(self, wait: bool = False) -> None:
        """Read every status that has arrived (``wait``: every one), and raise the first refusal among them."""
        arrived = [check for check in self.pending if wait or check.arrived()]
        if not arrived:
            return
        self.pending = [check for check in self.pending if check not in arrived]
        for check in arrived:
            if check.event is not None:
                wp.synchronize_event(check.event)  # arrived already unless waiting: returns at once
        try:
            self._raise_first(arrived)
        finally:
            for check in arrived:
                self.spare[check.host.size, check.host.pinned].append(check.host)

    def check(self) -> None:
        """Wait for every launch's checks (and those of captured graphs, after their last replay) and raise."""
        self.poll(wait=True)
        if self.captured:
            wp.synchronize()  # a graph's copies land when its replay ends
            self._raise_first(self.captured)

    def _raise_first(self, checks: list[PendingCheck]) -> None:
        for check in checks:
            error = check.explain(check.values)
            if error is not None:
                self.pending = [other for other in self.pending if other.status is not check.status]
                raise error


_device_checks = DeviceChecks()


def check() -> None:
    """Raise the ``RewriteError`` of any rewritten launch the device refused that has not been reported yet.

    On the CPU refusals raise at once. On a GPU the device's checks reach the host without anyone waiting for
    them; they raise at the launch's next checkpoint (right after its forward, after each step of its backward)
    once the device has got there, and here, which waits for them. Call it after a captured graph's replay.
    """
    _device_checks.check()


def unbounded_chain(spec: KernelSpec, site: SiteSpec, instead: str) -> RewriteError:
    """The refusal, in a CUDA graph capture, of exact returns whose backward needs the host (see ``exact_rounds``)."""
    return RewriteError(
        spec.key,
        site.location,
        f"the values returned by wp.atomic_{site.op}() on '{site.target}' feed operands of float atomics on the "
        "same target (or their chain runs through a helper): how many adjoint launches the exact backward needs "
        "depends on the data and is found on the host, which a CUDA graph capture cannot wait for",
        f"Rewrite with detach_returns=True, or {instead} outside the capture",
    )


def trips_of(values: np.ndarray, loop: int) -> int:
    """The trips an execution of ``loop`` needed, as its status reports them (0: none beyond its room)."""
    return int(values[STATUS_TRIPS + loop])


def explain_status(
    spec: KernelSpec, capacities: dict[int, int], values: np.ndarray, in_backward: bool = False
) -> RewriteError | None:
    """The ``RewriteError`` a launch's status stands for (None: it was not refused). ``in_backward``: read during a
    backward pass, whose gradients the message then says are incomplete."""
    code, site_index = int(values[STATUS_CODE]), int(values[STATUS_SITE])
    if code == 0:
        return None
    withheld = ""
    if in_backward:
        if code == REPLAY_DIFFERS:
            withheld = (
                " (found in backward, where this launch's replay had added its local terms to the gradients "
                "and the rest was left out: this backward pass's gradients are wrong)"
            )
        elif code == UNSETTLED:
            withheld = (
                " (found in backward, after this launch's replay had added its local terms and part of the gradient "
                "through the returns to the gradients: this backward pass's gradients are wrong)"
            )
        else:
            withheld = (
                " (found in backward: none of this launch's gradients were written, so this backward "
                "pass's gradients are incomplete)"
            )
    if code == OVERFLOW:
        loop = next(loop for loop in spec.loops if loop.counted and trips_of(values, loop.id) > capacities[loop.id])
        needed = trips_of(values, loop.id)
        return RewriteError(
            spec.key,
            loop.location,
            f"this loop ran {needed} times in one execution but its records had room for {capacities[loop.id]}; "
            f"the launch's gradients would be wrong{withheld}",
            f"Pass max_records={needed} or more (to wp_rewrite, or to the generated launch function)",
        )
    exact = [site for site in spec.sites if site.exact]
    site = spec.sites[site_index] if 0 <= site_index < len(spec.sites) else exact[0]
    atomic = f"wp.atomic_{site.op}() on '{site.target}'"
    bug = "This is a bug in warp-rewrite (please report it); rewrite with detach_returns=True meanwhile"
    problems = {
        ORDER: (f"the tickets of the float atomics on '{site.target}' are not a permutation of each address's "
                "operations: two operations took one place, or one a place beyond the count", bug),
        MISSING: (f"an operation on '{site.target}' took a ticket but left no record", bug),
        CHAIN: (f"the value an operation of {atomic} returned does not follow from the operation before it on "
                "the same address: its records changed after the record kernel", bug),
        FINAL: (f"the last operation on an address of '{site.target}' ({atomic}) does not give the value the "
                "target held after the launch", bug),
        REPLAY_DIFFERS: (f"the replay kernel recomputed the operand of {atomic} differently from the forward: it "
                         "reads memory this launch changes (an array the kernel also writes, or an argument "
                         "sharing memory with another)",
                         "Compute the operand from arrays the launch does not write, or rewrite with "
                         "detach_returns=True"),
        UNSETTLED: (f"the gradient through the float returns of {atomic} did not settle in "
                    f"{spec.exact_rounds or 'as many'} adjoint launches (as operations): an operand depends on "
                    "returned values through more links than expected", bug),
    }  # fmt: skip
    problem, advice = problems[code]
    return RewriteError(spec.key, site.location, problem + withheld, advice)


# --- launching both phases -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelPair:
    """A record kernel, its replay kernel, and what their launches need to know about them."""

    record: wp.Kernel  # the complete forward plus the record stores; enable_backward=False
    replay: wp.Kernel  # the original code reading the records back: only its adjoint runs
    spec: KernelSpec
    count: wp.Kernel | None = None  # the record kernel without writes nothing reads back: what dry runs launch


def argument_arrays(parameters: Sequence[str], args: Sequence[Any]):
    """Every array among a launch's arguments (of any of Warp's array kinds), struct fields included, with its
    path ("state.count")."""
    for path, value in zip(parameters, args, strict=True):
        if isinstance(value, wp._src.types.Array):
            yield path, value
        elif isinstance(value, wp._src.codegen.StructInstance):
            fields = value._cls.vars
            yield from argument_arrays([f"{path}.{name}" for name in fields], [getattr(value, f) for f in fields])


def argument_at(parameters: Sequence[str], args: Sequence[Any], path: str) -> Any:
    """The launch argument, or struct field of one, that ``path`` ("count", "state.count") names."""
    root, *fields = path.split(".")
    value = args[parameters.index(root)]
    for name in fields:
        value = getattr(value, name)
    return value


def is_float_dtype(dtype: type) -> bool:
    """True for float scalars and for vectors, matrices, quaternions and transforms of them."""
    return wp._src.types.type_scalar_type(dtype) in wp._src.types.float_types


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


def scratch_copy(value: Any, path: str, written: frozenset[str]) -> Any:
    """What a dry run may run on in place of ``value`` (the argument at ``path``): a copy of each array the launch
    writes, struct fields copied likewise; everything else as it is (the kernel never writes it)."""
    if isinstance(value, wp._src.codegen.StructInstance):
        copy = type(value)()
        for name in value._cls.vars:
            setattr(copy, name, scratch_copy(getattr(value, name), f"{path}.{name}", written))
        return copy
    if path not in written:
        return value
    if isinstance(value, wp.array):
        return wp.clone(value, requires_grad=False)
    if isinstance(value, wp.indexedarray):
        return wp.indexedarray(wp.clone(value.data, requires_grad=False), value.indices[: value.ndim])
    return None  # not copyable: the caller refuses


def requires_grad_path(parameters: Sequence[str], args: Sequence[Any], site: SiteSpec) -> str | None:
    """The path of an array requiring grad that a float return may be differentiable in, if any."""
    if not is_float_dtype(argument_at(parameters, args, site.target).dtype):
        return None
    if site.gradient_sources is None:
        candidates = list(argument_arrays(parameters, args))
    else:
        candidates = [(path, argument_at(parameters, args, path)) for path in site.gradient_sources]
    for path, value in candidates:
        if isinstance(value, wp.array) and value.requires_grad and is_float_dtype(value.dtype):
            return path
    return None


def is_stand_in(record: RecordSpec, exact: frozenset[str]) -> bool:
    """Whether a record is an empty stand-in: exact-return records of a target with no exact returns this launch."""
    return record.kind in ("values", "order", "addresses", "compares") and record.target not in exact


def capacities_of(spec: KernelSpec, max_records: int | None) -> dict[int, int | None]:
    """Records per execution of each loop: compiled in, ``max_records``, or None (to be counted by a dry run)."""
    return {
        loop.id: loop.room if loop.room is not None else max_records if loop.counted else (loop.trips or 1)
        for loop in spec.loops
    }


@dataclass
class LaunchRecords:
    """What one launch allocates for the generated kernels."""

    extra: list[Any]  # the arguments both kernels take after the kernel's own
    status: wp.array | None  # the device's checks (see ``check``), where the kernels take one
    shadows: list["Shadow"]  # the shadows of targets with exact float returns
    exact: list["ExactTarget"]  # the targets whose float returns get exact gradients in this launch


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
        if record.kind == "shadow":
            shadows[record.target] = Shadow(argument_at(spec.parameters, args, record.target), device)
    targets = []
    for path in sorted(exact):
        sites = [(index, site) for index, site in enumerate(spec.sites) if site.exact and site.target == path]
        targets.append(ExactTarget(path, shadows[path], sites, sizes, device))
    sliced = {name: array for target in targets for name, array in target.slices().items()}
    extra = []
    empties = {}  # zero-size stand-ins are never written: one per (shape, dtype) serves every record
    for record in spec.records:
        array = argument_at(spec.parameters, args, record.target) if record.target else None
        if record.name in sliced:
            extra.append(sliced[record.name])
        elif record.kind == "shadow":
            extra.append(shadows[record.target].words)
        elif is_stand_in(record, exact):
            empty = (0, 0) if record.kind == "order" else (0,)
            dtype = array.dtype if record.kind in ("values", "compares") else wp.int32
            if (empty, dtype) not in empties:
                empties[empty, dtype] = wp.empty(empty, dtype=dtype, device=device)
            extra.append(empties[empty, dtype])
        else:
            dtype = array.dtype if record.kind == "returned" else record.dtype or wp.int32
            # The replay reads only records the record kernel wrote, so they need no zero fill.
            extra.append(wp.empty(sizes[record.name], dtype=dtype, device=device))
    # The capacities not compiled in, in loop order: the kernels' trip_capacity<id> parameters.
    extra += [capacities[loop.id] for loop in spec.loops if loop.counted and loop.room is None]
    status = None
    if spec.has_status:
        status = wp.zeros(STATUS_TRIPS + len(spec.loops), dtype=wp.int32, device=device)
        extra.append(status)
    if spec.launch_arity > 1:
        extra.append(wp.vec4i(*shape, *(1,) * (4 - len(shape))))
    return LaunchRecords(extra, status, list(shadows.values()), targets)


def held_elsewhere(values: list[Any], indices: list[int]) -> list[bool]:
    """For each ``values[i]``: whether anything besides the list ``values`` refers to it.

    How many references ``sys.getrefcount`` reports for an object in one list slot differs across Python
    versions; a probe in a list of its own, read the same way, calibrates it.
    """
    probe = [object()]
    alone = sys.getrefcount(probe[0])
    return [sys.getrefcount(values[i]) > alone for i in indices]


def signature(args: Sequence[Any], shape: tuple[int, ...], block_dim, max_blocks: int, max_records) -> tuple | None:
    """The key of a launch's ``PreparedLaunch``; None where an argument could change unseen (a struct's fields).

    An array stands for itself by its packed descriptor: Warp keeps one per array and replaces it whenever the
    array's gradient changes, and a prepared launch keeps the descriptors it was made for alive, so their ids
    are never reused. Other values are repacked at every launch: only their types count.
    """
    key = [shape, block_dim, max_blocks, max_records]
    for value in args:
        if type(value) is wp.array:
            key.append(id(value.__ctype__()))
        elif wp.types.is_value(value):
            key.append(type(value))
        else:
            return None
    return tuple(key)


class PreparedLaunch:
    """The record kernel's launch, packed once for one signature of arguments, and its last records (CPU only).

    A launch with the same arrays repacks only the other values (as ``wp.launch`` would) and runs. It writes the
    last launch's records (and status) again when no tape holds them any more (they are still warm in the cache),
    new ones otherwise. Not for CUDA, where a backward enqueued on another stream could still be reading the
    records, nor for exact float returns, whose shadows are filled and read around each launch.
    """

    def __init__(self, command, pair: KernelPair, args, records: LaunchRecords, capacities):
        command.fwd_args = None  # it would keep the arguments alive; Warp reads it only in graph captures
        self.command = command  # the record kernel's wp.Launch
        self.pair = pair
        arrays = [value for value in args if type(value) is wp.array]
        self.arrays = [weakref.ref(array) for array in arrays]
        self.descriptors = [array.__ctype__() for array in arrays]  # kept alive: see ``signature``
        self.values = {index: value for index, value in enumerate(args) if type(value) is not wp.array}  # as packed
        self.first_extra = len(args)  # the parameter index of extra[0]
        self.extra = records.extra
        self.renewed = [i for i, record in enumerate(pair.spec.records) if not is_stand_in(record, frozenset())]
        if records.status is not None:
            self.renewed.append(next(i for i, value in enumerate(records.extra) if value is records.status))
        # A CPU array's memory is the host's: its status is zeroed and read back without a copy or a launch.
        self.status = _host_view(records.status) if records.status is not None else None
        self.capacities = capacities

    def current(self) -> bool:
        """False once Warp has rebuilt the record kernel's module (a function it calls changed, or an option)."""
        command = self.command
        return command.kernel.module.load(command.device, command.block_dim) is command.module_exec

    def live(self) -> bool:
        """False once an array it was prepared for is gone: no launch can match it again."""
        return all(array() is not None for array in self.arrays)

    def launch(self, args, inputs, outputs, dim, block_dim, max_blocks, tape) -> None:
        """Run the record kernel on ``args`` and put the replay kernel's adjoint on ``tape``."""
        command, extra = self.command, self.extra
        for index, packed in self.values.items():
            value = args[index]
            # Packing a value costs microseconds; an int, float or bool equal to the one packed need not be.
            if type(value) is not type(packed) or type(value) not in (int, float, bool) or value != packed:
                command.set_param_at_index(index, value)
                self.values[index] = value
        if any(held_elsewhere(extra, self.renewed)):  # a tape may still replay the last ones
            for index in self.renewed:
                extra[index] = wp.empty(extra[index].shape, dtype=extra[index].dtype, device=command.device)
                command.set_param_at_index(self.first_extra + index, extra[index])
            if self.status is not None:
                self.status = _host_view(extra[self.renewed[-1]])
        if self.status is not None:
            self.status.fill(0)
        command.launch()
        if self.status is not None:
            error = explain_status(self.pair.spec, self.capacities, self.status)
            if error is not None:
                raise error
        tape.record_launch(self.pair.replay, dim, max_blocks, list(inputs), [*outputs, *extra],
                           command.device, block_dim or 0)  # fmt: skip


def remember(launches: dict, key: tuple, prepared: PreparedLaunch, most: int = 8) -> None:
    """Keep ``prepared`` for launches with ``key``: with at most ``most`` others, none that can no longer match."""
    for old_key, old in list(launches.items()):
        if not old.live():
            launches.pop(old_key, None)
    while len(launches) >= most:
        launches.pop(next(iter(launches)), None)  # the least recently used
    launches[key] = prepared


class RewrittenKernel:
    """A kernel rewritten into a record kernel (forward) and a replay kernel (backward).

    Launch it with ``.launch(...)`` (or ``warp_rewrite.launch``) exactly as you would launch ``kernel`` with
    ``wp.launch``. Under a ``wp.Tape`` the record kernel runs the original code and stores the values its atomics
    return, and the tape records the replay kernel, whose adjoint reads them back; without a tape (or with
    ``record_tape=False``) nothing runs backward, so ``kernel`` itself runs. A kernel that consumes no atomic's
    return has no pair and launches unchanged.
    """

    def __init__(
        self,
        kernel: wp.Kernel,
        pair: KernelPair | None,
        *,
        detached: Callable[[], KernelPair | None] | None = None,
        max_records: int | None = None,
        source: str = "",
    ):
        self.kernel = kernel
        self.pair = pair
        # Kernels with exact float returns: makes the variant recording them as constants, for launches in which
        # no gradient can flow through them (it costs what a hand-written record costs).
        self._make_detached = detached
        self.max_records = max_records  # room per execution of loops of unknown length without one compiled in
        self.source = source  # the generated source (API), for reading
        self._launches: dict = {}  # this kernel's PreparedLaunch per signature of arguments

    def __repr__(self) -> str:
        sites = len(self.pair.spec.sites) if self.pair else 0
        phases = "record+replay" if self.pair else "unchanged"
        return f"<RewrittenKernel {self.key!r}: {sites} site{'s' * (sites != 1)}, {phases}>"

    @property
    def key(self) -> str:
        return self.kernel.key

    @property
    def record_kernel(self) -> wp.Kernel | None:
        return self.pair.record if self.pair else None

    @property
    def replay_kernel(self) -> wp.Kernel | None:
        return self.pair.replay if self.pair else None

    @property
    def records(self) -> tuple[RecordSpec, ...]:
        return self.pair.spec.records if self.pair else ()

    def detached(self) -> KernelPair | None:
        """The variant recording float returns as constants (made on first use), or None if there is none."""
        if self._make_detached is not None:
            self._detached_pair, self._make_detached = self._make_detached(), None
        return getattr(self, "_detached_pair", None)

    def launch(
        self,
        dim: int | Sequence[int],
        inputs: Sequence[Any] = (),
        outputs: Sequence[Any] = (),
        adj_inputs: Sequence[Any] = (),
        adj_outputs: Sequence[Any] = (),
        device: Any = None,
        stream: wp.Stream | None = None,
        adjoint: bool = False,
        record_tape: bool = True,
        record_cmd: bool = False,
        max_blocks: int = 0,
        block_dim: int | None = None,
        *,
        max_records: int | None = None,
    ) -> "RewrittenLaunch | None":
        """Launch like ``wp.launch`` (the same parameters, in the same order); on an active tape, as the record and
        replay kernels. ``wp.launch(rewritten, ...)`` comes here too.

        ``record_cmd=True`` returns a ``RewrittenLaunch`` whose ``launch()`` runs both phases then. ``adjoint=True``
        is refused: a rewritten kernel's backward runs from the tape (``tape.backward()``), which holds the records
        of the forward launch it belongs to. ``max_records``: records per execution of a loop of unknown length
        whose kernels do not have a room compiled in (default: the kernel's ``max_records``; None: counted by a dry
        run at each launch).
        """
        if adjoint:
            raise ValueError(
                f"kernel '{self.key}' is rewritten: its backward runs from the tape that recorded its forward launch "
                "(tape.backward()), where the records of that launch are; it cannot be launched with adjoint=True"
            )
        if record_cmd:
            arguments = {"dim": dim, "inputs": inputs, "outputs": outputs, "device": device, "stream": stream,
                         "record_tape": record_tape, "max_blocks": max_blocks, "block_dim": block_dim,
                         "max_records": max_records}  # fmt: skip
            return RewrittenLaunch(self, arguments)
        device = stream.device if stream is not None else wp.get_device(device)
        tape = wp._src.context.runtime.tape if record_tape else None  # Warp has no public accessor for it
        if self.pair is None or tape is None:
            # Without a tape nothing will run backward: the original kernel is the exact forward.
            _warp_launch(self.kernel, dim, inputs, outputs, device=device, stream=stream, record_tape=record_tape,
                         block_dim=block_dim, max_blocks=max_blocks)  # fmt: skip
            return None
        max_records = self.max_records if max_records is None else max_records
        args = [*inputs, *outputs]
        shape = (dim,) if isinstance(dim, int) else tuple(dim)
        # A CPU launch on a tape with the arrays of an earlier one takes the PreparedLaunch that one left.
        preparable = device.is_cpu and not device.is_capturing and not wp.config.verify_autograd_array_access
        key = signature(args, shape, block_dim, max_blocks, max_records) if preparable else None
        prepared = None if key is None else self._launches.pop(key, None)  # out while it runs: one thread uses it
        if prepared is not None and prepared.current():
            try:
                prepared.launch(args, inputs, outputs, dim, block_dim, max_blocks, tape)
            finally:
                self._launches[key] = prepared
            return None
        self._check_arguments(args, shape, device)
        # Records are allocated and filled, and both phases run, on the launch's stream (see the README: Streams).
        with wp.ScopedStream(stream) if stream is not None else nullcontext():
            self._launch_on_tape(tape, dim, shape, inputs, outputs, args, device, stream, block_dim, max_blocks,
                                 max_records, key)  # fmt: skip
        return None

    def _compile(self, pair: KernelPair, device: wp.Device, block_dim: int | None) -> None:
        """Load the generated kernels' module; where it does not compile but the kernel's own does, say whose fault
        it is rather than leave the user with the compiler's output."""
        if pair.record.is_generic or pair.replay.is_generic:
            return  # compiled per overload at launch
        # The variant wp.launch will run: Warp resolves an unset block_dim per device (1 on the CPU, 256 on CUDA);
        # loading with None would compile the module's 256-thread variant on the CPU as well.
        block_dim = wp._src.context._resolve_launch_block_dim(device, block_dim)
        try:
            for kernel in (pair.record, pair.replay):
                kernel.module.load(device, block_dim)
        except Exception as error:
            self.kernel.module.load(device, block_dim)  # the kernel's own error, if it has one, is the user's
            first = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
            raise RewriteError(
                self.key,
                self.pair.spec.location,
                f"the kernels warp-rewrite generated for it do not compile ({first}), although the kernel does: this "
                "is a bug in warp-rewrite",
                "Please report it, with the kernel's source and RewrittenKernel.source",
            ) from error

    def _check_arguments(self, args: list[Any], shape: tuple[int, ...], device: wp.Device) -> None:
        """Refuse a bad launch before anything runs, so counters and outputs stay untouched."""
        spec = self.pair.spec
        if len(args) != len(spec.parameters):
            raise TypeError(f"kernel '{self.key}' takes {len(spec.parameters)} arguments (inputs + outputs), "
                            f"got {len(args)}")  # fmt: skip
        for path, array in argument_arrays(spec.parameters, args):
            if array.device != device:
                raise ValueError(
                    f"kernel '{self.key}': argument '{path}' is on device '{array.device}' "
                    f"but the launch is on '{device}'"
                )
        check_aliasing(spec, args)
        if len(shape) > spec.launch_arity:
            raise ValueError(
                f"kernel '{self.key}' unpacks wp.tid() into {spec.launch_arity} index(es) but is launched with "
                f"{len(shape)} dimensions: its records are kept per thread by those indices. Unpack all "
                f"{len(shape)} (e.g. i, j = wp.tid()) or launch with fewer dimensions"
            )

    def _launch_on_tape(self, tape, dim, shape, inputs, outputs, args, device, stream, block_dim, max_blocks,
                        max_records, key) -> None:  # fmt: skip
        pair = self.pair
        parameters = pair.spec.parameters
        # A detached float return, or a float read of an array the launch writes, is replayed as a constant: exact
        # only if nothing it is made of needs a gradient.
        for site in pair.spec.sites:
            path = None if site.exact else requires_grad_path(parameters, args, site)
            if path is not None and site.op == "read":
                raise RewriteError(
                    self.key,
                    site.location,
                    f"this reads '{site.target}', which the launch also writes, and the value read is a float that "
                    f"depends on '{path}', which requires grad: its gradient through what the launch wrote there is "
                    "not supported",
                    f"Write the result into a separate array, or launch with '{path}' not requiring grad",
                )
            if path is not None:
                raise RewriteError(
                    self.key,
                    site.location,
                    f"the value returned by wp.atomic_{site.op}() on '{site.target}' is a float that depends on "
                    f"'{path}', which requires grad; its exact gradient through the returned value is not supported",
                    f"Launch with '{path}' not requiring grad, or compute the value without using the atomic's return",
                )
        # Exact float returns cost nothing extra where no gradient can flow through them.
        exact = frozenset(
            site.target
            for site in pair.spec.sites
            if site.exact and requires_grad_path(parameters, args, site) is not None
        )
        if not exact:
            pair = self.detached() or pair
        self._compile(pair, device, block_dim)
        spec = pair.spec
        for site in spec.sites:  # the variant launched keeps these targets' values in shadows
            target = argument_at(parameters, args, site.target)
            if site.exact and type(target) is not wp.array:
                raise RewriteError(
                    self.key,
                    site.location,
                    f"the target '{site.target}' of float atomics whose returns get exact gradients is a "
                    f"{type(target).__name__}; while the kernel runs, its values live in a shadow of a wp.array",
                    "Pass a wp.array (a view or slice of one is fine), or rewrite with detach_returns=True",
                )
        if exact and spec.exact_rounds is None and device.is_capturing:
            raise unbounded_chain(spec, next(site for site in spec.sites if site.target in exact), "launch this kernel")
        options = {"device": device, "stream": stream, "block_dim": block_dim, "max_blocks": max_blocks}
        capacities = capacities_of(spec, max_records)
        counted = None in capacities.values()
        if counted:
            loop = next(loop for loop in spec.loops if capacities[loop.id] is None)
            if device.is_capturing:
                raise RewriteError(
                    self.key,
                    loop.location,
                    "this loop's trip count is not known before the launch: it would be counted by a dry run read "
                    "back on the host, which a CUDA graph capture cannot wait for",
                    "Pass max_records=N (to wp_rewrite, or to the launch) to bound its trips",
                )
            # A dry run on scratch copies, with no room for records, counts the trips of loops of unknown length.
            copied = frozenset(spec.copied if pair.count is not None else spec.written)
            scratch = [scratch_copy(value, path, copied) for value, path in zip(args, parameters, strict=True)]
            uncopyable = next((path for path, value in zip(parameters, scratch, strict=True) if value is None), None)
            if uncopyable is not None:
                raise RewriteError(
                    self.key, spec.location,
                    f"counting the trips of its loops of unknown length would need a copy of '{uncopyable}', which "
                    "the kernel writes, and that kind of array cannot be copied",
                    "Pass max_records (to wp_rewrite, or to the launch) so that no count is needed",
                )  # fmt: skip
            no_room = {loop: room or 0 for loop, room in capacities.items()}
            dry = phase_arguments(spec, scratch, shape, no_room, device)
            for shadow in dry.shadows:
                shadow.load()
            _warp_launch(pair.count or pair.record, shape, scratch, dry.extra, record_tape=False, **options)
            needed = dry.status.numpy()  # the host needs the counts to size the records: it waits here
            capacities = {
                loop: room if room is not None else trips_of(needed, loop) for loop, room in capacities.items()
            }
        # Forward: the record kernel runs the original code and stores every consumed atomic's returned value.
        records = phase_arguments(spec, args, shape, capacities, device, exact)
        for shadow in records.shadows:
            shadow.load()
        # A launch whose record sizes depend only on its signature is prepared for the next one like it.
        if key is not None and not counted and not records.shadows:
            command = _warp_launch(pair.record, dim, inputs, [*outputs, *records.extra], record_tape=False,
                                record_cmd=True, **options)  # fmt: skip
            if command is not None:  # None: no threads, nothing to run
                remember(self._launches, key, PreparedLaunch(command, pair, args, records, capacities))
                command.launch()
        else:
            _warp_launch(pair.record, dim, inputs, [*outputs, *records.extra], record_tape=False, **options)
        for shadow in records.shadows:
            shadow.store()
        if records.status is not None:
            _device_checks.watch(records.status, lambda values: explain_status(spec, capacities, values))
        # Backward runs these in reverse: the exact order's preparation and checks, then the replay kernel's
        # adjoint (reading the recorded values back), then the routing of the returned values' adjoints.
        replay_outputs = [*outputs, *records.extra]
        exact_targets = [target for target in records.exact if target.count]  # none: in loops that never ran
        step = None
        if exact_targets:
            step = ExactBackward(spec, pair.replay, dim, list(inputs), replay_outputs, device, block_dim, max_blocks,
                                 records.status, capacities, exact_targets)  # fmt: skip
            tape.record_func(backward=step.route, arrays=[target.returned for target in exact_targets])
        tape.record_launch(pair.replay, dim, max_blocks, list(inputs), replay_outputs, device, block_dim or 0)
        if step is not None:
            tape.record_func(backward=step.prepare, arrays=[])
        if wp.config.verify_autograd_array_access:
            tape._check_kernel_array_access(pair.replay, [*args, *records.extra])


@dataclass
class RewrittenLaunch:
    """A launch of a rewritten kernel made ready by ``launch(..., record_cmd=True)``: ``launch()`` runs it, both
    phases on the tape active then, as ``wp.launch``'s ``Launch`` objects do for plain kernels."""

    kernel: RewrittenKernel
    arguments: dict[str, Any]

    def launch(self) -> None:
        self.kernel.launch(**self.arguments)


@dataclass(frozen=True)
class KernelRewrite:
    """The record and replay kernels generated for a plain function that its file makes a kernel of when it runs
    (``wp.Kernel(func=f)``, ``wp.kernel(f)``, a function of the file calling one of those): ``wp-rewrite`` wraps
    each call that makes the kernel in a call of this, which gives the ``RewrittenKernel`` launching them."""

    pair: KernelPair
    max_records: int | None = None

    def __call__(self, kernel: wp.Kernel) -> RewrittenKernel:
        spec = self.pair.spec
        function = getattr(kernel, "func", None)
        if not isinstance(kernel, wp.Kernel) or tuple(inspect.signature(function).parameters) != spec.parameters:
            problem = (f"the call wrapped to rewrite it gave {kernel!r}, not a kernel made of the function "
                       f"'{spec.key}' the record and replay kernels were generated from")  # fmt: skip
            raise RewriteError(spec.key, spec.location, problem, "Make that call return the kernel it makes")
        return RewrittenKernel(kernel, self.pair, max_records=self.max_records)


# ``wp.launch`` takes rewritten kernels: importing this module puts ``launch`` below in its place, which hands them
# to their own ``launch`` and everything else to the ``wp.launch`` it found (Warp's, or another copy's of this
# module: the package's and the ones written beside emitted files each wrap the one before). For code one cannot
# edit, ``warp_rewrite.rewrite_launches()`` sets AUTO_REWRITE: then plain kernels that consume an atomic's return
# are rewritten when launched forward on a tape.
_warp_launch = wp.launch
AUTO_REWRITE: Callable[[wp.Kernel], RewrittenKernel] | None = None


@functools.wraps(_warp_launch)  # wp.launch's signature and documentation: the same arguments, the same meaning
def launch(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    if hasattr(kernel, "launches_rewritten"):  # a RewrittenKernel, of any copy of this module
        return kernel.launch(*args, **kwargs)
    if AUTO_REWRITE is not None and isinstance(kernel, wp.Kernel) and _needs_rewrite(kernel, args, kwargs):
        return AUTO_REWRITE(kernel).launch(*args, **kwargs)
    return _warp_launch(kernel, *args, **kwargs)


def _needs_rewrite(kernel: wp.Kernel, args: tuple, kwargs: dict) -> bool:
    """Is this a forward launch on a tape, of a kernel with a backward (the only launches a rewrite changes)?"""
    bound = inspect.signature(launch).bind(kernel, *args, **kwargs).arguments
    if bound.get("adjoint") or not bound.get("record_tape", True) or wp._src.context.runtime.tape is None:
        return False
    return (kernel.module.options | kernel.options).get("enable_backward", True) is not False


RewrittenKernel.launches_rewritten = True
wp.launch = launch


# --- exact gradients through floating-point atomic returns -----------------------------------------------------
#
# For the operations on one address (one component of it), in execution order 1..m, ``prev_k`` (what op k
# returned) is made of the target's initial value and the operands of ops before k:
#
# - add/sub: ``prev_k = acc0 + sum_{j<k} s_j v_j``, so ``adj(v_j) += s_j * sum_{k>j} adj(prev_k)`` (a segmented
#   suffix sum in execution order) and ``adj(acc0) += sum_k adj(prev_k)``;
# - exch/max/min/cas: ``prev_k`` is the operand of the last op before k that stored one (every exch does), or
#   ``acc0``: its adjoint goes there.
#
# The final value's adjoint (``target.grad``) is routed the same way: to every operand (add/sub) or to the op that
# stored the final value. The execution order is exact by construction: each op's ticket (see ``exact_add``) is
# its place among the ops on its address, and the shadow's ticket words count them, so positions are
# ``offset[address] + ticket`` (an exclusive scan of the counts), no sort needed. Before the replay kernel's
# adjoint runs, ``ExactBackward.prepare`` lays the ops out in that order and checks every one: the tickets form
# each address's 0..m-1, each op's result is what the next one returned, and the last one's is the value the
# target held after the launch. A failed check refuses the launch in its status: no gradient of it is written.
#
# The replay kernel's adjoint gives ``adj(prev)`` (the returned-value records' gradient). ``route`` first checks
# that the replay recomputed every operand the forward used (it stores them over the recorded ones: compared
# with a snapshot prepare took), then routes with scans, adds acc0's share into ``target.grad`` (through the
# target's own strides: views work), and reaches the kernel's inputs through adjoint launches of the replay
# kernel seeded only with the operands' extra adjoints (``exact_returned`` stores each operand: its adjoint's
# entry point). An operand made of another exact return feeds another round; the kernel spec bounds the rounds
# (``exact_rounds``), and rounds with nothing left to route skip their work on the device. Every size comes from
# bounds known at launch and every decision is made on the device: no host round trip (but for chains of
# unbounded length, see ``KernelSpec.exact_rounds``).

ADD, HOLD = 0, 1  # how a returned value is made: a running sum; the operand of the last op that stored one
_KIND = {"add": ADD, "sub": ADD, "exch": HOLD, "max": HOLD, "min": HOLD, "cas": HOLD}
_OP_CODES = {"add": OP_ADD, "sub": OP_SUB, "min": OP_MIN, "max": OP_MAX, "exch": OP_EXCH, "cas": OP_CAS}
_SCALARS = (wp.float16, wp.bfloat16, wp.float32, wp.float64)  # the overloads of every generic kernel below


def _run(kernel: wp.Kernel, dim: Any, inputs: list[Any], device: Any) -> None:
    """Launch one of the runtime's own kernels: on the current stream, never recorded on a tape."""
    _warp_launch(kernel, dim, inputs=inputs, device=device, record_tape=False)


def component_views(array: wp.array) -> list[wp.array]:
    """One 4-D scalar view per component of an array of up to 4 dimensions, through its own strides (no copy).

    Views (``table[:, 0]``, ``arr[::2]``) keep their strides, so the kernels below read and write exactly the
    elements the array is made of.
    """
    scalar = wp._src.types.type_scalar_type(array.dtype)
    step = wp._src.types.type_size_in_bytes(scalar)
    padding = 4 - array.ndim
    shape, strides = (1,) * padding + tuple(array.shape), (0,) * padding + tuple(array.strides)
    views = []
    for c in range(wp._src.types.type_size(array.dtype)):
        view = wp.array(ptr=array.ptr + c * step, dtype=scalar, shape=shape, strides=strides, device=array.device)
        view._ref = array  # a view keeps what it views alive, as Warp's own views do
        views.append(view)
    return views


def scalars_of(array: wp.array) -> wp.array:
    """A flat scalar view of a contiguous array (no copy)."""
    scalar = wp._src.types.type_scalar_type(array.dtype)
    view = wp.array(ptr=array.ptr, dtype=scalar, shape=(array.size * wp._src.types.type_size(array.dtype),),
                    device=array.device)  # fmt: skip
    view._ref = array
    return view


def records_view(array: wp.array) -> wp.array:
    """A (n, components) scalar view of a contiguous 1-D array of scalars, vectors or matrices (no copy)."""
    scalar = wp._src.types.type_scalar_type(array.dtype)
    view = wp.array(
        ptr=array.ptr,
        dtype=scalar,
        shape=(array.size, wp._src.types.type_size(array.dtype)),
        strides=(wp._src.types.type_size_in_bytes(array.dtype), wp._src.types.type_size_in_bytes(scalar)),
        device=array.device,
    )
    view._ref = array
    return view


class Shadow:
    """A target's values and tickets while one launch's record kernel runs (see ``exact_add``)."""

    def __init__(self, target: wp.array, device: wp.Device):
        self.target = target
        self.components = wp._src.types.type_size(target.dtype)
        self.wide = wp._src.types.type_scalar_type(target.dtype) is wp.float64  # two words per component
        self.words = wp.empty((target.size, self.components * (1 + self.wide)), dtype=wp.uint64, device=device)

    def bits_column(self, component: int) -> int:
        return component * (1 + self.wide)

    def ticket_column(self, component: int) -> int:
        return 2 * component + 1 if self.wide else component

    def load(self) -> None:
        """Fill the shadow from the target (its tickets at 0): before the record kernel."""
        for c, view in enumerate(component_views(self.target)):
            ticket_column = self.ticket_column(c) if self.wide else -1
            inputs = [view, self.bits_column(c), ticket_column, self.words]
            _run(_load_shadow, self.target.size, inputs=inputs, device=self.words.device)

    def store(self) -> None:
        """Write the shadow's values back into the target: after the record kernel."""
        for c, view in enumerate(component_views(self.target)):
            _run(_store_shadow, self.target.size, inputs=[self.words, self.bits_column(c), view],
                      device=self.words.device)  # fmt: skip


@dataclass
class ExactSiteRecords:
    """One site's part of its target's exact records."""

    index: int  # the site's position in the kernel spec (messages name its location)
    site: SiteSpec
    offset: int
    count: int

    def rows(self, array: wp.array) -> wp.array:
        """This site's rows of one of its target's records (Warp cannot slice an empty range)."""
        if self.count == 0:
            return wp.empty((0, *array.shape[1:]), dtype=array.dtype, device=array.device)
        return array[self.offset : self.offset + self.count]


@dataclass
class OrderColumn:
    """The operations on a target in execution order, for one component: ``perm[p]`` is the p-th; the ops on
    address ``a`` are positions ``offsets[a]`` to ``offsets[a] + counts[a] - 1``. For exch/max/min/cas, ``ranks``
    (an inclusive scan of "this op stored its operand") and ``by_rank`` (the position of the r-th that did) give
    the op holding the value at each position (see ``_holder``)."""

    counts: wp.array
    offsets: wp.array
    perm: wp.array
    ranks: wp.array | None = None
    by_rank: wp.array | None = None


class ExactTarget:
    """A target whose float returns get exact gradients in one launch: its sites' records, each kind in one
    allocation that the sites' record parameters are slices of, and (from the first backward) their order."""

    def __init__(self, path: str, shadow: Shadow, sites: list[tuple[int, SiteSpec]], sizes: dict, device):
        self.path, self.shadow, self.array, self.device = path, shadow, shadow.target, device
        self.kind = _KIND[sites[0][1].op]
        self.sites = []
        count = 0
        for index, site in sites:
            self.sites.append(ExactSiteRecords(index, site, count, sizes[site.exact.returned]))
            count += sizes[site.exact.returned]
        self.count = count
        dtype, components = self.array.dtype, shadow.components
        self.returned = wp.empty(count, dtype=dtype, device=device, requires_grad=True)
        self.operands = wp.empty(count, dtype=dtype, device=device)
        self.order = wp.full((count, components), -1, dtype=wp.int32, device=device)  # -1: the op never ran
        self.addresses = wp.empty(count, dtype=wp.int32, device=device)
        cas = any(part.site.op == "cas" for part in self.sites)
        self.compares = wp.empty(count, dtype=dtype, device=device) if cas else None
        self.named = {}  # record parameter -> the slice passed for it
        for part in self.sites:
            records = part.site.exact
            self.named[records.returned] = part.rows(self.returned)
            self.named[records.values] = part.rows(self.operands)
            self.named[records.order] = part.rows(self.order)
            self.named[records.addresses] = part.rows(self.addresses)
            if records.compares:
                self.named[records.compares] = part.rows(self.compares)
        self.columns: list[OrderColumn] | None = None

    def slices(self) -> dict[str, wp.array]:
        return self.named

    def prepare(self, status: wp.array) -> None:
        """Lay the operations out in execution order per component, and check every one (once per launch)."""
        if self.columns is not None or self.count == 0:
            return
        n, size, device, shadow = self.count, self.array.size, self.device, self.shadow
        # Per site, in record order: where its records end, and its index * 8 + op code (see ``_site_info``).
        ends = wp.empty(len(self.sites), dtype=wp.int32, device=device)
        codes = wp.empty(len(self.sites), dtype=wp.int32, device=device)
        for i, part in enumerate(self.sites):  # filled on the device: no upload from the host
            ends[i : i + 1].fill_(part.offset + part.count)
            codes[i : i + 1].fill_(part.index * 8 + _OP_CODES[part.site.op])
        self.info = (ends, codes)
        returned, operands, compares = self.record_views()
        self.recorded = wp.clone(self.operands)  # the replay kernel stores the operands it recomputes over them
        self.columns = []
        for c in range(shadow.components):
            counts = wp.empty(size, dtype=wp.int32, device=device)
            _run(_count_ops, size, inputs=[shadow.words, shadow.ticket_column(c), counts], device=device)
            offsets = wp.empty(size, dtype=wp.int32, device=device)
            wp.utils.array_scan(counts, offsets, inclusive=False)
            perm = wp.full(n, -1, dtype=wp.int32, device=device)
            inputs = [status, c, self.order, self.addresses, counts, offsets, *self.info, perm]
            _run(_place_ops, n, inputs=inputs, device=device)
            column = OrderColumn(counts, offsets, perm)
            _run(_check_places, size, inputs=[status, perm, counts, offsets], device=device)
            self.check(status, c, column)
            if self.kind == HOLD:
                stored = wp.empty(n, dtype=wp.int32, device=device)
                inputs = [c, perm, *self.info, returned, operands, compares, stored]
                _run(_stored, n, inputs=inputs, device=device)
                column.ranks = wp.empty(n, dtype=wp.int32, device=device)
                wp.utils.array_scan(stored, column.ranks, inclusive=True)
                column.by_rank = wp.empty(n, dtype=wp.int32, device=device)
                _run(_rank_positions, n, inputs=[stored, column.ranks, column.by_rank], device=device)
            self.columns.append(column)

    def record_views(self) -> tuple[wp.array, wp.array, wp.array]:
        """The returned values, operands and compare operands as (n, components) scalars (cas's compares or, for
        the other ops, which never read them, the operands)."""
        returned, operands = records_view(self.returned), records_view(self.operands)
        return returned, operands, records_view(self.compares) if self.compares is not None else operands

    def check(self, status: wp.array, c: int, column: OrderColumn) -> None:
        """Check every operation in component ``c`` against the one after it (the last: against the value left)."""
        inputs = [status, c, column.perm, self.order, self.addresses, column.counts, column.offsets, *self.info,
                  *self.record_views(), self.shadow.words, self.shadow.bits_column(c)]  # fmt: skip
        _run(_check_chain, self.count, inputs=inputs, device=self.device)

    def route(self, gate, adjoint: wp.array, seeds: wp.array, seeding, first_round: bool) -> None:
        """Route the returned values' adjoints (``adjoint``, (n, components)) and, in the first round, the final
        values' to the operands (their ``seeds``, opening the ``seeding`` gate where one is not zero) and the
        initial values (into ``target.grad``). The first round also checks the operands the replay kernel
        recomputed (``gate`` is then the launch's status)."""
        n, device, check = self.count, self.device, first_round
        finals = self.finals() if first_round else None  # taken before the routing adds into the same gradient
        grads = component_views(self.array.grad) if self.array.grad is not None else None
        seeds_view = records_view(seeds)
        if check:  # the replay stored the operands it recomputed over the recorded ones: are they the same?
            inputs = [gate, self.order, *self.info, records_view(self.recorded), records_view(self.operands)]
            _run(_check_recomputed, (n, self.shadow.components), inputs=inputs, device=device)
        extras = None if self.kind == ADD else wp.zeros((n, self.shadow.components), dtype=wp.float64, device=device)
        for c, column in enumerate(self.columns):
            grad = grads[c] if grads else wp.empty((0, 0, 0, 0), dtype=adjoint.dtype, device=device)
            final = finals[c] if finals else wp.empty(0, dtype=wp.float64, device=device)
            place = [column.perm, self.addresses, column.counts, column.offsets]
            with_finals, with_grad = int(finals is not None), int(grads is not None)
            if self.kind == ADD:
                sums = wp.empty(n, dtype=wp.float64, device=device)
                _run(_gather, n, inputs=[gate, column.perm, adjoint, c, sums], device=device)
                wp.utils.array_scan(sums, sums, inclusive=True)
                inputs = [gate, c, *place, *self.info, sums, final, with_finals, seeds_view, seeding, grad, with_grad]
                _run(_route_sums, n, inputs=inputs, device=device)
            else:
                inputs = [gate, c, *place, column.ranks, column.by_rank, adjoint, final, with_finals, extras, grad,
                          with_grad]  # fmt: skip
                _run(_route_holders, n, inputs=inputs, device=device)
        if extras is not None:
            _run(_open_gate, extras.shape, inputs=[gate, extras, seeding], device=device)
            for c in range(self.shadow.components):
                _run(_to_dtype, n, inputs=[extras, c, seeds_view], device=device)

    def finals(self) -> list[wp.array] | None:
        """The final values' adjoints (float64, per component); None: the target has no gradient."""
        if self.array.grad is None:
            return None
        taken = []
        for view in component_views(self.array.grad):
            final = wp.empty(self.array.size, dtype=wp.float64, device=self.device)
            _run(_take_finals, self.array.size, inputs=[view, final], device=self.device)
            taken.append(final)
        return taken


class ExactBackward:
    """The exact backward of one launch, as two tape steps around the replay kernel's adjoint: ``prepare`` (runs
    before it) and ``route`` (after it)."""

    def __init__(self, spec, replay, dim, inputs, outputs, device, block_dim, max_blocks, status, capacities, targets):
        self.spec, self.replay, self.dim = spec, replay, dim
        self.inputs, self.outputs = inputs, outputs  # the replay kernel's arguments on the tape
        self.device, self.block_dim, self.max_blocks = device, block_dim, max_blocks
        self.status, self.capacities = status, capacities
        self.targets = targets

    def prepare(self) -> None:
        for target in self.targets:
            target.prepare(self.status)
        self._watch()

    def route(self) -> None:
        device, status = self.device, self.status
        rounds = self.spec.exact_rounds
        if rounds is None and device.is_capturing:
            raise unbounded_chain(self.spec, self.targets[0].sites[0].site, "run this kernel's backward")
        adjoints = {id(target): records_view(target.returned.grad) for target in self.targets}
        scratch: dict[int, Any] = {}  # the seeded launches' adjoints of the other arguments, by the argument's id
        pairs: list[tuple[wp.array, wp.array]] = []  # (gradient, scratch adjoint) to add together at the end
        gate = status  # route the first round unless the launch is refused
        # A chain of unbounded length runs through earlier operations: it has at most as many links as operations.
        for round_ in range(rounds or 1 + sum(target.count for target in self.targets)):
            seeds, collected = {}, {}
            # Gates are statuses of their own (the replay kernel may report into its status): 1 closed, 0 open.
            seeding = wp.ones(STATUS_TRIPS, dtype=wp.int32, device=device)  # opened by any seed
            for target in self.targets:
                seeds[id(target)] = wp.zeros_like(target.operands)  # ops that never ran get no seed
                target.route(gate, adjoints[id(target)], seeds[id(target)], seeding, first_round=round_ == 0)
                collected[id(target)] = wp.zeros_like(target.returned, requires_grad=False)
            self._seeded_launch(seeding, seeds, collected, scratch, pairs)
            gate = wp.ones(STATUS_TRIPS, dtype=wp.int32, device=device)  # opened by any adjoint collected
            for target in self.targets:
                adjoint = adjoints[id(target)] = records_view(collected[id(target)])
                _run(_open_gate, adjoint.shape, inputs=[status, adjoint, gate], device=device)
            if rounds is None and gate.numpy()[0] != 0:  # the host reads whether any gradient is left: it waits
                break
        _run(_settle, 1, inputs=[status, gate, self.targets[0].sites[0].index], device=device)
        for grad, adjoint in pairs:
            if grad.is_contiguous:  # most gradients: one flat pass
                _run(_accumulate_flat, grad.size * wp._src.types.type_size(grad.dtype),
                     inputs=[status, scalars_of(adjoint), scalars_of(grad)], device=device)  # fmt: skip
                continue
            for source, into in zip(component_views(adjoint), component_views(grad), strict=True):
                _run(_accumulate, grad.size, inputs=[status, source, into], device=device)
        for target in self.targets:
            target.returned.grad.zero_()  # read: a repeated backward must find it as the first did
        self._watch()

    def _seeded_launch(self, gate, seeds: dict, collected: dict, scratch: dict, pairs: list) -> None:
        """An adjoint launch of the replay kernel seeded only with the operands' extra adjoints; the adjoints that
        reach returned values gather in ``collected``, the rest in ``scratch`` (added into the gradients later)."""
        special = {}
        for target in self.targets:
            for part in target.sites:
                records = part.site.exact
                special[id(target.named[records.values])] = part.rows(seeds[id(target)])
                special[id(target.named[records.returned])] = part.rows(collected[id(target)])
        # An array the launch never writes only gathers adjoints (its adjoint is never read back as a seed): its own
        # gradient takes them, with no scratch to zero and add in afterwards.
        arguments = [*self.inputs, *self.outputs][: len(self.spec.parameters)]  # the kernel's own, then records
        for path, value in zip(self.spec.parameters, arguments, strict=True):
            if isinstance(value, wp.array) and value.grad is not None and path not in self.spec.written:
                special.setdefault(id(value), value.grad if is_float_dtype(value.dtype) else None)

        def adjoint_of(value: Any) -> Any:
            if id(value) in special:
                return special[id(value)]
            if id(value) not in scratch:
                scratch[id(value)] = _zero_adjoint(value, pairs)
            return scratch[id(value)]

        outputs = [gate if value is self.status else value for value in self.outputs]
        _warp_launch(
            self.replay,
            self.dim,
            inputs=self.inputs,
            outputs=outputs,
            adj_inputs=[adjoint_of(value) for value in self.inputs],
            adj_outputs=[None if value is self.status else adjoint_of(value) for value in self.outputs],
            adjoint=True,
            device=self.device,
            block_dim=self.block_dim,
            max_blocks=self.max_blocks,
            record_tape=False,
        )

    def _watch(self) -> None:
        spec, capacities = self.spec, self.capacities
        _device_checks.watch(self.status, lambda values: explain_status(spec, capacities, values, in_backward=True))


def _zero_adjoint(value: Any, pairs: list[tuple[wp.array, wp.array]]) -> Any:
    """Like ``Tape.get_adjoint``, but a fresh zero array for every float gradient (remembered in ``pairs``)."""
    if isinstance(value, wp.array):
        if value.grad is None or not is_float_dtype(value.dtype):
            return None
        adjoint = wp.zeros(value.shape, dtype=value.dtype, device=value.device)
        pairs.append((value.grad, adjoint))
        return adjoint
    if wp._src.types.is_struct(value):
        adjoint = value._cls()
        for name in value._cls.vars:
            field_adjoint = _zero_adjoint(getattr(value, name), pairs)
            if field_adjoint is not None:
                setattr(adjoint, name, field_adjoint)
        return adjoint
    if wp._src.types.is_native_type(type(value)):
        return type(value)()
    return None


@wp.func
def _element(view: wp.array4d(dtype=Any), flat: int) -> wp.vec4i:
    """The indices of the ``flat``-th element (row-major) of a 4-D view."""
    last = flat % view.shape[3]
    rest = flat // view.shape[3]
    third = rest % view.shape[2]
    rest = rest // view.shape[2]
    return wp.vec4i(rest // view.shape[1], rest % view.shape[1], third, last)


@wp.func
def _stores(op: int, old: Any, operand: Any, compare: Any) -> bool:
    """Whether an exch/max/min/cas op stored its operand. Max/min store only if that changes the value, and
    follow Warp's float min/max (C's fmin/fmax): a NaN held is replaced by a number, a NaN offered is not."""
    stores = op == 4
    if op == 2:
        stores = operand == operand and not (old <= operand)
    elif op == 3:
        stores = operand == operand and not (old >= operand)
    elif op == 5:
        stores = old == compare
        if _on_cuda():
            stores = _bits(old) == _bits(compare)
    return stores


@wp.func
def _site_info(k: int, site_ends: wp.array(dtype=wp.int32), site_codes: wp.array(dtype=wp.int32)) -> int:
    """The index * 8 + op code of the site whose records hold op ``k`` (a target has a few sites: a per-op array
    would cost a pass and a scattered read per op)."""
    s = int(0)
    while s < site_ends.shape[0] - 1 and k >= site_ends[s]:
        s += 1
    return site_codes[s]


@wp.func
def _holder(position: int, first: int, ranks: wp.array(dtype=wp.int32), by_rank: wp.array(dtype=wp.int32)) -> int:
    """The position of the last op at or before ``position`` on its address that stored its operand (-1: none, the
    address still held its initial value there)."""
    before = int(0)
    if first > 0:
        before = ranks[first - 1]
    holder = int(-1)
    if ranks[position] > before:
        holder = by_rank[ranks[position] - 1]
    return holder


@wp.kernel
def _load_shadow(
    target: wp.array4d(dtype=Any), bits_column: int, ticket_column: int, words: wp.array2d(dtype=wp.uint64)
):
    a = wp.tid()
    e = _element(target, a)
    words[a, bits_column] = _bits(target[e[0], e[1], e[2], e[3]])
    if ticket_column >= 0:
        words[a, ticket_column] = wp.uint64(0)


@wp.kernel
def _store_shadow(words: wp.array2d(dtype=wp.uint64), bits_column: int, target: wp.array4d(dtype=Any)):
    a = wp.tid()
    e = _element(target, a)
    target[e[0], e[1], e[2], e[3]] = _from_bits(words[a, bits_column], target.dtype(0.0))


@wp.kernel
def _count_ops(words: wp.array2d(dtype=wp.uint64), ticket_column: int, counts: wp.array(dtype=wp.int32)):
    a = wp.tid()
    counts[a] = wp.int32(words[a, ticket_column] >> _SHIFT32)


@wp.kernel
def _place_ops(
    status: wp.array(dtype=wp.int32),
    column: int,
    order: wp.array2d(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    counts: wp.array(dtype=wp.int32),
    offsets: wp.array(dtype=wp.int32),
    site_ends: wp.array(dtype=wp.int32),
    site_codes: wp.array(dtype=wp.int32),
    perm: wp.array(dtype=wp.int32),
):
    """Each op that ran goes to position offset[address] + ticket; two on one place, or one past its address's
    count, refuse the launch."""
    k = wp.tid()
    ticket = order[k, column]
    if refused(status) or ticket < 0:
        return
    a = addresses[k]
    site = _site_info(k, site_ends, site_codes) // 8
    if ticket >= counts[a]:
        refuse(status, _ORDER, site)
        return
    p = offsets[a] + ticket
    if p >= perm.shape[0]:
        refuse(status, _MISSING, site)
    elif wp.atomic_exch(perm, p, k) != -1:
        refuse(status, _ORDER, site)


@wp.kernel
def _check_chain(
    status: wp.array(dtype=wp.int32),
    column: int,
    perm: wp.array(dtype=wp.int32),
    order: wp.array2d(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    counts: wp.array(dtype=wp.int32),
    offsets: wp.array(dtype=wp.int32),
    site_ends: wp.array(dtype=wp.int32),
    site_codes: wp.array(dtype=wp.int32),
    returned: wp.array2d(dtype=Any),
    operands: wp.array2d(dtype=Any),
    compares: wp.array2d(dtype=Any),
    words: wp.array2d(dtype=wp.uint64),
    bits_column: int,
):
    """Each op's result is what the next op on its address returned; the last one's, the value left there; the
    places next to each op hold ops (``_check_places`` checks the first of each address).

    One thread per op, in record order: what it reads of its own op is contiguous.
    """
    k = wp.tid()
    if refused(status):
        return
    ticket = order[k, column]
    if ticket < 0:
        return
    a = addresses[k]
    code = _site_info(k, site_ends, site_codes)
    if ticket > 0 and perm[offsets[a] + ticket - 1] < 0:
        refuse(status, _MISSING, code // 8)
    result = _combine(code % 8, returned[k, column], operands[k, column], compares[k, column])
    if ticket < counts[a] - 1:
        following = perm[offsets[a] + ticket + 1]
        if following < 0:
            refuse(status, _MISSING, code // 8)
        elif not _same(result, returned[following, column]):
            refuse(status, _CHAIN, code // 8)
    elif not _same(result, _from_bits(words[a, bits_column], result)):
        refuse(status, _FINAL, code // 8)


@wp.kernel
def _check_recomputed(
    status: wp.array(dtype=wp.int32),
    order: wp.array2d(dtype=wp.int32),
    site_ends: wp.array(dtype=wp.int32),
    site_codes: wp.array(dtype=wp.int32),
    recorded: wp.array2d(dtype=Any),
    recomputed: wp.array2d(dtype=Any),
):
    """Every operand the replay kernel recomputed is the one the forward used."""
    k, c = wp.tid()
    if order[k, c] >= 0 and not refused(status) and not _same(recorded[k, c], recomputed[k, c]):
        refuse(status, _REPLAY_DIFFERS, _site_info(k, site_ends, site_codes) // 8)


@wp.kernel
def _check_places(status: wp.array(dtype=wp.int32), perm: wp.array(dtype=wp.int32), counts: wp.array(dtype=wp.int32),
                  offsets: wp.array(dtype=wp.int32)):  # fmt: skip
    """Every address whose ticket count says it had operations has its first one placed, and the counts add up to
    no more operations than were recorded (``_check_chain`` checks each op's neighbours)."""
    a = wp.tid()
    if refused(status):
        return
    if (a == counts.shape[0] - 1 and offsets[a] + counts[a] > perm.shape[0]) or (
        counts[a] > 0 and offsets[a] < perm.shape[0] and perm[offsets[a]] < 0
    ):
        refuse(status, _MISSING, -1)


@wp.kernel
def _stored(
    column: int,
    perm: wp.array(dtype=wp.int32),
    site_ends: wp.array(dtype=wp.int32),
    site_codes: wp.array(dtype=wp.int32),
    returned: wp.array2d(dtype=Any),
    operands: wp.array2d(dtype=Any),
    compares: wp.array2d(dtype=Any),
    stored: wp.array(dtype=wp.int32),
):
    p = wp.tid()
    k = perm[p]
    stored[p] = 0
    if k >= 0:
        op = _site_info(k, site_ends, site_codes) % 8
        if _stores(op, returned[k, column], operands[k, column], compares[k, column]):
            stored[p] = 1


@wp.kernel
def _rank_positions(
    stored: wp.array(dtype=wp.int32), ranks: wp.array(dtype=wp.int32), by_rank: wp.array(dtype=wp.int32)
):
    p = wp.tid()
    if stored[p] != 0:
        by_rank[ranks[p] - 1] = p


@wp.kernel
def _take_finals(grad: wp.array4d(dtype=Any), finals: wp.array(dtype=wp.float64)):
    a = wp.tid()
    e = _element(grad, a)
    finals[a] = wp.float64(grad[e[0], e[1], e[2], e[3]])


@wp.kernel
def _gather(
    gate: wp.array(dtype=wp.int32),
    perm: wp.array(dtype=wp.int32),
    adjoint: wp.array2d(dtype=Any),
    column: int,
    sums: wp.array(dtype=wp.float64),
):
    """add/sub: the returned values' adjoints in execution order, to be scanned."""
    p = wp.tid()
    k = perm[p]
    sums[p] = wp.float64(0.0)
    if k >= 0 and not refused(gate):
        sums[p] = wp.float64(adjoint[k, column])


@wp.kernel
def _route_sums(
    gate: wp.array(dtype=wp.int32),
    column: int,
    perm: wp.array(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    counts: wp.array(dtype=wp.int32),
    offsets: wp.array(dtype=wp.int32),
    site_ends: wp.array(dtype=wp.int32),
    site_codes: wp.array(dtype=wp.int32),
    sums: wp.array(dtype=wp.float64),
    finals: wp.array(dtype=wp.float64),
    with_finals: int,
    seeds: wp.array2d(dtype=Any),
    seeding: wp.array(dtype=wp.int32),
    grad: wp.array4d(dtype=Any),
    with_grad: int,
):
    """add/sub: operand j gets s_j * (final + the later returns' adjoints), its seed (opening ``seeding`` if it is
    not zero); acc0 gets all of them."""
    p = wp.tid()
    k = perm[p]
    if refused(gate) or k < 0:
        return
    a = addresses[k]
    first = offsets[a]
    last = first + counts[a] - 1
    later = sums[last] - sums[p]
    if with_finals != 0:
        later += finals[a]
    if _site_info(k, site_ends, site_codes) % 8 == 1:
        later = -later
    seeds[k, column] = seeds.dtype(later)
    if later != wp.float64(0.0):
        seeding[0] = 0
    if p == first and with_grad != 0:
        before = wp.float64(0.0)
        if first > 0:
            before = sums[first - 1]
        e = _element(grad, a)
        wp.atomic_add(grad, e[0], e[1], e[2], e[3], grad.dtype(sums[last] - before))


@wp.kernel
def _route_holders(
    gate: wp.array(dtype=wp.int32),
    column: int,
    perm: wp.array(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    counts: wp.array(dtype=wp.int32),
    offsets: wp.array(dtype=wp.int32),
    ranks: wp.array(dtype=wp.int32),
    by_rank: wp.array(dtype=wp.int32),
    adjoint: wp.array2d(dtype=Any),
    finals: wp.array(dtype=wp.float64),
    with_finals: int,
    extras: wp.array2d(dtype=wp.float64),
    grad: wp.array4d(dtype=Any),
    with_grad: int,
):
    """exch/max/min/cas: each returned value's adjoint goes to the op whose operand it is (or acc0); the final
    value's, to the op that stored it (taken from acc0's)."""
    p = wp.tid()
    k = perm[p]
    if refused(gate) or k < 0:
        return
    a = addresses[k]
    first = offsets[a]
    source = int(-1)  # position of the op whose operand op p returned; -1: the initial value
    if p > first:
        source = _holder(p - 1, first, ranks, by_rank)
    value = wp.float64(adjoint[k, column])
    if source >= 0:
        wp.atomic_add(extras, perm[source], column, value)
    elif with_grad != 0:
        e = _element(grad, a)
        wp.atomic_add(grad, e[0], e[1], e[2], e[3], grad.dtype(value))
    if p == first + counts[a] - 1 and with_finals != 0:
        holder = _holder(p, first, ranks, by_rank)
        if holder >= 0:  # the final value is that op's operand, not acc0's
            wp.atomic_add(extras, perm[holder], column, finals[a])
            e = _element(grad, a)
            wp.atomic_add(grad, e[0], e[1], e[2], e[3], grad.dtype(-finals[a]))


@wp.kernel
def _to_dtype(extras: wp.array2d(dtype=wp.float64), column: int, out: wp.array2d(dtype=Any)):
    k = wp.tid()
    out[k, column] = out.dtype(extras[k, column])


@wp.kernel
def _open_gate(status: wp.array(dtype=wp.int32), values: wp.array2d(dtype=Any), gate: wp.array(dtype=wp.int32)):
    """Open ``gate`` (0) if any value is not zero, unless the launch is refused."""
    k, c = wp.tid()
    if values[k, c] != values.dtype(0.0) and not refused(status):
        gate[0] = 0


@wp.kernel
def _settle(status: wp.array(dtype=wp.int32), gate: wp.array(dtype=wp.int32), site: int):
    if gate[0] == 0:
        refuse(status, _UNSETTLED, site)


@wp.kernel
def _accumulate(status: wp.array(dtype=wp.int32), source: wp.array4d(dtype=Any), into: wp.array4d(dtype=Any)):
    a = wp.tid()
    if refused(status):
        return
    e = _element(into, a)
    wp.atomic_add(into, e[0], e[1], e[2], e[3], source[e[0], e[1], e[2], e[3]])


@wp.kernel
def _accumulate_flat(status: wp.array(dtype=wp.int32), source: wp.array(dtype=Any), into: wp.array(dtype=Any)):
    i = wp.tid()
    if not refused(status):
        wp.atomic_add(into, i, source[i])


def _declare_overloads() -> None:
    """Declare every generic kernel above for every float scalar type now, so that their module compiles once
    (an overload made by a launch after it loaded would make Warp compile it all again)."""
    kernels = [_load_shadow, _store_shadow, _check_chain, _stored, _take_finals, _gather, _route_sums,
               _route_holders, _to_dtype, _open_gate, _accumulate, _accumulate_flat, _check_recomputed]  # fmt: skip
    for kernel in kernels:
        for scalar in _SCALARS:
            types = {
                name: wp.array(dtype=scalar, ndim=annotation.ndim)
                for name, annotation in kernel.adj.arg_types.items()
                if wp._src.types.type_is_generic(annotation)
            }
            wp.overload(kernel, types)


_declare_overloads()
