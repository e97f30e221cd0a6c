# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The exact float atomics: the value an atomic returns and its place in the order of the operations on its address,
from one atomic. Device code only; the host side of the exact backward is ``exact``."""

from typing import Any

import warp as wp

from .abi import EXACT_OPS, Op

#
# While the record kernel runs, a target with exact float returns lives in a shadow beside it: per element and
# component a uint64 word packing (ticket << 32 | value bits) for float32, float16 and bfloat16, so that one
# 64-bit compare-and-swap gives an operation both the value it returns and its ticket, its place among the
# operations on that address. float64 takes two words, (value bits, ticket word): a 128-bit compare-and-swap on
# sm_90 and later (and on the CPU), below sm_90 a ticket lock whose ticket is taken by one atomic add. Either way
# the ticket word holds (count << 32 | count) at rest. Vectors, matrices, quaternions and transforms work per
# component, as Warp's own atomics do. An int target (int32 and uint32 as float32, int64 and uint64 as float64) is a
# generic kernel's, launched with ints beside targets that need exact gradients: its returns have none, but it lives
# in its shadow like the others, as the generated code is the same. The launch fills the shadow from the target
# before the record kernel and writes the values back after it; the tickets stay for the exact backward. The CPU
# runs this same code (its compare-and-swap always succeeds first: CPU launches are serial).

# The device's op codes: each exact op's place in abi.EXACT_OPS.
OP_ADD, OP_SUB, OP_MIN, OP_MAX, OP_EXCH, OP_CAS = (
    wp.constant(EXACT_OPS.index(op)) for op in (Op.ADD, Op.SUB, Op.MIN, Op.MAX, Op.EXCH, Op.CAS)
)
_LOW32 = wp.constant(wp.uint64(0xFFFFFFFF))
SHIFT32 = wp.constant(wp.uint64(32))
_ONE = wp.constant(wp.uint64(1))
_NEXT_TICKET = wp.constant(wp.uint64(1 << 32))
Float = wp._src.types.Float  # Warp's generic float scalar
Int = wp._src.types.Int  # Warp's generic int scalar
# The int targets a shadow holds (a generic kernel's, launched with ints): those Warp's atomics take.
SHADOWED_INTS = (wp.int32, wp.uint32, wp.int64, wp.uint64)


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
    return true;
#else
    return false;
#endif
"""
)
def on_cuda() -> bool: ...


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


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
    return *(volatile wp::uint64*)wp::address(shadow, address, column);  // from L2, where the atomics are
#else
    return *wp::address(shadow, address, column);
#endif
"""
)
def _current_word(shadow: wp.array2d(dtype=wp.uint64), address: int, column: int) -> wp.uint64:
    """A shadow word as it is now: one aligned 64-bit load, which no compare-and-swap or exchange of the word can
    tear. Native for the reason ``_peek`` is."""
    ...


@wp.func
def to_bits(x: wp.float32) -> wp.uint64:
    return wp.uint64(wp.cast(x, wp.uint32))


@wp.func
def to_bits(x: wp.float16) -> wp.uint64:  # noqa: F811  (Warp overloads @wp.func by signature)
    return wp.uint64(wp.cast(x, wp.uint16))


@wp.func
def to_bits(x: wp.bfloat16) -> wp.uint64:  # noqa: F811  (Warp overloads @wp.func by signature)
    return wp.uint64(wp.cast(x, wp.uint16))


@wp.func
def to_bits(x: wp.float64) -> wp.uint64:  # noqa: F811  (Warp overloads @wp.func by signature)
    return wp.cast(x, wp.uint64)


@wp.func
def to_bits(x: wp.int32) -> wp.uint64:  # noqa: F811  (ints: a generic kernel's target launched with ints)
    return wp.uint64(wp.cast(x, wp.uint32))


@wp.func
def to_bits(x: wp.uint32) -> wp.uint64:  # noqa: F811  (Warp overloads @wp.func by signature)
    return wp.uint64(x)


@wp.func
def to_bits(x: wp.int64) -> wp.uint64:  # noqa: F811  (Warp overloads @wp.func by signature)
    return wp.cast(x, wp.uint64)


@wp.func
def to_bits(x: wp.uint64) -> wp.uint64:  # noqa: F811  (Warp overloads @wp.func by signature)
    return x


@wp.func
def from_bits(bits: wp.uint64, like: wp.float32) -> wp.float32:
    return wp.cast(wp.uint32(bits & _LOW32), wp.float32)


@wp.func
def from_bits(bits: wp.uint64, like: wp.float16) -> wp.float16:  # noqa: F811  (Warp overloads @wp.func by signature)
    return wp.cast(wp.uint16(bits & _LOW32), wp.float16)


@wp.func
def from_bits(bits: wp.uint64, like: wp.bfloat16) -> wp.bfloat16:  # noqa: F811  (Warp overloads @wp.func by signature)
    return wp.cast(wp.uint16(bits & _LOW32), wp.bfloat16)


@wp.func
def from_bits(bits: wp.uint64, like: wp.float64) -> wp.float64:  # noqa: F811  (Warp overloads @wp.func by signature)
    return wp.cast(bits, wp.float64)


@wp.func
def from_bits(bits: wp.uint64, like: wp.int32) -> wp.int32:  # noqa: F811  (Warp overloads @wp.func by signature)
    return wp.cast(wp.uint32(bits & _LOW32), wp.int32)


@wp.func
def from_bits(bits: wp.uint64, like: wp.uint32) -> wp.uint32:  # noqa: F811  (Warp overloads @wp.func by signature)
    return wp.uint32(bits & _LOW32)


@wp.func
def from_bits(bits: wp.uint64, like: wp.int64) -> wp.int64:  # noqa: F811  (Warp overloads @wp.func by signature)
    return wp.cast(bits, wp.int64)


@wp.func
def from_bits(bits: wp.uint64, like: wp.uint64) -> wp.uint64:  # noqa: F811  (Warp overloads @wp.func by signature)
    return bits


@wp.func
def combine(op: int, old: Any, operand: Any, compare: Any):
    """What operation ``op`` leaves at an address holding ``old``: the arithmetic of Warp's own atomics.

    cas compares as the device's own atomic does: bit patterns on CUDA, ``==`` on the CPU.
    """
    new = operand  # exch
    if op == OP_ADD:
        new = old + operand
    elif op == OP_SUB:
        new = old - operand
    elif op == OP_MIN:
        new = wp.min(old, operand)
    elif op == OP_MAX:
        new = wp.max(old, operand)
    elif op == OP_CAS:
        new = old
        swaps = old == compare
        if on_cuda():
            swaps = to_bits(old) == to_bits(compare)
        if swaps:
            new = operand
    return new


@wp.func
def same_value(a: Float, b: Float) -> bool:
    """Equal, counting two NaNs as equal (their payloads may differ between compilers)."""
    return a == b or (wp.isnan(a) and wp.isnan(b))


@wp.func
def same_value(a: Any, b: Any) -> bool:  # noqa: F811  vectors, matrices, ... (after the scalars: Warp takes the first match)
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
        old = from_bits(word, operand)
        ticket = word >> SHIFT32
        new = ((ticket + _ONE) << SHIFT32) | to_bits(combine(op, old, operand, compare))
        seen = wp.atomic_cas(shadow, address, column, word, new)
        if seen == word:
            searching = False
        else:
            word = seen
    return old, wp.int32(ticket)


@wp.func
def _exact_pair_cas(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, column: int, operand: Any, compare: Any
):
    """float64 (int64, uint64) on a (bits, ticket word) pair with one 128-bit compare-and-swap: the value found and
    its ticket."""
    guess = wp.vec2ul(_peek(shadow, address, column), _peek(shadow, address, column + 1))  # torn: fails once
    return _exact_pair_cas_from(op, shadow, address, column, operand, compare, guess)


@wp.func
def _exact_pair_cas_from(
    op: int,
    shadow: wp.array2d(dtype=wp.uint64),
    address: int,
    column: int,
    operand: Any,
    compare: Any,
    guess: wp.vec2ul,
):
    word = guess
    old = operand
    ticket = wp.uint64(0)
    searching = bool(True)
    while searching:
        old = from_bits(word[0], operand)
        ticket = word[1] >> SHIFT32
        count = ticket + _ONE
        new = wp.vec2ul(to_bits(combine(op, old, operand, compare)), (count << SHIFT32) | count)
        seen = _cas_pair(shadow, address, column, word, new)
        if seen[0] == word[0] and seen[1] == word[1]:
            searching = False
        else:
            word = seen
    return old, wp.int32(ticket)


@wp.func
def _exact_pair_locked(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, column: int, operand: Any, compare: Any
):
    """float64 (int64, uint64) below sm_90: a ticket lock (next ticket << 32 | ticket served); the ticket is the
    place."""
    lock = wp.atomic_add(shadow, address, column + 1, _NEXT_TICKET)
    ticket = lock >> SHIFT32
    serving = lock & _LOW32
    while serving != ticket:  # waits only for smaller tickets, whose holders already run: no deadlock
        _backoff()
        serving = wp.atomic_add(shadow, address, column + 1, wp.uint64(0)) & _LOW32
    _fence()
    old = from_bits(wp.atomic_add(shadow, address, column, wp.uint64(0)), operand)
    wp.atomic_exch(shadow, address, column, to_bits(combine(op, old, operand, compare)))
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
def _exact_scalar(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, operand: wp.int32, compare: Any
):
    return _exact_word(op, shadow, address, component, operand, wp.int32(compare))


@wp.func
def _exact_scalar(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, operand: wp.uint32, compare: Any
):
    return _exact_word(op, shadow, address, component, operand, wp.uint32(compare))


@wp.func
def _exact_scalar(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, operand: wp.int64, compare: Any
):
    if _wide_cas_available():
        return _exact_pair_cas(op, shadow, address, 2 * component, operand, wp.int64(compare))
    return _exact_pair_locked(op, shadow, address, 2 * component, operand, wp.int64(compare))


@wp.func
def _exact_scalar(
    op: int, shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, operand: wp.uint64, compare: Any
):
    if _wide_cas_available():
        return _exact_pair_cas(op, shadow, address, 2 * component, operand, wp.uint64(compare))
    return _exact_pair_locked(op, shadow, address, 2 * component, operand, wp.uint64(compare))


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
    operand: Int,
    compare: Int,
    order: wp.array2d(dtype=wp.int32),
    record_index: int,
):
    """An int target's operation (a generic kernel's target launched with ints, beside targets whose float returns
    need exact gradients): in its shadow too, where the launch keeps its values; its returns have no gradient."""
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
    return _record_exact(OP_ADD, address, operand, operand, shadow, returned, operands, order, addresses, record_index)


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
    return _record_exact(OP_SUB, address, operand, operand, shadow, returned, operands, order, addresses, record_index)


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
    return _record_exact(OP_MIN, address, operand, operand, shadow, returned, operands, order, addresses, record_index)


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
    return _record_exact(OP_MAX, address, operand, operand, shadow, returned, operands, order, addresses, record_index)


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
    return _record_exact(OP_EXCH, address, operand, operand, shadow, returned, operands, order, addresses, record_index)


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
        OP_CAS, address, returned.dtype(value), expected, shadow, returned, operands, order, addresses, record_index
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

    The length is ``len(operands)``, not ``operands.shape[0]``: Warp's adjoint of reading ``.shape`` resets the shape
    of the adjoint array handed in (``adj_operands.shape = {}``), which a second call (in a loop) then indexes.
    """
    if record_index < len(operands):
        operands[record_index] = operands.dtype(value)
    return returned[record_index]


@wp.func
def _current(shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, like: wp.float32):
    return from_bits(_current_word(shadow, address, component), like)


@wp.func
def _current(shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, like: wp.float16):
    return from_bits(_current_word(shadow, address, component), like)


@wp.func
def _current(shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, like: wp.bfloat16):
    return from_bits(_current_word(shadow, address, component), like)


@wp.func
def _current(shadow: wp.array2d(dtype=wp.uint64), address: int, component: int, like: wp.float64):
    return from_bits(_current_word(shadow, address, 2 * component), like)  # (value bits, ticket word) pairs


@wp.func
def shadowed_read(value: Float, address: int, shadow: wp.array2d(dtype=wp.uint64)):
    """The element at ``address`` of a target whose values live in ``shadow`` while the record kernel runs, as it is
    now: what a plain read of the target reads in the original kernel (``value``, the target's own element, read
    before the launch's atomics, gives only the type).

    Every operation on the shadow writes a value word whole (a compare-and-swap of the word or the pair, or the
    exchange under the ticket lock below sm_90), so the word read is a value the element held during the launch,
    as a plain read of a target other threads update is on the GPU; the CPU runs threads in order, and reads
    exactly what the original reads.
    """
    return _current(shadow, address, 0, value)


@wp.func
def shadowed_read(  # noqa: F811
    value: wp.types.vector(length=Any, dtype=Float), address: int, shadow: wp.array2d(dtype=wp.uint64)
):
    current = value
    for c in range(len(value)):
        current[c] = _current(shadow, address, c, value[c])
    return current


@wp.func
def shadowed_read(value: wp.types.quaternion(dtype=Float), address: int, shadow: wp.array2d(dtype=wp.uint64)):  # noqa: F811
    current = value
    for c in range(4):
        current[c] = _current(shadow, address, c, value[c])
    return current


@wp.func
def shadowed_read(  # noqa: F811
    value: wp.types.transformation(dtype=Float), address: int, shadow: wp.array2d(dtype=wp.uint64)
):
    current = value
    for c in range(7):
        current[c] = _current(shadow, address, c, value[c])
    return current


@wp.func
def shadowed_read(  # noqa: F811
    value: wp.types.matrix(shape=(Any, Any), dtype=Float), address: int, shadow: wp.array2d(dtype=wp.uint64)
):
    current = value
    columns = len(value[0])
    for c in range(len(value) * columns):
        row, column = c // columns, c % columns
        current[row, column] = _current(shadow, address, c, value[row, column])
    return current
