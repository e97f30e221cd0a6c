"""Which loops of a function Warp's backward replays wrong: the loops it does not unroll, where the replay would see
a value other than the forward's.

Warp's backward runs a function's forward code again before its reverse pass, but leaves out every loop it does not
unroll (a ``for`` over a range it cannot count when it builds the kernel, a ``while``, a constant range longer than
``max_unroll`` or one that breaks); its reverse pass then runs such a loop's iterations backwards, each replayed
with the locals the loop changes at whatever value the replay left them (``codegen.Adjoint.end_for``,
``end_while``). So, in backward:

- a local carried out of the loop keeps the value it had before the loop, and a local carried from one iteration
  into the next holds, in each replayed iteration, a value of another iteration (``Hazard.CARRIED``);
- a ``while`` loop's condition is evaluated again on the replay's values, so it runs other iterations than the
  forward did, usually none (``Hazard.WHILE``);
- a replayed ``break`` or ``continue`` jumps past the adjoint of its iteration and, for a break, of every earlier
  one (``Hazard.JUMPS``);
- Warp's forward assigns each local the loop changes into the variable the local had before the loop, in place
  (``codegen.Adjoint.materialize_redefinitions``): where that variable holds what a builtin returned whose adjoint
  reads its result (``wp.sqrt``, ``wp.exp``, ``wp.normalize``, a division), that adjoint reads the loop's value
  instead, whatever the loop computes (``Hazard.OVERWRITES_RESULT``; the replay copies the local into a variable of
  its own before the loop, ``Loop.fresh``).

The rewrite records what such a loop needs and replays it from the records (``passes.plan``, ``passes.two_phase``);
``--check`` reports the hazard. Loops Warp unrolls are straight code to its backward, and a loop whose body does
nothing at all (``while spin(): pass`` style, no locals carried) hands nothing wrong to the replay.

Nor does a loop no gradient depends on (``_no_gradient_depends_on``): the values Warp's backward sees wrong are those
the loop computes (every one in a ``while`` loop or one that jumps, else those it carries) and whatever depends on
them, in data or in control. Warp's backward does not store again (``array_store`` is skipped in its replay), so
such a value changes a gradient only where it reaches something whose adjoint carries one: a store or atomic into
memory that is not known to hold ints, a helper that may write such memory, or a helper's return of a value not
known to be an int. A loop that only counts, searches or flags into int arrays, or a helper's probe loop returning
an int slot, is then no hazard. The rule reads only the source (annotations, Warp's spelling, the helpers the front
end resolves), the same for ``--check``, the command line and the API; what it cannot tell counts as a gradient.
A ``while`` loop with a ``return`` inside stays a hazard whatever it computes: Warp's backward evaluates its
condition again on values it replays, and may never leave it.
"""

from __future__ import annotations

import ast
import copy
import enum
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

from warp_rewrite.passes.atomics import PLAIN, WarpNames, positional_arguments
from warp_rewrite.passes.builtin_names import ARRAY_WRITERS, reads_its_result
from warp_rewrite.passes.constant_ranges import bound_value, is_static
from warp_rewrite.passes.loop_carried import CarriedLocals, LoopFlow
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.syntax import walk


class Hazard(enum.Enum):
    """Why Warp's backward replays a loop wrong (see the module's docstring)."""

    CARRIED = "carries {carried} from one trip into the next or out of the loop"
    WHILE = "is a while loop, whose condition Warp's backward evaluates again on the values it replays"
    JUMPS = "breaks or continues, which Warp's backward replays by jumping past the trip's adjoint"
    OVERWRITES_RESULT = (
        "assigns {overwritten}, which holds a value a builtin returned before the loop: Warp's forward overwrites it "
        "in place, and the builtin's adjoint, which reads the value it returned, then reads the loop's"
    )


@dataclass(frozen=True)
class LoopHazard:
    """A loop Warp does not unroll, the reasons its replay goes wrong, and the locals it carries."""

    loop: ast.For | ast.While
    hazards: frozenset[Hazard]
    carried: tuple[str, ...]  # sorted
    overwritten: tuple[str, ...] = ()  # sorted: the builtins' results it overwrites (``overwritten_results``)

    def why(self) -> str:
        """What goes wrong, as a clause: "carries 'acc' from one trip into the next or out of the loop and ..."."""
        carried = ", ".join(f"'{name}'" for name in self.carried)
        overwritten = ", ".join(f"'{name}'" for name in self.overwritten)
        return " and ".join(
            h.value.format(carried=carried, overwritten=overwritten) for h in Hazard if h in self.hazards
        )


# Whether a call of a helper (a ``@wp.func`` the front end resolves; True where it cannot follow the call) may write
# memory a gradient flows through (``writes_gradient_memory``, by the front end's resolution of its own calls).
HelperWrites = Callable[[ast.Call], bool]


@dataclass(frozen=True)
class Callees:
    """What the hazard's precision needs beyond the function's tree: how its module spells Warp, what the helpers
    it calls write, and whether it is a kernel (whose value parameters get no gradient in Warp). The default follows
    no helper: each may write anything."""

    names: WarpNames = PLAIN
    helper_writes: HelperWrites = field(default=lambda call: True)
    kernel: bool = False


def loop_hazards(
    function: ast.FunctionDef, flow: LoopFlow, max_unroll: int, callees: Callees = Callees()
) -> list[LoopHazard]:
    """The loops of ``function`` that Warp does not unroll and replays wrong, in source order; ``flow``: the
    function's ``LoopFlow``; ``max_unroll``: its module's option; ``callees``: what its calls do (a loop no gradient
    depends on is left out)."""
    found = []
    memory: _Memory | None = None
    for node in walk(function):
        if not isinstance(node, ast.For | ast.While) or unrolled_by_warp(node, max_unroll):
            continue
        carried = flow.carried(node)
        names = carried.into_iterations | carried.out_of_loop
        hazards = {Hazard.CARRIED} if names else set()
        memory = memory or _Memory(function, callees.names)
        if _does_something(node):
            if isinstance(node, ast.While):
                hazards.add(Hazard.WHILE)
            if any(not _skips_nothing(node, jump, names, memory, callees) for jump in own_jumps(node.body)):
                hazards.add(Hazard.JUMPS)
        if hazards and _no_gradient_depends_on(function, node, hazards, carried, memory, callees):
            hazards, names = set(), frozenset()
        overwritten = overwritten_results(function, node, callees.names)
        if overwritten:  # (whatever the loop computes: the builtin's adjoint reads the value, wherever it goes)
            hazards.add(Hazard.OVERWRITES_RESULT)
        if hazards:
            found.append(LoopHazard(node, frozenset(hazards), tuple(sorted(names)), overwritten))
    return found


def overwritten_results(function: ast.FunctionDef, loop: ast.For | ast.While, names: WarpNames) -> tuple[str, ...]:
    """The locals ``loop`` (one Warp does not unroll) assigns that a statement before it, outside it, assigns a
    result of a builtin whose adjoint reads it (``builtin_names.RESULT_READERS``: ``wp.sqrt``, ``wp.exp``,
    ``wp.normalize``, a division, a power). Warp's forward assigns each local a loop changes into the variable it had
    before the loop, in place (``codegen.Adjoint.materialize_redefinitions``), so that the builtin's adjoint, run
    after the loop's in the backward pass, reads the loop's value of the local instead of its own result. Any such
    statement counts, wherever it is before the loop: an assignment that does not reach the loop costs a copy."""
    inside = set(walk(loop))
    assigned = {n.id for n in inside if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if not assigned:
        return ()
    found: set[str] = set()
    for node in walk(function):
        if node in inside or not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        if (node.lineno, node.col_offset) >= (loop.lineno, loop.col_offset) or not reads_its_result(node.value, names):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        found.update(name for target in targets for name in _bound_names(target) if name in assigned)
    return tuple(sorted(found))


# Warp's int and bool types (scalars and vectors), whose values carry no gradient: by the names Warp exports.
INT_TYPES = frozenset(
    ["int", "bool", *(f"{u}int{bits}" for u in ("", "u") for bits in (8, 16, 32, 64))]
    + [f"vec{n}{kind}" for n in (2, 3, 4) for kind in ("b", "ub", "s", "us", "i", "ui", "l", "ul")]
)
# Warp's value types (scalars, vectors, matrices, quaternions, transforms, spatial types): a parameter of such a type
# is a copy, which a store into a component changes; any other (arrays, structs, Any) counts as memory.
_VALUE_TYPE = re.compile(
    r"int|float|bool|half|float(16|32|64)|u?int(8|16|32|64)|vec\d\w*|mat\d\d\w*|quat[dfh]?|transform[dfh]?"
    r"|spatial_(vector|matrix)[dfh]?"
)
_ARRAY_TYPES = re.compile(r"(indexed)?(fabric)?array(\dd)?|fixedarray(\dd)?")
# Python's builtins a kernel may call, functions of their arguments' values.
_PYTHON_PURE = frozenset({"int", "float", "bool", "min", "max", "abs", "len", "range", "round", "print"})


def _last_name(expr: ast.expr | None) -> str | None:
    """``wp.int32`` -> ``int32``; ``int`` -> ``int``; anything but a name or an attribute -> None."""
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return expr.id if isinstance(expr, ast.Name) else None


def _root(expr: ast.expr) -> ast.Name | None:
    """The name an expression of fields and elements starts from: ``model.body_q[i].p`` -> ``model``."""
    while isinstance(expr, ast.Attribute | ast.Subscript):
        expr = expr.value
    return expr if isinstance(expr, ast.Name) else None


_NOT_AN_ARRAY = ast.Constant(None)  # what ``_array_dtype`` gives for an annotation of no array


def _array_dtype(annotation: ast.expr) -> ast.expr | None:
    """The dtype an array annotation names (``wp.array(dtype=int)``, ``wp.array2d[wp.int32]``); None where it
    names none; ``_NOT_AN_ARRAY`` where the annotation is no array."""
    head = annotation.func if isinstance(annotation, ast.Call) else annotation
    head = head.value if isinstance(head, ast.Subscript) else head
    name = _last_name(head)
    if name is None or not _ARRAY_TYPES.fullmatch(name):
        return _NOT_AN_ARRAY
    if isinstance(annotation, ast.Subscript):
        dtype = annotation.slice
        return dtype.elts[0] if isinstance(dtype, ast.Tuple) and dtype.elts else dtype
    if isinstance(annotation, ast.Call):
        keyword = next((k.value for k in annotation.keywords if k.arg == "dtype"), None)
        return keyword if keyword is not None else (annotation.args[0] if annotation.args else None)
    return None


class _Memory:
    """Which names of a function hold memory (arrays, structs, anything whose type the source does not tell as a
    value) and which of those hold only ints, read off the annotations and the assignments: a local bound to
    memory (``row = grid[i]``, ``q = model.body_q``) or to what a helper returns is memory, of ints where every such
    binding is."""

    def __init__(self, function: ast.FunctionDef, names: WarpNames):
        self.memory: set[str] = set()
        self.ints: set[str] = set()
        self.arrays: set[str] = set()  # the parameters annotated as arrays
        self.constants: set[str] = set()  # the parameters of a value type the function never rebinds
        for argument in function.args.args:
            annotation = argument.annotation
            dtype = _NOT_AN_ARRAY if annotation is None else _array_dtype(annotation)
            if dtype is _NOT_AN_ARRAY:
                if not _VALUE_TYPE.fullmatch(_last_name(annotation) or ""):
                    self.memory.add(argument.arg)  # a struct, Any, or a type the source does not name plainly
            else:
                self.memory.add(argument.arg)
                self.arrays.add(argument.arg)
                if dtype is not None and _last_name(dtype) in INT_TYPES:
                    self.ints.add(argument.arg)
        bindings: dict[str, list[ast.expr]] = {}
        for node in walk(function):
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for name in _bound_names(target):
                        bindings.setdefault(name, []).append(node.value)
        parameters = {a.arg for a in function.args.args}
        rebound = {name for node in walk(function) for name in _bindings(node)} | set(bindings)
        self.constants = parameters - self.memory - rebound
        changed = True
        while changed:
            changed = False
            for name, values in bindings.items():
                if name in parameters:
                    continue
                held = [value for value in values if self._holds_memory(value, names)]
                if held and name not in self.memory:
                    self.memory.add(name)
                    changed = True
                all_ints = all((root := _root(value)) is not None and root.id in self.ints for value in held)
                if held and all_ints and name not in self.ints:
                    self.ints.add(name)
                    changed = True
                elif held and not all_ints and name in self.ints:
                    self.ints.discard(name)
                    changed = True

    def _holds_memory(self, value: ast.expr, names: WarpNames) -> bool:
        root = _root(value)
        if root is not None and root.id in self.memory:
            return True
        if isinstance(value, ast.Call):
            builtin = _warp_builtin(value, names)
            return builtin in ("view", "address") or (builtin is None and _last_name(value.func) not in _PYTHON_PURE)
        return False

    def writes_gradient(self, target: ast.expr) -> bool:
        """Is a store into ``target`` (a field or element) a write into memory a gradient may flow through?"""
        root = _root(target)
        return root is None or (root.id in self.memory and root.id not in self.ints)

    def holds_ints(self, expr: ast.expr) -> bool:
        root = _root(expr)
        return root is not None and root.id in self.ints


def _bound_names(target: ast.expr) -> list[str]:
    """The names an assignment target binds (``a, b = ...``), not those it stores into."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [name for element in target.elts for name in _bound_names(element)]
    return []


def _warp_builtin(call: ast.Call, names: WarpNames) -> str | None:
    """Warp's name of the builtin ``call`` calls (``wp.X(...)``, or a bare name imported from Warp), else None."""
    func = call.func
    if isinstance(func, ast.Attribute):
        root = func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        return func.attr if isinstance(root, ast.Name) and root.id in names.modules else None
    return names.member(func.id) if isinstance(func, ast.Name) else None


def writes_gradient_memory(function: ast.FunctionDef, callees: Callees) -> bool:
    """Does ``function`` (a helper) write memory a gradient may flow through, itself or in a helper it calls? Where
    it stores, what its atomics target and what its calls write, as ``_no_gradient_depends_on`` reads them."""
    memory = _Memory(function, callees.names)
    statements = [node for node in walk(function) if isinstance(node, ast.stmt) and node is not function]
    return any(_gradient_sink(statement, memory, callees, returns_value=False) for statement in statements)


# Set by ``passes.loop_returns`` on a loop whose returns it made breaks: the loop is still one a return leaves.
RETURNED_FROM = "wp_rewrite_returned_from"


def returns_from(loop: ast.For | ast.While) -> bool:
    """Does a return leave the loop, as written or before ``passes.loop_returns`` made it a break? A ``while`` loop
    a return leaves is wrong in Warp's backward whatever it computes, lowered or not, so the rewrite records it
    (``tests/api/test_coverage.py``: plain Warp's gradients are zero)."""
    return getattr(loop, RETURNED_FROM, False) or any(isinstance(node, ast.Return) for node in walk(loop))


def _no_gradient_depends_on(
    function: ast.FunctionDef,
    loop: ast.For | ast.While,
    hazards: set[Hazard],
    carried: CarriedLocals,
    memory: _Memory,
    callees: Callees,
) -> bool:
    """Does no gradient depend on what Warp's backward sees wrong in ``loop``? See the module's docstring: the
    statements that depend on the loop (in data, through locals, or in control) write no memory but ints, call no
    helper that may, and return no value but an int from a helper.

    A sum the loop carries (``_sums``) is wrong in backward too, but its adjoint is right: statements that use it
    only linearly (``_linear_uses``: a copy, a sum, a store, an atomic add) pass it on as such, and only a statement
    that needs its value depends on it."""
    if isinstance(loop, ast.While) and returns_from(loop):
        return False  # Warp's backward may never leave it (see the module's docstring)
    statements = [node for node in walk(function) if isinstance(node, ast.stmt) and node is not function]
    enclosing = _enclosing_loops(function)
    influenced: set[ast.stmt] = set()
    names = carried.into_iterations | carried.out_of_loop
    summed: set[str] = set()  # wrong in backward, but only ever summed, copied or stored: the adjoint is right
    wrong: set[str] = set(names)  # wrong in backward, and maybe needed

    def influence(statement: ast.stmt) -> None:
        for node in walk(statement):
            if isinstance(node, ast.stmt) and node not in influenced:
                influenced.add(node)
                wrong.update(_assigned(node, memory))
                if isinstance(node, ast.Break | ast.Continue) and node in enclosing:
                    influence(enclosing[node])  # which trips run depends on it
                elif isinstance(node, ast.Return):
                    influenced.update(statements)  # whether anything after runs depends on it
                    for other in statements:
                        wrong.update(_assigned(other, memory))

    constants = memory.constants if callees.kernel else set()
    if hazards & {Hazard.WHILE, Hazard.JUMPS}:  # the trips themselves are wrong
        influence(loop)
    else:
        summed = _sums(loop, names - carried.assigned_in_loop_only)
        wrong -= summed
    changed = True
    while changed:
        changed = False
        for statement in statements:
            if statement in influenced:
                continue
            read = _read(statement)
            if read & wrong:
                influence(statement)
                changed = True
            elif read & summed:
                passed_on = _linear_uses(statement, summed, memory, callees.names, constants)
                if passed_on is None:
                    influence(statement)
                    changed = True
                elif passed_on - summed - wrong:
                    summed.update(passed_on - wrong)
                    changed = True
        summed -= wrong
    returns_int = function.returns is not None and _last_name(function.returns) in INT_TYPES
    return not any(
        _gradient_sink(statement, memory, callees, returns_value=not returns_int) for statement in influenced
    )


def _sums(loop: ast.For | ast.While, candidates: frozenset[str]) -> set[str]:
    """The locals among ``candidates`` (carried by ``loop``, and assigned before it) that the loop only adds to:
    every binding of one in the loop is ``s += e``, ``s -= e``, ``s = s + e`` or ``s = s - e`` (``e`` free of ``s``,
    ``s`` taken once: each trip passes the sum's adjoint on unchanged). Warp's
    reverse pass keeps such a local's adjoint across the trips it replays, so each trip's ``e`` gets it right,
    whatever value the replay gives the sum (tests/passes/test_warp_loops.py)."""
    sums = set(candidates)
    for node in walk(loop):  # the loop itself too: a for loop's variable is set at each trip, never added to
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if not isinstance(node.op, ast.Add | ast.Sub) or _mentions(node.value, {node.target.id}):
                sums.discard(node.target.id)
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if not _adds_to(node.value, node.targets[0].id):
                sums.discard(node.targets[0].id)
            continue
        sums -= _bindings(node)  # any other binding, a component store, a local handed to a call
    return sums


def _adds_to(value: ast.expr, name: str) -> bool:
    """Is ``value`` the local ``name`` plus or minus terms free of it (``s + a - b``, ``a + s``)?"""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add | ast.Sub):
        left = (isinstance(value.left, ast.Name) and value.left.id == name) or _adds_to(value.left, name)
        if left and not _mentions(value.right, {name}):
            return True
        right = (isinstance(value.right, ast.Name) and value.right.id == name) or _adds_to(value.right, name)
        return isinstance(value.op, ast.Add) and right and not _mentions(value.left, {name})
    return False


def _bindings(node: ast.AST) -> set[str]:
    """The locals a node binds or may change other than by a plain assignment of a name: targets of for loops,
    tuples, walrus, annotated assignments and component stores, and the locals handed to a call."""
    found: set[str] = set()
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.For):
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            found.update(_bound_names(target))
            found.update(root.id for stored in _stored(target) if (root := _root(stored)) is not None)
    elif isinstance(node, ast.NamedExpr):
        found.add(node.target.id)
    elif isinstance(node, ast.Call):
        found.update(a.id for a in node.args if isinstance(a, ast.Name))
    return found


def _mentions(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(node, ast.Name) and node.id in names for node in walk(expr))


def _linear(expr: ast.expr, summed: set[str], constants: set[str]) -> bool:
    """Is ``expr`` linear in the ``summed`` locals, so that its adjoint needs none of their values? Sums and
    differences, negation, products and quotients by a literal or by one of the ``constants`` (a kernel's value
    parameters, which Warp gives no gradient); any expression free of them."""
    if not _mentions(expr, summed) or isinstance(expr, ast.Name):
        return True
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub | ast.UAdd):
        return _linear(expr.operand, summed, constants)
    if isinstance(expr, ast.BinOp):
        constant = lambda side: _is_number(side) or (isinstance(side, ast.Name) and side.id in constants)  # noqa: E731
        if isinstance(expr.op, ast.Add | ast.Sub):
            return _linear(expr.left, summed, constants) and _linear(expr.right, summed, constants)
        if isinstance(expr.op, ast.Mult):
            return (constant(expr.left) and _linear(expr.right, summed, constants)) or (
                constant(expr.right) and _linear(expr.left, summed, constants)
            )
        if isinstance(expr.op, ast.Div):
            return constant(expr.right) and _linear(expr.left, summed, constants)
    return False


def _is_number(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and type(expr.value) in (int, float)


def _linear_uses(
    statement: ast.stmt, summed: set[str], memory: _Memory, names: WarpNames, constants: set[str]
) -> set[str] | None:
    """The locals a statement that reads some of the ``summed`` locals makes sums in turn, where it uses them only
    linearly: ``y = s + e`` (``y``), ``y += s``, ``out[i] = s``, ``out[i] += s``, ``wp.atomic_add(out, i, s)`` with
    the return unused, a helper's ``return s``. None where it needs the value of one (any other use)."""
    if isinstance(statement, ast.Return):
        return set() if statement.value is not None and _linear(statement.value, summed, constants) else None
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        arguments = positional_arguments(call)
        if names.atomic_op(call) in ("add", "sub") and not call.keywords and arguments:
            *place, value = arguments
            return set() if _linear(value, summed, constants) and not any(_mentions(p, summed) for p in place) else None
        return None
    if isinstance(statement, ast.AugAssign) and not isinstance(statement.op, ast.Add | ast.Sub):
        return None
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0], statement.value
    elif isinstance(statement, ast.AugAssign | ast.AnnAssign) and statement.value is not None:
        target, value = statement.target, statement.value
    else:
        return None
    if not _linear(value, summed, constants):
        return None
    if isinstance(target, ast.Name):
        return {target.id}
    root = _root(target)
    if root is None or not isinstance(target, ast.Attribute | ast.Subscript):
        return None
    places = [target.slice] if isinstance(target, ast.Subscript) else []
    inner = target.value
    while isinstance(inner, ast.Attribute | ast.Subscript):
        places += [inner.slice] if isinstance(inner, ast.Subscript) else []
        inner = inner.value
    if any(_mentions(place, summed) for place in places):
        return None  # an index that needs the value
    return set() if root.id in memory.memory else {root.id}


def _own_expressions(statement: ast.stmt) -> list[ast.AST]:
    """The nodes a statement evaluates itself, not those of the statements in its body."""
    if isinstance(statement, ast.If | ast.While):
        return walk(statement.test)
    if isinstance(statement, ast.For):
        return walk(statement.iter) + walk(statement.target)
    if isinstance(statement, ast.FunctionDef | ast.With | ast.Try):
        return []
    return walk(statement)


def _read(statement: ast.stmt) -> set[str]:
    return {
        node.id for node in _own_expressions(statement) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }


def _assigned(statement: ast.stmt, memory: _Memory) -> set[str]:
    """The locals a statement may change: those it binds, those whose components it stores into (a store into
    memory changes no local), and every name but an array parameter that it hands to a call (Warp's builtins write
    the arguments they take by reference: ``wp.bvh_query_next(query, i)``)."""
    names = set()
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AnnAssign | ast.AugAssign | ast.For):
        targets = [statement.target]
    for target in targets:
        names.update(_bound_names(target))
        names.update(root.id for stored in _stored(target) if (root := _root(stored)) and root.id not in memory.memory)
    for node in _own_expressions(statement):
        if isinstance(node, ast.NamedExpr):
            names.add(node.target.id)
        elif isinstance(node, ast.Call):
            names.update(a.id for a in node.args if isinstance(a, ast.Name) and a.id not in memory.arrays)
    return names


def _gradient_sink(statement: ast.stmt, memory: _Memory, callees: Callees, returns_value: bool) -> bool:
    """Does the statement itself write memory a gradient may flow through, call a helper that may, or (with
    ``returns_value``) return a value that may carry one?"""
    if isinstance(statement, ast.Return) and statement.value is not None and returns_value:
        return True
    stored: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        stored = [t for target in statement.targets for t in _stored(target)]
    elif isinstance(statement, ast.AnnAssign | ast.AugAssign):
        stored = _stored(statement.target)
    if any(memory.writes_gradient(target) for target in stored):
        return True
    for node in _own_expressions(statement):
        if isinstance(node, ast.Call) and _call_writes_gradient(node, memory, callees):
            return True
    return False


def _stored(target: ast.expr) -> list[ast.expr]:
    """The fields and elements an assignment target stores into (not the locals it binds)."""
    if isinstance(target, ast.Tuple | ast.List):
        return [stored for element in target.elts for stored in _stored(element)]
    return [target] if isinstance(target, ast.Attribute | ast.Subscript) else []


def _call_writes_gradient(call: ast.Call, memory: _Memory, callees: Callees) -> bool:
    builtin = _warp_builtin(call, callees.names)
    if callees.names.atomic_op(call) is not None or builtin in ARRAY_WRITERS:
        arguments = positional_arguments(call)
        return not (arguments and memory.holds_ints(arguments[0]) and builtin not in ARRAY_WRITERS)
    if builtin is not None or (isinstance(call.func, ast.Name) and call.func.id in _PYTHON_PURE):
        return False
    return callees.helper_writes(call)


def _enclosing_loops(function: ast.FunctionDef) -> dict[ast.stmt, ast.For | ast.While]:
    """Each break and continue of the function, with the loop it leaves or continues."""
    found: dict[ast.stmt, ast.For | ast.While] = {}
    for node in walk(function):
        if isinstance(node, ast.For | ast.While):
            for jump in own_jumps(node.body):
                found[jump] = node
    return found


def _skips_nothing(
    loop: ast.For | ast.While,
    jump: ast.Break | ast.Continue,
    carried: frozenset[str],
    memory: _Memory,
    callees: Callees,
) -> bool:
    """Does Warp's replay of ``jump`` skip no adjoint that matters? A replayed ``continue`` jumps past the adjoint of
    what its trip ran before it: nothing is lost where that wrote no memory a gradient flows through, called no
    helper that may, and changed no local the loop carries (a ``continue`` that skips a trip before its work:
    ``if not active[i]: continue``). A ``break`` jumps past the adjoints of every earlier trip too."""
    if isinstance(jump, ast.Break):
        return False
    at = (jump.lineno, jump.col_offset)
    before = [n for n in walk(loop) if isinstance(n, ast.stmt) and n is not loop and (n.lineno, n.col_offset) < at]
    return not any(
        _gradient_sink(node, memory, callees, returns_value=True) or _assigned(node, memory) & carried
        for node in before
    )


def _does_something(loop: ast.For | ast.While) -> bool:
    """Does the loop's body hold more than ``pass``, ``break`` and ``continue``?"""
    return any(not isinstance(statement, ast.Pass | ast.Break | ast.Continue) for statement in loop.body)


def unrolled_by_warp(loop: ast.For | ast.While, max_unroll: int) -> bool:
    """Does Warp unroll the loop? Warp first puts each ``wp.static(...)``'s value in its place, but for one that reads
    a variable of a ``for`` loop around it (known only once that loop is unrolled); then it unrolls a ``range()`` of
    int constants whenever the loop holds such a ``wp.static(...)``, else when it has at most ``max_unroll`` trips
    (the module's option) and never breaks (``codegen.replace_static_expressions``, ``get_unroll_range``). The
    passes read a bound's value where it is a literal or the front end read it (``constant_ranges``); a range of
    other names or ``wp.static(...)`` counts as a loop, unless the loop holds a ``wp.static(...)`` Warp leaves for
    later."""
    if not isinstance(loop, ast.For) or not _calls(loop.iter, "range") or loop.iter.keywords:
        return False
    args = loop.iter.args
    if not 1 <= len(args) <= 3 or not all(bound_value(a) is not None or is_static(a) for a in args):
        return False
    if _holds_a_later_static(loop):
        return True
    if any(bound_value(a) is None for a in args):
        return False
    breaks = any(isinstance(jump, ast.Break) for jump in own_jumps(loop.body))
    bounds = [bound for a in args if (bound := bound_value(a)) is not None]  # every one
    return len(range(*bounds)) <= max_unroll and not breaks


def _holds_a_later_static(loop: ast.For) -> bool:
    """Does ``loop`` hold a ``wp.static(...)`` reading the variable of a ``for`` loop around it inside ``loop`` (or
    ``loop``'s own), which Warp evaluates only once it unrolls that loop? (One reading the variable of a loop around
    ``loop`` is missed: the loop then counts as one Warp does not unroll, which costs records, never a gradient.)"""

    def later(node: ast.AST, variables: frozenset[str]) -> bool:
        if is_static(node):
            assert isinstance(node, ast.Call)
            return any(isinstance(n, ast.Name) and n.id in variables for a in node.args for n in walk(a))
        if isinstance(node, ast.For):
            target = {n.id for n in walk(node.target) if isinstance(n, ast.Name)}
            variables = variables | target
        return any(later(child, variables) for child in ast.iter_child_nodes(node))

    return later(loop, frozenset())


def own_jumps(body: list[ast.stmt]) -> list[ast.Break | ast.Continue]:
    """The break and continue statements of the loop with this body, not of loops nested in it."""
    jumps = []
    for statement in body:
        if isinstance(statement, ast.Break | ast.Continue):
            jumps.append(statement)
        elif isinstance(statement, ast.If):
            jumps += own_jumps(statement.body) + own_jumps(statement.orelse)
    return jumps


def _calls(expr: ast.expr, name: str) -> TypeGuard[ast.Call]:
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == name


# --- reads of memory the launch writes: whether a gradient needs the value read --------------------------------


def values_needed(function: ast.FunctionDef, reads: Sequence[ast.expr], names: WarpNames, kernel: bool) -> bool:
    """Does anything in ``function`` need the value of one of ``reads`` (its reads of memory the launch writes),
    which Warp's backward replays against the launch's final memory? A linear use (``_linear_uses``: a copy, a sum,
    a store, an atomic add, a product by a literal or by a kernel's value parameter) hands the value on, followed
    through the locals it is assigned to, and needs none of it; any other use needs it: an operation whose adjoint
    reads it, a condition, an index, a call, a helper's return (its caller's use is not followed)."""
    if not reads:
        return False
    marker = Namer.for_tree(function).fresh("value_read")
    positions = {_span(read) for read in reads}
    memory = _Memory(function, names)
    constants = memory.constants if kernel else set()
    statements = [node for node in walk(function) if isinstance(node, ast.stmt) and node is not function]
    derived: set[str] = set()  # locals holding a linear function of a value read
    changed = True
    while changed:
        changed = False
        for statement in statements:
            holds = any(isinstance(node, ast.expr) and _span(node) in positions for node in _own_expressions(statement))
            if not holds and not _read(statement) & derived:
                continue
            if isinstance(statement, ast.Return) and not kernel:
                return True
            marked = _ReadsMarked(positions, marker).visit(copy.deepcopy(statement)) if holds else statement
            assert isinstance(marked, ast.stmt)  # (a statement stays one: only reads are replaced)
            passed = _linear_uses(marked, derived | {marker}, memory, names, constants)
            if passed is None:
                return True
            if passed - derived:
                derived |= passed
                changed = True
    return False


def _span(node: ast.expr) -> tuple[int, int, int | None, int | None]:
    return node.lineno, node.col_offset, node.end_lineno, node.end_col_offset


class _ReadsMarked(ast.NodeTransformer):
    """A statement with each of the reads at ``positions`` replaced by the local ``marker``."""

    def __init__(self, positions: set[tuple[int, int, int | None, int | None]], marker: str):
        self.positions, self.marker = positions, marker

    def visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.expr) and _span(node) in self.positions:
            return ast.copy_location(ast.Name(self.marker, ast.Load()), node)
        return super().visit(node)


def reads_overwritten(
    function: ast.FunctionDef, reads: Sequence[ast.Subscript], stores: Sequence[ast.Subscript]
) -> list[ast.Subscript]:
    """Of ``reads`` (of one array, in ``function``), those a store of ``stores`` (into the same array, in
    ``function``) at the same index, as written but for locals that copy another name (``j = i``, each assigned
    once), may overwrite after the read: in the read's statement, a later one, or one in a loop around both. Warp's
    backward then replays the read against the stored value. A store at another index is taken to write another
    element (a parent's transform read, a child's stored: a tree walked down), as a store in another function or
    thread is: those reads are not told here."""
    index = _index_as_copied(function)
    statements = [node for node in walk(function) if isinstance(node, ast.stmt) and node is not function]
    owner: dict[int, ast.stmt] = {}  # the innermost statement holding each node, by id
    for statement in statements:
        for node in _own_expressions(statement):
            owner[id(node)] = statement
    loops = [node for node in statements if isinstance(node, ast.For | ast.While)]

    def around(statement: ast.stmt) -> set[int]:
        return {id(loop) for loop in loops if any(node is statement for node in walk(loop))}

    stored_at = {id(store): index(store.slice) for store in stores}  # (each index read once, not once a pair)
    found = []
    for read in reads:
        at = owner.get(id(read))
        if at is None:
            continue
        read_at = index(read.slice)
        for store in stores:
            placed = owner.get(id(store))
            if placed is None or stored_at[id(store)] != read_at:
                continue
            if (placed.lineno, placed.col_offset) >= (at.lineno, at.col_offset) or around(at) & around(placed):
                found.append(read)
                break
    return found


def _index_as_copied(function: ast.FunctionDef) -> Callable[[ast.expr], str]:
    """The dump of an index with each local that copies another name put back to that name: ``j`` where the function
    assigns ``j = i`` once and ``i`` at most once, and so on down a chain of such copies."""
    stores = Counter(n.id for n in walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    copies = {
        statement.targets[0].id: statement.value.id
        for statement in walk(function)
        if isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and isinstance(statement.value, ast.Name)
        and stores[statement.targets[0].id] == 1
        and stores[statement.value.id] <= 1
    }

    def source(name: str) -> str:
        seen = {name}
        while name in copies and copies[name] not in seen:
            name = copies[name]
            seen.add(name)
        return name

    def dump(index: ast.expr) -> str:
        copied = copy.deepcopy(index)
        for node in walk(copied):
            if isinstance(node, ast.Name):
                node.id = source(node.id)
        return ast.dump(copied)

    return dump
