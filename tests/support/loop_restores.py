"""A checker of what the replay may read inside a loop Warp does not unroll (issue 34).

Warp's backward leaves such a loop out of its forward replay and then runs its trips backwards, each with the locals
the loop changes at whatever value the replay left them, and runs a ``while`` loop's condition again on those values.
So, in the replay kernel and every function it calls (not the ``@wp.func_replay`` twins of cloned helpers: Warp runs
those forward only, in backward's forward replay, and differentiates the clone itself), for each loop Warp does not
unroll that does something and that some gradient depends on (``passes.loop_hazards``, asked of the replay as printed,
as the planner asks it of the kernel: a loop whose wrong values reach only ints needs no records):

- it is a ``for`` over ``range()``, with no ``break`` or ``continue`` of its own: a ``while`` loop, or a loop over a
  spatial query (whose state is gone in backward), runs its recorded trips instead; and each loop of the plan that
  counts its trips (a ``while``, a query's loop, a loop that breaks) is a ``for`` over the count its records hold;
- every local it carries into its next trip is set from a record at the trip's start before any statement reads it,
  and every local it carries out is set from a record right after the loop, before any statement reads it. A record
  is a ``carried_<dtype>(local, records, index)`` call (whose adjoint passes the gradient on) or a plain read of
  ``records[index]``, ``records`` a record parameter of the launch.

Which locals a loop carries is asked of the replay as printed (``passes.loop_carried.LoopFlow`` on the generated
function, not the planner's notes), with each restore's read of the local it restores left out (it reads the local
only to pass its gradient on): one the rewrite forgot to restore is carried. ``tests/support/invariants.py`` runs it
on every kernel the suite and the fuzzer rewrite.
"""

from __future__ import annotations

import ast
from copy import deepcopy

from tests.support.record_kernels import _runtime_call
from warp_rewrite.passes.builtins import written_arguments
from warp_rewrite.passes.loop_carried import LoopFlow
from warp_rewrite.passes.loop_hazards import Callees, loop_hazards, own_jumps, unrolled_by_warp
from warp_rewrite.passes.read_back import Analysis
from warp_rewrite.passes.syntax import walk
from warp_rewrite.pipeline import Frontend, GeneratedKernel, with_known_bounds
from warp_rewrite.runtime.abi import Reader, reader_of


def unrestored_loop_locals(frontend: Frontend, generated: GeneratedKernel) -> list[str]:
    """A line for each loop of the replay Warp would replay wrong (none, if sound)."""
    frontend = with_known_bounds(frontend)  # (the user's helpers read as the pipeline reads them: constant ranges)
    records = frozenset(record.name for record in generated.spec.records)
    runtime = frontend.module.runtime.alias
    functions = {f.name: f for f in ast.parse(generated.source).body if isinstance(f, ast.FunctionDef)}
    problems: list[str] = []
    seen: set[str] = set()
    for plan in generated.plan.root.walk():
        function = functions.get(f"{plan.name}_replay")
        if function is not None:
            problems += _counted_loops(plan, function, records)
            _check(frontend, plan.unit, function, records, runtime, functions, problems, seen)
    return problems


def _counted_loops(plan, function: ast.FunctionDef, records: frozenset[str]) -> list[str]:
    """Each loop of the plan that counts its trips must be, in the replay, a ``for`` over its recorded count."""
    replayed = {
        loop.target.id: loop.iter.args[0]
        for loop in walk(function)
        if isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) and _is_range(loop.iter)
        if len(loop.iter.args) == 1
    }
    problems = []
    for loop in plan.loops.values():
        if loop.opaque or not loop.trips_records:
            continue
        bound = replayed.get(loop.counter)
        if bound is None or not _reads_record(bound, records, loop.trips_records):
            problems.append(
                f"{function.name}: the loop at {loop.location} is not replayed as a for loop over its recorded trips "
                f"('for {loop.counter} in range({loop.trips_records}[...])')"
            )
    return problems


def _check(frontend, unit, function, records, runtime, generated, problems, seen) -> None:
    """The loops of ``function`` (a replay function, or a user's helper it calls, with ``unit`` its original); then
    those of the user's helpers it calls."""
    if function.name in seen:
        return
    seen.add(function.name)
    analysis = Analysis(unit, frontend)
    names = frontend.warp_names(unit)
    function = _blinded(function, records, runtime)
    flow = LoopFlow(function, analysis.holds_a_value, lambda call: written_arguments(call, names))
    # A loop no gradient depends on needs no records (``passes.loop_hazards``, as the planner asks it); a call of a
    # generated function may write anything.
    writes = lambda call: _callee(call) in generated or analysis.callees.helper_writes(call)  # noqa: E731
    callees = Callees(names, writes, kernel=analysis.callees.kernel)
    hazards = {id(found.loop) for found in loop_hazards(function, flow, frontend.max_unroll, callees)}
    # and those the plan replays, but for a loop Warp unrolls (straight code to its backward) around such loops
    hazards |= {
        id(loop)
        for loop in walk(function)
        if _restores_in(loop, records, runtime) and not unrolled_by_warp(loop, frontend.max_unroll)
    }
    for statements in _statement_lists(function):
        for at, loop in enumerate(statements):
            if isinstance(loop, ast.For | ast.While) and id(loop) in hazards:
                where = f"{function.name}:{loop.lineno}"
                found = _loop_problems(loop) + _restores(loop, statements[at + 1 :], flow, records, runtime)
                problems += [f"{where}: {problem}" for problem in found]
    for call in (n for n in walk(function) if isinstance(n, ast.Call)):
        helper = None if _callee(call) in generated else frontend.resolve_helper(unit, call)
        if helper is not None:
            _check(frontend, helper, helper.tree, records, runtime, generated, problems, seen)


def _blinded(function: ast.FunctionDef, records: frozenset[str], runtime: str) -> ast.FunctionDef:
    """A copy of ``function`` in which each restore ``x = carried_<dtype>(x, records, index)`` passes on a name of its
    own instead of ``x``: the restore reads ``x`` only to pass its gradient on (the value it gives is the record's),
    so that read carries nothing from one trip to the next (Newton's ``closest_point_heightfield``: a local set in
    an inner loop and restored after it, at the end of each outer trip, is not carried into the next outer trip)."""
    copy = deepcopy(function)
    for statement in walk(copy):
        if isinstance(statement, ast.Assign) and _restores_from_record(statement, _target(statement), records, runtime):
            value = statement.value
            if isinstance(value, ast.Call):
                value.args[0] = ast.Name(_passed_on(_target(statement)), ast.Load())
    return copy


def _restores_in(loop: ast.AST, records: frozenset[str], runtime: str) -> bool:
    """Is ``loop`` a loop that restores a local from a record (one the plan gave records)?"""
    return isinstance(loop, ast.For | ast.While) and any(
        isinstance(node, ast.Assign) and _restores_from_record(node, _target(node), records, runtime)
        for node in walk(loop)
    )


def _target(statement: ast.Assign) -> str:
    target = statement.targets[0]
    return target.id if isinstance(target, ast.Name) else ""


def _passed_on(local: str) -> str:
    return f"{local}__passed_on"


def _callee(call: ast.Call) -> str | None:
    return call.func.id if isinstance(call.func, ast.Name) else None


def _statement_lists(function: ast.FunctionDef) -> list[list[ast.stmt]]:
    """Every list of statements in the function: its body, and each body and else branch in it."""
    lists = []
    for node in walk(function):
        for name in ("body", "orelse"):
            statements = getattr(node, name, None)
            if isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt):
                lists.append(statements)
    return lists


def _loop_problems(loop: ast.For | ast.While) -> list[str]:
    """What makes a loop that does something one Warp's backward cannot run as the replay needs."""
    if not any(not isinstance(s, ast.Pass | ast.Break | ast.Continue) for s in loop.body):
        return []
    if isinstance(loop, ast.While):
        return ["a while loop, whose condition Warp's backward evaluates again: the replay must run its recorded trips"]
    problems = []
    if not (_is_range(loop.iter) or _is_reversed_range(loop.iter)):
        problems.append(
            f"a for loop over '{ast.unparse(loop.iter)}', not a range: the replay must run its recorded trips"
        )
    if own_jumps(loop.body):
        problems.append("a break or continue, which Warp's reverse pass replays by jumping past the trip's adjoint")
    return problems


def _restores(loop, after: list[ast.stmt], flow: LoopFlow, records: frozenset[str], runtime: str) -> list[str]:
    """The locals the loop carries that are read, at a trip's start or after the loop, before a record sets them."""
    carried = flow.carried(loop)
    problems = []
    for local in sorted(carried.into_iterations):
        if not _set_from_record_first(local, loop.body, records, runtime):
            problems.append(f"'{local}' is carried into the next trip but not set from a record at each trip's start")
    for local in sorted(carried.out_of_loop):
        if not _set_from_record_first(local, after, records, runtime):
            problems.append(f"'{local}' is carried out of the loop but not set from a record right after it")
    return problems


def _set_from_record_first(local: str, statements: list[ast.stmt], records: frozenset[str], runtime: str) -> bool:
    """Is the first of ``statements`` that mentions ``local`` an assignment of it from a record?"""
    for statement in statements:
        if local in {n.id for n in walk(statement) if isinstance(n, ast.Name)}:
            return _restores_from_record(statement, local, records, runtime)
    return False


def _restores_from_record(statement: ast.stmt, local: str, records: frozenset[str], runtime: str) -> bool:
    """``local = records[index]``, or ``local = carried_<dtype>(local, records, index)``."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return False
    target, value = statement.targets[0], statement.value
    if not (isinstance(target, ast.Name) and target.id == local):
        return False
    if isinstance(value, ast.Subscript):
        return isinstance(value.value, ast.Name) and value.value.id in records and local not in _names(value.slice)
    called = _runtime_call(value, runtime)
    reader = reader_of(called) if called is not None else None
    if reader is None or reader[0] is not Reader.CARRIED or len(value.args) != 3:
        return False
    passed_on, array, index = value.args
    return (
        isinstance(passed_on, ast.Name)
        and passed_on.id in (local, _passed_on(local))
        and isinstance(array, ast.Name)
        and array.id in records
        and local not in _names(index)
    )


def _reads_record(bound: ast.expr, records: frozenset[str], name: str) -> bool:
    return isinstance(bound, ast.Subscript) and isinstance(bound.value, ast.Name) and bound.value.id == name in records


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name)}


def _is_range(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"


def _is_reversed_range(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "reversed"
        and len(node.args) == 1
        and _is_range(node.args[0])
    )
