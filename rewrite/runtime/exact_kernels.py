# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The device side of the exact backward (``exact``): its kernels, all in this one Warp module, with every generic
one's overloads declared at import so that the module compiles once per process."""

from typing import Any

import warp as wp

from .device import _CANCELLED, _CHAIN, _FINAL, _MISSING, _ORDER, _REPLAY_DIFFERS, _UNSETTLED, refuse, refused
from .exact_atomics import (
    OP_CAS,
    OP_EXCH,
    OP_MAX,
    OP_MIN,
    SHADOWED_INTS,
    SHIFT32,
    combine,
    from_bits,
    on_cuda,
    same_value,
    to_bits,
)

SCALARS = wp._src.types.float_types  # the overloads of every generic kernel below: float16, bfloat16, float32, float64


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
    stores = op == OP_EXCH
    if op == OP_MIN:
        stores = operand == operand and not (old <= operand)
    elif op == OP_MAX:
        stores = operand == operand and not (old >= operand)
    elif op == OP_CAS:
        stores = old == compare
        if on_cuda():
            stores = to_bits(old) == to_bits(compare)
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
def load_shadow(
    target: wp.array4d(dtype=Any), bits_column: int, ticket_column: int, words: wp.array2d(dtype=wp.uint64)
):
    a = wp.tid()
    e = _element(target, a)
    words[a, bits_column] = to_bits(target[e[0], e[1], e[2], e[3]])
    if ticket_column >= 0:
        words[a, ticket_column] = wp.uint64(0)


@wp.kernel
def store_shadow(words: wp.array2d(dtype=wp.uint64), bits_column: int, target: wp.array4d(dtype=Any)):
    a = wp.tid()
    e = _element(target, a)
    target[e[0], e[1], e[2], e[3]] = from_bits(words[a, bits_column], target.dtype(0.0))


@wp.kernel
def count_ops(words: wp.array2d(dtype=wp.uint64), ticket_column: int, counts: wp.array(dtype=wp.int32)):
    a = wp.tid()
    counts[a] = wp.int32(words[a, ticket_column] >> SHIFT32)


@wp.kernel
def place_ops(
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
def check_chain(
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
    places next to each op hold ops (``check_places`` checks the first of each address).

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
    result = combine(code % 8, returned[k, column], operands[k, column], compares[k, column])
    if ticket < counts[a] - 1:
        following = perm[offsets[a] + ticket + 1]
        if following < 0:
            refuse(status, _MISSING, code // 8)
        elif not same_value(result, returned[following, column]):
            refuse(status, _CHAIN, code // 8)
    elif not same_value(result, from_bits(words[a, bits_column], result)):
        refuse(status, _FINAL, code // 8)


@wp.kernel
def check_recomputed(
    status: wp.array(dtype=wp.int32),
    order: wp.array2d(dtype=wp.int32),
    site_ends: wp.array(dtype=wp.int32),
    site_codes: wp.array(dtype=wp.int32),
    recorded: wp.array2d(dtype=Any),
    recomputed: wp.array2d(dtype=Any),
):
    """Every operand the replay kernel recomputed is the one the forward used."""
    k, c = wp.tid()
    if order[k, c] >= 0 and not refused(status) and not same_value(recorded[k, c], recomputed[k, c]):
        refuse(status, _REPLAY_DIFFERS, _site_info(k, site_ends, site_codes) // 8)


@wp.kernel
def check_places(
    status: wp.array(dtype=wp.int32),
    perm: wp.array(dtype=wp.int32),
    counts: wp.array(dtype=wp.int32),
    offsets: wp.array(dtype=wp.int32),
):
    """Every address whose ticket count says it had operations has its first one placed, and the counts add up to
    no more operations than were recorded (``check_chain`` checks each op's neighbours)."""
    a = wp.tid()
    if refused(status):
        return
    if (a == counts.shape[0] - 1 and offsets[a] + counts[a] > perm.shape[0]) or (
        counts[a] > 0 and offsets[a] < perm.shape[0] and perm[offsets[a]] < 0
    ):
        refuse(status, _MISSING, -1)


@wp.kernel
def mark_stored(
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
def rank_positions(
    stored: wp.array(dtype=wp.int32), ranks: wp.array(dtype=wp.int32), by_rank: wp.array(dtype=wp.int32)
):
    p = wp.tid()
    if stored[p] != 0:
        by_rank[ranks[p] - 1] = p


@wp.kernel
def take_finals(grad: wp.array4d(dtype=Any), finals: wp.array(dtype=wp.float64)):
    a = wp.tid()
    e = _element(grad, a)
    finals[a] = wp.float64(grad[e[0], e[1], e[2], e[3]])


@wp.kernel
def gather(
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
def segment_ends(
    perm: wp.array(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    counts: wp.array(dtype=wp.int32),
    offsets: wp.array(dtype=wp.int32),
    ends: wp.array(dtype=wp.int32),
):
    """The last position of the address each position holds an op of (a position holding none: itself)."""
    p = wp.tid()
    k = perm[p]
    ends[p] = p
    if k >= 0:
        a = addresses[k]
        ends[p] = offsets[a] + counts[a] - 1


@wp.kernel
def suffix_step(
    ends: wp.array(dtype=wp.int32),
    distance: int,
    sums: wp.array(dtype=wp.float64),
    into: wp.array(dtype=wp.float64),
):
    """One step of a segmented suffix scan by doubling: each position adds the sum ``distance`` further on, within
    its address's ops."""
    p = wp.tid()
    value = sums[p]
    if p + distance <= ends[p]:
        value += sums[p + distance]
    into[p] = value


@wp.kernel
def route_sums(
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
    not zero); acc0 gets all of them. ``sums``: the returned values' adjoints summed from each position to the last
    op on its address (``suffix_sums``)."""
    p = wp.tid()
    k = perm[p]
    if refused(gate) or k < 0:
        return
    a = addresses[k]
    first = offsets[a]
    last = first + counts[a] - 1
    later = wp.float64(0.0)
    if p < last:
        later = sums[p + 1]
    if with_finals != 0:
        later += finals[a]
    if _site_info(k, site_ends, site_codes) % 8 == 1:
        later = -later
    seeds[k, column] = seeds.dtype(later)
    if later != wp.float64(0.0):
        seeding[0] = 0
    if p == first and with_grad != 0:
        e = _element(grad, a)
        wp.atomic_add(grad, e[0], e[1], e[2], e[3], grad.dtype(sums[first]))


@wp.kernel
def route_holders(
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
def to_dtype(extras: wp.array2d(dtype=wp.float64), column: int, out: wp.array2d(dtype=Any)):
    k = wp.tid()
    out[k, column] = out.dtype(extras[k, column])


@wp.kernel
def open_gate(status: wp.array(dtype=wp.int32), values: wp.array2d(dtype=Any), gate: wp.array(dtype=wp.int32)):
    """Open ``gate`` (0) if any value is not zero, unless the launch is refused."""
    k, c = wp.tid()
    if values[k, c] != values.dtype(0.0) and not refused(status):
        gate[0] = 0


@wp.kernel
def tally_seeds(
    seeds: wp.array2d(dtype=Any), totals: wp.array2d(dtype=wp.float64), sizes: wp.array2d(dtype=wp.float64)
):
    """Add one round's seeds of the operands' adjoints into their totals, and their sizes into the sum of sizes."""
    k, c = wp.tid()
    seed = wp.float64(seeds[k, c])
    totals[k, c] += seed
    sizes[k, c] += wp.abs(seed)


@wp.kernel
def check_cancellation(
    status: wp.array(dtype=wp.int32),
    totals: wp.array2d(dtype=wp.float64),
    sizes: wp.array2d(dtype=wp.float64),
    limit: wp.float64,
    site: int,
):
    """Refuse the launch where an operand's adjoint is a sum over rounds that cancelled beyond ``limit``."""
    k, c = wp.tid()
    if sizes[k, c] > limit * wp.abs(totals[k, c]):
        refuse(status, _CANCELLED, site)


@wp.kernel
def settle(status: wp.array(dtype=wp.int32), gate: wp.array(dtype=wp.int32), site: int):
    if gate[0] == 0:
        refuse(status, _UNSETTLED, site)


@wp.kernel
def accumulate(status: wp.array(dtype=wp.int32), source: wp.array4d(dtype=Any), into: wp.array4d(dtype=Any)):
    a = wp.tid()
    if refused(status):
        return
    e = _element(into, a)
    wp.atomic_add(into, e[0], e[1], e[2], e[3], source[e[0], e[1], e[2], e[3]])


@wp.kernel
def accumulate_flat(status: wp.array(dtype=wp.int32), source: wp.array(dtype=Any), into: wp.array(dtype=Any)):
    i = wp.tid()
    if not refused(status):
        wp.atomic_add(into, i, source[i])


def _declare_overloads() -> None:
    """Declare every generic kernel of this module for every float scalar type now, and the shadow's for the ints it
    holds too, so that the module compiles once (an overload made by a launch after it loaded would make Warp compile
    it all again)."""
    generic = [value for value in globals().values() if isinstance(value, wp.Kernel) and value.is_generic]
    for kernel in generic:
        for scalar in (*SCALARS, *SHADOWED_INTS) if kernel in (load_shadow, store_shadow) else SCALARS:
            types = {
                name: wp.array(dtype=scalar, ndim=annotation.ndim)
                for name, annotation in kernel.adj.arg_types.items()
                if wp._src.types.type_is_generic(annotation)
            }
            wp.overload(kernel, types)


_declare_overloads()
