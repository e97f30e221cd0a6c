"""One pipeline for both front ends: a kernel becomes its record and replay kernels, as source text.

``rewrite_kernel(frontend, options)`` runs the stages of ``STAGES`` in order. Each makes its output, a frozen
record, from the one of the stage before, adding its own part; the passes they call are pure functions of the
kernel's tree. The API (``warp_rewrite.api``, with ``warp_rewrite.live_frontend.LiveFrontend``) compiles the result,
the command line (``warp_rewrite.cli.emit``, with ``warp_rewrite.cli.static_frontend.StaticFrontend``) writes it into a
file: the same kernels either way.

Set ``WP_REWRITE_DEBUG=1`` in the environment (or ``warp_rewrite.pipeline.DEBUG = True``) to print what each
stage made.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.atomics import AtomicCall, WarpNames
from warp_rewrite.passes.builtins import int_only_atomics
from warp_rewrite.passes.constant_ranges import known_bounds
from warp_rewrite.passes.count_slice import fewer_copies
from warp_rewrite.passes.dataflow import exact_chain_links
from warp_rewrite.passes.dtypes import ArrayInfo
from warp_rewrite.passes.fence import Fence
from warp_rewrite.passes.layout import RecordParam, check_replay_twins, record_params, site_gradient_sources
from warp_rewrite.passes.local_components import copy_component_stores
from warp_rewrite.passes.loop_returns import lower_returns
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.own_writes import counter_slots, forward_own_writes, leading_thread_index, thread_index
from warp_rewrite.passes.plan import Planner
from warp_rewrite.passes.plan_types import Frontend as PlanFrontend
from warp_rewrite.passes.plan_types import KernelPlan, Site, Unit, array_at, is_int_path
from warp_rewrite.passes.read_back import Analysis
from warp_rewrite.passes.refusals import Refusal
from warp_rewrite.passes.replay_needs import records_read
from warp_rewrite.passes.syntax import walk
from warp_rewrite.passes.trip_parameters import compiled_room
from warp_rewrite.passes.two_phase import (
    COUNT,
    RECORD,
    REPLAY,
    KernelNames,
    ModuleNames,
    launch_arity,
    mentioning,
    phase_functions,
    phase_name,
)
from warp_rewrite.passes.while_conditions import hoist_conditions
from warp_rewrite.printing import unparse_wrapped
from warp_rewrite.runtime import (
    ArgumentBound,
    ExactRecords,
    KernelSpec,
    LoopSpec,
    Op,
    RecordKind,
    RecordSpec,
    RewriteError,
    SiteSpec,
)

DEBUG = bool(os.environ.get("WP_REWRITE_DEBUG"))


class Frontend(PlanFrontend[Any], Protocol):
    """What the pipeline needs to know about one kernel: what the passes ask (``passes.plan_types.Frontend``), plus
    how its module names Warp and the runtime, which module-level names are taken, and the kernel's options."""

    module: ModuleNames
    taken: set[str]  # names generated module-level definitions must avoid; the pipeline adds the ones it uses
    options: dict[str, Any]  # the kernel's options (@wp.kernel(enable_backward=...)), for the generated kernels
    placement: dict[str, Any]  # @wp.kernel(module=..., module_options=...) for the generated kernels, if any

    def closure_variable(self, name: str) -> bool:
        """Does the generated code see ``name`` as a closure variable of the function it is written into (a kernel
        factory), one that Python captures only where a body uses it: its annotations are strings (``from
        __future__ import annotations``), which Warp evaluates with the globals and the closure variables only?"""


@dataclass(frozen=True)
class RewriteOptions:
    """``wp_rewrite``'s options (the command line's ``--max-records`` and ``--detach-returns``)."""

    # records per execution of a loop of unknown length, compiled into the kernels; None: passed by each launch
    max_records: int | None = None
    detach_returns: bool = False  # record float returns as constants instead of giving them exact gradients


@dataclass
class GeneratedKernel:
    """What the pipeline makes of one kernel."""

    kernel: str  # the kernel's name
    source: str  # the generated definitions: each phase's clones and kernel
    definitions: list[str]  # their names, in order
    record_kernel: str
    replay_kernel: str
    count_kernel: str  # "" unless a dry run counts trips (see passes.two_phase.COUNT)
    spec: KernelSpec
    plan: KernelPlan
    max_records: int | None  # the room compiled in, where some loop takes it; None where none does
    source_unit: Callable[[Unit], Unit]  # the front end's own unit a unit of ``plan`` was desugared from


@dataclass(frozen=True)
class Given:
    """What the caller hands the pipeline."""

    frontend: Frontend
    options: RewriteOptions


class DesugaredFrontend:
    """The front end, handing the passes each function desugared by one pass (``desugaring``): a function that
    changes is a copy of the front end's own unit with the new tree, which the front end is asked about as its own
    unit (``source``). The kernel is desugared at once, each helper when the passes first reach it."""

    def __init__(self, frontend: Frontend, desugaring: Callable[[Frontend, Unit], ast.FunctionDef | None]):
        self.frontend, self.desugaring = frontend, desugaring
        self.module, self.taken = frontend.module, frontend.taken
        self.options, self.placement, self.max_unroll = frontend.options, frontend.placement, frontend.max_unroll
        self.backward = frontend.backward
        self._desugared: dict[int, Unit] = {}  # id of a front end's unit -> the unit the passes see
        self._sources: dict[int, Unit] = {}  # and back
        self.kernel = self._desugar(frontend.kernel)

    def source(self, unit: Unit) -> Unit:
        """The caller's unit that ``unit`` (one the passes see) was made from, through every desugaring."""
        own = self._sources.get(id(unit), unit)
        return self.frontend.source(own) if isinstance(self.frontend, DesugaredFrontend) else own

    def _own_source(self, unit: Unit) -> Unit:
        return self._sources.get(id(unit), unit)

    def changed(self, unit: Unit) -> bool:
        """Did this front end's own desugaring change ``unit`` (one the passes see)?"""
        return self._own_source(unit) is not unit

    def _desugar(self, unit: Unit) -> Unit:
        if id(unit) not in self._desugared:
            tree = self.desugaring(self.frontend, unit)
            # cast: the protocol Unit says nothing of dataclasses; each front end's unit is one.
            desugared = unit if tree is None else dataclasses.replace(cast(Any, unit), tree=tree)
            self._desugared[id(unit)], self._sources[id(desugared)] = desugared, unit
        return self._desugared[id(unit)]

    def warp_names(self, unit: Unit) -> WarpNames:
        return self.frontend.warp_names(self._own_source(unit))

    def resolve_helper(self, unit: Unit, call: ast.Call) -> Unit | None:
        helper = self.frontend.resolve_helper(self._own_source(unit), call)
        return None if helper is None else self._desugar(helper)

    def parameter_types(self, unit: Unit) -> dict[str, Any]:
        return self.frontend.parameter_types(self._own_source(unit))

    def element_struct(self, unit: Unit, name: str) -> Any:
        return self.frontend.element_struct(self._own_source(unit), name)

    def is_generic(self, unit: Unit) -> bool:
        return self.frontend.is_generic(self._own_source(unit))

    def has_custom_gradient(self, unit: Unit) -> bool:
        return self.frontend.has_custom_gradient(self._own_source(unit))

    def local_types(self, unit: Unit) -> dict[str, Any]:
        return self.frontend.local_types(self._own_source(unit))

    def return_type(self, unit: Unit) -> Any:
        return self.frontend.return_type(self._own_source(unit))

    def named_type(self, unit: Unit, expr: ast.expr) -> Any:
        return self.frontend.named_type(self._own_source(unit), expr)

    def is_builtin(self, unit: Unit, call: ast.Call) -> bool:
        return self.frontend.is_builtin(self._own_source(unit), call)

    def array(self, path: str) -> ArrayInfo | None:
        return self.frontend.array(path)

    def closure_variable(self, name: str) -> bool:
        return self.frontend.closure_variable(name)

    def int_constant(self, unit: Unit, name: str) -> int | None:
        return self.frontend.int_constant(self._own_source(unit), name)


@dataclass(frozen=True)
class Desugared:
    """The kernel as the passes see it: desugared by every desugaring stage so far."""

    frontend: DesugaredFrontend
    options: RewriteOptions


@dataclass(frozen=True)
class Fenced(Given):
    """The kernel past the fence: ``needed`` where it needs a rewrite (``needs_rewrite``), ``consumes`` where it uses
    an atomic's return (``consumes_returns``)."""

    needed: bool
    consumes: bool


class LeftToWarp(RewriteError):
    """A kernel that uses no atomic's return, with a hazard (a loop Warp's backward replays wrong, a read of an array
    its launch updates) in a form the rewrite cannot make right: it runs as plain Warp, with Warp's own gradients, and
    the front ends warn instead of refusing, so that a kernel that launches in plain Warp still launches. (Where a
    kernel uses an atomic's return, the same form is refused: the promise covers the whole kernel.) The message is a
    refusal's: where, what, and what to do (``runtime.errors.left_to_warp`` says it as the front ends warn it)."""


def _known_bounds(frontend: Frontend, unit: Unit) -> ast.FunctionDef | None:
    def value_of(name: str) -> int | None:
        return frontend.int_constant(unit, name)

    return known_bounds(unit.tree, value_of, min(frontend.warp_names(unit).modules), frontend.module.runtime.alias)


def with_known_bounds(frontend: Frontend) -> DesugaredFrontend:
    """The front end with each range bound it reads as an int constant written out (``passes.constant_ranges``), so
    that every pass, the fence's first, takes the loop as Warp does."""
    return DesugaredFrontend(frontend, _known_bounds)


def needs_rewrite(frontend: Frontend) -> bool:
    """Does the kernel, or a helper it reaches, use an atomic's return (a tile atomic's too), or hold a loop Warp's
    backward replays wrong where Warp builds one? The one answer both front ends go by: ``rewrite_kernel`` makes
    nothing of a kernel that does not, and the command line rewrites or refuses exactly the kernels that do
    (``passes.fence.Fence.needs_rewrite``)."""
    return Fence(with_known_bounds(frontend)).needs_rewrite


def consumes_returns(frontend: Frontend) -> bool:
    """Does the kernel, or a helper it reaches, use an atomic's return? Where it does not, what the rewrite cannot
    handle is left to Warp (``LeftToWarp``), not refused."""
    return Fence(frontend).consumes_returns


def constant_ranges(given: Given) -> Given:
    """Range bounds the front end reads as int constants written out, with a check of the value when Warp builds the
    kernel (``passes.constant_ranges``)."""
    return Given(with_known_bounds(given.frontend), given.options)


def fence(given: Given) -> Fenced:
    """Every form of the kernel and of the helpers it reaches is one the fence's table accepts
    (``passes.fence``), where the kernel consumes an atomic's return: any other form is refused before any
    transformation. A kernel that does not needs no rewrite: the pipeline stops here."""
    checked = Fence(given.frontend)
    checked.check()
    return Fenced(given.frontend, given.options, checked.needs_rewrite, checked.consumes_returns)


def _hoisted_conditions(frontend: Frontend, unit: Unit) -> ast.FunctionDef | None:
    names = frontend.warp_names(unit)

    def calls_out(call: ast.Call) -> bool:  # an atomic, or a helper (which may hold atomics)
        return names.atomic_op(call) is not None or frontend.resolve_helper(unit, call) is not None

    return hoist_conditions(unit.tree, calls_out)


def while_conditions(given: Fenced) -> Desugared:
    """While conditions that call an atomic or a helper moved into their loops (``passes.while_conditions``)."""
    return Desugared(DesugaredFrontend(given.frontend, _hoisted_conditions), given.options)


def _lowered_returns(frontend: Frontend, unit: Unit) -> ast.FunctionDef | None:
    return lower_returns(unit.tree, min(frontend.warp_names(unit).modules), frontend.max_unroll)


def loop_returns(desugared: Desugared) -> Desugared:
    """Returns from loops Warp does not unroll made breaks (``passes.loop_returns``)."""
    return Desugared(DesugaredFrontend(desugared.frontend, _lowered_returns), desugared.options)


def _copied_components(frontend: Frontend, unit: Unit) -> ast.FunctionDef | None:
    facts = Analysis(unit, frontend)
    types = facts.value_types

    def has_named_components(name: str) -> bool:
        return dtypes.is_vector_or_quaternion(types.get(name))

    warp = min(frontend.warp_names(unit).modules)
    return copy_component_stores(unit.tree, facts.holds_a_value, warp, has_named_components)


def local_components(desugared: Desugared) -> Desugared:
    """Stores into a component of a local vector or matrix made ``wp.assign_copy`` (``passes.local_components``),
    whose adjoint Warp gets right."""
    return Desugared(DesugaredFrontend(desugared.frontend, _copied_components), desugared.options)


def _tid_call(names: WarpNames) -> Callable[[ast.expr], bool]:
    """Whether an expression is ``wp.tid()`` (any alias of warp)."""

    def is_tid(value: ast.expr) -> bool:
        func = value.func if isinstance(value, ast.Call) and not value.args else None
        return (
            isinstance(func, ast.Attribute) and func.attr == "tid" and getattr(func.value, "id", None) in names.modules
        )

    return is_tid


def _forwarded_own_writes(frontend: Frontend, unit: Unit) -> ast.FunctionDef | None:
    if unit is not frontend.kernel:
        return None  # helpers: their arrays are the caller's, other threads' elements included
    names = frontend.warp_names(unit)
    warp = min(names.modules)
    is_tid = _tid_call(names)
    candidates, int_arrays = {}, set()
    for name, annotation in frontend.parameter_types(unit).items():
        array = dtypes.array_info(annotation)
        if array is not None and array.ndim == 1 and array.dtype is not None and not dtypes.is_generic(array.dtype):
            candidates[name] = dtypes.source(array.dtype, warp)
        if array is not None and array.dtype is not None and dtypes.is_int(array.dtype):
            int_arrays.add(name)
    slots = counter_slots(unit.tree, names, frozenset(int_arrays))
    return forward_own_writes(unit.tree, thread_index(unit.tree, is_tid), candidates, slots)


def own_writes(desugared: Desugared) -> Desugared:
    """Reads of the element a thread stored itself made reads of the stored value (``passes.own_writes``)."""
    return Desugared(DesugaredFrontend(desugared.frontend, _forwarded_own_writes), desugared.options)


@dataclass(frozen=True)
class Surveyed(Desugared):
    """The first planning: the functions involved, and the targets whose float returns get exact gradients."""

    first: KernelPlan
    namer: Namer  # the names the first planning issued
    analyses: dict[int, Analysis]  # what it read off each function, for the second planning to reuse
    exact: frozenset[str]

    @property
    def nothing_to_record(self) -> bool:
        """No atomic's return is consumed (a probe loop's consumed atomics may leave only a loop to record), and no
        read of what the thread stored itself was forwarded (``own_writes``: the forwarded kernel, with no record,
        is then the rewrite: ``y[tid] = wp.sin(x)`` then ``y[tid] * y[tid]``, which plain Warp replays wrong)."""
        frontend = self.frontend
        forwarded = isinstance(frontend, DesugaredFrontend) and frontend.changed(frontend.kernel)
        return not self.first.sites and not self.first.loops and not forwarded


def known_ints(frontend: PlanFrontend, plan_: KernelPlan, paths: Iterable[str]) -> frozenset[str]:
    """Of ``paths``, those known before launch to hold ints: by their Warp type, or as the target of a bitwise atomic
    whose return is used (an array of any dtype, ``dtype=Any``, that Warp's ``atomic_and`` updates holds ints)."""
    bitwise = {site.target for site in plan_.sites if site.op in int_only_atomics()}
    return frozenset(path for path in paths if path in bitwise or is_int_path(frontend, path, plan_.narrowed))


def survey(desugared: Desugared) -> Surveyed:
    """A first planning (``passes.plan``), to find the functions involved and the targets whose float returns
    get exact gradients: every target of an atomic but int ones, unless ``detach_returns``."""
    frontend = desugared.frontend
    analyses: dict[int, Analysis] = {}
    namer = Namer.for_tree(frontend.kernel.tree, frontend.taken)
    first = Planner(frontend, namer, analyses=analyses).plan()
    atomics = frozenset(s.target for s in first.sites if s.op != "read")  # reads get no exact gradients
    exact = frozenset() if desugared.options.detach_returns else atomics - known_ints(frontend, first, atomics)
    return Surveyed(frontend, desugared.options, first, namer, analyses, exact)


@dataclass(frozen=True)
class Planned(Desugared):
    plan: KernelPlan
    names: KernelNames
    max_records: int | None  # the room compiled in, where some loop takes it


def plan(surveyed: Surveyed) -> Planned:
    """Which atomics get records, in which loops and helper clones, under which names (``passes.plan``): the
    survey's plan, or, where there are exact targets or its names clash with a helper's, a second planning with
    those targets and with names fresh in every function involved."""
    frontend, result, namer = surveyed.frontend, surveyed.first, surveyed.namer
    kernel = frontend.kernel
    helpers: list[ast.stmt] = [f.unit.tree for f in result.root.walk() if f.unit is not kernel]
    if surveyed.exact or (helpers and namer.issued & Namer.for_tree(ast.Module(helpers, [])).taken):
        namer = Namer.for_tree(ast.Module([f.unit.tree for f in result.root.walk()], []), frontend.taken)
        result = Planner(frontend, namer, surveyed.exact, surveyed.analyses).plan()
    # The kernel's own generated names are parameters of every clone too (a helper's local 'status', Kamino's)
    namer.taken |= Namer.for_tree(ast.Module([f.unit.tree for f in result.root.walk()], [])).taken
    arity = launch_arity(kernel.tree)
    own = leading_thread_index(kernel.tree, _tid_call(frontend.warp_names(kernel))) if arity == 1 else None
    names = KernelNames(
        thread=own or namer.fresh("thread"),
        coordinate=namer.fresh("coordinate"),
        launch_shape=namer.fresh("launch_shape"),
        coords=tuple(namer.fresh(f"coord{i}") for i in range(arity)),
        trip_capacity=namer.fresh_base("trip_capacity", tuple(str(loop.id) for loop in result.loops)),
        loop_number=namer.fresh_base("loop", tuple(str(loop.id) for loop in result.loops)),
        status=namer.fresh("status"),
        own_thread=own is not None,
    )
    room_needed = any(loop.needs_room for loop in result.loops)
    max_records = surveyed.options.max_records if room_needed else None  # nothing to compile it into
    return Planned(frontend, surveyed.options, result, names, max_records)


@dataclass(frozen=True)
class Laid(Planned):
    records: dict[str, RecordParam]
    int_paths: frozenset[str]  # the targets known before launch to hold ints (no adjoint)


def layout(planned: Planned) -> Laid:
    """The record parameters and their dtypes (``passes.layout``), and the refusals that need them."""
    frontend, plan_ = planned.frontend, planned.plan
    records = record_params(plan_, lambda path: array_at(frontend, plan_.narrowed, path))
    paths = {s.target for s in plan_.sites} | {p for f in plan_.root.walk() for p in f.unconsumed.values() if p}
    int_paths = known_ints(frontend, plan_, paths)
    check_replay_twins(plan_, records, int_paths, frontend.is_generic)
    return _extended(planned, Laid, records=records, int_paths=int_paths)


def unread_reads(laid: Laid) -> Laid:
    """Reads of memory the launch writes that the replay does not need are not recorded: the replay keeps what
    carries gradients (``passes.two_phase``), and a read that only decides a write the replay leaves out (an int
    atomic's index, Newton's hash table's slot) carries none. The record kernel then stores less, and every phase
    takes fewer records; the replay is made again without them (the same, but for the statements they were in)."""
    reads = [site for site in laid.plan.sites if site.op == "read" and not site.marks and not site.shadow]
    if not reads:  # (no replay to make first)
        return laid
    needed = records_read(_phase(laid, REPLAY, backward=True))
    unread = frozenset(site for site in reads if site.records not in needed)
    if not unread:
        return laid
    plan_ = laid.plan.without(unread)
    records = record_params(plan_, lambda path: array_at(laid.frontend, plan_.narrowed, path))
    return dataclasses.replace(laid, plan=plan_, records=records)


@dataclass(frozen=True)
class Recorded(Laid):
    functions: tuple[ast.FunctionDef, ...]  # generated so far, in the order printed
    record_kernel: str


def _phase(laid: Laid, phase: str, backward: bool) -> list[ast.FunctionDef]:
    frontend = laid.frontend
    options = {**frontend.placement, **frontend.options, **({} if backward else {"enable_backward": False})}
    return phase_functions(
        laid.plan, phase, frontend.module, laid.names, laid.records, laid.int_paths, options, laid.max_records
    )


def record_phase(laid: Laid) -> Recorded:
    """The record kernel and its cloned helpers (``passes.two_phase``)."""
    functions = _phase(laid, RECORD, backward=False)
    return _extended(laid, Recorded, functions=tuple(functions), record_kernel=functions[-1].name)


@dataclass(frozen=True)
class Counted(Recorded):
    count_kernel: str  # "" unless a dry run counts trips


def count_phase(recorded: Recorded) -> Counted:
    """Where launches count trips in a dry run (a loop of unknown length, without ``max_records``, whose range the
    launch's arguments do not give: ``passes.launch_trips``): the record
    kernel cut down to what decides trip counts, each function taking only what it reads (``passes.count_slice``),
    without its writes into arrays it does not read, so that the dry run needs no copies of those
    (``passes.two_phase.COUNT``; the plan's ``copied``, ``count_slice.fewer_copies``)."""
    counted = any(loop.needs_room and loop.argument_range is None for loop in recorded.plan.loops)
    counted = counted and recorded.max_records is None
    if not counted:
        return _extended(recorded, Counted, count_kernel="")
    plan_, functions = fewer_copies(
        recorded.plan,
        lambda tried: _phase(dataclasses.replace(recorded, plan=tried), COUNT, backward=False),
        functools.partial(phase_name, phase=COUNT),
    )
    return _extended(
        dataclasses.replace(recorded, plan=plan_),
        Counted,
        functions=recorded.functions + tuple(functions),
        count_kernel=functions[-1].name,
    )


@dataclass(frozen=True)
class Replayed(Counted):
    replay_kernel: str


def replay_phase(counted: Counted) -> Replayed:
    """The replay kernel and its cloned helpers, cut down to what carries gradients (``passes.slicing``), with
    twins for those that write memory, registered as what Warp's backward runs in their place (``passes.twins``)."""
    functions = _phase(counted, REPLAY, backward=True)
    return _extended(
        counted, Replayed, functions=counted.functions + tuple(functions), replay_kernel=functions[-1].name
    )


def keep_closures(replayed: Replayed) -> Replayed:
    """Every closure variable a generated function's annotations name stays one (``Frontend.closure_variable``):
    where leaving statements out took the body's last use of it (a factory's ``dtype``), the body names it again
    (``passes.two_phase.mentioning``)."""
    closure_variable = replayed.frontend.closure_variable
    functions = tuple(mentioning(function, closure_variable) for function in replayed.functions)
    return dataclasses.replace(replayed, functions=functions)


@dataclass(frozen=True)
class Printed(Replayed):
    source: str  # the generated definitions: each phase's clones and kernel


def print_source(replayed: Replayed) -> Printed:
    """The generated source, with the user's own text for every statement the phases left as it was."""
    originals = {}
    for function in replayed.plan.root.walk():
        unit = replayed.frontend.source(function.unit)  # its statements, not those the desugaring stages made
        originals.update({node: unit.text for node in walk(unit.tree) if isinstance(node, ast.stmt)})
    source = "\n\n\n".join(unparse_wrapped(f, originals) for f in replayed.functions) + "\n"
    return _extended(replayed, Printed, source=source)


@dataclass(frozen=True)
class Specified(Printed):
    spec: KernelSpec


def launch_spec(printed: Printed) -> Specified:
    """What a launch of the two kernels needs to know about them (``warp_rewrite.runtime.KernelSpec``)."""
    frontend, plan_ = printed.frontend, printed.plan
    kernel = frontend.kernel
    params = [a.arg for a in kernel.tree.args.args]
    sources = site_gradient_sources(
        kernel, plan_, params, frontend.warp_names(kernel), frontend.resolve_helper, printed.int_paths
    )

    def site_spec(s: Site) -> SiteSpec:
        gradient_sources = sources.get(id(s), frozenset())
        exact = ExactRecords(s.records, s.values, s.order, s.addresses, s.compares or None) if s.exact else None
        sources_ = None if gradient_sources is None else tuple(sorted(gradient_sources))
        return SiteSpec(s.target, Op(s.op), s.location, sources_, exact, pool=bool(s.marks))

    # The sites the device names by number first, in their order; then the others, each once (a helper's site,
    # reached by several calls, is one site to the launch)
    reported = [site_spec(s) for s in plan_.sites if s.reported]
    sites = [*reported, *dict.fromkeys(site_spec(s) for s in plan_.sites if not s.reported)]
    records = []
    for name in plan_.root.record_params():
        r = printed.records[name]
        kind = RecordKind(r.kind)
        fixed = r.dtype if kind in (RecordKind.TRIPS, RecordKind.CARRIED) else None  # the others' follow the target
        records.append(RecordSpec(name, kind, r.target, fixed, r.loops, r.requires_grad))
    loops = [
        LoopSpec(
            loop.id,
            loop.location,
            loop.static_trips,
            compiled_room(loop, printed.max_records),
            loop.needs_room,
            tuple(
                bound if isinstance(bound, int) else ArgumentBound(bound.parameter, bound.axis)
                for bound in loop.argument_range or ()
            ),
        )
        for loop in plan_.loops
    ]
    spec = KernelSpec(
        kernel.name,
        location=kernel.location(kernel.tree),
        written=tuple(sorted(plan_.written)),
        copied=tuple(sorted(plan_.copied)),
        sites=tuple(sites),
        records=tuple(records),
        loops=tuple(loops),
        launch_arity=len(printed.names.coords),
        exact_rounds=exact_rounds(printed, params),
    )
    return _extended(printed, Specified, spec=spec)


def exact_rounds(planned: Planned, params: list[str]) -> int | None:
    """The adjoint launches of the replay kernel the exact backward makes: one reaching the inputs, plus one per
    link of the longest chain of exact returns feeding exact operands (``passes.dataflow.exact_chain_links``).
    None: found by the backward, on the host (a chain that can feed back into its own target, or runs through a
    helper); 0: no exact returns."""
    frontend, exact = planned.frontend, [s for s in planned.plan.sites if s.exact]
    if not exact:
        return 0
    kernel = frontend.kernel
    calls = []
    for site in exact:
        assert isinstance(site.node, ast.Call)  # only atomics have exact sites (read sites are subscripts)
        calls.append(AtomicCall(site.node, site.op, site.consumed))
    through_helpers = any(s.in_helper for s in exact) or any(
        frontend.resolve_helper(kernel, node) is not None
        for call in calls
        for arg in call.value_args
        for node in walk(arg)
        if isinstance(node, ast.Call)
    )
    if through_helpers:
        return None
    links = exact_chain_links(kernel.tree, params, frontend.warp_names(kernel), calls, [s.target for s in exact])
    return None if links is None else links + 1


_State = TypeVar("_State")


def _extended(state: Any, kind: type[_State], **fields: Any) -> _State:
    """``state`` as the next stage's output ``kind``: its fields, and the new ones."""
    return kind(**{**{f.name: getattr(state, f.name) for f in dataclasses.fields(state)}, **fields})


_Before = TypeVar("_Before")
_After = TypeVar("_After")


@dataclass(frozen=True)
class Stage(Generic[_Before, _After]):
    """One step of the pipeline: ``run`` makes its output from the output of the stage before (the first stage's
    from ``Given``); ``show`` is what ``DEBUG`` prints of it; where ``finished`` holds of its output, the kernel
    needs no rewrite and the pipeline stops there."""

    name: str
    run: Callable[[_Before], _After]
    show: Callable[[_After], list[str]]
    finished: Callable[[_After], bool] = lambda _: False

    @property
    def summary(self) -> str:
        """The first paragraph of ``run``'s docstring, on one line (the design notes' stage list)."""
        return " ".join((self.run.__doc__ or "").split("\n\n")[0].split())


def _kernel_tree(state: Desugared) -> list[str]:
    return [ast.unparse(state.frontend.kernel.tree)]


def _plan_lines(plan_: KernelPlan) -> list[str]:
    lines = [f"{s.location}: wp.atomic_{s.op} on '{s.target}' -> {s.records}" for s in plan_.sites]
    return lines + [
        f"{loop.location}: loop {loop.id}" + (" (skipped by the replay)" if loop.opaque else "") for loop in plan_.loops
    ]


def _record_lines(state: Laid) -> list[str]:
    return [f"{r.name}: {r.kind} of {getattr(r.dtype, '__name__', 'generic')}" for r in state.records.values()]


def _functions(state: Recorded) -> list[str]:
    return [ast.unparse(f) for f in state.functions]


STAGES: tuple[Stage[Any, Any], ...] = (
    Stage("constant_ranges", constant_ranges, _kernel_tree),
    Stage("fence", fence, lambda state: [ast.unparse(state.frontend.kernel.tree)], lambda state: not state.needed),
    Stage("while_conditions", while_conditions, _kernel_tree),
    Stage("loop_returns", loop_returns, _kernel_tree),
    Stage("local_components", local_components, _kernel_tree),
    Stage("own_writes", own_writes, _kernel_tree),
    Stage("survey", survey, lambda state: _plan_lines(state.first), lambda state: state.nothing_to_record),
    Stage("plan", plan, lambda state: _plan_lines(state.plan)),
    Stage("layout", layout, _record_lines),
    Stage("unread_reads", unread_reads, _record_lines),
    Stage("record", record_phase, _functions),
    Stage("count", count_phase, _functions),
    Stage("replay", replay_phase, _functions),
    Stage("closures", keep_closures, _functions),
    Stage("print", print_source, lambda state: [state.source]),
    Stage("spec", launch_spec, lambda state: [repr(state.spec)]),
)


def rewrite_kernel(frontend: Frontend, options: RewriteOptions = RewriteOptions()) -> GeneratedKernel | None:
    """The record and replay kernels of ``frontend.kernel``, or None when it needs no rewrite (``needs_rewrite``).

    Raises ``RewriteError`` for what the rewrite cannot handle correctly: ``LeftToWarp`` where the kernel uses no
    atomic's return.
    """
    state: Any = Given(frontend, options)
    consumes: bool | None = None  # known once past the fence
    for stage in STAGES:
        try:
            state = stage.run(state)
        except Refusal as refusal:
            problem = refusal.problem
            source = state.frontend.source if isinstance(state.frontend, DesugaredFrontend) else lambda unit: unit
            if source(refusal.unit) is not frontend.kernel:
                problem += f" (in helper '{refusal.unit.name}')"
            verdict = RewriteError if (consumes_returns(frontend) if consumes is None else consumes) else LeftToWarp
            raise verdict(frontend.kernel.name, refusal.location, problem, refusal.advice) from None
        if DEBUG:
            print(
                f"--- wp-rewrite: kernel '{frontend.kernel.name}' after stage '{stage.name}' ---",
                *stage.show(state),
                sep="\n",
                file=sys.stderr,
            )
        if isinstance(state, Fenced):
            consumes = state.consumes
        if stage.finished(state):
            return None
    done: Specified = state
    frontend.taken.update(f.name for f in done.functions)
    return GeneratedKernel(
        frontend.kernel.name,
        done.source,
        [f.name for f in done.functions],
        done.record_kernel,
        done.replay_kernel,
        done.count_kernel,
        dataclasses.replace(done.spec, uses_no_returns=not consumes),
        done.plan,
        done.max_records,
        done.frontend.source,
    )


def stage_list() -> str:
    """The design notes' list of the stages (docs/design.md, between ``<!-- stages -->`` and ``<!-- /stages -->``)."""
    return "".join(f"{number}. `{stage.name}`: {stage.summary}\n" for number, stage in enumerate(STAGES, 1))
