"""The count phase cut down to what decides trip counts.

A dry run launches the count kernel to learn how many trips each loop of unknown length makes, before the record
kernel runs with room for their records. What it must compute is the record kernel's control flow and every write
into an array it reads (``KernelPlan.copied``: a later read, in this thread or another, may decide a trip count);
anything else it computes is thrown away. The count phase as ``passes.two_phase`` makes it is the record phase
less its records and less its writes into the arrays the plan does not copy, and left the rest for the compiler
to leave out: in a helper's clone, most of the helper. Here it is left out of the text too:

- a clone whose value no caller reads returns nothing (where that leaves out a good part of it: ``sliced``);
- a statement that only computes a value nothing reads is left out: an assignment to a local nothing reads, or a
  call on its own, where every call in it only computes a value (``FunctionPlan.computing``: no store into memory,
  no atomic, no write into a local it is handed, in what it runs too; a print goes, so a dry run prints nothing)
  or constructs one;
- then an ``if`` or a ``for`` with nothing left inside, whose test or range only computes; a clone left with
  nothing to do, and its calls.

What stays is what the record phase does to decide trip counts and to write the arrays the dry run copies, in the
same order: the same statements, not new ones. A ``while`` loop stays whatever its body (leaving it out could
change whether the kernel ends).

Then what the dry run copies (``fewer_copies``): an array the launch writes and reads back needs a copy only where
the count phase reads it; where the cut-down phase does not (the hash table's values that only decide an int
``atomic_max``, a counter whose returns only index stores the phase leaves out), its writes go too.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Callable

from warp_rewrite.passes.plan_types import FunctionPlan, KernelPlan
from warp_rewrite.passes.pruning import constructs
from warp_rewrite.passes.slicing import LeavesOut, idle, loaded, only_computes, sliced_function
from warp_rewrite.passes.syntax import CopyOnWrite, parent_map, walk


def fewer_copies(
    plan: KernelPlan,
    count_phase: Callable[[KernelPlan], list[ast.FunctionDef]],
    named: Callable[[FunctionPlan], str],
) -> tuple[KernelPlan, list[ast.FunctionDef]]:
    """The plan copying, for a dry run, only the arrays its count phase reads, with that count phase.

    It starts from the arrays whose copies are needed whatever the count phase keeps (``KernelPlan.read_at`` has
    none of them): the count phase made so leaves out the writes into every other array, and the atomics on them
    whose values it does not read (``dropped_atomics``). Each array it still reads is copied too, and its writes
    kept, which may read more, until it reads nothing it does not copy: at the latest, where every array the
    launch reads back is copied. ``named``: the name of each function of the plan in the count phase."""
    trees = {named(function): id(function.unit.tree) for function in plan.root.walk()}
    copied = frozenset(path for path in plan.copied if path not in plan.read_at)
    while True:
        tried = dataclasses.replace(plan, copied=copied)
        functions = count_phase(tried)
        read = _arrays_read(plan, functions, trees, copied)
        if read <= copied:
            return tried, functions
        copied |= read


def _arrays_read(
    plan: KernelPlan, functions: list[ast.FunctionDef], trees: dict[str, int], copied: frozenset[str]
) -> frozenset[str]:
    """The arrays of ``plan.copied`` the count phase ``functions`` reads: those it reads at one of their places
    (``KernelPlan.read_at``; an atomic of an array it copies only where its value is read, and one of an array it
    does not copy wherever it is left: it would write it), and those whose copy is needed whatever it keeps."""
    found: dict[tuple[int, int, int, type[ast.AST]], set[bool]] = {}  # a node's place -> is its value read?
    for function in functions:
        nodes = walk(function)
        parents = parent_map(nodes)
        for node in nodes:
            if isinstance(node, ast.expr) and hasattr(node, "lineno"):  # (a name the phase made has none)
                place = (trees[function.name], node.lineno, node.col_offset, type(node))
                found.setdefault(place, set()).add(not isinstance(parents.get(node), ast.Expr))

    def read(path: str) -> bool:
        places = plan.read_at.get(path)
        if places is None:
            return True
        for place in places:
            value_read = found.get((place.tree, place.line, place.column, place.node_type), set())
            if True in value_read or (value_read and (not place.only_its_value or path not in copied)):
                return True
        return False

    return frozenset(path for path in plan.copied if read(path))


def dropped_atomics(function: ast.FunctionDef, tree: ast.FunctionDef, plan: KernelPlan) -> frozenset[ast.Call]:
    """The atomics of the count phase's ``function`` (made from ``tree``) whose values the launch reads, on arrays
    the plan does not copy: where nothing reads their values they go, as the phase's other writes into those
    arrays do (``KernelPlan.read_at`` has the place of each)."""
    dropped = plan.written - plan.copied
    places = {
        (place.line, place.column)
        for path in dropped
        for place in plan.read_at.get(path, ())
        if place.only_its_value and place.tree == id(tree)
    }
    calls = [node for node in walk(function) if isinstance(node, ast.Call) and hasattr(node, "lineno")]
    return frozenset(call for call in calls if (call.lineno, call.col_offset) in places)


def sliced(functions: list[ast.FunctionDef], computing: frozenset[ast.Call]) -> list[ast.FunctionDef]:
    """The count phase's ``functions`` (the clones, callees first, then the kernel) cut down to what decides trip
    counts, each taking only what it reads; ``computing``: the calls of the plan's functions that only compute a
    value.

    A clone whose value no caller reads returns nothing where that, with the same for the clones it calls, leaves
    out at least a quarter of it and them: a file defines each variant of a clone once (``rewrite.cli.shared_clones``),
    and one returning nothing is another variant, worth its lines only where it is much shorter."""
    slicer = _Slicer(computing)
    void: frozenset[str] = frozenset()
    cut = slicer.fixed_point(functions, void)
    tried = None
    while tried != void:  # again where a clone returning nothing leaves another's value unread
        tried = void
        for clone in reversed(functions[:-1]):  # callers first
            if clone.name in void or clone.name in _returns_read(cut):
                continue
            below = _called(functions, clone.name)
            trial = slicer.fixed_point(functions, void | below)
            if 4 * _size(trial, below) <= 3 * _size(cut, below):
                void, cut = void | below, trial
    while (taking := _reading_what_they_take(cut, slicer.leaves_out(frozenset()))) is not cut:
        cut = slicer.fixed_point(taking, void)
    return cut


class _Slicer:
    """Slices the count phase's functions, each once for each way ``sliced`` tries (which clones return nothing,
    which are gone)."""

    def __init__(self, computing: frozenset[ast.Call]):
        self.computing = computing
        # (function's id, returns nothing, clones gone) -> (the function, its slice): holding the function keeps
        # its id from being reused
        self._slices: dict[tuple[int, bool, frozenset[str]], tuple[ast.FunctionDef, ast.FunctionDef]] = {}

    def fixed_point(self, functions: list[ast.FunctionDef], void: frozenset[str]) -> list[ast.FunctionDef]:
        """``functions`` sliced, the clones named in ``void`` returning nothing where no caller reads their value,
        until nothing more goes; a clone left with nothing to do goes, and so do its calls."""
        gone: frozenset[str] = frozenset()
        while True:
            read = _returns_read(functions)
            cut = [self.sliced(f, f.name in void and f.name not in read, gone) for f in functions]
            idling = {f.name for f in cut[:-1] if f.name not in read and idle(f.body)}
            gone |= idling
            cut = [function for function in cut if function.name not in idling]
            if len(cut) == len(functions) and all(new is old for new, old in zip(cut, functions, strict=True)):
                return functions
            functions = cut

    def sliced(self, function: ast.FunctionDef, void: bool, gone: frozenset[str]) -> ast.FunctionDef:
        key = (id(function), void, gone)
        if key not in self._slices:
            leaves_out = self.leaves_out(gone)
            voided = _void(function, leaves_out) if void else function
            self._slices[key] = (function, sliced_function(voided, leaves_out))
        return self._slices[key][1]

    def leaves_out(self, gone: frozenset[str]) -> LeavesOut:
        """Which calls can go where nothing reads their value: those that only compute, and those of the clones
        ``gone``."""

        def leaves_out(call: ast.Call) -> bool:
            return call in self.computing or constructs(call) or _callee(call) in gone

        return leaves_out


def _reading_what_they_take(functions: list[ast.FunctionDef], leaves_out: LeavesOut) -> list[ast.FunctionDef]:
    """The count phase's functions taking only what they read: a clone's parameter nothing in it reads goes, with
    the argument each call passes it where that argument only computes; so does a parameter of the kernel nothing
    in it reads (the launch passes the count kernel only the arguments it takes: ``KernelPair.count_arguments``).
    The same list where nothing goes."""
    clones = {function.name: function for function in functions[:-1]}
    calls = [node for f in functions for node in walk(f) if isinstance(node, ast.Call) and _callee(node) in clones]
    unread: dict[str, set[int]] = {}
    for name, clone in clones.items():
        read = loaded(clone)
        positions = {index for index, parameter in enumerate(clone.args.args) if parameter.arg not in read}
        for call in calls:
            if _callee(call) == name:
                positions = {p for p in positions if p < len(call.args) and only_computes(call.args[p], leaves_out)}
        if positions:
            unread[name] = positions
    kernel = functions[-1]
    kernel_read = loaded(kernel)
    kernel_unread = {i for i, p in enumerate(kernel.args.args) if p.arg not in kernel_read}
    if not unread and not kernel_unread:
        return functions
    taking = []
    for function in functions:
        dropped = kernel_unread if function is kernel else unread.get(function.name, set())
        function = _ArgumentsLeftOut(unread).visit(function)
        if dropped:
            function = copy.copy(function)
            function.args = copy.copy(function.args)
            function.args.args = [p for i, p in enumerate(function.args.args) if i not in dropped]
        taking.append(function)
    return taking


def _callee(call: ast.Call) -> str | None:
    return call.func.id if isinstance(call.func, ast.Name) else None


class _ArgumentsLeftOut(CopyOnWrite):
    """A function whose calls of the clones named leave out the arguments at the positions given: copied where it
    changes, its other nodes its own (``computing`` knows calls by identity)."""

    def __init__(self, positions: dict[str, set[int]]):
        self.positions = positions

    def visit_Call(self, node: ast.Call) -> ast.Call:
        visited = self.generic_visit(node)
        left_out = self.positions.get(_callee(node) or "", set())
        if not left_out:
            return visited
        visited = copy.copy(visited)
        visited.args = [argument for index, argument in enumerate(visited.args) if index not in left_out]
        return visited


def _called(functions: list[ast.FunctionDef], name: str) -> frozenset[str]:
    """The clone ``name`` and the clones it calls, at any depth."""
    by_name = {function.name: function for function in functions[:-1]}
    found: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current in found or current not in by_name:
            continue
        found.add(current)
        calls = [node for node in walk(by_name[current]) if isinstance(node, ast.Call)]
        pending += [call.func.id for call in calls if isinstance(call.func, ast.Name)]
    return frozenset(found)


def _size(functions: list[ast.FunctionDef], names: frozenset[str]) -> int:
    """The statements of the functions named in ``names``."""
    return sum(isinstance(node, ast.stmt) for f in functions if f.name in names for node in walk(f))


def _returns_read(functions: list[ast.FunctionDef]) -> set[str]:
    """The clones some caller reads the value of (any call of it that is not a statement of its own)."""
    clones = {function.name for function in functions[:-1]}
    read = set()
    for function in functions:
        nodes = walk(function)
        parents = parent_map(nodes)
        for node in nodes:
            named = _callee(node) if isinstance(node, ast.Call) else None
            if named in clones and not isinstance(parents.get(node), ast.Expr):
                read.add(named)
    return read


def _void(function: ast.FunctionDef, leaves_out: LeavesOut) -> ast.FunctionDef:
    """``function`` returning nothing: each ``return value`` a bare ``return``, after the value's calls where one of
    them does more than compute; and no return annotation."""
    if function.returns is None and not any(isinstance(n, ast.Return) and n.value for n in walk(function)):
        return function

    def returned(statement: ast.stmt) -> list[ast.stmt]:
        if not isinstance(statement, ast.Return) or statement.value is None:
            return [statement]
        bare = ast.copy_location(ast.Return(None), statement)
        if only_computes(statement.value, leaves_out):
            return [bare]
        return [ast.copy_location(ast.Expr(statement.value), statement), bare]

    function = copy.copy(function)
    function.body = _without_last_returns(_mapped(function.body, returned)) or [ast.Pass()]
    function.returns = None
    return function


def _without_last_returns(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` (of a function returning nothing) less each bare ``return`` after which nothing would run anyway:
    its last statement, or the last of a branch of an ``if`` that is last (``if count < limit: return``)."""
    if not body:
        return body
    last = body[-1]
    if isinstance(last, ast.Return):
        return _without_last_returns(body[:-1])
    if isinstance(last, ast.If):
        branches = copy.copy(last)
        branches.body = _without_last_returns(last.body) or [ast.Pass()]
        branches.orelse = _without_last_returns(last.orelse)
        return [*body[:-1], branches]
    return body


def _mapped(body: list[ast.stmt], change: Callable[[ast.stmt], list[ast.stmt]]) -> list[ast.stmt]:
    """``body`` with ``change`` applied to each statement, at every depth (the statements it leaves are copies)."""
    result: list[ast.stmt] = []
    for statement in body:
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(statement, name, None)
            if isinstance(inner, list) and inner:
                statement = copy.copy(statement)
                setattr(statement, name, _mapped(inner, change))
        result += change(statement)
    return result
