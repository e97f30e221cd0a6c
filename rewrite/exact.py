"""Exact gradients through floating-point atomic returns.

For the operations on one address, in execution order 1..m, ``prev_k`` (what op k returned) is made of the
target's initial value and the operands of ops before k:

- add/sub: ``prev_k = acc0 + sum_{j<k} s_j v_j``, so ``adj(v_j) += s_j * sum_{k>j} adj(prev_k)`` (a segmented
  suffix sum in execution order) and ``adj(acc0) += sum_k adj(prev_k)``;
- exch: ``prev_k`` is the operand of the op before k (or ``acc0``): its adjoint goes there;
- max/min/cas: ``prev_k`` is the value stored by the last op before k that changed it (or ``acc0``): its
  adjoint goes to that op's operand.

The final value's adjoint (``target.grad``) is routed the same way: to every operand (add/sub) or to the op
that stored the final value. The execution order comes from tickets taken from a counter beside the target
right after each atomic (``passes.templates.record_exact``). On the CPU threads run in order, so tickets are
exact; on a GPU another thread may slip between an atomic and its ticket, so the recorded values are checked
against the ticket order and a mismatch raises instead of giving a wrong gradient.

The replay kernel's adjoint gives ``adj(prev)`` (the returned-value records' gradient). Routing it produces
extra adjoints for operands, which reach the kernel's inputs through a second adjoint launch of the replay
kernel seeded only with them, through the operand records' adjoint (``exact_returned`` stores each operand).
An operand that itself depends on an exact return feeds another round; rounds stop when nothing is left.
Everything runs as Warp kernels, sort and scans: O(n log n) in the number of operations, parallel on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

from warp_rewrite.errors import RewriteError

ADD, EXCH, HOLD = 0, 1, 2  # how a returned value is made: running sum; the op before; the last op that stored
_KIND = {"add": ADD, "sub": ADD, "exch": EXCH, "max": HOLD, "min": HOLD, "cas": HOLD}
_MAX_ROUNDS = 64


@wp.kernel
def _sort_keys(
    order: wp.array(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    keys: wp.array(dtype=wp.int64),
    positions: wp.array(dtype=wp.int32),
):
    i = wp.tid()
    key = wp.int64(9223372036854775807)  # ops that never ran sort last
    if order[i] >= 0:
        key = wp.int64(addresses[i]) * wp.int64(2147483648) + wp.int64(order[i])
    keys[i] = key
    positions[i] = i


@wp.kernel
def _segment_starts(
    addresses: wp.array(dtype=wp.int32), perm: wp.array(dtype=wp.int32), starts: wp.array(dtype=wp.int32)
):
    p = wp.tid()
    starts[p] = wp.where(p == 0 or addresses[perm[p]] != addresses[perm[p - 1]], 1, 0)


@wp.kernel
def _segment_bounds(
    segment: wp.array(dtype=wp.int32),
    count: int,
    first: wp.array(dtype=wp.int32),
    last: wp.array(dtype=wp.int32),
):
    p = wp.tid()
    if p == 0 or segment[p] != segment[p - 1]:
        first[segment[p]] = p
    if p == count - 1 or segment[p] != segment[p + 1]:
        last[segment[p]] = p


@wp.kernel
def _check_order(
    kind: int,
    op_code: wp.array(dtype=wp.int32),
    perm: wp.array(dtype=wp.int32),
    starts: wp.array(dtype=wp.int32),
    returned: wp.array2d(dtype=Any),
    values: wp.array2d(dtype=Any),
    compares: wp.array2d(dtype=Any),
    mismatches: wp.array(dtype=wp.int32),
):
    """Does each op's returned value follow from the op before it in ticket order?"""
    p, c = wp.tid()
    if starts[p] == 0:
        j = perm[p - 1]
        k = perm[p]
        before = returned[j, c]
        expected = before
        if kind == 0:
            expected = wp.where(op_code[j] == 1, before - values[j, c], before + values[j, c])
        elif kind == 1:
            expected = values[j, c]
        elif op_code[j] == 2:  # max
            expected = wp.max(before, values[j, c])
        elif op_code[j] == 3:  # min
            expected = wp.min(before, values[j, c])
        elif before == compares[j, c]:  # cas that swapped
            expected = values[j, c]
        if expected != returned[k, c]:
            wp.atomic_add(mismatches, 0, 1)


@wp.kernel
def _stored(
    column: int,
    op_code: wp.array(dtype=wp.int32),
    perm: wp.array(dtype=wp.int32),
    returned: wp.array2d(dtype=Any),
    values: wp.array2d(dtype=Any),
    compares: wp.array2d(dtype=Any),
    holder: wp.array(dtype=wp.int32),
):
    """For max/min/cas: this op's position if it changed the stored component ``column``, else -1.

    Vector max/min work per component, so each component has holders of its own.
    """
    p = wp.tid()
    k = perm[p]
    changed = False
    if op_code[k] == 2:
        changed = values[k, column] > returned[k, column]
    elif op_code[k] == 3:
        changed = values[k, column] < returned[k, column]
    elif op_code[k] == 4:
        changed = returned[k, column] == compares[k, column]
    holder[p] = wp.where(changed, p, -1)


@wp.kernel
def _last_holder_step(
    distance: int,
    segment: wp.array(dtype=wp.int32),
    first: wp.array(dtype=wp.int32),
    source: wp.array(dtype=wp.int32),
    result: wp.array(dtype=wp.int32),
):
    """One step of a segmented max-scan (Hillis-Steele): the last op at or before p that stored a value."""
    p = wp.tid()
    value = source[p]
    if p - distance >= first[segment[p]]:
        value = wp.max(value, source[p - distance])
    result[p] = value


@wp.kernel
def _gather_sorted(
    perm: wp.array(dtype=wp.int32), adjoint: wp.array2d(dtype=wp.float64), column: int, out: wp.array(dtype=wp.float64)
):
    p = wp.tid()
    out[p] = adjoint[perm[p], column]


@wp.struct
class Segments:
    """Operations in execution order per address: ``perm[p]`` is the p-th, ``segment[p]`` its address's
    segment, which runs from position ``first[segment]`` to ``last[segment]``; ``addresses[op]`` by op."""

    perm: wp.array(dtype=wp.int32)
    segment: wp.array(dtype=wp.int32)
    first: wp.array(dtype=wp.int32)
    last: wp.array(dtype=wp.int32)
    addresses: wp.array(dtype=wp.int32)


@wp.kernel
def _route_sums(
    column: int,
    order: Segments,
    sums: wp.array(dtype=wp.float64),
    sign: wp.array(dtype=wp.float64),
    final: wp.array2d(dtype=wp.float64),
    extras: wp.array2d(dtype=wp.float64),
    initial: wp.array2d(dtype=wp.float64),
):
    """add/sub: operand j gets s_j * (final + sum of later returns' adjoints); acc0 gets all of them."""
    p = wp.tid()
    k = order.perm[p]
    seg = order.segment[p]
    a = order.addresses[k]
    last = order.last[seg]
    extras[k, column] += sign[k] * (sums[last] - sums[p] + final[a, column])
    if p == order.first[seg]:
        before = wp.float64(0.0)
        if p > 0:
            before = sums[p - 1]
        wp.atomic_add(initial, a, column, sums[last] - before)


@wp.kernel
def _route_holders(
    kind: int,
    column: int,
    order: Segments,
    holders: wp.array(dtype=wp.int32),
    adjoint: wp.array2d(dtype=wp.float64),
    final: wp.array2d(dtype=wp.float64),
    extras: wp.array2d(dtype=wp.float64),
    initial: wp.array2d(dtype=wp.float64),
):
    """exch/max/min/cas: each returned value's adjoint goes to the op whose operand it is (or acc0)."""
    p = wp.tid()
    k = order.perm[p]
    seg = order.segment[p]
    a = order.addresses[k]
    source = int(-1)  # position of the op whose operand op p returned; -1: the initial value
    if p > order.first[seg]:
        source = wp.where(kind == 1, p - 1, holders[p - 1])
    if source < 0:
        wp.atomic_add(initial, a, column, adjoint[k, column])
    else:
        wp.atomic_add(extras, order.perm[source], column, adjoint[k, column])
    if p == order.last[seg]:
        final_source = wp.where(kind == 1, p, holders[p])
        if final_source >= 0:  # the final value is that op's operand, not acc0's
            wp.atomic_add(extras, order.perm[final_source], column, final[a, column])
            wp.atomic_add(initial, a, column, -final[a, column])


@wp.kernel
def _to_float64(source: wp.array2d(dtype=Any), offset: int, out: wp.array2d(dtype=wp.float64)):
    i, c = wp.tid()
    out[offset + i, c] = wp.float64(source[i, c])


@wp.kernel
def _from_float64(source: wp.array2d(dtype=wp.float64), offset: int, out: wp.array2d(dtype=Any)):
    i, c = wp.tid()
    out[i, c] = out.dtype(source[offset + i, c])


@wp.kernel
def _add_float64(source: wp.array2d(dtype=wp.float64), out: wp.array2d(dtype=Any)):
    i, c = wp.tid()
    out[i, c] = out[i, c] + out.dtype(source[i, c])


@wp.kernel
def _accumulate(source: wp.array(dtype=Any), out: wp.array(dtype=Any)):
    i = wp.tid()
    out[i] = out[i] + source[i]


def components(array: wp.array) -> wp.array:
    """A (n, components) view of the scalars of an array of scalars, vectors or matrices (no copy)."""
    scalar = wp._src.types.type_scalar_type(array.dtype)
    count = wp._src.types.type_size(array.dtype)
    return wp.array(
        ptr=array.ptr,
        dtype=scalar,
        shape=(array.size, count),
        strides=(wp._src.types.type_size_in_bytes(array.dtype), wp._src.types.type_size_in_bytes(scalar)),
        device=array.device,
    )


@dataclass
class ExactSite:
    """One exact site's records in one launch."""

    op: str
    returned: wp.array
    values: wp.array
    order: wp.array
    addresses: wp.array
    compares: wp.array | None


_OP_CODES = {"add": 0, "sub": 1, "max": 2, "min": 3, "cas": 4, "exch": 5}


class _Target:
    """The exact sites of one target array, their operations sorted by (address, ticket) once."""

    def __init__(self, kernel: str, location: str, path: str, target: wp.array, sites: list[ExactSite]):
        self.path, self.target, self.sites = path, target, sites
        self.kind = _KIND[sites[0].op]
        device = target.device
        self.device = device
        self.sizes = [s.returned.size for s in sites]
        self.offsets = list(np.cumsum([0, *self.sizes[:-1]]))
        n = sum(self.sizes)
        self.columns = wp._src.types.type_size(target.dtype)
        concat = lambda name: self._concat([getattr(s, name) for s in sites])  # noqa: E731
        order, addresses = concat("order"), concat("addresses")
        codes = np.concatenate(
            [np.full(size, _OP_CODES[s.op], np.int32) for s, size in zip(sites, self.sizes, strict=True)]
        )
        self.op_code = wp.array(codes, dtype=wp.int32, device=device)
        self.sign = wp.array(np.where(codes == 1, -1.0, 1.0), dtype=wp.float64, device=device)
        self.addresses = addresses
        keys = wp.empty(2 * n, dtype=wp.int64, device=device)
        perm = wp.empty(2 * n, dtype=wp.int32, device=device)
        wp.launch(_sort_keys, n, inputs=[order, addresses, keys, perm], device=device)
        wp.utils.radix_sort_pairs(keys, perm, n)
        self.count = int((order.numpy() >= 0).sum())
        self.perm = perm[: self.count]
        if self.count == 0:
            return
        starts = wp.empty(self.count, dtype=wp.int32, device=device)
        wp.launch(_segment_starts, self.count, inputs=[addresses, self.perm, starts], device=device)
        self.segment = wp.empty(self.count, dtype=wp.int32, device=device)
        wp.utils.array_scan(starts, self.segment, inclusive=True)
        wp.launch(_minus_one, self.count, inputs=[self.segment], device=device)
        segments = int(self.segment.numpy()[-1]) + 1
        self.first = wp.empty(segments, dtype=wp.int32, device=device)
        self.last = wp.empty(segments, dtype=wp.int32, device=device)
        wp.launch(_segment_bounds, self.count, inputs=[self.segment, self.count, self.first, self.last], device=device)

        returned, values = self._concat_components("returned"), self._concat_components("values")
        compares = self._concat_components("compares") if sites[0].op == "cas" else values
        mismatches = wp.zeros(1, dtype=wp.int32, device=device)
        inputs = [self.kind, self.op_code, self.perm, starts, returned, values, compares, mismatches]
        wp.launch(_check_order, (self.count, self.columns), inputs=inputs, device=device)
        if int(mismatches.numpy()[0]):
            raise RewriteError(
                kernel,
                location,
                f"the order of the float atomics on '{path}' could not be recovered: their returned values do not "
                "follow each other in ticket order (another thread ran between an atomic and its ticket)",
                "Rewrite with detach_returns=True, or run this kernel on the CPU for exact gradients",
            )
        if self.kind == HOLD:
            self.holders = [self._last_holders(c, returned, values, compares) for c in range(self.columns)]

    def _concat(self, arrays: list[wp.array]) -> wp.array:
        out = wp.empty(sum(a.size for a in arrays), dtype=arrays[0].dtype, device=self.device)
        for array, offset in zip(arrays, self.offsets, strict=True):
            wp.copy(out, array, dest_offset=int(offset), count=array.size)
        return out

    def _concat_components(self, name: str) -> wp.array:
        parts = [components(getattr(s, name)) for s in self.sites]
        out = wp.empty((sum(self.sizes), self.columns), dtype=parts[0].dtype, device=self.device)
        for part, offset in zip(parts, self.offsets, strict=True):
            wp.copy(out[int(offset) : int(offset) + part.shape[0]], part)
        return out

    def _last_holders(self, column: int, returned: wp.array, values: wp.array, compares: wp.array) -> wp.array:
        """For each position, the last op at or before it (in its segment) that stored its operand's component."""
        holders = wp.empty(self.count, dtype=wp.int32, device=self.device)
        inputs = [column, self.op_code, self.perm, returned, values, compares, holders]
        wp.launch(_stored, self.count, inputs=inputs, device=self.device)
        result = wp.empty_like(holders)
        distance = 1
        while distance < self.count:
            inputs = [distance, self.segment, self.first, holders, result]
            wp.launch(_last_holder_step, self.count, inputs=inputs, device=self.device)
            holders, result = result, holders
            distance *= 2
        return holders

    def route(self, adjoint: wp.array, final: wp.array) -> tuple[wp.array, wp.array]:
        """Route returned values' adjoints (and the final value's, in ``final``) to operands and acc0.

        Returns the operands' extra adjoints (n, columns) and acc0's (target size, columns), float64.
        """
        extras = wp.zeros((sum(self.sizes), self.columns), dtype=wp.float64, device=self.device)
        initial = wp.zeros((self.target.size, self.columns), dtype=wp.float64, device=self.device)
        if self.count == 0:
            return extras, initial
        order = Segments()
        order.perm, order.segment, order.first, order.last = self.perm, self.segment, self.first, self.last
        order.addresses = self.addresses
        for column in range(self.columns):
            if self.kind == ADD:
                sums = wp.empty(self.count, dtype=wp.float64, device=self.device)
                wp.launch(_gather_sorted, self.count, inputs=[self.perm, adjoint, column, sums], device=self.device)
                wp.utils.array_scan(sums, sums, inclusive=True)
                inputs = [column, order, sums, self.sign, final, extras, initial]
                wp.launch(_route_sums, self.count, inputs=inputs, device=self.device)
            else:
                holders = self.holders[column] if self.kind == HOLD else self.perm  # unused for exch
                inputs = [self.kind, column, order, holders, adjoint, final, extras, initial]
                wp.launch(_route_holders, self.count, inputs=inputs, device=self.device)
        return extras, initial

    def adjoints_of(self, arrays: list[wp.array]) -> wp.array:
        """The sites' per-op adjoints (one array per site, target dtype) as one (n, columns) float64 array."""
        out = wp.zeros((sum(self.sizes), self.columns), dtype=wp.float64, device=self.device)
        for array, offset in zip(arrays, self.offsets, strict=True):
            wp.launch(
                _to_float64,
                (array.size, self.columns),
                inputs=[components(array), int(offset), out],
                device=self.device,
            )
        return out

    def split(self, extras: wp.array) -> list[wp.array]:
        """Extra adjoints as one array per site, in the operand records' dtype: the seeds of the next launch."""
        seeds = []
        for site, offset in zip(self.sites, self.offsets, strict=True):
            seed = wp.zeros_like(site.values)
            wp.launch(
                _from_float64,
                (seed.size, self.columns),
                inputs=[extras, int(offset), components(seed)],
                device=self.device,
            )
            seeds.append(seed)
        return seeds


@wp.kernel
def _minus_one(values: wp.array(dtype=wp.int32)):
    i = wp.tid()
    values[i] = values[i] - 1


def _scratch_adjoint(value: Any, pairs: list[tuple[wp.array, wp.array]]) -> Any:
    """Like ``Tape.get_adjoint``, but a fresh zero array for every gradient (remembered in ``pairs``)."""
    if wp._src.types.is_native_type(type(value)):
        return type(value)()
    if isinstance(value, wp.array):
        if value.grad is None:
            return None
        scratch = wp.zeros_like(value.grad)
        pairs.append((value.grad, scratch))
        return scratch
    if wp._src.types.is_struct(value):
        adjoint = value._cls()
        for name in value._cls.vars:
            setattr(adjoint, name, _scratch_adjoint(getattr(value, name), pairs) or getattr(adjoint, name))
        return adjoint
    return None


@dataclass
class ExactBackward:
    """The tape step that runs right after the replay kernel's adjoint (see the module docstring)."""

    kernel: str
    replay_kernel: wp.Kernel
    dim: Any
    inputs: list[Any]
    outputs: list[Any]  # the original outputs, then every record array, then the trip and shape arguments
    device: Any
    block_dim: int | None
    max_blocks: int
    targets: list[tuple[str, str, wp.array, list[ExactSite]]]  # (location, path, target array, sites)

    def __call__(self) -> None:
        targets = [_Target(self.kernel, location, path, array, sites) for location, path, array, sites in self.targets]
        adjoints = [t.adjoints_of([s.returned.grad for s in t.sites]) for t in targets]
        finals = [self._take_finals(t) for t in targets]
        for _ in range(_MAX_ROUNDS):
            seeds: dict[int, wp.array] = {}
            for target, adjoint, final in zip(targets, adjoints, finals, strict=True):
                extras, initial = target.route(adjoint, final)
                if target.target.grad is not None:
                    wp.launch(
                        _add_float64,
                        initial.shape,
                        inputs=[initial, components(target.target.grad)],
                        device=target.device,
                    )
                for site, seed in zip(target.sites, target.split(extras), strict=True):
                    seeds[id(site.values)] = seed
            if not any(np.any(seed.numpy()) for seed in seeds.values()):
                return
            collected = self._seed_launch(seeds)
            adjoints = [t.adjoints_of([collected[id(s.returned)] for s in t.sites]) for t in targets]
            finals = [wp.zeros_like(f) for f in finals]
        raise RuntimeError(f"exact gradients of kernel '{self.kernel}' did not settle in {_MAX_ROUNDS} rounds")

    def _take_finals(self, target: _Target) -> wp.array:
        """The final values' adjoints (float64), which route() hands to operands instead."""
        final = wp.zeros((target.target.size, target.columns), dtype=wp.float64, device=target.device)
        if target.target.grad is not None:
            grad = components(target.target.grad)
            wp.launch(_to_float64, grad.shape, inputs=[grad, 0, final], device=target.device)
        return final

    def _seed_launch(self, seeds: dict[int, wp.array]) -> dict[int, wp.array]:
        """An adjoint launch of the replay kernel seeded only with the operands' extra adjoints."""
        pairs: list[tuple[wp.array, wp.array]] = []
        collected: dict[int, wp.array] = {}
        returned = {id(s.returned) for _, _, _, sites in self.targets for s in sites}

        def adjoint_of(value: Any) -> Any:
            if isinstance(value, wp.array) and id(value) in seeds:
                return seeds[id(value)]
            if isinstance(value, wp.array) and id(value) in returned:
                collected[id(value)] = wp.zeros_like(value)
                return collected[id(value)]
            return _scratch_adjoint(value, pairs)

        wp.launch(
            self.replay_kernel,
            self.dim,
            inputs=self.inputs,
            outputs=self.outputs,
            adj_inputs=[adjoint_of(a) for a in self.inputs],
            adj_outputs=[adjoint_of(a) for a in self.outputs],
            adjoint=True,
            device=self.device,
            block_dim=self.block_dim,
            max_blocks=self.max_blocks,
            record_tape=False,
        )
        for real, scratch in pairs:
            wp.launch(_accumulate, real.size, inputs=[scratch.flatten(), real.flatten()], device=real.device)
        return collected
