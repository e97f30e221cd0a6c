"""What the planner (``passes.plan``) makes of one kernel, and what it asks about the kernel: the plan the phases
(``passes.two_phase``, ``passes.layout``) read, built whole and frozen, and the front end's protocol."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.atomics import WarpNames
from warp_rewrite.passes.launch_trips import Bound
from warp_rewrite.passes.syntax import Located


class Unit(Protocol):
    """A kernel's or helper's parsed source, as a front end reads it."""

    name: str
    text: str  # the source ``tree`` was parsed from: its node positions refer to this text
    tree: ast.FunctionDef  # read, never changed, by the passes

    def location(self, node: Located) -> str: ...


UnitT = TypeVar("UnitT", bound=Unit)  # the units of one front end, which its methods are asked about


class Frontend(Protocol[UnitT]):
    """What the passes need to know about a kernel beyond its tree, from live Warp objects (the API,
    ``warp_rewrite.live_frontend``) or from source files (the command line, ``warp_rewrite.cli.static_frontend``)."""

    kernel: UnitT
    max_unroll: int  # the longest constant range() Warp unrolls in the kernel's module (its option 'max_unroll')
    backward: bool  # does Warp build the kernel's backward pass (its option 'enable_backward', its module's)?

    def warp_names(self, unit: UnitT) -> WarpNames:
        """How the function's module spells Warp and its atomics."""

    def resolve_helper(self, unit: UnitT, call: ast.Call) -> UnitT | None:
        """The ``@wp.func`` a call in ``unit`` refers to; None for anything else. Raises ``Refusal`` for a
        helper whose source cannot be read."""

    def parameter_types(self, unit: UnitT) -> dict[str, Any]:
        """The Warp type of each parameter of the function, where known (``passes.dtypes.normalized``)."""

    def local_types(self, unit: UnitT) -> dict[str, Any]:
        """The Warp type of each local of the function, where the front end knows it (else the passes infer ints)."""

    def return_type(self, unit: UnitT) -> Any:
        """The function's declared return type, where known."""

    def named_type(self, unit: UnitT, expr: ast.expr) -> Any:
        """The Warp type ``expr`` names in the function (``F`` after ``F = wp.float64``, ``wp.vec3``, a struct),
        where it names one and that is known; a call of it makes a value of that type."""

    def element_struct(self, unit: UnitT, name: str) -> Any:
        """The struct type of the elements of the function's array parameter ``name``; None where they are no
        structs, or where it is not known."""

    def is_builtin(self, unit: UnitT, call: ast.Call) -> bool:
        """Is the callee one whose effect on memory is known: a Warp builtin (atomics aside), a Python builtin,
        a struct or vector constructor? (A ``@wp.func`` is a helper instead: ``resolve_helper``.)"""

    def is_generic(self, unit: UnitT) -> bool:
        """Is the function generic to Warp (a parameter of type ``Any``, an array of ``Any``)? Warp then lets it
        have no ``@wp.func_replay``."""

    def has_custom_gradient(self, unit: UnitT) -> bool:
        """Does a hand-written ``@wp.func_grad`` give the function its adjoint? Warp's backward then calls that
        instead of replaying the function's body: no loop of it (or of what it calls) is replayed."""

    def array(self, path: str) -> dtypes.ArrayInfo | None:
        """What is known of the array argument (or struct field of one) at ``path``; None if it is no array."""

    def int_constant(self, unit: UnitT, name: str) -> int | None:
        """The int that ``name``, which the function does not bind itself, holds where Warp reads it (the function's
        closure, then its module's globals), where the front end can tell; None elsewhere (``constant_ranges``)."""


HelperResolver = Callable[[Unit, ast.Call], "Unit | None"]


def overlap(path: str, other: str) -> bool:
    """Do two argument paths name the same memory, or one a struct holding the other (``s`` and ``s.count``)?"""
    return path == other or path.startswith(other + ".") or other.startswith(path + ".")


def array_at(frontend: Frontend, narrowed: dict[str, Any], path: str) -> dtypes.ArrayInfo | None:
    """What is known of the array at argument ``path``: from the argument's type or, where that is generic (``Any``,
    ``wp.array(dtype=Any)``), from ``narrowed``: the types helpers declare for memory under generic arguments, by
    path (``passes.read_back.MemoryAccesses._narrowed_types``)."""
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


@dataclass(frozen=True)
class Carried:
    """A local a loop changes and later code reads, kept in records for the replay (``Loop.carried``)."""

    local: str
    records: str
    dtype: Any  # its Warp type: ints and bools (vectors of them too) restored plainly, others with their gradient

    @property
    def has_gradient(self) -> bool:
        return not dtypes.holds_no_gradient(self.dtype)


@dataclass(frozen=True)
class Loop:
    """A loop the replay runs from records: one with a consumed atomic somewhere inside (possibly in a called helper),
    or one Warp's backward replays wrong on its own (``passes.loop_hazards``), and the loops around them."""

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
    opaque: bool = False  # nothing differentiable inside: the replay skips it (see passes.plan.Planner._opaque_loops)
    active: str = ""  # replay: flag lowering break/continue, which Warp's reverse pass mishandles
    # a for loop over a spatial query: replayed like a while loop, over its recorded trips, its variable restored
    iterated: bool = False
    # Locals a loop changes: read by later iterations (kept at each iteration's start) or after the loop (kept at
    # its exit). Warp's backward replays loop bodies with loop-carried locals at other values, so the replay kernel
    # restores them from these records.
    carried_in: tuple[Carried, ...] = ()
    carried: tuple[Carried, ...] = ()
    # a loop of unknown length whose range the launch's arguments give (``passes.launch_trips``): no dry run counts it
    argument_range: tuple[Bound, ...] | None = None
    # Locals holding a builtin's result that the loop assigns (``loop_hazards.overwritten_results``): the replay
    # copies each into a variable of its own before the loop, which Warp's forward then overwrites instead
    fresh: tuple[str, ...] = ()

    @property
    def needs_room(self) -> bool:
        """Of unknown length and replayed: it may run more often than its records have room for, so its trips are
        counted (records inside it are stored with ``record_if_room``, and each launch checks the counts)."""
        return self.static_trips is None and not self.opaque


@dataclass(frozen=True)
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
    # a read of an append pool (``passes.memory.pool_arrays``): the marks of the elements the launch read and wrote,
    # shared by every read of the pool; the replay reads memory where the launch's check proves it unchanged
    marks: str = ""

    @property
    def exact(self) -> bool:
        return bool(self.values)

    @property
    def reported(self) -> bool:
        """Does the device name it by its number (its place among the launch spec's first sites): an exact site, whose
        records the exact backward checks, or a read of an append pool, which the record kernel checks?"""
        return self.exact or bool(self.marks)

    def record_names(self) -> list[str]:
        return [n for n in (self.records, self.values, self.order, self.addresses, self.compares) if n]


@dataclass(frozen=True)
class Clone:
    """A helper specialized for one call path."""

    call: ast.Call
    plan: FunctionPlan


@dataclass(frozen=True)
class HelperCall:
    """A call to a helper the plan clones, and whether the clone records anything (it consumes an atomic's
    return or reads memory the launch writes) or only needs a replay twin that writes nothing."""

    call: ast.Call
    helper: Unit
    records: bool


@dataclass(frozen=True)
class FunctionPlan:
    unit: Unit
    name: str  # generated base name (the phase is appended)
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict, repr=False)  # of the unit's tree's nodes
    paths: dict[str, str | None] = field(default_factory=dict)  # the kernel path each parameter names
    sites: list[Site] = field(default_factory=list)
    loops: dict[ast.AST, Loop] = field(default_factory=dict)
    clones: dict[ast.Call, Clone] = field(default_factory=dict)
    # atomics whose value is discarded (bare calls, ``arr[i] += v``): statement (or the conditional expression
    # statement the atomic is a branch of) -> target's argument path
    unconsumed: dict[ast.AST, str | None] = field(default_factory=dict)
    # plain stores into argument arrays (``out[slot] = v``): statement -> the array's argument path
    stores: dict[ast.stmt, str] = field(default_factory=dict)
    # calls that only compute a value or print (``read_back.Analysis.computes_only``): the count phase leaves out
    # those whose value nothing reads (``passes.count_slice``)
    computing: frozenset[ast.Call] = frozenset()

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
                for shared in (site.shadow, site.marks):
                    if shared and shared not in shadows:
                        shadows.append(shared)
            for loop in plan.loops.values():
                names += [loop.trips_records] if loop.trips_records else []
                names += [carried.records for carried in loop.carried_in + loop.carried]
        return names + shadows


@dataclass(frozen=True)
class ReadPlace:
    """Where a function of the plan reads an array the launch writes: the read's node, by the tree it is in and its
    position (a phase's copy of a node keeps its position, not always its identity)."""

    tree: int  # id() of the function's tree
    line: int
    column: int
    node_type: type[ast.AST]
    only_its_value: bool  # an atomic: it reads its target only where its value is used

    @staticmethod
    def of(tree: ast.FunctionDef, node: ast.expr, only_its_value: bool = False) -> ReadPlace:
        return ReadPlace(id(tree), node.lineno, node.col_offset, type(node), only_its_value)


@dataclass(frozen=True)
class KernelPlan:
    root: FunctionPlan
    loops: list[Loop]
    sites: list[Site]
    written: frozenset[str] = frozenset()  # argument paths of the arrays the launch writes
    # those of them a dry run needs copies of, the only ones the count phase writes: the planner's, every one the
    # launch reads back; the count stage's, those its count phase reads (passes.count_slice.fewer_copies)
    copied: frozenset[str] = frozenset()
    narrowed: dict[str, Any] = field(default_factory=dict)  # types of memory under generic arguments (array_at)
    # where the functions the plan clones read each copied array; one written by a function it does not clone, or
    # read in one, has none: the count phase cannot leave out that function's writes or reads, so its copy stays
    read_at: dict[str, frozenset[ReadPlace]] = field(default_factory=dict)

    def without(self, sites: frozenset[Site]) -> KernelPlan:
        """The plan recording none of ``sites``: at their places every phase has the expression as written."""
        return dataclasses.replace(
            self, root=_without(self.root, sites), sites=[s for s in self.sites if s not in sites]
        )


def _without(plan: FunctionPlan, sites: frozenset[Site]) -> FunctionPlan:
    clones = {call: Clone(clone.call, _without(clone.plan, sites)) for call, clone in plan.clones.items()}
    return dataclasses.replace(plan, sites=[s for s in plan.sites if s not in sites], clones=clones)


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
