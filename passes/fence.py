"""The language fence: the forms of Warp code the rewrite accepts, in one table (``FORMS``), and the visitor that
refuses every other form before any stage transforms the kernel.

A kernel that consumes no atomic's return and holds no loop Warp's backward replays wrong (``passes.loop_hazards``)
needs no rewrite and runs as plain Warp: the fence leaves it alone. In
one that does, the fence walks the kernel and every helper it reaches and names the table's form of each statement,
assignment target, call and control-flow construct. A refused form, or one the table does not know, is a
``Refusal`` naming the form and saying what to do. The fuzzer (tests/fuzz) draws its kernels from the same table,
and docs/design.md lists it (``form_list``).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from enum import Enum
from typing import Any

from warp_rewrite.passes import builtins, dtypes
from warp_rewrite.passes.atomics import TILE_ATOMIC_PREFIX, TILE_ATOMIC_RETURN, WarpNames, find_atomic_calls
from warp_rewrite.passes.dataflow import rebound_locals
from warp_rewrite.passes.memory import index_count
from warp_rewrite.passes.overloads import Ambiguous
from warp_rewrite.passes.plan_types import Frontend, Unit
from warp_rewrite.passes.read_back import Analysis, MemoryAccesses
from warp_rewrite.passes.refusals import Refusal
from warp_rewrite.passes.syntax import Located, called_name, function_locals, parent_map, walk

UNSUPPORTED = "not supported by warp-rewrite yet"
# The builtin classes the rewrite accepts, as the table of forms lists them (docs/design.md).
ACCEPTED_CLASSES = ", ".join(effect.label for effect in builtins.Effect if effect is not builtins.Effect.REFUSED)


class Kind(Enum):
    ACCEPTED = "accepted"
    REFUSED = "refused"


@dataclass(frozen=True)
class Form:
    """One form of Warp code: accepted (the passes handle it, and the fuzzer checks that they do) or refused."""

    name: str
    kind: Kind
    example: str
    why: str  # accepted: how the rewrite handles it; refused: why not, and what to write instead


# Assignment targets, by the chain of subscripts and attributes under the name they start from (attributes right
# after the name are a path to memory: ``s.counts[i]`` is a subscript of the struct field ``s.counts``).
TARGETS = {
    "name": ("v", "a local: the passes track what it holds"),
    "attribute": ("s.f", "a field of a struct, or a component of a vector, held in a local or an argument"),
    "subscript": ("a[i]", "an element of an array (or a component of a local vector)"),
    "component": ("a[i][1]", "a component of an array's vector or matrix element (or a local matrix's)"),
    "field": ("a[i].f", "a struct field or a named component (.x) of an array's element"),
    "nested": ("a[i].f[1]", "deeper chains of subscripts and attributes into an element"),
}
# Operators, in groups that Warp lowers alike on an array's element (or a slot of one)
OPERATORS = {
    "=": ("=", "a store"),
    "+=": ("+= -=", "an atomic add or sub whose return is unused (Warp 1.19, on an array's element or slot)"),
    "*=": ("*= /= //= %= **= &= |= ^= <<= >>=", "a read and a store (an atomic for &= |= ^= on int elements)"),
}
# Tables laid out by hand (fmt: skip): a few operators to a line here, each form below in two lines.
_GROUP = {
    ast.Add: "+=", ast.Sub: "+=", ast.Mult: "*=", ast.Div: "*=", ast.FloorDiv: "*=", ast.Mod: "*=", ast.Pow: "*=",
    ast.BitAnd: "*=", ast.BitOr: "*=", ast.BitXor: "*=", ast.LShift: "*=", ast.RShift: "*=",
}  # fmt: skip


def _assignment_forms() -> tuple[Form, ...]:
    forms = []
    for target, (spelled, what) in TARGETS.items():
        for group, (operators, lowered) in OPERATORS.items():
            example = f"{spelled} {operators.split()[0]} v"
            why = f"{what}; {operators}: {lowered}. Reads of memory the launch writes are recorded"
            forms.append(Form(f"{target} {group}", Kind.ACCEPTED, example, why))
    return tuple(forms)


FORMS: tuple[Form, ...] = (
    *_assignment_forms(),
    Form("tuple =", Kind.ACCEPTED, "a, b = f(x)", "unpacking into locals (a helper's tuple return)"),
    Form("@= on any target", Kind.REFUSED, "m @= n", "unproven: write m = m @ n"),
    # atomics
    Form("atomic, return used", Kind.ACCEPTED, "s = wp.atomic_add(c, 0, 1)",
         "the record kernel records the return, the replay reads the record"),
    Form("atomic by keyword, return used", Kind.ACCEPTED, "s = wp.atomic_add(arr=c, i=0, value=1)",
         "arguments are read in parameter order (passes.atomics.positional_arguments)"),
    Form("atomic, return unused", Kind.ACCEPTED, "wp.atomic_add(c, 0, 1)",
         "no hazard: Warp's backward skips it and nothing reads its return"),
    Form("tile atomic, return used", Kind.REFUSED, "t = wp.tile_atomic_add(a, tile)", TILE_ATOMIC_RETURN),
    # calls
    Form("helper call", Kind.ACCEPTED, "r = slot_of(c, tid)",
         "the helper is read, planned and cloned with the kernel through the arguments the call binds"),
    Form("helper through wp.static", Kind.ACCEPTED, "wp.static(write)(c, tid)",
         "resolved like a plain helper call, as Warp resolves it when it builds the kernel"),
    Form("builtin call", Kind.ACCEPTED, "wp.sin(x[tid])",
         "a Warp builtin of a class the rewrite replays right (passes.builtins: " + ACCEPTED_CLASSES + "), a Python "
         "builtin Warp reads as its own (min, int, range), a struct or vector constructor"),
    Form("builtin writing its arguments", Kind.ACCEPTED, "wp.hash_grid_query_next(query, j)",
         "the locals it takes by reference (passes.builtins.written_arguments) are assigned by the call: the "
         "dataflow sees them, and a loop carrying one records it like any int"),
    Form("builtin the rewrite cannot replay", Kind.REFUSED, "a = wp.zeros(4, dtype=float)",
         "of a class passes.builtins refuses, or one it does not have (a newer Warp's): the message says why and "
         "what to write instead"),
    Form("helper returning memory", Kind.REFUSED, "buf = pick(a, b, k)",
         "the planner cannot tell which array what a helper returns names: index the array where the helper is "
         "called, or have the helper return the values it reads"),
    Form("call of a local", Kind.REFUSED, "op = wp.atomic_xor; op(flag, 0, m)",
         "handed memory, a local (or parameter) naming a function (a builtin, a helper) the rewrite cannot tell from "
         "the source may write it where the rewrite cannot see: call the function by its own name"),
    Form("opaque call", Kind.ACCEPTED, "native_op(v)",
         "a call the rewrite cannot read (@wp.func_native): accepted handed values only; handed memory it is refused "
         "(passes.read_back)"),
    Form("wp.static value", Kind.ACCEPTED, "wp.static(N)", "a constant Warp evaluates when it builds the kernel"),
    # memory reached through locals and elements
    Form("local bound to memory", Kind.ACCEPTED, "buf = a",
         "an array, or a view of one (row = grid[i]): stores, atomics and reads through it are those of what it "
         "names (passes.read_back)"),
    Form("local assigned more than one array", Kind.ACCEPTED, "src = a; if c: src = b",
         "a store through it writes every array it may name; any other use is refused where the launch writes one "
         "of them, since which one it reaches is known only at run time (passes.read_back)"),
    Form("memory in an element of an array of structs", Kind.REFUSED, "bodies[b].points[k]",
         "the planner follows the arrays of kernel arguments and of their fields, not of elements: pass the array "
         "as a kernel argument of its own, or as a field of a struct argument"),
    # control flow
    Form("if", Kind.ACCEPTED, "if c[0] < n:", "both branches are replayed, with the condition's reads recorded"),
    Form("for over range()", Kind.ACCEPTED, "for k in range(n):", "loops get per-trip records (passes.plan)"),
    Form("for over another iterable", Kind.ACCEPTED, "for k in reversed(range(n)):",
         "accepted away from consumed atomics; the planner refuses it around one"),
    Form("while", Kind.ACCEPTED, "while done == 0:",
         "an atomic or helper in the condition is moved into the body first (passes.while_conditions)"),
    Form("loop with an 'else' clause", Kind.REFUSED, "for k in range(n): ... else: ...",
         "Warp compiles no loop 'else' clause (it drops a while loop's): rewrite the loop without 'else'"),
    Form("break", Kind.ACCEPTED, "break", "trip counts of loops that break are recorded"),
    Form("continue", Kind.ACCEPTED, "continue", "replayed as written"),
    Form("return in kernel", Kind.ACCEPTED, "return", "replayed as written"),
    Form("return in helper", Kind.ACCEPTED, "return slot",
         "a return from a loop Warp does not unroll becomes a flag and a break (passes.loop_returns)"),
    # the rest of the language Warp compiles
    Form("expression statement", Kind.ACCEPTED, "'''docstring'''", "a constant or a call whose value is unused"),
    Form("pass", Kind.ACCEPTED, "pass", "nothing to replay"),
    Form("assert", Kind.ACCEPTED, "assert n > 0", "checked in the record kernel and the replay alike"),
    Form("operators", Kind.ACCEPTED, "a * b < c and not d",
         "arithmetic, comparisons, boolean and conditional expressions: pure"),
    Form("reads", Kind.ACCEPTED, "a[i].f", "names, constants, attributes, subscripts, slices, tuples and a vector "
         "unpacked into a call's arguments (wp.vec6(*v, *w)); element reads of memory the launch writes are recorded"),
)  # fmt: skip
BY_NAME = {form.name: form for form in FORMS}

# Nodes that are parts of a form rather than forms of their own.
_PARTS = (ast.arguments, ast.arg, ast.keyword)
_READS = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.Starred)
_OPERATORS = (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp)


def target_kind(target: ast.expr) -> str | None:
    """The ``TARGETS`` kind of an assignment target; None for targets outside the table."""
    layers: list[type] = []
    node = target
    while isinstance(node, ast.Subscript | ast.Attribute):
        layers.append(type(node))
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    layers.reverse()  # from the name out
    while layers and layers[0] is ast.Attribute:  # a path: a struct field of a local or an argument
        layers.pop(0)
        if not layers:
            return "attribute"
    if not layers:
        return "name"
    shapes: dict[tuple[type, ...], str] = {(ast.Subscript,): "subscript", (ast.Subscript, ast.Subscript): "component"}
    return shapes.get(tuple(layers), "field" if tuple(layers) == (ast.Subscript, ast.Attribute) else "nested")


class Fence:
    """Names the form of each node of the kernel and of the helpers it reaches (``form_of``), and refuses the
    kernel where one is refused or unknown (``check``)."""

    def __init__(self, frontend: Frontend):
        self.frontend = frontend
        self._memories: dict[int, _Memory] = {}
        self._reached: dict[bool, list[Unit]] = {}  # reached()'s answers, by through_custom_gradients
        self.ambiguous: list[Ambiguous] = []  # calls whose overload the source does not tell (check raises them)
        self._locals: dict[int, set[str]] = {}  # a function's tree -> its parameters and assigned locals

    def reached(self, through_custom_gradients: bool = True) -> list[Unit]:
        """The kernel and every helper it reaches, each once, in the order first reached; without
        ``through_custom_gradients``, not what a helper with a hand-written ``@wp.func_grad`` calls (Warp's backward
        replays none of it)."""
        if through_custom_gradients in self._reached:
            return self._reached[through_custom_gradients]
        units, pending, seen = [], [self.frontend.kernel], set()
        while pending:
            unit = pending.pop(0)
            if id(unit.tree) in seen:
                continue
            seen.add(id(unit.tree))
            units.append(unit)
            kernel = unit is self.frontend.kernel
            if not through_custom_gradients and not kernel and self.frontend.has_custom_gradient(unit):
                continue
            for node in walk(unit.tree):
                if isinstance(node, ast.Call):
                    pending += self._callees(unit, node)
        self._reached[through_custom_gradients] = units
        return units

    def _callees(self, unit: Unit, call: ast.Call) -> list[Unit]:
        """The helper the call runs; every definition it may run, where the source does not tell which overload."""
        try:
            helper = self.frontend.resolve_helper(unit, call)
        except Ambiguous as ambiguous:
            if all(id(known.node) != id(call) for known in self.ambiguous):
                self.ambiguous.append(ambiguous)
            return ambiguous.candidates
        return [] if helper is None else [helper]

    @functools.cached_property
    def needs_rewrite(self) -> bool:
        """Does the kernel, or a helper it reaches, use an atomic's return (a tile atomic's too), hold a loop Warp's
        backward replays wrong (not in what a helper with a hand-written gradient calls), or read an array the launch
        writes where Warp's backward gets the read wrong (``reads_written``)? Any other kernel runs as plain Warp: the
        one answer both front ends go by (``pipeline.needs_rewrite``). Each matters only where Warp builds the
        kernel's backward pass: without one, nothing replays it and no gradient flows."""
        if not self.frontend.backward:
            return False
        loops = any(map(self._replayed_wrong, self.reached(through_custom_gradients=False)))
        return self.consumes_returns or loops or bool(self.reads_written)

    @functools.cached_property
    def reads_written(self) -> frozenset[str]:
        """The arrays the launch writes whose reads Warp's backward replays wrong (``MemoryAccesses.reads_written``):
        updated (an atomic, ``+=``) and read, or stored into and read where the value read is needed. Empty where the
        launch hands memory to a call the rewrite cannot read: it cannot tell, and leaves the kernel to Warp as it
        leaves any it need not rewrite."""
        if not any(map(self._writes, self.reached())):
            return frozenset()  # (many kernels write no array they could read: asked first, as it is cheap)
        try:
            return MemoryAccesses(self.frontend).reads_written()
        except Refusal:
            return frozenset()

    def _writes(self, unit: Unit) -> bool:
        """Might the function write memory: an assignment into an element or a field, an atomic, a builtin that
        writes arrays (a call it cannot tell counts)?"""
        names = self.frontend.warp_names(unit)
        for node in walk(unit.tree):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(n, ast.Subscript | ast.Attribute) for t in targets for n in walk(t)):
                    return True
            elif isinstance(node, ast.Call) and (names.atomic_op(node) is not None or self._may_write(unit, node)):
                return True
        return False

    def _may_write(self, unit: Unit, call: ast.Call) -> bool:
        if self.frontend.is_builtin(unit, call):
            effect = builtins.call_effect(call, self.frontend.warp_names(unit))
            return effect is None or builtins.Effect.WRITES_ARRAYS in effect.effects
        return False  # (a helper's own writes are asked of the helper: ``reached``)

    @functools.cached_property
    def consumes_returns(self) -> bool:
        """Does the kernel, or a helper it reaches, use an atomic's return (a tile atomic's too)?"""
        return any(map(self._consumes, self.reached()))

    def check(self) -> None:
        """Refuse the first node, in source order, of a refused or unknown form, in a kernel that consumes an
        atomic's return or holds a loop Warp's backward replays wrong (any other kernel runs as plain Warp)."""
        if not self.needs_rewrite:
            return
        if self.ambiguous:
            raise self.ambiguous[0]
        for unit in self.reached():
            for node, form in self.forms(unit):
                # A part without a position of its own (a comprehension's ``for``) is reported at the function.
                where = node if isinstance(node, Located) else unit.tree
                if form is None:
                    name = type(node).__name__
                    raise Refusal(
                        unit,
                        where,
                        f"'{name}' ({_shown(node)}) is {UNSUPPORTED}",
                        "Write it with the forms docs/design.md lists as accepted",
                    )
                if form.kind is Kind.REFUSED and isinstance(node, ast.Call) and form.name.startswith("builtin"):
                    raise self._builtin_refusal(unit, node)
                if form.kind is Kind.REFUSED:
                    advice = form.why[0].upper() + form.why[1:]
                    raise Refusal(unit, where, f"{form.name} ({_shown(node)}) is {UNSUPPORTED}", advice)

    def _builtin_refusal(self, unit: Unit, call: ast.Call) -> Refusal:
        """A refused builtin, named, with its group's reason and what to write instead."""
        callee = ast.unparse(call.func)
        effect = builtins.call_effect(call, self.frontend.warp_names(unit))
        if effect is None:
            problem = (
                f"'{callee}' ({_shown(call)}) is not in the rewrite's table of Warp's builtins (passes/builtins.py), "
                f"so it cannot tell what the call does to memory: {UNSUPPORTED}"
            )
            advice = "Compute it in a kernel that consumes no atomic's return, and report it to warp-rewrite"
            return Refusal(unit, call, problem, advice)
        return Refusal(unit, call, f"'{callee}' ({_shown(call)}) is {UNSUPPORTED}: {effect.reason}", effect.instead)

    def _consumes(self, unit: Unit) -> bool:
        """Does the function use an atomic's return (a tile atomic's too)?"""
        if any(call.consumed for call in find_atomic_calls(unit.tree, self.frontend.warp_names(unit))):
            return True
        return any(form is BY_NAME["tile atomic, return used"] for _, form in self.forms(unit))

    def _replayed_wrong(self, unit: Unit) -> bool:
        """Does the function hold a loop Warp's backward replays wrong (``passes.loop_hazards``)?"""
        return bool(Analysis(unit, self.frontend).loop_hazards)

    def forms(self, unit: Unit) -> list[tuple[ast.AST, Form | None]]:
        """Each node of the function's body with its form (None: none in the table), in source order; nodes that
        are parts of another's form are left out."""
        nodes = [node for statement in unit.tree.body for node in walk(statement)]
        parents = parent_map([unit.tree, *nodes]) if nodes else {}
        parents.update({statement: unit.tree for statement in unit.tree.body})
        atomics = atomic_forms(unit, self.frontend)
        found = []
        for node in nodes:
            if isinstance(node, _PARTS) or _is_part_of_target(node, parents):
                continue
            if isinstance(node, ast.Call) and getattr(parents.get(node), "func", None) is node:
                continue  # wp.static(helper) in wp.static(helper)(...): part of the call's form
            found.append((node, atomics.get(id(node)) or self.form_of(unit, node, parents)))
        return sorted(found, key=lambda pair: (getattr(pair[0], "lineno", 0), getattr(pair[0], "col_offset", 0)))

    def form_of(self, unit: Unit, node: ast.AST, parents: dict[ast.AST, ast.AST]) -> Form | None:
        """The table's form of ``node``; None for a node of a form the table does not have."""
        if isinstance(node, ast.Assign | ast.AugAssign):
            return self._memory_assignment_form(unit, node) or _assignment_form(node)
        if isinstance(node, ast.Call):
            return self._call_form(unit, node, parents)
        if isinstance(node, ast.For | ast.While):
            return _loop_form(node)
        if isinstance(node, ast.Return):
            return BY_NAME["return in kernel" if unit is self.frontend.kernel else "return in helper"]
        simple = {
            ast.If: "if",
            ast.Break: "break",
            ast.Continue: "continue",
            ast.Pass: "pass",
            ast.Assert: "assert",
            ast.Expr: "expression statement",
        }
        if type(node) in simple:
            return BY_NAME[simple[type(node)]]
        if isinstance(node, _OPERATORS):
            return BY_NAME["operators"]
        if isinstance(node, ast.Attribute) and self._in_struct_element(unit, node):
            return BY_NAME["memory in an element of an array of structs"]
        if isinstance(node, _READS) and not isinstance(getattr(node, "ctx", None), ast.Store | ast.Del):
            return BY_NAME["reads"]
        return None

    def _memory_assignment_form(self, unit: Unit, node: ast.Assign | ast.AugAssign) -> Form | None:
        """The form of an assignment that binds a local to memory, or stores through an array held in an element
        of an array of structs; None for any other."""
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        target = node.target if isinstance(node, ast.AugAssign) else target
        if target is None:
            return None
        if any(isinstance(n, ast.Attribute) and self._in_struct_element(unit, n) for n in walk(target)):
            return BY_NAME["memory in an element of an array of structs"]
        memory = self._memory(unit)
        if isinstance(node, ast.Assign) and isinstance(target, ast.Name) and memory.names_memory(node.value):
            several = target.id in memory.rebound
            return BY_NAME["local assigned more than one array" if several else "local bound to memory"]
        return None

    def _memory(self, unit: Unit) -> _Memory:
        if id(unit.tree) not in self._memories:
            types = self.frontend.parameter_types(unit)
            structs = {name: self.frontend.element_struct(unit, name) for name in types}
            names = self.frontend.warp_names(unit)
            self._memories[id(unit.tree)] = _Memory.of(unit.tree, types, structs, names)
        return self._memories[id(unit.tree)]

    def _in_struct_element(self, unit: Unit, node: ast.Attribute) -> bool:
        """Is ``node`` an array field of an element of an array of structs (``bodies[b].points``, or ``body.points``
        after ``body = bodies[b]``)?"""
        struct = self._memory(unit).element_struct(node.value)
        return struct is not None and dtypes.is_array(dtypes.field_type(struct, node.attr))

    def _returns_memory(self, helper: Unit) -> bool:
        """Does the helper return an array (by its annotation, or a return of an array it names)?"""
        if dtypes.is_array(self.frontend.return_type(helper)):
            return True
        memory = self._memory(helper)
        returns = [node.value for node in walk(helper.tree) if isinstance(node, ast.Return) and node.value]
        return any(memory.names_memory(value) for value in returns)

    def _local_names(self, unit: Unit) -> set[str]:
        """The function's parameters and the locals it assigns: a call of one (a function value: ``op =
        wp.atomic_xor``, a ``g: wp.Function`` parameter) the front end cannot resolve is opaque to the rewrite."""
        if id(unit.tree) not in self._locals:
            self._locals[id(unit.tree)] = function_locals(unit.tree)
        return self._locals[id(unit.tree)]

    def _call_form(self, unit: Unit, call: ast.Call, parents: dict[ast.AST, ast.AST]) -> Form | None:
        used = not isinstance(parents.get(call), ast.Expr)
        name = called_name(call)
        callees = self._callees(unit, call)
        if callees:
            if used and any(self._returns_memory(helper) for helper in callees):
                return BY_NAME["helper returning memory"]
            static = isinstance(call.func, ast.Call) and called_name(call.func) == "static"
            return BY_NAME["helper through wp.static" if static else "helper call"]
        if name == "static" and isinstance(call.func, ast.Attribute):
            return BY_NAME["wp.static value"]
        if isinstance(call.func, ast.Name) and call.func.id in self._local_names(unit):
            memory = self._memory(unit)
            handed = [*call.args, *(keyword.value for keyword in call.keywords)]
            # handed values only, it is an opaque call, replayed as Warp replays it; handed memory, it may write it
            if any(memory.names_memory(argument) or memory.element_struct(argument) for argument in handed):
                return BY_NAME["call of a local"]
            return BY_NAME["opaque call"]
        if self.frontend.is_builtin(unit, call):
            tile_atomic = name is not None and name.startswith(TILE_ATOMIC_PREFIX)
            if tile_atomic and used:
                return BY_NAME["tile atomic, return used"]
            return _builtin_form(call, self.frontend.warp_names(unit))
        return BY_NAME["opaque call"]


def _builtin_form(call: ast.Call, names: WarpNames) -> Form:
    """The form of a call of a builtin: by its class in ``passes.builtins``, a constructor's being a pure value."""
    if builtins.called_builtin(call, names) is None:
        return BY_NAME["builtin call"]
    effect = builtins.call_effect(call, names)
    if effect is None or effect.refused:
        return BY_NAME["builtin the rewrite cannot replay"]
    return BY_NAME["builtin writing its arguments" if effect.written else "builtin call"]


@dataclass
class _Memory:
    """What names memory in one function: its array parameters and the locals bound to them or to views of them
    (``arrays``, with the dimensions each has left), and the locals bound to an element of an array of structs
    (``elements``, with the struct type)."""

    arrays: dict[str, int]
    struct_arrays: dict[str, tuple[Any, int]]  # parameter -> its element's struct type and its dimensions
    elements: dict[str, Any]
    rebound: frozenset[str]  # locals assigned more than once (``dataflow.rebound_locals``)

    @classmethod
    def of(cls, function: ast.FunctionDef, types: dict[str, Any], structs: dict[str, Any], names: WarpNames) -> _Memory:
        """``types``: the function's parameter types; ``structs``: the struct type of each array parameter's
        elements, where they are structs (``Frontend.element_struct``); ``names``: how the function spells Warp."""
        arrays, struct_arrays = {}, {}
        for name, annotation in types.items():
            if (array := dtypes.array_info(annotation)) is not None:
                arrays[name] = array.ndim or 1
                if structs.get(name) is not None:
                    struct_arrays[name] = (structs[name], array.ndim or 1)
        memory = cls(arrays, struct_arrays, {}, frozenset(rebound_locals(function, names=names)))
        bindings = [
            (node.targets[0].id, node.value)
            for node in walk(function)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ]
        for _ in range(2):  # a local bound to another local: in either order
            for name, value in bindings:
                if (left := memory._left(value)) is not None and left > 0:
                    memory.arrays.setdefault(name, left)
                elif (struct := memory.element_struct(value)) is not None:
                    memory.elements.setdefault(name, struct)
        return memory

    def _left(self, expr: ast.expr) -> int | None:
        """How many dimensions the array ``expr`` names has left (``grid[i]`` of a 2-D ``grid``: 1); None where it
        names no array."""
        indices = 0
        while isinstance(expr, ast.Subscript):
            indices += index_count(expr)
            expr = expr.value
        return self.arrays[expr.id] - indices if isinstance(expr, ast.Name) and expr.id in self.arrays else None

    def names_memory(self, expr: ast.expr) -> bool:
        left = self._left(expr)
        return left is not None and left > 0

    def element_struct(self, expr: ast.expr) -> Any:
        """The struct type of the element of an array of structs ``expr`` is (``bodies[b]``, or a local bound to
        one); None for anything else."""
        if isinstance(expr, ast.Name):
            return self.elements.get(expr.id)
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and expr.value.id in self.struct_arrays:
            struct, ndim = self.struct_arrays[expr.value.id]
            return struct if index_count(expr) == ndim else None
        return None


def atomic_forms(unit: Unit, frontend: Frontend) -> dict[int, Form]:
    """The form of each atomic call of the function, by id of its node."""
    forms = {}
    for call in find_atomic_calls(unit.tree, frontend.warp_names(unit)):
        keywords = any(keyword.arg for keyword in call.node.keywords)
        name = f"atomic{' by keyword' if keywords else ''}, return used" if call.consumed else "atomic, return unused"
        forms[id(call.node)] = BY_NAME[name]
    return forms


def _assignment_form(node: ast.Assign | ast.AugAssign) -> Form | None:
    if isinstance(node, ast.AugAssign):
        if isinstance(node.op, ast.MatMult):
            return BY_NAME["@= on any target"]
        kind = target_kind(node.target)
        return None if kind is None else BY_NAME[f"{kind} {_GROUP[type(node.op)]}"]
    if len(node.targets) != 1:
        return None  # a = b = v
    (target,) = node.targets
    if isinstance(target, ast.Tuple | ast.List):
        into_locals = all(isinstance(element, ast.Name) for element in target.elts)
        return BY_NAME["tuple ="] if into_locals else None  # Warp unpacks into locals only
    kind = target_kind(target)
    return None if kind is None else BY_NAME[f"{kind} ="]


def _is_part_of_target(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Is ``node`` inside an assignment's or a for loop's target (whose form that statement names), but for its
    indices?"""
    child, parent = node, parents.get(node)
    while isinstance(parent, ast.Subscript | ast.Attribute | ast.Tuple | ast.List | ast.Starred):
        if isinstance(parent, ast.Subscript) and child is parent.slice:
            return False
        child, parent = parent, parents.get(parent)
    if isinstance(parent, ast.Assign):
        return child in parent.targets
    if isinstance(parent, ast.For):
        return child is parent.target
    return isinstance(parent, ast.AugAssign) and child is parent.target


def _loop_form(loop: ast.For | ast.While) -> Form:
    if loop.orelse:
        return BY_NAME["loop with an 'else' clause"]
    if isinstance(loop, ast.While):
        return BY_NAME["while"]
    iterates_range = isinstance(loop.iter, ast.Call) and called_name(loop.iter) == "range"
    return BY_NAME["for over range()" if iterates_range else "for over another iterable"]


def _shown(node: ast.AST, most: int = 60) -> str:
    text = ast.unparse(node).split("\n", 1)[0]
    return text if len(text) <= most else text[: most - 3] + "..."


def form_list() -> str:
    """The design notes' table of forms (docs/design.md, between ``<!-- fence -->`` and ``<!-- /fence -->``)."""
    rows = [f"| {f.name} | {f.kind.value} | `{f.example}` | {f.why} |\n" for f in FORMS]
    return "| form | kind | example | why |\n|---|---|---|---|\n" + "".join(rows)
