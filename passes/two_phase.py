"""The core rewrite: one kernel becomes a record kernel and a replay kernel.

The functions here return ASTs meant for printing (the generated code is compiled from text), so new nodes
carry no line numbers; they never change the trees they read (see ``PhaseWriter``), and a statement they leave
as it was keeps its position, so it can be printed from the user's source (``rewrite.printing``).

Record kernel: the complete original forward, plus a store of each consumed atomic's returned value into a
per-launch record array. It runs forward only (``enable_backward=False``).

Replay kernel: the original code with each consumed atomic's value read back from the records. Each atomic
call stays in place as the argument of ``replay_returned``, so Warp still generates its adjoint
(d target / d value); its side effect never runs, since this kernel is launched only in backward, where
Warp skips atomics when it replays the forward code. It keeps what carries gradients: its statements that only
compute values nothing kept reads are left out (``passes.slicing``), and so are the records they read
(``pipeline.unread_reads``, ``passes.replay_needs``). A cloned helper whose replay still writes memory gets a
twin that writes nothing, registered for Warp's backward to run in its place (``passes.twins``).

Both wrap the atomic call where it stands, so argument evaluation order, short-circuit ``and``/``or`` and
``x if c else y`` keep the original semantics. Loops around an atomic get a coordinate (see ``passes.plan``);
a while loop becomes, in the replay kernel, a for loop over its recorded trip count, since Warp's backward
re-evaluates a while loop's condition on the final state rather than replaying its iterations.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from warp_rewrite.passes import count_slice, dtypes, replay_needs, twins
from warp_rewrite.passes.atomics import positional_arguments
from warp_rewrite.passes.constant_ranges import bound_value, is_static
from warp_rewrite.passes.layout import RecordParam
from warp_rewrite.passes.plan_types import Carried, FunctionPlan, KernelPlan, Loop, Site, needs_forward_twin
from warp_rewrite.passes.pruning import constructs, pruned
from warp_rewrite.passes.slicing import sliced_function
from warp_rewrite.passes.syntax import CopyOnWrite, called_name, function_locals, walk
from warp_rewrite.passes.trip_parameters import clone_trip_parameters, trip_capacities, trip_parameters

if TYPE_CHECKING:  # the passes import no runtime: the ABI's names come in through ModuleNames
    from warp_rewrite.runtime.abi import RuntimeNames

RECORD, REPLAY = "record", "replay"
# The record kernel without its writes into arrays the plan does not copy, and without its records (a dry run's are
# thrown away): what a dry run launches to count the trips of loops of unknown length, without copies of those
# arrays (see warp_rewrite.runtime), cut down to what decides trip counts (passes.count_slice, which also decides
# which arrays the count reads, and so which are copied).
COUNT = "count"
# A cloned helper's replay variant with no atomic at all: what backward's forward replay runs instead of it
# (registered by the runtime's ``replays``, through wp.func_replay), since Warp re-runs a helper's atomics when it
# replays a call.
REPLAY_FORWARD = "replay_forward"


@dataclass(frozen=True)
class ModuleNames:
    """How generated code names what lives outside the kernels: Warp and warp-rewrite's runtime.

    Both are names of the kernel's module (the user's alias of warp, and a name fresh there for the runtime); every
    runtime name generated code calls comes spelled from the ABI's table (``warp_rewrite.runtime.abi``).
    """

    warp: str
    runtime: RuntimeNames


@dataclass(frozen=True)
class KernelNames:
    """Parameters and locals the generated kernels and clones add, fresh in the kernel and every helper involved."""

    thread: str  # the thread's row in the record arrays
    coordinate: str  # the coordinate parameter of cloned helpers
    launch_shape: str
    coords: tuple[str, ...]  # one per launch dimension the kernel's own wp.tid() unpacks (1 to 4)
    trip_capacity: str  # with a loop's id appended: the parameter passing that loop's capacity, where it is one
    loop_number: str  # with a loop's id appended: the parameter passing a clone that loop's id
    status: str  # the launch's status: the device's checks (see the runtime's ``check``)
    own_thread: bool = False  # ``thread`` is the kernel's own local, bound to wp.tid() by its first statement


@dataclass(frozen=True)
class PhaseSettings:
    """What every function of one phase of one kernel is written with."""

    phase: str
    module: ModuleNames
    names: KernelNames
    int_paths: frozenset[str]  # atomic targets holding integers: no adjoint
    capacities: dict[int, str]  # each replayed loop's room per execution, as code (a constant or a parameter)
    trip_args: tuple[str, ...]  # the kernel's trip parameters (the launch passes them)
    may_outgrow: frozenset[int]  # loops whose records are stored with record_if_room
    readers: dict[str, str]  # record parameter -> the runtime function reading it back (replay), as spelled
    site_numbers: dict[int, int]  # each site's place among the kernel's (the launch spec's), by id: in refusals
    dropped: frozenset[str] = frozenset()  # count phase: argument paths whose writes it leaves out
    twinless: frozenset[int] = frozenset()  # replay: clones (by id of their plan) whose replay is its own twin


def _expr(text: str) -> ast.expr:
    if text.isidentifier():  # most are names: no parser needed
        return ast.Name(text, ast.Load())
    return ast.parse(text, mode="eval").body


def _stmt(text: str) -> ast.stmt:
    return ast.parse(text).body[0]


_Node = TypeVar("_Node", bound=ast.AST)


def _parsed(text: str, kind: type[_Node]) -> _Node:
    """``_stmt`` of a statement of a known kind (a ``for``, a ``def``)."""
    statement = _stmt(text)
    assert isinstance(statement, kind)
    return statement


def _lower_jumps(body: list[ast.stmt], active: str) -> list[ast.stmt]:
    """Replace this loop's break/continue by clearing ``active`` and guarding what follows.

    Warp's reverse pass replays each iteration before its adjoint, and a replayed break or continue jumps
    past that adjoint. The replay kernel runs exactly the recorded iterations, so a break can end the
    iteration like a continue does.
    """
    lowered = []
    for index, stmt in enumerate(body):
        if isinstance(stmt, ast.Break | ast.Continue):
            lowered.append(_stmt(f"{active} = False"))
            return lowered
        if isinstance(stmt, ast.If) and _has_jump(stmt):
            # A new statement, not the old one changed: an unchanged one may be printed from its source text.
            lowered.append(
                ast.If(stmt.test, _lower_jumps(stmt.body, active) or [ast.Pass()], _lower_jumps(stmt.orelse, active))
            )
            rest = _lower_jumps(body[index + 1 :], active)
            if rest:
                lowered.append(ast.If(_expr(active), rest, []))
            return lowered
        lowered.append(stmt)
    return lowered


def _every_argument(call: ast.Call, helper: ast.FunctionDef) -> list[ast.expr]:
    """The call's arguments in the helper's parameter order, defaults filled in for those it leaves out: a clone's
    record parameters come after all of the helper's, so none of them can be left to a default or a keyword."""
    params = helper.args.args
    defaults = dict(
        zip([p.arg for p in params[len(params) - len(helper.args.defaults) :]], helper.args.defaults, strict=True)
    )
    given = dict(zip([p.arg for p in params], call.args, strict=False))
    given.update({keyword.arg: keyword.value for keyword in call.keywords if keyword.arg})
    return [given[p.arg] if p.arg in given else copy.deepcopy(defaults[p.arg]) for p in params]


def _has_jump(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Break | ast.Continue):
        return True
    return isinstance(stmt, ast.If) and any(_has_jump(s) for s in [*stmt.body, *stmt.orelse])


class PhaseWriter(CopyOnWrite):
    """Rewrites one function of the plan (kernel or cloned helper) for one phase.

    It never changes the tree it reads: a node with a changed child is copied (``CopyOnWrite``), so the
    planner's tree serves both phases without a new parse each, the phases share their unchanged parts, and a
    statement of the result that is a statement of the planner's tree is one the phase left as it was (printed
    from the user's text: ``warp_rewrite.printing``). The plan's entries are the planner's nodes themselves, so
    the writer finds them by identity.
    """

    def __init__(self, plan: FunctionPlan, settings: PhaseSettings, coordinate: str, in_helper: bool):
        self.plan = plan
        self._inner_loops: set[tuple[int, int]] | None = None  # where the loops inside another are (``_dynamic``)
        self._locals: set[str] = set()  # the function's parameters and assigned locals
        self.settings = settings
        self.phase = settings.phase
        self.forward = settings.phase in (RECORD, COUNT)  # runs the forward (storing records, in the record phase)
        self.records = settings.phase != COUNT  # stores or reads records
        self.coordinate = coordinate
        self.in_helper = in_helper
        self.kept_calls: set[int] = set()  # atomics and clone calls the phase keeps, by id
        self.sites = {site.statement or site.node: site for site in plan.sites}
        edited = [*plan.unconsumed, *self.sites, *plan.clones, *plan.loops, *plan.stores]
        parents = plan.parents
        self.on_path: set[int] = set()  # ids of the edited nodes and every node above them
        for start in edited:
            node: ast.AST | None = start
            while node is not None and id(node) not in self.on_path:
                self.on_path.add(id(node))
                node = parents.get(node)

    def visit(self, node: ast.AST) -> ast.AST | list[ast.stmt]:
        """Visit only subtrees that hold something this phase changes; the rest (most math) stays as it is."""
        positioned = getattr(node, "end_col_offset", None) is not None  # nodes this pass made have no position
        if positioned and id(node) not in self.on_path:
            return node
        return super().visit(node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        site, clone = self.sites.get(node), self.plan.clones.get(node)
        visited = self.generic_visit(node)  # inner calls first: an index may come from another atomic
        if site is not None:
            return ast.copy_location(self._site(visited, site), node)
        if clone is not None:
            settings = self.settings
            taken = clone_trip_parameters(clone.plan, settings.trip_args, settings.names)
            trips = [self._trip_argument(name) for name in taken]
            extra = [*(_expr(name) for name in clone.plan.record_params()), *trips, _expr(self.coordinate)]
            visited = copy.copy(visited)
            name = clone_name(clone.plan, self.settings)
            visited.func = ast.copy_location(_expr(name), node.func)
            visited.args = [*_every_argument(visited, clone.plan.unit.tree), *extra]
            visited.keywords = []
            self.kept_calls.add(id(visited))
        return visited

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        site = self.sites.get(node)  # a read of an array the launch writes (passes.memory)
        visited = self.generic_visit(node)
        return visited if site is None else ast.copy_location(self._site(visited, site), node)

    def _trip_argument(self, parameter: str) -> ast.expr:
        """What this function passes for a clone's trip parameter: its own parameter of that name, but a loop's
        number, which the kernel spells as the constant it is."""
        numbered = parameter.removeprefix(self.settings.names.loop_number)
        if not self.in_helper and numbered != parameter and numbered.isdigit():
            return ast.Constant(int(numbered))
        return _expr(parameter)

    def _loop_number(self, loop: Loop) -> str:
        """The loop's id as this function spells it: a constant in the kernel, a parameter in a clone (so that a
        helper's clone reads the same in every kernel that calls it, and a file keeps one definition of it)."""
        return f"{self.settings.names.loop_number}{loop.id}" if self.in_helper else str(loop.id)

    @property
    def _runtime(self) -> RuntimeNames:
        return self.settings.module.runtime

    def _site(self, call: ast.Call | ast.Subscript, site: Site) -> ast.expr:
        """The recorded value: stored by the record phase, read back by the replay."""
        if site.exact:
            assert isinstance(call, ast.Call)  # (only atomics have exact sites)
            return self._exact_site(call, site)
        if self.forward:
            self.kept_calls.add(id(call))
            value = self._shadowed(call, site) if site.shadow else call
            if not self.records:  # the count phase: the value as the forward reads it, nowhere stored
                return value
            recorder = _expr(self._recorder(site.loops))
            if site.marks and self.phase == RECORD:
                value = self._pool_access(self._runtime.pool_read, call, site, value)
            return ast.Call(recorder, [value, _expr(site.records), _expr(self.coordinate)], [])
        if site.marks and self.phase == REPLAY:  # memory, where the launch's check proves the launch left it alone
            arguments = [call, _expr(site.records), _expr(self.coordinate), _expr(site.marks)]
            return ast.Call(_expr(self._runtime.pool_value), arguments, [])
        keeps_inner = any(id(n) in self.kept_calls for n in walk(call)[1:])
        # A float atomic's own adjoint (d target / d value) is kept: its return is replayed as a constant, which
        # the launch takes only where no gradient can flow through it (``if old > d``), but the target's
        # gradient still reaches the operands (the depth that won ``wp.atomic_min(zbuf, p, d)``).
        keeps_adjoint = site.op in ("add", "sub", "min", "max") and site.target not in self.settings.int_paths
        if self.phase == REPLAY_FORWARD or not (keeps_inner or keeps_adjoint):
            # Just the recorded value: an int target's atomic has no adjoint, and a read none to keep.
            reader = self.settings.readers.get(site.records)
            if reader:  # (the twin reads alike: one that then reads as its replay does is left out)
                return ast.Call(_expr(reader), [_expr(site.records), _expr(self.coordinate)], [])
            return _expr(f"{site.records}[{self.coordinate}]")
        # The atomic stays, as the stand-in's argument, for the calls inside it that keep adjoints: Warp skips
        # it when replaying but still generates its adjoint.
        self.kept_calls.add(id(call))
        stand_in = _expr(self._runtime.replay_returned)
        return ast.Call(stand_in, [call, _expr(site.records), _expr(self.coordinate)], [])

    def _pool_access(self, function: str, access: ast.expr, site: Site, *value: ast.expr) -> ast.Call:
        """``pool_read(value, address, marks, status, site)`` or ``pool_written(address, ...)``: the record kernel
        marks the element of an append pool it reads or writes, and refuses the launch where one is both."""
        assert isinstance(access, ast.Subscript)  # (a pool is read and stored element by element: memory.pool_arrays)
        indices = access.slice.elts if isinstance(access.slice, ast.Tuple) else [access.slice]
        address = ast.Call(_expr(self._runtime.flat_index), copy.deepcopy([access.value, *indices]), [])
        number = ast.Constant(self.settings.site_numbers[id(site)])
        arguments = [*value, address, _expr(site.marks), _expr(self.settings.names.status), number]
        return ast.Call(_expr(function), arguments, [])

    def _shadowed(self, read: ast.expr, site: Site) -> ast.expr:
        """A compared read of a target whose values live in its shadow while the record kernel runs: read there
        (the runtime's ``shadowed_read``), as the original reads the target after the atomics before it."""
        assert isinstance(read, ast.Subscript)  # (shadow sites are element reads: Planner._compared_shadow_read)
        indices = read.slice.elts if isinstance(read.slice, ast.Tuple) else [read.slice]
        address = ast.Call(_expr(self._runtime.flat_index), copy.deepcopy([read.value, *indices]), [])
        return ast.Call(_expr(self._runtime.shadowed_read), [read, address, _expr(site.shadow)], [])

    def _exact_site(self, call: ast.Call, site: Site) -> ast.expr:
        """A float atomic whose returned values get exact gradients (see the runtime's ``exact_add``): recorded
        through the target's shadow, replayed as its recorded value."""
        coordinate = _expr(self.coordinate)
        if self.forward:
            self.kept_calls.add(id(call))
            target, *indices, value = positional_arguments(call)
            address = ast.Call(_expr(self._runtime.flat_index), [target, *indices[: site.indices]], [])
            operands = [address, *indices[site.indices :], value]  # atomic_cas: the compare operand first
            names = [site.shadow, site.records, site.values, site.order, site.addresses]
            names += [site.compares] if site.compares else []
            arguments = [*operands, *(_expr(n) for n in names), coordinate]
            return ast.Call(_expr(self._runtime.exact(site.op)), arguments, [])
        if self.phase == REPLAY_FORWARD:
            return _expr(f"{site.records}[{self.coordinate}]")
        arguments = [positional_arguments(call)[-1], _expr(site.values), _expr(site.records), coordinate]
        return ast.Call(_expr(self._runtime.exact_returned), arguments, [])

    def _drops(self, stmt: ast.stmt) -> bool:
        """Does this phase leave out a write into memory: an atomic whose value is discarded, or a store?"""
        path = self.plan.unconsumed.get(stmt, self.plan.stores.get(stmt, ""))
        if path == "":
            return False
        if self.phase == COUNT:
            return path in self.settings.dropped
        if self.phase == REPLAY_FORWARD:
            return True
        # In a helper's replay an int write would run again in backward and has no adjoint to keep.
        return self.phase == REPLAY and self.in_helper and path in self.settings.int_paths

    def _dropped(self, stmt: ast.Expr | ast.Assign | ast.AnnAssign | ast.AugAssign) -> list[ast.stmt]:
        """What stays of a write this phase leaves out: nothing; but in the count phase, the calls in it (an index
        may come from an atomic whose target the launch reads back), each a statement of its own."""
        if self.phase != COUNT:
            return [ast.Pass()]
        visited = self.generic_visit(stmt)
        if isinstance(visited, ast.Expr):  # a bare atomic: what its index and value arguments call
            assert isinstance(visited.value, ast.Call)
            parts = positional_arguments(visited.value)[1:]
        else:
            targets = visited.targets if isinstance(visited, ast.Assign) else [visited.target]
            parts = [part for part in (visited.value, *targets) if part is not None]  # (a write has a value)
        calls = []
        for part in parts:
            calls += _outermost_calls(part)
        return [ast.copy_location(ast.Expr(call), stmt) for call in calls] or [ast.Pass()]

    def visit_Assign(self, node: ast.Assign | ast.AnnAssign) -> ast.stmt | list[ast.stmt]:
        if self._drops(node):
            return self._dropped(node)
        visited = self.generic_visit(node)
        pool = self._pools.get(self.plan.stores.get(node, ""))
        if pool is None or self.phase != RECORD:
            return visited
        target = visited.targets[0] if isinstance(visited, ast.Assign) else visited.target
        written = ast.Expr(self._pool_access(self._runtime.pool_written, target, pool))
        return [visited, ast.copy_location(written, node)]

    @property
    def _pools(self) -> dict[str, Site]:
        """The append pools the function reads, each with its first read (``pool_written`` refuses naming it)."""
        pools: dict[str, Site] = {}
        for site in self.plan.sites:
            if site.marks:
                pools.setdefault(site.target, site)
        return pools

    visit_AnnAssign = visit_Assign

    def visit_Expr(self, node: ast.Expr) -> ast.stmt | list[ast.stmt]:
        if self._drops(node):
            return self._dropped(node)
        if node.value in self.sites and self.phase == REPLAY_FORWARD:
            return ast.Pass()
        return self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.stmt | list[ast.stmt]:
        site = self.sites.get(node)  # ``arr[i] += v`` on a target with exact float returns
        if site is not None:
            if self.phase == REPLAY_FORWARD:
                return ast.Pass()
            visited = self.generic_visit(node)
            target = visited.target
            assert isinstance(target, ast.Subscript)  # (a site: an update of an element)
            index = target.slice
            indices = index.elts if isinstance(index, ast.Tuple) else [index]
            atomic = _expr(f"{self.settings.module.warp}.atomic_{site.op}")
            call = ast.copy_location(ast.Call(atomic, [target.value, *indices, visited.value], []), node)
            return ast.copy_location(ast.Expr(self._site(call, site)), node)
        return self._dropped(node) if self._drops(node) else self.generic_visit(node)

    def _recorder(self, loops: tuple[int, ...]) -> str:
        """The record helper for a coordinate inside ``loops``: one checking for room if a loop may outgrow it, and
        always in a helper's clone, which then reads the same wherever it is called from (inside such a loop of the
        kernel's or not), so that one definition serves every call (``rewrite.cli.shared_clones``)."""
        runtime = self._runtime
        checked = self.in_helper or self.settings.may_outgrow.intersection(loops)
        return runtime.record_if_room if checked else runtime.record_returned

    def _iteration_start(self, loop: Loop, iteration: str, body: list[ast.stmt]) -> list[ast.stmt]:
        """The iteration's coordinate, where it or ``body`` (the iteration's statements) reads it, then its
        loop-carried locals recorded (or, replaying, restored)."""
        coordinate = f"{self.coordinate} * {self.settings.capacities[loop.id]} + {iteration}"
        statements = []
        for carried in loop.carried_in if self.records else ():
            if self.forward:
                recorder = self._recorder((*loop.outer_loops, loop.id))
                statements.append(_stmt(f"{recorder}({carried.local}, {carried.records}, {loop.coordinate})"))
            else:
                statements.append(self._restored(carried, loop.coordinate))
        if any(isinstance(n, ast.Name) and n.id == loop.coordinate for s in (*statements, *body) for n in walk(s)):
            statements.insert(0, _stmt(f"{loop.coordinate} = {coordinate}"))
        return statements

    def _restored(self, carried: Carried, coordinate: str) -> ast.stmt:
        """A carried local set back to the value the forward had (the replay): an int or bool read plainly (it has no
        gradient), any other value through its carrier, which passes the gradient on to the local as the replay
        holds it, so that the gradient flows through the loop from trip to trip as in the forward."""
        if not carried.has_gradient:
            return _stmt(f"{carried.local} = {carried.records}[{coordinate}]")
        carrier = self._runtime.carrier(carried.dtype)
        return _stmt(f"{carried.local} = {carrier}({carried.local}, {carried.records}, {coordinate})")

    def _visit_body(self, loop: Loop, body: list[ast.stmt]) -> list[ast.stmt]:
        outer, self.coordinate = self.coordinate, loop.coordinate
        body = [new for stmt in body for new in self._statements(stmt)]
        self.coordinate = outer
        if self.phase == REPLAY and loop.jumps:
            body = [_stmt(f"{loop.active} = True"), *_lower_jumps(body, loop.active)]
        return body

    def _statements(self, statement: ast.stmt) -> list[ast.stmt]:
        """What visiting a statement makes of it: a statement, or several."""
        new = self.visit(statement)
        if isinstance(new, list):
            return new
        assert isinstance(new, ast.stmt)
        return [new]

    def _after(self, loop: Loop) -> list[ast.stmt]:
        """Record (or, replaying, restore) the trip count and the locals the loop hands on (counting, nothing)."""
        if not self.records:
            return []
        if self.forward:
            kept = [(loop.counter, loop.trips_records)] if loop.trips_records else []
            kept += [(carried.local, carried.records) for carried in loop.carried]
            recorder = self._recorder(loop.outer_loops)
            return [_stmt(f"{recorder}({name}, {records}, {self.coordinate})") for name, records in kept]
        return [self._restored(carried, self.coordinate) for carried in loop.carried]

    def _check_trips(self, loop: Loop, trips: str) -> ast.stmt:
        """``check_trips(status, loop, trips, capacity)``: tell the launch about an execution with more trips than
        the records have room for (only then: an atomic on one address from every thread would serialize them on a
        GPU). The dry run that counts trips passes a capacity of 0, so there every execution reports."""
        capacity = self.settings.capacities[loop.id]
        status = self.settings.names.status
        return _stmt(f"{self._runtime.check_trips}({status}, {self._loop_number(loop)}, {trips}, {capacity})")

    def _opaque(self, node: ast.For | ast.While, loop: Loop) -> list[ast.stmt]:
        """Record: the loop as it is (count: without the writes it leaves out), then the ints it hands on. Replay:
        just those ints, restored."""
        if self.forward:
            return [node if self.phase == RECORD else self.generic_visit(node), *self._after(loop)]
        return self._after(loop) or [ast.Pass()]

    def visit_For(self, node: ast.For) -> ast.AST | list[ast.stmt]:
        loop = self.plan.loops.get(node)
        return self._visit_loop(
            node, self._rewrite_counted if loop is not None and loop.iterated else self._rewrite_for
        )

    def visit_While(self, node: ast.While) -> ast.AST | list[ast.stmt]:
        return self._visit_loop(node, self._rewrite_counted)

    def _visit_loop(self, node: ast.For | ast.While, rewrite: Callable) -> ast.AST | list[ast.stmt]:
        """A loop around a consumed atomic is rewritten, into a copy; any other loop is visited like any node."""
        loop = self.plan.loops.get(node)
        if loop is None:
            return self.generic_visit(node)
        if loop.opaque:
            return self._opaque(node, loop)
        rewritten = rewrite(copy.copy(node), loop)
        if self.phase != REPLAY or not loop.fresh:
            return rewritten
        # Each builtin's result the loop would overwrite in place, in a variable of its own (``Loop.fresh``)
        copies = [_stmt(f"{name} = {self._runtime.fresh}({name})") for name in loop.fresh]
        return [*copies, *(rewritten if isinstance(rewritten, list) else [rewritten])]

    def _dynamic(self, loop: ast.For, bound: ast.expr) -> ast.expr:
        """A bound of a loop inside another, to assign to a local: in ``int(...)`` where it names no local or
        parameter, so that Warp makes it a variable, not a constant, which it refuses to assign inside a dynamic loop
        ("Error mutating a constant": Newton's surface gripper's elimination loops)."""
        if self._inner_loops is None:
            tree = self.plan.unit.tree
            outer = [node for node in walk(tree) if isinstance(node, ast.For | ast.While)]
            self._inner_loops = {
                _position(inner)
                for node in outer
                for inner in walk(node)
                if inner is not node and isinstance(inner, ast.For)
            }
            self._locals = function_locals(tree)
        if _position(loop) not in self._inner_loops or any(
            isinstance(n, ast.Name) and n.id in self._locals for n in walk(bound)
        ):
            return bound
        return ast.Call(ast.Name("int", ast.Load()), [bound], [])

    def _rewrite_for(self, node: ast.For, loop: Loop) -> list[ast.stmt]:
        assert isinstance(node.target, ast.Name)  # a loop over range() with one variable (refusals.check_loop)
        variable = node.target.id
        iterated = self.visit(node.iter)
        assert isinstance(iterated, ast.Call)
        node.iter = iterated
        before: list[ast.stmt] = []
        args = iterated.args
        start: str | int
        step: str | int
        if loop.static_trips is None:
            values = [_expr("0"), *args, _expr("1")] if len(args) == 1 else [*args, _expr("1")][:3]
            spelled = []  # start, stop and step as the code after this reads them
            for name, value in zip(loop.bounds, values, strict=True):
                if _stands(value, node):
                    spelled.append(ast.unparse(value))
                    continue
                hoisted = ast.Assign([ast.Name(name, ast.Store())], self._dynamic(node, value))
                before.append(ast.copy_location(hoisted, node))  # (pruned when unread)
                spelled.append(name)
            if any(name in spelled for name in loop.bounds):  # else the loop keeps the user's own range()
                as_written = {1: spelled[1:2], 2: spelled[:2], 3: spelled}[len(args)]
                node.iter = _expr(f"range({', '.join(as_written)})")
            start, stop, step = (int(text) if _is_int(text) else text for text in spelled)
            if self.forward:  # (a range(n) of n < 0 makes no trip, and reports none)
                trips = stop if (start, step) == (0, 1) else f"{self._runtime.range_length}({', '.join(spelled)})"
                before.append(self._check_trips(loop, str(trips)))
        else:
            # (every bound's value is known, ``constant_ranges.bound_value``: the trips are known)
            constants = [known for a in args if (known := bound_value(a)) is not None]
            start, step = (0, 1) if len(constants) == 1 else (constants[0], constants[2] if len(constants) == 3 else 1)
        body = self._visit_body(loop, node.body)
        if not loop.trips_records:
            # The loop variable as an int32, whatever Warp made of it (it unrolls a constant range(), and its variable
            # is then a constant that C++ cannot add to an int without a cast); range(n) and range(a, b) step by one:
            # no division per iteration.
            counted = f"{self.settings.module.warp}.int32({variable})"
            if (start, step) == (0, 1) or len(args) == 1:
                iteration = counted
            elif step == 1 or len(args) == 2:
                iteration = f"{counted} - {start}"
            else:
                iteration = f"({counted} - {start}) // {step}"
            node.body = [*self._iteration_start(loop, iteration, body), *body]
            return [*before, node, *self._after(loop)]
        counter = loop.counter
        if self.forward:
            # A loop that breaks: count the iterations it entered, for the replay to run exactly those.
            node.body = [*self._iteration_start(loop, counter, body), _stmt(f"{counter} = {counter} + 1"), *body]
            return [*before, _stmt(f"{counter} = {self.settings.module.warp}.int32(0)"), node, *self._after(loop)]
        replay = _parsed(f"for {counter} in range({loop.trips_records}[{self.coordinate}]):\n    pass", ast.For)
        position = _stmt(f"{variable} = {start} + {counter} * {step}")
        replay.body = [position, *self._iteration_start(loop, counter, body), *body]
        return [*before, ast.copy_location(replay, node), *self._after(loop)]

    def _rewrite_counted(self, node: ast.While | ast.For, loop: Loop) -> list[ast.stmt]:
        """A while loop, or a for loop over a spatial query: the record kernel counts its trips, and the replay runs as
        many, as a for loop over a range (Warp's backward evaluates a while loop's condition again, and the query's
        state is gone); what the condition or the query's step wrote comes back from each trip's records."""
        counter, trips = loop.counter, loop.trips_records
        body = self._visit_body(loop, node.body)
        if self.forward:
            node.body = [*self._iteration_start(loop, counter, body), _stmt(f"{counter} = {counter} + 1"), *body]
            return [
                _stmt(f"{counter} = {self.settings.module.warp}.int32(0)"),
                node,
                self._check_trips(loop, counter),
                *self._after(loop),
            ]
        # Replay: exactly the recorded iterations, as a for loop Warp can run backward.
        replay = _parsed(f"for {counter} in range({trips}[{self.coordinate}]):\n    pass", ast.For)
        replay.body = [*self._iteration_start(loop, counter, body), *body]
        return [ast.copy_location(replay, node), *self._after(loop)]


def _stands(bound: ast.expr, loop: ast.For) -> bool:
    """Can a bound of ``loop``'s range be read again where it stands, before the loop and in it, for the same value
    (its trip check, its records' coordinate)? An int literal, a ``wp.static(...)`` (which Warp evaluates once, when
    it builds the kernel: left as written, Warp unrolls the loop or not as it does the original's), a name the loop
    does not assign, or such a name's ``.shape[i]``; anything else is evaluated once, into a local before the loop."""
    assigned = {n.id for n in walk(loop) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if isinstance(bound, ast.UnaryOp) and isinstance(bound.op, ast.USub):
        bound = bound.operand
    if is_static(bound):
        return True
    if isinstance(bound, ast.Constant):
        return isinstance(bound.value, int) and not isinstance(bound.value, bool)
    if (
        isinstance(bound, ast.Subscript)
        and isinstance(bound.value, ast.Attribute)
        and bound.value.attr == "shape"
        and isinstance(bound.slice, ast.Constant)
    ):
        bound = bound.value.value
    return isinstance(bound, ast.Name) and bound.id not in assigned


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def launch_arity(kernel: ast.FunctionDef) -> int:
    """How many launch dimensions the kernel's ``wp.tid()`` unpacks: the rewritten kernels index by as many."""
    arity = 1
    statements = list(kernel.body)  # an assignment is a statement: no need to look inside expressions
    for node in statements:
        statements += [*getattr(node, "body", ()), *getattr(node, "orelse", ())]
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and called_name(node.value) == "tid"
            and isinstance(node.targets[0], ast.Tuple)
        ):
            arity = max(arity, len(node.targets[0].elts))
    return arity


def _position(node: ast.AST) -> tuple[int, int]:
    """Where a node is: the same for the copies the writer makes of it."""
    return getattr(node, "lineno", -1), getattr(node, "col_offset", -1)


def thread_index_prologue(names: KernelNames, warp: str) -> list[ast.stmt]:
    """This thread's row in the record arrays: ``wp.tid()`` itself on 1-D launches (no divisions), nothing where the
    kernel binds it first thing (``own_writes.leading_thread_index``)."""
    if len(names.coords) == 1:
        return [] if names.own_thread else [_stmt(f"{names.thread} = {warp}.tid()")]
    linear = names.coords[0]
    for axis, coord in enumerate(names.coords[1:], start=1):
        linear = f"({linear}) * {names.launch_shape}[{axis}] + {coord}"
    return [_stmt(f"{', '.join(names.coords)} = {warp}.tid()"), _stmt(f"{names.thread} = {linear}")]


def _decorator(warp: str, kind: str, options: dict) -> ast.expr:
    """``@wp.kernel(key=value, ...)``; with a ``**expr`` of the user's (an option "**expr"), one dict of them all,
    the named ones last, so that ``enable_backward=False`` wins over whatever ``expr`` holds."""
    unpacked = [key for key in options if key.startswith("**")]
    named = {key: value for key, value in options.items() if not key.startswith("**")}
    if unpacked:
        entries = [*unpacked, *(f"{key!r}: {value!r}" for key, value in named.items())]
        return _expr(f"{warp}.{kind}(**{{{', '.join(entries)}}})")
    keywords = ", ".join(f"{key}={value!r}" for key, value in named.items())
    return _expr(f"{warp}.{kind}({keywords})" if keywords else f"{warp}.{kind}")


def record_annotation(record: RecordParam, module: ModuleNames) -> str:
    """``wp.array(dtype=wp.float32)``; the runtime's ``Any`` where the dtype is only known at launch."""
    generic = module.runtime.Any
    if record.kind in ("shadow", "order"):  # (target elements, words) and (operations, components)
        return f"{module.warp}.array2d(dtype={module.warp}.{'uint64' if record.kind == 'shadow' else 'int32'})"
    dtype = dtypes.source(record.dtype, module.warp) if record.dtype is not None else None
    return f"{module.warp}.array(dtype={dtype or generic})"


def _add_params(function: ast.FunctionDef, params: list[tuple[str, str]], keep_defaults: bool = True) -> None:
    """Append parameters; a clone's calls pass every argument (``_every_argument``), so it keeps no defaults."""
    function.args = copy.copy(function.args)
    function.args.args = [*function.args.args, *(ast.arg(name, _expr(annotation)) for name, annotation in params)]
    if not keep_defaults:
        function.args.defaults = []


def phase_name(plan: FunctionPlan, phase: str) -> str:
    """The name of the function ``phase`` makes of ``plan``."""
    return f"{plan.name}_{phase}"


def clone_name(plan: FunctionPlan, settings: PhaseSettings) -> str:
    phase = settings.phase
    if phase == REPLAY_FORWARD and id(plan) in settings.twinless:
        phase = REPLAY  # its replay writes nothing: it is its own forward twin
    return phase_name(plan, phase)


def phase_function(
    plan: FunctionPlan,
    settings: PhaseSettings,
    records: dict[str, RecordParam],
    options: dict | None = None,
) -> ast.FunctionDef:
    """One function of the plan rewritten for ``settings.phase``: the kernel when ``options`` is given, else a
    cloned helper."""
    is_kernel = options is not None
    names, module = settings.names, settings.module
    coordinate = names.thread if is_kernel else names.coordinate
    visited = PhaseWriter(plan, settings, coordinate, in_helper=not is_kernel).visit(plan.unit.tree)
    assert isinstance(visited, ast.FunctionDef)
    function = copy.copy(visited)
    function.name = phase_name(plan, settings.phase)
    if ast.get_docstring(function) is not None:  # the user's function has it: each phase would repeat it
        function.body = function.body[1:] or [ast.Pass()]
    w = module.warp
    params = [(name, record_annotation(records[name], module)) for name in plan.record_params()]
    for name in settings.trip_args if is_kernel else clone_trip_parameters(plan, settings.trip_args, names):
        params.append((name, f"{w}.array(dtype={w}.int32)" if name == names.status else "int"))
    if options is not None:  # (is_kernel)
        function.decorator_list = [_decorator(w, "kernel", options)]
        if len(names.coords) > 1:  # see thread_index_prologue
            params.append((names.launch_shape, f"{w}.vec4i"))
        _add_params(function, params)
        prologue = thread_index_prologue(names, w)
        if settings.phase == REPLAY and names.status in settings.trip_args:  # a refused launch has no gradients
            prologue.append(_stmt(f"if {module.runtime.refused}({names.status}):\n    return"))
        function.body = [*prologue, *function.body]
    else:
        function.decorator_list = [_decorator(w, "func", {})]
        _add_params(function, [*params, (names.coordinate, "int")], keep_defaults=False)
    return function


def mentioning(function: ast.FunctionDef, closure_variable: Callable[[str], bool]) -> ast.FunctionDef:
    """``function`` whose body names, in a statement of its own that Warp evaluates to nothing, each closure variable
    its annotations name and its body does not, so that Python captures it (see ``pipeline.keep_closures``)."""
    annotations = [arg.annotation for arg in function.args.args if arg.annotation is not None]
    annotations += [function.returns] if function.returns is not None else []
    named = {n.id for annotation in annotations for n in walk(annotation) if isinstance(n, ast.Name)}
    used = {n.id for statement in function.body for n in walk(statement) if isinstance(n, ast.Name)}
    missing = sorted(name for name in named - used if closure_variable(name))
    if not missing:
        return function
    function = copy.copy(function)
    function.body = [*(ast.Expr(_expr(name)) for name in missing), *function.body]
    return function


def _outermost_calls(expr: ast.expr) -> list[ast.Call]:
    """The calls in ``expr`` that are not inside another one, but those that only make a value, in order."""
    if isinstance(expr, ast.Call) and not constructs(expr):
        return [expr]
    return [
        call for child in ast.iter_child_nodes(expr) if isinstance(child, ast.expr) for call in _outermost_calls(child)
    ]


def phase_functions(
    plan: KernelPlan,
    phase: str,
    module: ModuleNames,
    names: KernelNames,
    records: dict[str, RecordParam],
    int_paths: frozenset[str],
    options: dict,
    max_records: int | None = None,
) -> list[ast.FunctionDef]:
    """The kernel for ``phase`` preceded by its cloned helpers, callees first.

    ``max_records``: the room per execution of loops of unknown length, when it is fixed for every launch of the
    kernels; None leaves it to each launch (see ``trip_capacities``).
    """
    readers = {}
    for site in plan.sites:
        dtype = records[site.records].dtype
        reader = module.runtime.reader(dtype) if dtype is not None else None
        if reader and not site.exact:  # exact returns are read by exact_returned
            readers[site.records] = reader
    settings = PhaseSettings(
        phase,
        module,
        names,
        int_paths,
        capacities=trip_capacities(plan.loops, names, max_records),
        trip_args=trip_parameters(plan, names, max_records),
        may_outgrow=frozenset(loop.id for loop in plan.loops if loop.needs_room),
        readers=readers,
        site_numbers={id(site): number for number, site in enumerate(s for s in plan.sites if s.reported)},
        dropped=plan.written - plan.copied if phase == COUNT else frozenset(),
    )
    computing = frozenset().union(*(function.computing for function in plan.root.walk()))
    replay_leaves_out = replay_needs.leaves_out(computing, module.runtime)

    def tidy(function: ast.FunctionDef) -> ast.FunctionDef:
        if phase == RECORD:
            return function  # the user's forward
        return sliced_function(function, replay_leaves_out) if phase == REPLAY else pruned(function)

    functions = []
    twinless: set[int] = set()
    for clone in reversed([p for p in plan.root.walk() if p is not plan.root]):  # callees first
        settings = dataclasses.replace(settings, twinless=frozenset(twinless))
        functions.append(tidy(phase_function(clone, settings, records)))
        if phase != REPLAY:
            continue
        twin = None
        if needs_forward_twin(clone, int_paths):
            twin = tidy(phase_function(clone, dataclasses.replace(settings, phase=REPLAY_FORWARD), records))
        if twin is None or twins.same_code(twin, functions[-1]):  # the replay writes nothing Warp's backward would redo
            twinless.add(id(clone))
        else:
            functions.append(twins.registered(twin, functions[-1].name, module.runtime.replays))
    settings = dataclasses.replace(settings, twinless=frozenset(twinless))
    functions.append(tidy(phase_function(plan.root, settings, records, options)))
    if phase == COUNT:
        plans = [*reversed([p for p in plan.root.walk() if p is not plan.root]), plan.root]  # as made above
        dropped = [count_slice.dropped_atomics(f, p.unit.tree, plan) for f, p in zip(functions, plans, strict=True)]
        return count_slice.sliced(functions, computing.union(*dropped))
    return functions
