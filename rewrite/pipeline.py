"""One pipeline for both front ends: a kernel becomes its record and replay kernels, as source text.

``rewrite_kernel(frontend, options)`` runs the stages of ``STAGES`` in order. Each is a function of the
``Rewrite`` the stages before it filled in, and adds its own part; the passes they call are pure functions of
the kernel's tree. The API (``warp_rewrite.api``, with ``warp_rewrite.live.LiveFrontend``) compiles the result,
the command line (``warp_rewrite.emit``, with ``warp_rewrite.static_types.StaticFrontend``) writes it into a
file: the same kernels either way.

Set ``WP_REWRITE_DEBUG=1`` in the environment (or ``warp_rewrite.pipeline.DEBUG = True``) to print what each
stage made.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from warp_rewrite.passes.atomics import AtomicCall, WarpNames
from warp_rewrite.passes.dataflow import exact_chain_links
from warp_rewrite.passes.dtypes import ArrayInfo
from warp_rewrite.passes.layout import RecordParam, check_replay_twins, record_params, site_gradient_sources
from warp_rewrite.passes.loop_returns import lower_returns
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.plan import Frontend as PlanFrontend
from warp_rewrite.passes.plan import KernelPlan, Planner, Refusal, Unit, array_at, is_int_path
from warp_rewrite.passes.syntax import walk
from warp_rewrite.passes.two_phase import (
    COUNT,
    RECORD,
    REPLAY,
    KernelNames,
    ModuleNames,
    compiled_room,
    launch_arity,
    mentioning,
    phase_functions,
)
from warp_rewrite.passes.while_conditions import hoist_conditions
from warp_rewrite.printing import unparse_wrapped
from warp_rewrite.runtime import ExactRecords, KernelSpec, LoopSpec, RecordSpec, RewriteError, SiteSpec

DEBUG = bool(os.environ.get("WP_REWRITE_DEBUG"))


class Frontend(PlanFrontend, Protocol):
    """What the pipeline needs to know about one kernel: what the passes ask (``passes.plan.Frontend``), plus
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


@dataclass
class Rewrite:
    """The state the stages pass on: each fills in its part."""

    frontend: Frontend  # the caller's, until the stage ``desugar`` replaces it with a DesugaredFrontend
    options: RewriteOptions
    plan: KernelPlan | None = None
    names: KernelNames | None = None
    max_records: int | None = None
    records: dict[str, RecordParam] = field(default_factory=dict)
    int_paths: frozenset[str] = frozenset()
    functions: list[ast.FunctionDef] = field(default_factory=list)  # generated so far, in the order printed
    record_kernel: str = ""
    replay_kernel: str = ""
    count_kernel: str = ""
    source: str = ""
    spec: KernelSpec | None = None


class DesugaredFrontend:
    """The front end, handing the passes each function desugared: while conditions that call out moved into their
    loops (``passes.while_conditions``), then returns from loops Warp does not unroll made breaks
    (``passes.loop_returns``). A function that changes is a copy of the front end's own unit with the new tree,
    which the front end is asked about as its own unit (``source``)."""

    def __init__(self, frontend: Frontend):
        self.frontend = frontend
        self.module, self.taken = frontend.module, frontend.taken
        self.options, self.placement, self.max_unroll = frontend.options, frontend.placement, frontend.max_unroll
        self._desugared: dict[int, Unit] = {}  # id of a front end's unit -> the unit the passes see
        self._sources: dict[int, Unit] = {}  # and back
        self.kernel = self._desugar(frontend.kernel)

    def source(self, unit: Unit) -> Unit:
        """The front end's unit that ``unit`` (one the passes see) was made from."""
        return self._sources.get(id(unit), unit)

    def _desugar(self, unit: Unit) -> Unit:
        if id(unit) not in self._desugared:
            names = self.frontend.warp_names(unit)

            def calls_out(call: ast.Call) -> bool:  # an atomic, or a helper (which may hold atomics)
                return names.atomic_op(call) is not None or self.frontend.resolve_helper(unit, call) is not None

            hoisted = hoist_conditions(unit.tree, calls_out)
            tree = lower_returns(hoisted or unit.tree, min(names.modules), self.max_unroll) or hoisted
            desugared = unit if tree is None else dataclasses.replace(unit, tree=tree)
            self._desugared[id(unit)], self._sources[id(desugared)] = desugared, unit
        return self._desugared[id(unit)]

    def warp_names(self, unit: Unit) -> WarpNames:
        return self.frontend.warp_names(self.source(unit))

    def resolve_helper(self, unit: Unit, call: ast.Call) -> Unit | None:
        helper = self.frontend.resolve_helper(self.source(unit), call)
        return None if helper is None else self._desugar(helper)

    def parameter_types(self, unit: Unit) -> dict[str, Any]:
        return self.frontend.parameter_types(self.source(unit))

    def local_types(self, unit: Unit) -> dict[str, Any]:
        return self.frontend.local_types(self.source(unit))

    def return_type(self, unit: Unit) -> Any:
        return self.frontend.return_type(self.source(unit))

    def is_builtin(self, unit: Unit, call: ast.Call) -> bool:
        return self.frontend.is_builtin(self.source(unit), call)

    def array(self, path: str) -> ArrayInfo | None:
        return self.frontend.array(path)

    def closure_variable(self, name: str) -> bool:
        return self.frontend.closure_variable(name)


def desugar(rewrite: Rewrite) -> None:
    """The kernel and every helper the passes look into, desugared (``DesugaredFrontend``)."""
    rewrite.frontend = DesugaredFrontend(rewrite.frontend)


def plan(rewrite: Rewrite) -> None:
    """Which atomics get records, in which loops and helper clones, under which names (``passes.plan``).

    The first planning finds the functions involved and the targets whose float returns get exact gradients (all
    but int targets, unless ``detach_returns``). A second one, with those targets and with names fresh in every
    function involved, is needed only when there are exact targets or the first one's names clash with a helper's.
    """
    frontend = rewrite.frontend
    kernel = frontend.kernel
    analyses = {}
    namer = Namer.for_tree(kernel.tree, frontend.taken)
    planner = Planner(frontend, namer, analyses=analyses)
    result = planner.plan()
    atomics = {s.target for s in result.sites if s.op != "read"}  # reads get no exact gradients
    exact = frozenset() if rewrite.options.detach_returns else atomics
    exact = frozenset(path for path in exact if not is_int_path(frontend, path, result.narrowed))
    helpers = [f.unit.tree for f in result.root.walk() if f.unit is not kernel]
    if exact or (helpers and namer.issued & Namer.for_tree(ast.Module(helpers, [])).taken):
        namer = Namer.for_tree(ast.Module([f.unit.tree for f in result.root.walk()], []), frontend.taken)
        result = Planner(frontend, namer, exact, analyses).plan()
    rewrite.plan = result
    rewrite.names = KernelNames(
        thread=namer.fresh("thread"),
        coordinate=namer.fresh("coordinate"),
        launch_shape=namer.fresh("launch_shape"),
        coords=tuple(namer.fresh(f"coord{i}") for i in range(launch_arity(kernel.tree))),
        trip_capacity=namer.fresh_base("trip_capacity", tuple(str(loop.id) for loop in result.loops)),
        status=namer.fresh("status"),
    )
    room_needed = any(loop.needs_room for loop in result.loops)
    rewrite.max_records = rewrite.options.max_records if room_needed else None  # nothing to compile it into


def layout(rewrite: Rewrite) -> None:
    """The record parameters and their dtypes (``passes.layout``), and the refusals that need them."""
    frontend, plan_ = rewrite.frontend, rewrite.plan
    rewrite.records = record_params(plan_, lambda path: array_at(frontend, plan_.narrowed, path))
    paths = {s.target for s in plan_.sites} | {p for f in plan_.root.walk() for p in f.unconsumed.values() if p}
    rewrite.int_paths = frozenset(path for path in paths if is_int_path(frontend, path, plan_.narrowed))
    check_replay_twins(plan_, rewrite.records, rewrite.int_paths, frontend.parameter_types)


def record_phase(rewrite: Rewrite) -> None:
    """The record kernel and its cloned helpers (``passes.two_phase``)."""
    frontend = rewrite.frontend
    options = {**frontend.placement, **frontend.options, "enable_backward": False}
    functions = phase_functions(rewrite.plan, RECORD, frontend.module, rewrite.names, rewrite.records,
                                rewrite.int_paths, options, rewrite.max_records)  # fmt: skip
    rewrite.functions = functions
    rewrite.record_kernel = functions[-1].name


def count_phase(rewrite: Rewrite) -> None:
    """Where launches count trips in a dry run (a loop of unknown length without ``max_records``): the record
    kernel without its writes into arrays nothing in the launch reads back, so that the dry run needs no copies
    of those (``passes.two_phase.COUNT``)."""
    counted = any(loop.needs_room for loop in rewrite.plan.loops) and rewrite.max_records is None
    if not counted:
        return
    frontend = rewrite.frontend
    options = {**frontend.placement, **frontend.options, "enable_backward": False}
    functions = phase_functions(rewrite.plan, COUNT, frontend.module, rewrite.names, rewrite.records,
                                rewrite.int_paths, options, rewrite.max_records)  # fmt: skip
    rewrite.functions += functions
    rewrite.count_kernel = functions[-1].name


def replay_phase(rewrite: Rewrite) -> None:
    """The replay kernel, its cloned helpers and their ``@wp.func_replay`` twins (``passes.two_phase``)."""
    frontend = rewrite.frontend
    functions = phase_functions(rewrite.plan, REPLAY, frontend.module, rewrite.names, rewrite.records,
                                rewrite.int_paths, {**frontend.placement, **frontend.options},
                                rewrite.max_records)  # fmt: skip
    rewrite.functions += functions
    rewrite.replay_kernel = functions[-1].name


def keep_closures(rewrite: Rewrite) -> None:
    """Every closure variable a generated function's annotations name stays one (``Frontend.closure_variable``):
    where leaving statements out took the body's last use of it (a factory's ``dtype``), the body names it again
    (``passes.two_phase.mentioning``)."""
    closure_variable = rewrite.frontend.closure_variable
    rewrite.functions = [mentioning(function, closure_variable) for function in rewrite.functions]


def print_source(rewrite: Rewrite) -> None:
    """The generated source, with the user's own text for every statement the phases left as it was."""
    originals = {}
    for function in rewrite.plan.root.walk():
        unit = rewrite.frontend.source(function.unit)  # its statements, not those the stage desugar made
        originals.update({node: unit.text for node in walk(unit.tree) if isinstance(node, ast.stmt)})
    rewrite.source = "\n\n\n".join(unparse_wrapped(f, originals) for f in rewrite.functions) + "\n"


def launch_spec(rewrite: Rewrite) -> None:
    """What a launch of the two kernels needs to know about them (``warp_rewrite.runtime.KernelSpec``)."""
    frontend, plan_ = rewrite.frontend, rewrite.plan
    kernel = frontend.kernel
    params = [a.arg for a in kernel.tree.args.args]
    sources = site_gradient_sources(kernel, plan_, params, frontend.warp_names(kernel), frontend.resolve_helper,
                                    rewrite.int_paths)  # fmt: skip
    sites = []
    for s in plan_.sites:
        gradient_sources = sources.get(id(s), frozenset())
        exact = ExactRecords(s.records, s.values, s.order, s.addresses, s.compares or None) if s.exact else None
        sites.append(SiteSpec(s.target, s.op, s.location, None if gradient_sources is None else
                              tuple(sorted(gradient_sources)), exact))  # fmt: skip
    records = []
    for name in plan_.root.record_params():
        r = rewrite.records[name]
        fixed = r.dtype if r.kind in ("trips", "carried") else None  # the others' follow the target at launch
        records.append(RecordSpec(name, r.kind, r.target, fixed, r.loops, r.requires_grad))
    loops = [
        LoopSpec(loop.id, loop.location, loop.static_trips, compiled_room(loop, rewrite.max_records), loop.needs_room)
        for loop in plan_.loops
    ]
    rewrite.spec = KernelSpec(
        kernel.name,
        tuple(params),
        kernel.location(kernel.tree),
        tuple(sorted(plan_.written)),
        tuple(sorted(plan_.copied)),
        tuple(sites),
        tuple(records),
        tuple(loops),
        len(rewrite.names.coords),
        exact_rounds(rewrite, params),
    )


def exact_rounds(rewrite: Rewrite, params: list[str]) -> int | None:
    """The adjoint launches of the replay kernel the exact backward makes: one reaching the inputs, plus one per
    link of the longest chain of exact returns feeding exact operands (``passes.dataflow.exact_chain_links``).
    None: found by the backward, on the host (a chain that can feed back into its own target, or runs through a
    helper); 0: no exact returns."""
    frontend, exact = rewrite.frontend, [s for s in rewrite.plan.sites if s.exact]
    if not exact:
        return 0
    kernel = frontend.kernel
    calls = [AtomicCall(s.node, s.op, s.consumed) for s in exact]
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


STAGES: tuple[tuple[str, Callable[[Rewrite], None]], ...] = (
    ("desugar", desugar),
    ("plan", plan),
    ("layout", layout),
    ("record", record_phase),
    ("count", count_phase),
    ("replay", replay_phase),
    ("closures", keep_closures),
    ("print", print_source),
    ("spec", launch_spec),
)


def rewrite_kernel(frontend: Frontend, options: RewriteOptions = RewriteOptions()) -> GeneratedKernel | None:
    """The record and replay kernels of ``frontend.kernel``, or None when it consumes no atomic's return.

    Raises ``RewriteError`` for what the rewrite cannot handle correctly.
    """
    rewrite = Rewrite(frontend, options)
    for name, stage in STAGES:
        try:
            stage(rewrite)
        except Refusal as refusal:
            problem = refusal.problem
            if refusal.unit is not frontend.kernel and refusal.unit is not rewrite.frontend.kernel:
                problem += f" (in helper '{refusal.unit.name}')"
            raise RewriteError(frontend.kernel.name, refusal.location, problem, refusal.advice) from None
        if DEBUG:
            _show(name, rewrite)
        if name == "plan" and not rewrite.plan.sites and not rewrite.plan.loops:
            return None  # nothing to record (a probe loop's consumed atomics may leave only a loop to record)
    frontend.taken.update(f.name for f in rewrite.functions)
    return GeneratedKernel(frontend.kernel.name, rewrite.source, [f.name for f in rewrite.functions],
                           rewrite.record_kernel, rewrite.replay_kernel, rewrite.count_kernel, rewrite.spec,
                           rewrite.plan, rewrite.max_records)  # fmt: skip


def _show(stage: str, rewrite: Rewrite) -> None:
    """What a stage made, on stderr (``DEBUG``)."""
    kernel = rewrite.frontend.kernel.name
    if stage == "desugar":
        lines = [ast.unparse(rewrite.frontend.kernel.tree)]
    elif stage == "plan":
        lines = [f"{s.location}: wp.atomic_{s.op} on '{s.target}' -> {s.records}" for s in rewrite.plan.sites]
        lines += [f"{loop.location}: loop {loop.id}" + (" (skipped by the replay)" if loop.opaque else "")
                  for loop in rewrite.plan.loops]  # fmt: skip
    elif stage == "layout":
        lines = [f"{r.name}: {r.kind} of {getattr(r.dtype, '__name__', 'generic')}" for r in rewrite.records.values()]
    elif stage in ("record", "count", "replay", "closures"):
        lines = [ast.unparse(f) for f in rewrite.functions]
    elif stage == "print":
        lines = [rewrite.source]
    else:
        lines = [repr(rewrite.spec)]
    print(f"--- wp-rewrite: kernel '{kernel}' after stage '{stage}' ---", *lines, sep="\n", file=sys.stderr)
