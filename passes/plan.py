"""Plan the rewrite of one kernel: which atomics get records, in which loops and helper calls, under which names.

Records are laid out by *coordinates*: a consumed atomic's record index is built from the thread index and the
iteration number of every loop around it (across helper calls), ``((thread * cap1 + t1) * cap2 + t2)...``.
Coordinates, unlike a per-thread counter, survive Warp's backward: its reverse pass replays each iteration of
a dynamic loop with the loop variable restored but every loop-carried local at its final value.

A helper (``@wp.func``) that consumes an atomic's return, directly or deeper, is cloned for each call path,
so every call site gets records of its own.
"""

from __future__ import annotations

import ast
import functools
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from warp_rewrite.passes import dtypes, memory
from warp_rewrite.passes.atomics import (
    AtomicCall,
    WarpNames,
    find_atomic_calls,
    find_augmented_writes,
    positional_arguments,
)
from warp_rewrite.passes.dataflow import argument_path, is_view, single_assignments
from warp_rewrite.passes.int_types import IntLocals
from warp_rewrite.passes.loop_carried import LoopFlow
from warp_rewrite.passes.loop_returns import own_jumps, unrolled_by_warp
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.syntax import parent_map, walk


class Unit(Protocol):
    """A kernel's or helper's parsed source, as a front end reads it."""

    name: str
    text: str  # the source ``tree`` was parsed from: its node positions refer to this text
    tree: ast.FunctionDef  # read, never changed, by the passes

    def location(self, node: ast.AST) -> str: ...


class Frontend(Protocol):
    """What the passes need to know about a kernel beyond its tree, from live Warp objects (the API,
    ``warp_rewrite.live``) or from source files (the command line, ``warp_rewrite.static_types``)."""

    kernel: Unit
    max_unroll: int  # the longest constant range() Warp unrolls in the kernel's module (its option 'max_unroll')

    def warp_names(self, unit: Unit) -> WarpNames:
        """How the function's module spells Warp and its atomics."""

    def resolve_helper(self, unit: Unit, call: ast.Call) -> Unit | None:
        """The ``@wp.func`` a call in ``unit`` refers to; None for anything else. Raises ``Refusal`` for a
        helper whose source cannot be read."""

    def parameter_types(self, unit: Unit) -> dict[str, Any]:
        """The Warp type of each parameter of the function, where known (``passes.dtypes.normalized``)."""

    def local_types(self, unit: Unit) -> dict[str, Any]:
        """The Warp type of each local of the function, where the front end knows it (else the passes infer ints)."""

    def return_type(self, unit: Unit) -> Any:
        """The function's declared return type, where known."""

    def is_builtin(self, unit: Unit, call: ast.Call) -> bool:
        """Is the callee one whose effect on memory is known: a Warp builtin (atomics aside), a Python builtin,
        a struct or vector constructor? (A ``@wp.func`` is a helper instead: ``resolve_helper``.)"""

    def array(self, path: str) -> dtypes.ArrayInfo | None:
        """What is known of the array argument (or struct field of one) at ``path``; None if it is no array."""


HelperResolver = Callable[[Unit, ast.Call], "Unit | None"]


def overlap(path: str, other: str) -> bool:
    """Do two argument paths name the same memory, or one a struct holding the other (``s`` and ``s.count``)?"""
    return path == other or path.startswith(other + ".") or other.startswith(path + ".")


def array_at(frontend: Frontend, narrowed: dict[str, Any], path: str) -> dtypes.ArrayInfo | None:
    """What is known of the array at argument ``path``: from the argument's type or, where that is generic (``Any``,
    ``wp.array(dtype=Any)``), from ``narrowed``: the types helpers declare for memory under generic arguments, by
    path (``Planner._narrowed_types``)."""
    array = frontend.array(path)
    if array is not None and array.dtype is not None:
        return array
    parts = path.split(".")
    for end in range(len(parts), 0, -1):  # the longest path a helper declares: the struct, or the field itself
        declared = narrowed.get(".".join(parts[:end]))
        if declared is not None:
            for name in parts[end:]:
                declared = dtypes.field_type(declared, name)
            return dtypes.array_info(declared) or array
    return array


def is_int_path(frontend: Frontend, path: str, narrowed: dict[str, Any] | None = None) -> bool:
    """Is the array at argument ``path`` known, before launch, to hold integers (no adjoint)?"""
    array = array_at(frontend, narrowed or {}, path)
    return array is not None and dtypes.is_int(array.dtype)


class _Analysis:
    """What the planner reads off one function's tree, computed once per rewrite and only when asked for.

    Most helpers a kernel calls are only asked whether they consume an atomic's return (``atomics``, ``calls``).
    """

    def __init__(self, unit: Unit, frontend: Frontend):
        self.unit, self.frontend, self.tree = unit, frontend, unit.tree
        self.names = frontend.warp_names(unit)
        self.parameter_types = frontend.parameter_types(unit)

    @functools.cached_property
    def nodes(self) -> list[ast.AST]:
        return walk(self.tree)

    @functools.cached_property
    def parents(self) -> dict[ast.AST, ast.AST]:
        return parent_map(self.nodes)

    @functools.cached_property
    def calls(self) -> list[ast.Call]:
        return [node for node in self.nodes if isinstance(node, ast.Call)]

    @functools.cached_property
    def aliases(self) -> dict[str, ast.expr]:
        return single_assignments(self.tree, self.nodes)

    @functools.cached_property
    def atomics(self) -> list[AtomicCall]:
        return find_atomic_calls(self.tree, self.names, self.nodes)

    @functools.cached_property
    def writes(self) -> list[ast.AugAssign]:
        return find_augmented_writes(self.tree, self.nodes)

    @functools.cached_property
    def kinds(self) -> dict[str, str]:
        local_types = self.frontend.local_types(self.unit)
        helpers = ((call, self.frontend.resolve_helper(self.unit, call)) for call in self.calls)
        call_types = {call: self.frontend.return_type(helper) for call, helper in helpers if helper is not None}
        return IntLocals(self.tree, self.parameter_types, self.nodes, local_types, call_types).locals

    @functools.cached_property
    def flow(self) -> LoopFlow:
        return LoopFlow(self.tree, self._holds_a_value)

    def _holds_a_value(self, name: str) -> bool:
        """Does ``name`` hold a value (a vector, matrix or struct the function makes or reads), which a store into a
        component changes, rather than memory (an array, a view of one), which such a store writes? Where the
        types do not tell, memory."""
        params = [a.arg for a in self.tree.args.args]
        if name in params:
            return dtypes.is_value_type(self.parameter_types.get(name))
        local = ast.Name(name, ast.Load())
        path = argument_path(local, params, self.aliases)
        if path is None:
            return True  # made in the function
        root, *fields = path.split(".")
        annotation = self.parameter_types.get(root)
        for field_name in fields:
            annotation = dtypes.field_type(annotation, field_name)
        if dtypes.is_array(annotation):
            return memory.depth(local, self.aliases) >= annotation.ndim  # an element read, or a view
        return dtypes.is_value_type(annotation)


class Refusal(Exception):
    """A construct the rewrite cannot handle; the caller turns it into a ``RewriteError``.

    ``location`` overrides where it is reported (``unit.location(node)`` by default).
    """

    def __init__(self, unit: Unit, node: ast.AST, problem: str, advice: str, location: str | None = None):
        super().__init__(problem)
        self.unit, self.node, self.problem, self.advice = unit, node, problem, advice
        self.location = location or unit.location(node)


@dataclass(frozen=True)
class Carried:
    """An int a loop changes and later code reads, kept in records for the replay (``Loop.carried``)."""

    local: str
    records: str
    dtype: Any  # passes.dtypes.INT or BOOL


@dataclass
class Loop:
    """A loop with a consumed atomic somewhere inside (possibly in a called helper)."""

    node: ast.For | ast.While
    id: int  # index into the launch's trip arrays
    static_trips: int | None  # trip count when it is a constant range(), else None
    location: str
    coordinate: str  # local holding this loop's coordinate
    counter: str = ""  # while loops: the trip counter of the record kernel / iteration of the replay
    bounds: tuple[str, str, str] = ("", "", "")  # dynamic for loops: hoisted start, stop, step
    trips_records: str = ""  # while loops and loops that break: records of each execution's trip count
    outer_loops: tuple[int, ...] = ()  # ids of the loops around this one
    jumps: bool = False  # the body has its own break or continue
    opaque: bool = False  # nothing differentiable inside: the replay skips it (see Planner._opaque_loops)
    active: str = ""  # replay: flag lowering break/continue, which Warp's reverse pass mishandles
    # Ints a loop changes: read by later iterations (kept at each iteration's start) or after the loop (kept at
    # its exit). Warp's backward replays loop bodies with loop-carried locals at their final values, so the replay
    # kernel restores them from these records.
    carried_in: list[Carried] = field(default_factory=list)
    carried: list[Carried] = field(default_factory=list)

    @property
    def needs_room(self) -> bool:
        """Of unknown length and replayed: it may run more often than its records have room for, so its trips are
        counted (records inside it are stored with ``record_if_room``, and each launch checks the counts)."""
        return self.static_trips is None and not self.opaque


@dataclass
class Site:
    """A recorded value: an atomic whose value is consumed, any atomic on a target with exact float returns, or
    a plain read of an array the launch writes (``op`` "read", see ``passes.memory``)."""

    # the atomic call (for ``arr[i] += v``, an equivalent ``wp.atomic_add(arr, i, v)`` at the statement's place),
    # or the read ``arr[i]``
    node: ast.Call | ast.Subscript
    op: str
    records: str  # the returned values
    target: str  # kernel argument path of the target array, e.g. "count" or "w.count"
    loops: tuple[int, ...]  # ids of the loops around it, outermost first, across helper calls
    location: str
    in_helper: bool
    indices: int  # number of index arguments (1 to 4)
    consumed: bool = True
    statement: ast.AugAssign | None = None  # the augmented assignment this site stands for
    # Exact float returns (see the runtime's exact_add): the operands, each operation's place in the order of
    # operations on its address, the flat address, and (cas) the compare operands.
    values: str = ""
    order: str = ""
    addresses: str = ""
    compares: str = ""
    shadow: str = ""  # the target's shadow (values and tickets), shared by every exact site on the target

    @property
    def exact(self) -> bool:
        return bool(self.values)

    def record_names(self) -> list[str]:
        return [n for n in (self.records, self.values, self.order, self.addresses, self.compares) if n]


@dataclass
class Clone:
    """A helper specialized for one call path."""

    call: ast.Call
    plan: FunctionPlan


@dataclass
class FunctionPlan:
    unit: Unit
    name: str  # generated base name (the phase is appended)
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict, repr=False)  # of the unit's tree's nodes
    paths: dict[str, str | None] = field(default_factory=dict)  # the kernel path each parameter names
    sites: list[Site] = field(default_factory=list)
    loops: dict[ast.AST, Loop] = field(default_factory=dict)
    clones: dict[ast.Call, Clone] = field(default_factory=dict)
    # atomics whose value is discarded (bare calls, ``arr[i] += v``): statement -> target's argument path
    unconsumed: dict[ast.stmt, str | None] = field(default_factory=dict)
    # plain stores into argument arrays (``out[slot] = v``): statement -> the array's argument path
    stores: dict[ast.stmt, str] = field(default_factory=dict)

    def walk(self) -> Iterator[FunctionPlan]:
        yield self
        for clone in self.clones.values():
            yield from clone.plan.walk()

    def record_params(self) -> list[str]:
        """Record arrays this function and its clones use, in a stable order."""
        names = []
        shadows = []
        for plan in self.walk():
            for site in plan.sites:
                names += site.record_names()
                if site.shadow and site.shadow not in shadows:
                    shadows.append(site.shadow)
            for loop in plan.loops.values():
                names += [loop.trips_records] if loop.trips_records else []
                names += [carried.records for carried in loop.carried_in + loop.carried]
        return names + shadows


@dataclass
class KernelPlan:
    root: FunctionPlan
    loops: list[Loop]
    sites: list[Site]
    written: frozenset[str] = frozenset()  # argument paths of the arrays the launch writes
    # those of them a dry run needs copies of: the launch reads them back (the count phase writes only these)
    copied: frozenset[str] = frozenset()
    narrowed: dict[str, Any] = field(default_factory=dict)  # types of memory under generic arguments (array_at)


def needs_forward_twin(plan: FunctionPlan, int_paths: frozenset[str]) -> bool:
    """Does a cloned helper's replay variant still write memory (an atomic or a store, kept for its adjoint)?

    Warp's backward runs a helper's forward again, side effects included, unless it has a ``@wp.func_replay``:
    the twin, which writes nothing.
    """
    if any(site.target not in int_paths and not site.exact and site.op != "read" for site in plan.sites):
        return True
    if any(path not in int_paths for path in [*plan.unconsumed.values(), *plan.stores.values()]):
        return True
    return any(needs_forward_twin(clone.plan, int_paths) for clone in plan.clones.values())


def _static_trips(loop: ast.For) -> int | None:
    args = loop.iter.args
    if all(isinstance(a, ast.Constant) and isinstance(a.value, int) for a in args):
        return len(range(*(a.value for a in args)))
    return None


def _carried(
    unit: Unit, loop: ast.For | ast.While, facts: _Analysis
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Locals the loop changes that later iterations read, and those code after the loop reads: (name, dtype)."""
    kinds = facts.kinds
    carried = facts.flow.carried(loop)
    into, out = carried.into_iterations, carried.out_of_loop
    if unrolled_by_warp(loop, facts.frontend.max_unroll):
        # Unrolled, the loop is straight code to Warp's backward: a value changed one component at a time is then
        # no concern (the refusal of other floats predates this reasoning, and stays).
        into, out = into - carried.updated_only, out - carried.updated_only
    for name in sorted((into | out) - kinds.keys()):
        raise Refusal(
            unit,
            loop,
            f"'{name}' is changed in a loop around a consumed atomic and read by later iterations or after the loop, "
            "and is not an int",
            "Warp's backward replays such loops with loop-carried values it does not keep: keep such state in an int, "
            "or move the float computation out of the loop",
        )
    return [(n, kinds[n]) for n in sorted(into)], [(n, kinds[n]) for n in sorted(out)]


def _enclosing(node: ast.AST, parents: dict[ast.AST, ast.AST], root: ast.AST) -> list[ast.AST]:
    """Loops around ``node`` inside ``root``, outermost first."""
    loops = []
    current = parents.get(node)
    while current is not None and current is not root:
        if isinstance(current, ast.For | ast.While):
            loops.append(current)
        current = parents.get(current)
    return loops[::-1]


def _check_loop(unit: Unit, loop: ast.AST, names: WarpNames, max_unroll: int) -> None:
    if loop.orelse:
        raise Refusal(
            unit, loop, "a loop with an 'else' clause around a consumed atomic", "Rewrite the loop without 'else'"
        )
    if isinstance(loop, ast.While):
        # The pipeline moves such a condition into the body first (passes.while_conditions), but for a loop with an
        # 'else', refused above; a planner handed a tree that was not desugared refuses it here.
        if find_atomic_calls(loop.test, names):
            raise Refusal(
                unit,
                loop.test,
                "an atomic in a while loop's condition",
                "Call the atomic in the loop body and leave the loop with 'break'",
            )
        _check_returns(unit, loop)
        return
    iterates_range = (
        isinstance(loop.iter, ast.Call)
        and isinstance(loop.iter.func, ast.Name)
        and loop.iter.func.id == "range"
        and not loop.iter.keywords
        and 1 <= len(loop.iter.args) <= 3
    )
    if not iterates_range or not isinstance(loop.target, ast.Name):
        raise Refusal(
            unit,
            loop,
            "a for loop over something other than range() around a consumed atomic",
            "Loop over range(...) with a single loop variable",
        )
    assigned = {
        n.id for stmt in loop.body for n in walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    if loop.target.id in assigned:
        raise Refusal(
            unit, loop, f"the loop variable '{loop.target.id}' is reassigned in the loop", "Use another local"
        )
    if not unrolled_by_warp(loop, max_unroll):
        _check_returns(unit, loop)


def _check_returns(unit: Unit, loop: ast.For | ast.While) -> None:
    """Refuse a return from a loop Warp does not unroll (what ``passes.loop_returns`` leaves there): in the replay
    kernel's backward, Warp jumps from the return into the middle of its reverse loop, which then runs the wrong
    iterations."""
    returns = sorted((n for n in walk(loop) if isinstance(n, ast.Return)), key=lambda n: (n.lineno, n.col_offset))
    if returns:
        raise Refusal(
            unit,
            returns[0],
            "a 'return' inside a loop around a consumed atomic (Warp's backward cannot replay a return from a loop "
            "it does not unroll)",
            "Leave the loop with 'break', setting a flag, and return after the loop",
        )


class Planner:
    """Builds the plan of one kernel, with names fresh in ``namer``.

    ``exact_targets``: argument paths of the targets whose float returns get exact gradients; ``analyses``: what
    an earlier planner of the same kernel read off its functions, to be read again rather than recomputed.
    """

    def __init__(
        self,
        frontend: Frontend,
        namer: Namer,
        exact_targets: frozenset[str] = frozenset(),
        analyses: dict[int, _Analysis] | None = None,
    ):
        self.frontend = frontend
        self.kernel = frontend.kernel
        self.params = [a.arg for a in self.kernel.tree.args.args]
        self.namer = namer
        self.exact_targets = exact_targets
        self.resolve_helper = frontend.resolve_helper
        self.shadows: dict[str, str] = {}
        self._analyses = {} if analyses is None else analyses
        self._consuming: dict[int, bool] = {}
        self.loop_ids = itertools.count()
        self.loops: list[Loop] = []
        self.sites: list[Site] = []
        self.written: frozenset[str] = frozenset()  # argument paths of the arrays the launch writes
        self._read_back: set[str | None] = set()  # see _written_paths
        self._writers: dict[str | None, set[int | None]] = {}
        self._reading: dict[tuple, bool] = {}
        self.narrowed: dict[str, Any] = {}  # see _narrowed_types

    def array(self, path: str) -> dtypes.ArrayInfo | None:
        return array_at(self.frontend, self.narrowed, path)

    def is_int_path(self, path: str) -> bool:
        return is_int_path(self.frontend, path, self.narrowed)

    def plan(self) -> KernelPlan:
        namer = self.namer
        if not self._consumes(self.kernel, set()):
            return KernelPlan(FunctionPlan(self.kernel, self.kernel.name), [], [])  # nothing to record
        identity = {p: p for p in self.params}
        self.narrowed = self._narrowed_types()
        self.written = self._written_paths()
        root = self._plan(self.kernel, identity, (), namer.fresh_base(self.kernel.name))
        ops: dict[str, set[str]] = {}
        for site in self.sites:
            if site.exact:
                ops.setdefault(site.target, set()).add(site.op)
        for target, kinds in ops.items():
            if not any(kinds <= family for family in EXACT_FAMILIES):
                on_target = [site for site in self.sites if site.exact and site.target == target]
                family = next(f for f in EXACT_FAMILIES if on_target[0].op in f)
                odd_one = next(site for site in on_target if site.op not in family)
                raise Refusal(
                    self.kernel,
                    self.kernel.tree,
                    f"atomics of different kinds ({', '.join(sorted(kinds))}) on '{target}', whose float returns "
                    "need exact gradients",
                    "Use one kind of atomic per target array, or rewrite with detach_returns=True",
                    location=odd_one.location,
                )
        return KernelPlan(root, self.loops, self.sites, self.written, self._copied(root), self.narrowed)

    def analysis(self, unit: Unit) -> _Analysis:
        if id(unit.tree) not in self._analyses:
            self._analyses[id(unit.tree)] = _Analysis(unit, self.frontend)
        return self._analyses[id(unit.tree)]

    def _path_of(self, unit: Unit, paths: dict[str, str | None]) -> Callable[[ast.expr], str | None]:
        """The kernel argument path an expression of ``unit`` names (an array, a view of one, a struct field)."""
        params, aliases = [a.arg for a in unit.tree.args.args], self.analysis(unit).aliases
        return lambda expr: self._kernel_path(argument_path(expr, params, aliases), paths)

    def _ndim(self, unit: Unit, expr: ast.expr, path: str | None) -> int | None:
        """The number of dimensions of the array ``expr`` indexes (``path`` in the kernel), as the function sees it:
        a helper's array parameter may be a view of the kernel's array, so its own annotation counts first."""
        facts = self.analysis(unit)
        local = argument_path(expr, [a.arg for a in unit.tree.args.args], facts.aliases)
        declared = facts.parameter_types.get(local) if local is not None else None
        if dtypes.is_array(declared):
            return declared.ndim
        array = self.array(path) if path is not None else None
        return (array.ndim or 1) if array is not None else None

    def _names_memory(self, unit: Unit, expr: ast.expr, path: str | None) -> bool:
        """Does ``expr`` (naming ``path``) stand for memory: an array or a view of one, or a struct that may hold
        arrays, rather than an element's value?"""
        if path is None:
            return False
        ndim = self._ndim(unit, expr, path)
        if ndim is not None:
            return memory.depth(expr, self.analysis(unit).aliases) < ndim
        root_type = self.frontend.parameter_types(self.kernel).get(path.partition(".")[0])
        return not dtypes.is_value_type(root_type)

    def _is_element_read(self, unit: Unit, node: ast.Subscript, path: str | None) -> bool:
        """Does the load ``node`` read an element of the argument array at ``path`` (not a view, not a component
        of a value already read)?"""
        if path is None or self.array(path) is None:
            return False
        aliases = self.analysis(unit).aliases
        return memory.depth(node, aliases) >= self._ndim(unit, node, path) > memory.depth(node.value, aliases)

    def _bind(self, unit: Unit, call: ast.Call, helper: Unit, path_of: Callable) -> dict[str, str | None]:
        """The kernel path each of the helper's parameters names at this call: the memory it is handed (arrays,
        views, structs), None for values."""
        paths = {}
        for param, arg in _bound_arguments(call, helper).items():
            path = path_of(arg)
            paths[param] = path if self._names_memory(unit, arg, path) else None
        return paths

    def _narrowed_types(self) -> dict[str, Any]:
        """The types helpers declare for memory under the kernel's generic arguments, by kernel path: a struct the
        kernel takes as ``Any`` and hands whole to a helper taking a ``ContactWriterData`` is one (Warp compiles the
        call for no other type). Paths helpers declare different types for stay unknown."""
        params = self.frontend.parameter_types(self.kernel)
        generic = {name for name in self.params if dtypes.is_generic(params.get(name))}
        if not generic:
            return {}
        declared: dict[str, list[Any]] = {}
        seen, pending = set(), [(self.kernel, {p: p for p in self.params}, frozenset())]
        while pending:
            unit, paths, views = pending.pop()
            key = (id(unit.tree), tuple(sorted(paths.items(), key=repr)), views)
            if key in seen:
                continue
            seen.add(key)
            facts = self.analysis(unit)
            path_of = self._path_of(unit, paths)
            for call in facts.calls:
                helper = self.resolve_helper(unit, call) if facts.names.atomic_op(call) is None else None
                if helper is None:
                    continue
                bound = self._bind(unit, call, helper, path_of)
                arguments = _bound_arguments(call, helper)
                handed_views = frozenset(p for p, arg in arguments.items() if is_view(arg, facts.aliases, views))
                types = self.frontend.parameter_types(helper)
                for param, path in bound.items():
                    typed = types.get(param)
                    if path is None or path.partition(".")[0] not in generic or param in handed_views:
                        continue  # a view's type is not its array's
                    if typed is not None and not dtypes.is_generic(typed):
                        declared.setdefault(path, []).append(typed)
                pending.append((helper, bound, handed_views))
        return {path: types[0] for path, types in declared.items() if all(dtypes.same_type(t, types[0]) for t in types)}

    def _written_paths(self) -> frozenset[str]:
        """Argument paths of the arrays this launch writes: with atomics, stores and augmented assignments, in the
        kernel and in every helper it calls (through the paths each call binds), and any array handed to a Warp
        builtin that might write it. A call the planner cannot see into, handed memory, is refused.

        Also notes (``self._read_back``) the arrays the launch may read back, with a consumed atomic, an element read
        or a builtin, and (``self._writers``) which functions write each array: what a dry run must copy.

        Refuses a write into memory under an argument of a generic type that no helper declares (``_untyped``)."""
        written, seen, untyped, consumed = set(), set(), {}, set()
        pending = [(self.kernel, {p: p for p in self.params})]
        while pending:
            unit, paths = pending.pop()
            key = (id(unit.tree), tuple(sorted(paths.items(), key=repr)))
            if key in seen:
                continue
            seen.add(key)
            facts = self.analysis(unit)
            path_of = self._path_of(unit, paths)
            writes = [(call.node, path_of(call.target)) for call in facts.atomics]
            writes += [(node, path_of(array)) for node in facts.nodes for array in memory.stored_arrays(node)]
            for node, path in writes:
                self._writers.setdefault(path, set()).add(id(unit.tree))
                if self._untyped(path):
                    untyped.setdefault(path, (unit, node))
            written.update(path for _, path in writes)
            consumed.update(path_of(call.target) for call in facts.atomics if call.consumed)
            self._read_back.update(consumed)
            for node in memory.loads(facts.nodes, facts.parents, facts.names):
                if self._is_element_read(unit, node, path := path_of(node)):
                    self._read_back.add(path)
            for call in facts.calls:
                if facts.names.atomic_op(call) is not None:
                    continue
                helper = self.resolve_helper(unit, call)
                arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
                handed = [path_of(a) for a in arguments if self._names_memory(unit, a, path_of(a))]
                if helper is not None:
                    pending.append((helper, self._bind(unit, call, helper, path_of)))
                elif not handed:
                    continue
                elif not self.frontend.is_builtin(unit, call):
                    path = handed[0]
                    raise Refusal(
                        unit,
                        call,
                        f"'{ast.unparse(call.func)}' is handed '{path}' but the rewrite cannot see what it does with "
                        "it (it might write it, or read what this launch wrote)",
                        "Call a @wp.func the rewrite can read (defined in a .py file), or pass it values, not arrays",
                    )
                else:
                    self._read_back.update(handed)
                    if _called_name(call) not in memory.READ_ONLY_BUILTINS:
                        written.update(handed)  # it might write them
                        for path in handed:
                            self._writers.setdefault(path, set()).add(None)  # by no function of the plan
        # The targets of consumed atomics are sites: their records follow the type at launch, and plain accesses of
        # them are refused where their returns may be floats (_check_exact_accesses).
        for path, (unit, node) in untyped.items():
            if path not in consumed:
                root = path.partition(".")[0]
                raise Refusal(
                    unit,
                    node,
                    f"this writes '{path}', memory of '{root}', whose type is generic: the rewrite cannot tell which "
                    "arrays it holds, so it cannot record what the launch reads back from them",
                    f"Annotate '{root}' with its type, or hand '{root}' whole to a @wp.func that declares it",
                )
        return frozenset(path for path in written if path is not None and self.array(path) is not None)

    def _untyped(self, path: str | None) -> bool:
        """Is ``path`` memory under an argument of a generic type (``Any``) whose arrays the planner cannot tell?"""
        if path is None or self.array(path) is not None:
            return False
        return dtypes.is_generic(self.frontend.parameter_types(self.kernel).get(path.partition(".")[0]))

    def _copied(self, root: FunctionPlan) -> frozenset[str]:
        """The written arrays a dry run needs copies of: read back by the launch, or written by a function the
        plan does not clone (whose writes the count phase cannot leave out)."""
        cloned = {id(function.unit.tree) for function in root.walk()}
        return frozenset(
            path for path in self.written if path in self._read_back or not self._writers.get(path, set()) <= cloned
        )

    def _reads(self, unit: Unit, path_of: Callable[[ast.expr], str | None]) -> list[tuple[ast.Subscript, str]]:
        """The function's reads of elements of arrays the launch writes, with their paths."""
        facts = self.analysis(unit)
        found = []
        for node in memory.loads(facts.nodes, facts.parents, facts.names):
            path = path_of(node)
            if path in self.written and self._is_element_read(unit, node, path):
                found.append((node, path))
        return found

    def _reads_written(self, unit: Unit, paths: dict[str, str | None], seen: set[tuple]) -> bool:
        """Does the function read an element of an array the launch writes, itself or in a helper it calls?"""
        key = (id(unit.tree), tuple(sorted(paths.items(), key=repr)))
        if key in self._reading:
            return self._reading[key]
        if key in seen:
            return False
        seen.add(key)
        path_of = self._path_of(unit, paths)
        callees = ((call, self.resolve_helper(unit, call)) for call in self.analysis(unit).calls)
        reads = bool(self._reads(unit, path_of)) or any(
            self._reads_written(helper, self._bind(unit, call, helper, path_of), seen)
            for call, helper in callees
            if helper is not None
        )
        self._reading[key] = reads
        return reads

    def _check_builtin_reads(self, unit: Unit, path_of: Callable[[ast.expr], str | None]) -> None:
        """Refuse a Warp builtin handed an array the launch writes: it would read it in the replay, after the
        forward changed it (an element read with ``arr[i]`` is recorded instead)."""
        facts = self.analysis(unit)
        for call in facts.calls:
            if facts.names.atomic_op(call) is not None or _called_name(call) == "len":
                continue
            if self.resolve_helper(unit, call) is not None or not self.frontend.is_builtin(unit, call):
                continue
            for arg in [*call.args, *(keyword.value for keyword in call.keywords)]:
                path = path_of(arg)
                if path in self.written and self._names_memory(unit, arg, path):
                    raise Refusal(
                        unit,
                        call,
                        f"'{ast.unparse(call.func)}' reads '{path}', which this launch also writes: the replay would "
                        "read it after the forward changed it",
                        f"Read the elements you need with {path}[i] (those reads are recorded), or pass an array "
                        "this launch does not write",
                    )

    def _plan(
        self,
        unit: Unit,
        paths: dict[str, str | None],
        outer: tuple[int, ...],
        name: str,
        views: frozenset[str] = frozenset(),
    ) -> FunctionPlan:
        """The plan of one function; ``paths``: the kernel path each parameter names, ``views``: the parameters
        bound to a view of an array (``arr[i]``) rather than a whole one."""
        facts = self.analysis(unit)
        names = facts.names
        parents, aliases = facts.parents, facts.aliases
        plan = FunctionPlan(unit, name, parents, paths)
        unit_params = [a.arg for a in unit.tree.args.args]

        kernel_path = self._path_of(unit, paths)

        atomics = facts.atomics
        exact = [c for c in atomics if kernel_path(c.target) in self.exact_targets]
        exact += [_as_atomic_call(w, names) for w in facts.writes if kernel_path(w.target) in self.exact_targets]
        recorded = [c for c in atomics if c.consumed and c not in exact] + exact
        for call in atomics:
            if not call.consumed and call not in exact:
                plan.unconsumed[parents[call.node]] = kernel_path(call.target)
        for write in facts.writes:
            if kernel_path(write.target) not in self.exact_targets:
                plan.unconsumed[write] = kernel_path(write.target)
        for node in facts.nodes:
            stored = [path for array in memory.stored_arrays(node) if (path := kernel_path(array)) in self.written]
            if stored and not isinstance(node, ast.AugAssign):
                plan.stores[node] = stored[0]
        self._check_exact_accesses(unit, paths, unit_params, aliases)
        self._check_builtin_reads(unit, kernel_path)
        helper_calls = self._helper_calls(unit, [c for c in atomics if c.consumed], kernel_path)

        # A loop with nothing differentiable inside needs no replay: keep only what it hands on.
        opaque = sorted(self._opaque_loops(unit, atomics, kernel_path), key=lambda n: (n.lineno, n.col_offset))
        for loop in opaque:
            plan.loops[loop] = self._new_opaque_loop(unit, loop)
        hidden = lambda node: any(loop in opaque for loop in _enclosing(node, parents, unit.tree))  # noqa: E731
        recorded = [c for c in recorded if not hidden(_statement_or_call(c))]
        reads = [(node, path) for node, path in self._reads(unit, kernel_path) if not hidden(node)]
        relevant: list[ast.AST] = [_statement_or_call(c) for c in recorded] + [call for call, _ in helper_calls]
        relevant += [node for node, _ in reads] + list(opaque)
        for node in sorted(relevant, key=lambda n: (n.lineno, n.col_offset)):
            for loop in _enclosing(node, parents, unit.tree):
                if loop not in plan.loops:
                    _check_loop(unit, loop, names, self.frontend.max_unroll)
                    plan.loops[loop] = self._new_loop(unit, loop, outer + self._ids(plan, loop, parents, unit))
        for loop in opaque:
            plan.loops[loop].outer_loops = outer + self._ids(plan, loop, parents, unit)

        for call in sorted(recorded, key=lambda c: (c.node.lineno, c.node.col_offset)):
            target = kernel_path(call.target)
            if target is None:
                raise Refusal(
                    unit,
                    call.target,
                    f"the target of wp.atomic_{call.op}() is not a kernel argument or a struct field of one",
                    "Pass the target array to the kernel as an argument and apply the atomic to it directly",
                )
            node = _statement_or_call(call)
            loops = outer + tuple(plan.loops[loop].id for loop in _enclosing(node, parents, unit.tree))
            records = self.namer.fresh(_records_base(call, parents))
            location, in_helper = unit.location(node), unit is not self.kernel
            site = Site(call.node, call.op, records, target, loops, location, in_helper, len(call.index_args))
            site.consumed = call.consumed
            site.statement = node if isinstance(node, ast.AugAssign) else None
            if target in self.exact_targets:
                self._make_exact(unit, call, site, is_view(call.target, aliases, views))
            plan.sites.append(site)
            self.sites.append(site)

        for node, path in reads:
            loops = outer + tuple(plan.loops[loop].id for loop in _enclosing(node, parents, unit.tree))
            records = self.namer.fresh(f"{path.replace('.', '_')}_reads")
            location, in_helper = unit.location(node), unit is not self.kernel
            site = Site(node, "read", records, path, loops, location, in_helper, memory.index_count(node))
            plan.sites.append(site)
            self.sites.append(site)
        plan.sites.sort(key=lambda site: (site.node.lineno, site.node.col_offset))

        for call, helper in helper_calls:
            bound = _bound_arguments(call, helper)
            helper_paths = self._bind(unit, call, helper, kernel_path)
            helper_views = frozenset(param for param, arg in bound.items() if is_view(arg, aliases, views))
            loops = outer + tuple(plan.loops[loop].id for loop in _enclosing(call, parents, unit.tree))
            clone = self._plan(helper, helper_paths, loops, self.namer.fresh_base(helper.name), helper_views)
            plan.clones[call] = Clone(call, clone)
        return plan

    def _make_exact(self, unit: Unit, call: AtomicCall, site: Site, on_view: bool) -> None:
        if on_view:
            raise Refusal(
                unit,
                call.target,
                f"wp.atomic_{call.op}() on a view of '{site.target}' next to a consumed float return on it",
                "Index the whole array in the atomic: wp.atomic_add(arr, i, j, v), not wp.atomic_add(arr[i], j, v)",
            )
        if call.op not in EXACT_OPS:
            raise Refusal(unit, call.node, f"wp.atomic_{call.op}() on a float target", "Use an int target")
        fresh = self.namer.fresh
        base = site.records.removesuffix("_records")
        site.values, site.order, site.addresses = (
            fresh(f"{base}_values"),
            fresh(f"{base}_order"),
            fresh(f"{base}_addresses"),
        )
        if call.op == "cas":
            site.compares = fresh(f"{base}_compares")
        if site.target not in self.shadows:
            self.shadows[site.target] = fresh(site.target.replace(".", "_") + "_shadow")
        site.shadow = self.shadows[site.target]

    def _check_exact_accesses(self, unit: Unit, paths: dict, unit_params: list[str], aliases: dict) -> None:
        """Exact float returns need every access to their target to be an atomic the rewrite records: while the
        record kernel runs, the target's values live in a shadow only those atomics see."""
        if not self.exact_targets:
            return
        for node in walk(unit.tree):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                path = self._kernel_path(argument_path(node, unit_params, aliases), paths)
                if path in self.exact_targets and self._reads_element(node, path, aliases):
                    raise Refusal(
                        unit,
                        node,
                        f"a plain read of '{path}', whose float atomic returns need exact gradients (while the "
                        "kernel runs, its values live in a shadow that only its atomics see)",
                        "Use the values its atomics return, or rewrite with detach_returns=True",
                    )
            for target in _stored_into(node):
                path = self._kernel_path(argument_path(target, unit_params, aliases), paths)
                is_atomic = isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub)
                if isinstance(target, ast.Subscript) and path in self.exact_targets and not is_atomic:
                    raise Refusal(
                        unit,
                        node,
                        f"a plain write into '{path}', whose float atomic returns need exact gradients",
                        "Write into it only with atomics in this kernel, or rewrite with detach_returns=True",
                    )
            if isinstance(node, ast.Call) and node.args:
                helper = self.resolve_helper(unit, node)
                handed = [self._kernel_path(argument_path(a, unit_params, aliases), paths) for a in node.args]
                exact = any(overlap(path, target) for path in handed if path for target in self.exact_targets)
                if helper is not None and not self._consumes(helper, set()) and exact:
                    raise Refusal(
                        unit,
                        node,
                        f"helper '{helper.name}' receives an array whose float atomic returns need exact gradients",
                        "Inline the helper, or rewrite with detach_returns=True",
                    )

    def _reads_element(self, node: ast.Subscript, path: str, aliases: dict[str, ast.expr]) -> bool:
        """Does ``node`` read an element of the array at ``path`` (as many indices as it has dimensions, through
        locals bound to views of it), rather than make a view of it?"""
        indices, expr, seen = 0, node, set()
        while True:
            if isinstance(expr, ast.Subscript):
                indices += len(expr.slice.elts) if isinstance(expr.slice, ast.Tuple) else 1
                expr = expr.value
            elif isinstance(expr, ast.Name) and expr.id in aliases and expr.id not in seen:
                seen.add(expr.id)
                expr = aliases[expr.id]
            else:
                break
        array = self.array(path)
        return array is None or array.ndim is None or indices >= array.ndim

    def _opaque_loops(self, unit: Unit, atomics: list[AtomicCall], kernel_path: Callable) -> set[ast.AST]:
        """Outermost loops around a consumed atomic with no differentiable work inside (e.g. a CAS probe).

        Inside: only atomics and stores on int targets, no helper calls, no return; everything read after
        the loop is an int. The replay then skips such a loop and restores those ints from records.
        """
        facts = self.analysis(unit)
        loops = set()
        for call in atomics:
            if not call.consumed:
                continue
            for loop in _enclosing(call.node, facts.parents, unit.tree):
                if self._is_opaque(unit, loop, kernel_path, facts.kinds):
                    loops.add(loop)
                    break
        return loops

    def _is_opaque(self, unit: Unit, loop: ast.AST, kernel_path: Callable, kinds: dict[str, str]) -> bool:
        names = self.analysis(unit).names
        for node in walk(loop):
            if isinstance(node, ast.Return):
                return False
            if isinstance(node, ast.Call):
                op = names.atomic_op(node)
                if op is None and self.resolve_helper(unit, node) is not None:
                    return False
                if op is not None and not self._int_path(kernel_path(positional_arguments(node)[0])):
                    return False
            if any(isinstance(t, ast.Subscript) and not self._int_path(kernel_path(t)) for t in _stored_into(node)):
                return False
        try:
            _, carried_out = _carried(unit, loop, self.analysis(unit))
        except Refusal:
            return False
        return all(name in kinds for name, _ in carried_out)

    def _int_path(self, path: str | None) -> bool:
        return path is not None and path not in self.exact_targets and self.is_int_path(path)

    def _new_opaque_loop(self, unit: Unit, node: ast.AST) -> Loop:
        loop_id = next(self.loop_ids)
        loop = Loop(node, loop_id, None, unit.location(node), "", opaque=True)
        fresh = self.namer.fresh
        _, carried_out = _carried(unit, node, self.analysis(unit))
        loop.carried = [Carried(name, fresh(f"{name}_after_loop{loop_id}"), dtype) for name, dtype in carried_out]
        self.loops.append(loop)
        return loop

    def _ids(self, plan: FunctionPlan, loop: ast.AST, parents: dict, unit: Unit) -> tuple[int, ...]:
        return tuple(plan.loops[outer].id for outer in _enclosing(loop, parents, unit.tree))

    def _new_loop(self, unit: Unit, node: ast.AST, outer: tuple[int, ...]) -> Loop:
        loop_id = next(self.loop_ids)
        fresh = self.namer.fresh
        loop = Loop(node, loop_id, None, unit.location(node), fresh(f"coordinate{loop_id}"), outer_loops=outer)
        jumps = list(own_jumps(node.body))
        loop.jumps = bool(jumps)
        if loop.jumps:
            loop.active = fresh(f"iteration{loop_id}_active")
        if isinstance(node, ast.For):
            loop.static_trips = _static_trips(node)
            if loop.static_trips is None:
                loop.bounds = (fresh(f"start{loop_id}"), fresh(f"stop{loop_id}"), fresh(f"step{loop_id}"))
        if isinstance(node, ast.While) or any(isinstance(j, ast.Break) for j in jumps):
            loop.counter = fresh(f"trips{loop_id}")
            loop.trips_records = fresh(f"trips{loop_id}_records")
        carried_in, carried_out = _carried(unit, node, self.analysis(unit))
        loop.carried_in = [Carried(name, fresh(f"{name}_in_loop{loop_id}"), dtype) for name, dtype in carried_in]
        loop.carried = [Carried(name, fresh(f"{name}_after_loop{loop_id}"), dtype) for name, dtype in carried_out]
        self.loops.append(loop)
        return loop

    def _helper_calls(
        self, unit: Unit, consumed: list[AtomicCall], path_of: Callable[[ast.expr], str | None]
    ) -> list[tuple[ast.Call, Unit]]:
        """Calls to helpers that need a clone: they consume an atomic's return, or read an array the launch writes
        (their replay must read records instead), somewhere inside."""
        atomic_nodes = {c.node for c in consumed}
        found = []
        for node in self.analysis(unit).calls:
            if node not in atomic_nodes:
                helper = self.resolve_helper(unit, node)
                if helper is None:
                    continue
                if self._consumes(helper, set()) or self._reads_written(
                    helper, self._bind(unit, node, helper, path_of), set()
                ):
                    found.append((node, helper))
        return sorted(found, key=lambda pair: (pair[0].lineno, pair[0].col_offset))

    def _consumes(self, unit: Unit, seen: set[int]) -> bool:
        """Does the function consume an atomic's return, itself or in a helper it calls?"""
        key = id(unit.tree)
        if key in self._consuming:
            return self._consuming[key]
        if key in seen:
            return False
        seen.add(key)
        facts = self.analysis(unit)
        consumes = any(c.consumed for c in facts.atomics) or any(
            helper is not None and self._consumes(helper, seen)
            for helper in (self.resolve_helper(unit, call) for call in facts.calls)
        )
        self._consuming[key] = consumes
        return consumes

    @staticmethod
    def _kernel_path(local: str | None, paths: dict[str, str | None]) -> str | None:
        if local is None:
            return None
        root, _, rest = local.partition(".")
        mapped = paths.get(root)
        if mapped is None:
            return None
        return f"{mapped}.{rest}" if rest else mapped


def _called_name(call: ast.Call) -> str | None:
    """``tile_load`` for ``wp.tile_load(...)`` or a bare ``tile_load(...)``."""
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def _stored_into(node: ast.AST) -> list[ast.expr]:
    """What an assignment or augmented assignment stores into; nothing for any other node."""
    if isinstance(node, ast.Assign):
        return node.targets
    return [node.target] if isinstance(node, ast.AugAssign) else []


def _bound_arguments(call: ast.Call, helper: Unit) -> dict[str, ast.expr]:
    """The argument expression each of the helper's parameters gets at this call."""
    bound = dict(zip([a.arg for a in helper.tree.args.args], call.args, strict=False))
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    return bound


EXACT_OPS = ("add", "sub", "min", "max", "exch", "cas")
# Ops that may share a target with exact returns: a returned value is a running sum, the previous operand,
# or the operand of the last op that stored one.
EXACT_FAMILIES = ({"add", "sub"}, {"exch"}, {"max", "min", "cas"})


def _as_atomic_call(write: ast.AugAssign, names: WarpNames) -> AtomicCall:
    """``arr[i, j] += v`` as the ``wp.atomic_add(arr, i, j, v)`` Warp lowers it to, placed at the statement."""
    index = write.target.slice
    indices = index.elts if isinstance(index, ast.Tuple) else [index]
    op = "add" if isinstance(write.op, ast.Add) else "sub"
    func = ast.Attribute(ast.Name(min(names.modules), ast.Load()), f"atomic_{op}", ast.Load())
    call = ast.Call(func, [write.target.value, *indices, write.value], [])
    return AtomicCall(ast.copy_location(call, write), op, consumed=False, statement=write)


def _statement_or_call(call: AtomicCall) -> ast.AST:
    return call.statement if call.statement is not None else call.node


def _records_base(call: AtomicCall, parents: dict[ast.AST, ast.AST]) -> str:
    parent = parents.get(call.node)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        return f"{parent.targets[0].id}_records"
    return f"atomic_{call.op}_records"
