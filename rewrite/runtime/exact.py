# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The host side of the exact backward of floating-point atomic returns (its device side: ``exact_kernels``)."""

from dataclasses import dataclass
from typing import Any

import warp as wp

from . import exact_kernels as kernels
from .abi import EXACT_OPS, Op
from .checks import device_checks, explain_status, unbounded_chain
from .device import STATUS_TRIPS
from .exact_atomics import SHADOWED_INTS
from .hook import warp_launch
from .memory import float_components, is_float_dtype, written_first
from .specs import SiteSpec

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

_KIND = {Op.ADD: ADD, Op.SUB: ADD, Op.EXCH: HOLD, Op.MAX: HOLD, Op.MIN: HOLD, Op.CAS: HOLD}

# Over several rounds, an operand's adjoint is a sum of its seeds, one per length of the chains through returns
# that reach it: where the target's own returns feed its operands through factors near -1 (``f += r * x`` with x
# near -1), those terms are far larger than their sum (the expansion of a product (1 + x)^n by chain length), and
# the sum is lost to rounding. A launch where an operand's seeds add up to less than a fraction of their sizes is
# refused: the square root of the unit roundoff of the target's type, so that at most half its digits are lost
# (float64: 1e-8; measured on such chains, the gradients are then right to ~1e-7, and lose two digits with each
# further factor of 100).
UNIT_ROUNDOFF = {wp.float16: 2.0**-11, wp.bfloat16: 2.0**-8, wp.float32: 2.0**-24, wp.float64: 2.0**-53}


def cancellation_limit(array: wp.array) -> float:
    """How much larger than their sum the seeds of an operand of ``array``'s atomics may be (see above)."""
    return UNIT_ROUNDOFF[wp._src.types.type_scalar_type(array.dtype)] ** -0.5


def _run(kernel: wp.Kernel, dim: Any, inputs: list[Any], device: Any) -> None:
    """Launch one of the runtime's own kernels: on the current stream, never recorded on a tape."""
    warp_launch(kernel, dim, inputs=inputs, device=device, record_tape=False)


def shadowed_components(dtype: Any) -> list[tuple[int, type]]:
    """The components a shadow holds of an element of ``dtype``: its float components, or the int itself."""
    return [(0, dtype)] if dtype in SHADOWED_INTS else float_components(dtype)


def component_views(array: wp.array, components: list[tuple[int, type]] | None = None) -> list[wp.array]:
    """One 4-D scalar view per float component of an array of up to 4 dimensions (``float_components``; or per one of
    ``components``), through its own strides (no copy).

    Views (``table[:, 0]``, ``arr[::2]``) keep their strides, so the kernels below read and write exactly the
    elements the array is made of.
    """
    padding = 4 - array.ndim
    shape, strides = (1,) * padding + tuple(array.shape), (0,) * padding + tuple(array.strides)
    views = []
    for offset, scalar in float_components(array.dtype) if components is None else components:
        view: wp.array = wp.array(
            ptr=array.ptr + offset, dtype=scalar, shape=shape, strides=strides, device=array.device
        )
        # A view keeps what it views alive, as Warp's own views do (the ignore: Warp's __init__ sets _ref = None,
        # which mypy reads as its type).
        view._ref = array  # type: ignore[assignment]
        views.append(view)
    return views


def scalars_of(array: wp.array) -> wp.array:
    """A flat scalar view of a contiguous array (no copy)."""
    scalar = wp._src.types.type_scalar_type(array.dtype)
    view: wp.array = wp.array(
        ptr=array.ptr, dtype=scalar, shape=(array.size * wp._src.types.type_size(array.dtype),), device=array.device
    )
    view._ref = array  # type: ignore[assignment]  # (as in component_views)
    return view


def records_view(array: wp.array) -> wp.array:
    """A (n, components) scalar view of a contiguous 1-D array of scalars, vectors or matrices (no copy)."""
    scalar = wp._src.types.type_scalar_type(array.dtype)
    view: wp.array = wp.array(
        ptr=array.ptr,
        dtype=scalar,
        shape=(array.size, wp._src.types.type_size(array.dtype)),
        strides=(wp._src.types.type_size_in_bytes(array.dtype), wp._src.types.type_size_in_bytes(scalar)),
        device=array.device,
    )
    view._ref = array  # type: ignore[assignment]  # (as in component_views)
    return view


class Shadow:
    """A target's values and tickets while one launch's record kernel runs (see ``exact_add``)."""

    def __init__(self, target: wp.array, device: wp.Device):
        self.target = target
        self.held = shadowed_components(target.dtype)
        self.components = len(self.held)
        # two words per component: 64-bit values
        self.wide = wp._src.types.type_scalar_type(target.dtype) in (wp.float64, wp.int64, wp.uint64)
        self.words = wp.empty((target.size, self.components * (1 + self.wide)), dtype=wp.uint64, device=device)

    def bits_column(self, component: int) -> int:
        return component * (1 + self.wide)

    def ticket_column(self, component: int) -> int:
        return 2 * component + 1 if self.wide else component

    def load(self) -> None:
        """Fill the shadow from the target (its tickets at 0): before the record kernel."""
        for c, view in enumerate(component_views(self.target, self.held)):
            ticket_column = self.ticket_column(c) if self.wide else -1
            inputs = [view, self.bits_column(c), ticket_column, self.words]
            _run(kernels.load_shadow, self.target.size, inputs=inputs, device=self.words.device)

    def store(self) -> None:
        """Write the shadow's values back into the target: after the record kernel."""
        for c, view in enumerate(component_views(self.target, self.held)):
            _run(
                kernels.store_shadow,
                self.target.size,
                inputs=[self.words, self.bits_column(c), view],
                device=self.words.device,
            )


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
    ends: wp.array  # the last position of the address each position holds an op of (``segment_ends``)
    ranks: wp.array | None = None
    by_rank: wp.array | None = None


def suffix_sums(values: wp.array, ends: wp.array) -> wp.array:
    """Each position's value summed with those after it up to ``ends[position]`` (a segmented suffix scan), by
    doubling: ceil(log2(n)) launches, each sum one of the values it holds alone. A prefix scan's differences
    (``total - prefix``) would cancel where the first values dwarf the last (a chain of returns through a growing
    accumulator) and lose the later operands' adjoints."""
    distance, scratch = 1, written_first(values.shape, values.dtype, values.device)
    while distance < values.shape[0]:
        _run(kernels.suffix_step, values.shape, inputs=[ends, distance, values, scratch], device=values.device)
        values, scratch, distance = scratch, values, 2 * distance
    return values


class ExactTarget:
    """A target whose float returns get exact gradients in one launch: its sites' records, each kind in one
    allocation that the sites' record parameters are slices of, and (from the first backward) their order."""

    def __init__(self, path: str, shadow: Shadow, sites: list[tuple[int, SiteSpec]], sizes: dict, device):
        self.path, self.shadow, self.array, self.device = path, shadow, shadow.target, device
        self.kind = _KIND[sites[0][1].op]
        self.sites = []
        count = 0
        for index, site in sites:
            assert site.exact is not None  # (the sites of an exact target)
            self.sites.append(ExactSiteRecords(index, site, count, sizes[site.exact.returned]))
            count += sizes[site.exact.returned]
        self.count = count
        dtype, components = self.array.dtype, shadow.components
        self.returned = written_first(count, dtype, device, requires_grad=True)
        self.operands = written_first(count, dtype, device)
        self.order = wp.full((count, components), -1, dtype=wp.int32, device=device)  # -1: the op never ran
        self.addresses = wp.empty(count, dtype=wp.int32, device=device)
        cas = any(part.site.op == Op.CAS for part in self.sites)
        self.compares = written_first(count, dtype, device) if cas else None
        self.named = {}  # record parameter -> the slice passed for it
        for part in self.sites:
            records = part.site.exact
            assert records is not None
            self.named[records.returned] = part.rows(self.returned)
            self.named[records.values] = part.rows(self.operands)
            self.named[records.order] = part.rows(self.order)
            self.named[records.addresses] = part.rows(self.addresses)
            if records.compares and self.compares is not None:  # (cas sites have compares)
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
            codes[i : i + 1].fill_(part.index * 8 + EXACT_OPS.index(part.site.op))
        self.info = (ends, codes)
        returned, operands, compares = self.record_views()
        self.recorded = wp.clone(self.operands)  # the replay kernel stores the operands it recomputes over them
        self.columns = []
        for c in range(shadow.components):
            counts = wp.empty(size, dtype=wp.int32, device=device)
            _run(kernels.count_ops, size, inputs=[shadow.words, shadow.ticket_column(c), counts], device=device)
            offsets = wp.empty(size, dtype=wp.int32, device=device)
            wp.utils.array_scan(counts, offsets, inclusive=False)
            perm = wp.full(n, -1, dtype=wp.int32, device=device)
            inputs = [status, c, self.order, self.addresses, counts, offsets, *self.info, perm]
            _run(kernels.place_ops, n, inputs=inputs, device=device)
            ends = wp.empty(n, dtype=wp.int32, device=device)
            _run(kernels.segment_ends, n, inputs=[perm, self.addresses, counts, offsets, ends], device=device)
            column = OrderColumn(counts, offsets, perm, ends)
            _run(kernels.check_places, size, inputs=[status, perm, counts, offsets], device=device)
            self.check(status, c, column)
            if self.kind == HOLD:
                stored = wp.empty(n, dtype=wp.int32, device=device)
                inputs = [c, perm, *self.info, returned, operands, compares, stored]
                _run(kernels.mark_stored, n, inputs=inputs, device=device)
                column.ranks = wp.empty(n, dtype=wp.int32, device=device)
                wp.utils.array_scan(stored, column.ranks, inclusive=True)
                column.by_rank = wp.empty(n, dtype=wp.int32, device=device)
                _run(kernels.rank_positions, n, inputs=[stored, column.ranks, column.by_rank], device=device)
            self.columns.append(column)

    def record_views(self) -> tuple[wp.array, wp.array, wp.array]:
        """The returned values, operands and compare operands as (n, components) scalars (cas's compares or, for
        the other ops, which never read them, the operands)."""
        returned, operands = records_view(self.returned), records_view(self.operands)
        return returned, operands, records_view(self.compares) if self.compares is not None else operands

    def check(self, status: wp.array, c: int, column: OrderColumn) -> None:
        """Check every operation in component ``c`` against the one after it (the last: against the value left)."""
        inputs = [
            status,
            c,
            column.perm,
            self.order,
            self.addresses,
            column.counts,
            column.offsets,
            *self.info,
            *self.record_views(),
            self.shadow.words,
            self.shadow.bits_column(c),
        ]
        _run(kernels.check_chain, self.count, inputs=inputs, device=self.device)

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
            _run(kernels.check_recomputed, (n, self.shadow.components), inputs=inputs, device=device)
        extras = None if self.kind == ADD else wp.zeros((n, self.shadow.components), dtype=wp.float64, device=device)
        for c, column in enumerate(self.columns or []):  # none: prepare() found no operation to order
            grad = grads[c] if grads else wp.empty((0, 0, 0, 0), dtype=adjoint.dtype, device=device)
            final = finals[c] if finals else wp.empty(0, dtype=wp.float64, device=device)
            place = [column.perm, self.addresses, column.counts, column.offsets]
            with_finals, with_grad = int(finals is not None), int(grads is not None)
            if self.kind == ADD:
                sums = written_first(n, wp.float64, device)
                _run(kernels.gather, n, inputs=[gate, column.perm, adjoint, c, sums], device=device)
                sums = suffix_sums(sums, column.ends)
                inputs = [gate, c, *place, *self.info, sums, final, with_finals, seeds_view, seeding, grad, with_grad]
                _run(kernels.route_sums, n, inputs=inputs, device=device)
            else:
                inputs = [
                    gate,
                    c,
                    *place,
                    column.ranks,
                    column.by_rank,
                    adjoint,
                    final,
                    with_finals,
                    extras,
                    grad,
                    with_grad,
                ]
                _run(kernels.route_holders, n, inputs=inputs, device=device)
        if extras is not None:
            _run(kernels.open_gate, extras.shape, inputs=[gate, extras, seeding], device=device)
            for c in range(self.shadow.components):
                _run(kernels.to_dtype, n, inputs=[extras, c, seeds_view], device=device)

    def finals(self) -> list[wp.array] | None:
        """The final values' adjoints (float64, per component); None: the target has no gradient."""
        if self.array.grad is None:
            return None
        taken = []
        for view in component_views(self.array.grad):
            final = written_first(self.array.size, wp.float64, self.device)
            _run(kernels.take_finals, self.array.size, inputs=[view, final], device=self.device)
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
        tallies = self._tallies() if rounds != 1 else {}  # several rounds: sums that may cancel
        # A chain of unbounded length runs through earlier operations: it has at most as many links as operations.
        for round_ in range(rounds or 1 + sum(target.count for target in self.targets)):
            seeds, collected = {}, {}
            # Gates are statuses of their own (the replay kernel may report into its status): 1 closed, 0 open.
            seeding = wp.ones(STATUS_TRIPS, dtype=wp.int32, device=device)  # opened by any seed
            for target in self.targets:
                seeds[id(target)] = wp.zeros_like(target.operands)  # ops that never ran get no seed
                target.route(gate, adjoints[id(target)], seeds[id(target)], seeding, first_round=round_ == 0)
                if tallies:
                    seeded = records_view(seeds[id(target)])
                    _run(kernels.tally_seeds, seeded.shape, inputs=[seeded, *tallies[id(target)]], device=device)
                collected[id(target)] = wp.zeros_like(target.returned, requires_grad=False)
            self._seeded_launch(seeding, seeds, collected, scratch, pairs)
            gate = wp.ones(STATUS_TRIPS, dtype=wp.int32, device=device)  # opened by any adjoint collected
            for target in self.targets:
                adjoint = adjoints[id(target)] = records_view(collected[id(target)])
                _run(kernels.open_gate, adjoint.shape, inputs=[status, adjoint, gate], device=device)
            if rounds is None and gate.numpy()[0] != 0:  # the host reads whether any gradient is left: it waits
                break
        _run(kernels.settle, 1, inputs=[status, gate, self.targets[0].sites[0].index], device=device)
        for target in self.targets if tallies else ():
            inputs = [status, *tallies[id(target)], cancellation_limit(target.array), target.sites[0].index]
            _run(kernels.check_cancellation, tallies[id(target)][0].shape, inputs=inputs, device=device)
        for grad, adjoint in pairs:
            if grad.is_contiguous and not isinstance(grad.dtype, wp._src.codegen.Struct):  # one flat pass
                _run(
                    kernels.accumulate_flat,
                    grad.size * wp._src.types.type_size(grad.dtype),
                    inputs=[status, scalars_of(adjoint), scalars_of(grad)],
                    device=device,
                )
                continue
            for source, into in zip(component_views(adjoint), component_views(grad), strict=True):
                _run(kernels.accumulate, grad.size, inputs=[status, source, into], device=device)
        for target in self.targets:
            target.returned.grad.zero_()  # read: a repeated backward must find it as the first did
        self._watch()

    def _tallies(self) -> dict[int, tuple[wp.array, wp.array]]:
        """Per target, by id: its operands' seeds summed over the rounds, and their sizes (``cancellation_limit``)."""
        tallies = {}
        for target in self.targets:
            shape = records_view(target.operands).shape
            totals, sizes = (wp.zeros(shape, dtype=wp.float64, device=self.device) for _ in range(2))
            tallies[id(target)] = (totals, sizes)
        return tallies

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

        outputs = [gate if value is self.status else _with_gradient(value, adjoint_of(value)) for value in self.outputs]
        warp_launch(
            self.replay,
            self.dim,
            inputs=[_with_gradient(value, adjoint_of(value)) for value in self.inputs],
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
        device_checks.watch(self.status, lambda values: explain_status(spec, capacities, values, in_backward=True))


def _with_gradient(value: Any, adjoint: Any) -> Any:
    """``value``, or where its adjoint in a seeded launch is not its gradient, a twin of it (the same memory) whose
    gradient is that adjoint: a view the kernel makes of an array (``row = grid[i]``) takes its adjoint from the
    array's own gradient, not from the launch's adjoint of the array, and would read the gradient's seeds again."""
    if not isinstance(value, wp.array) or adjoint is None or adjoint is value.grad or adjoint.strides != value.strides:
        return value
    twin: wp.array = wp.array(
        ptr=value.ptr, dtype=value.dtype, shape=value.shape, strides=value.strides, device=value.device, grad=adjoint
    )
    twin._ref = value  # type: ignore[assignment]  # keeps the memory alive, as Warp's own views do
    return twin


def _zeros_laid_out_as(value: wp.array) -> wp.array:
    """Zeros with ``value``'s shape and strides (so that a twin of ``value`` can take them as its gradient)."""
    if value.is_contiguous:
        return wp.zeros(value.shape, dtype=value.dtype, device=value.device)
    item = wp._src.types.type_size_in_bytes(value.dtype)
    span = sum((n - 1) * stride for n, stride in zip(value.shape, value.strides, strict=True)) // item + 1
    base = wp.zeros(span, dtype=value.dtype, device=value.device)
    laid_out: wp.array = wp.array(
        ptr=base.ptr, dtype=value.dtype, shape=value.shape, strides=value.strides, device=value.device
    )
    laid_out._ref = base  # type: ignore[assignment]
    return laid_out


def _zero_adjoint(value: Any, pairs: list[tuple[wp.array, wp.array]]) -> Any:
    """Like ``Tape.get_adjoint``, but a fresh zero array for every float gradient (remembered in ``pairs``)."""
    if isinstance(value, wp.array):
        if value.grad is None or not is_float_dtype(value.dtype):
            return None
        adjoint = _zeros_laid_out_as(value)
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
