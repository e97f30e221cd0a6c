"""Turn a return from inside a loop Warp does not unroll into a flag and a break: ``return v`` becomes
``value = T(v)``, ``returned = True``, ``break``; each loop it was nested in breaks too, and after the outermost
one comes ``if returned: return value``.

Warp's backward cannot replay a return from such a loop: it jumps from the return into the middle of its reverse
loop, which then runs the wrong iterations. Lowered, the loop ends like any loop that breaks, which the rewrite
replays (``passes.two_phase``), and the flag and the value are ints the loop hands on (``passes.plan``). Only
functions that return nothing or an int (``-> int``, ``-> wp.int32``, ...) are lowered: the value's local needs its
type before the loop. The planner refuses a return left in such a loop. The tree given is never changed.
"""

from __future__ import annotations

import ast
import copy

from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.syntax import walk

_INT_TYPES = frozenset({"int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


def unrolled_by_warp(loop: ast.For | ast.While, max_unroll: int) -> bool:
    """Does Warp unroll the loop? A ``range()`` of int literals (or ``wp.static(...)``s), which Warp unrolls whenever
    the loop holds a ``wp.static(...)``, else when it has at most ``max_unroll`` trips (the module's option) and
    never breaks (``codegen.get_unroll_range``). A name's constant value is not looked up: such a loop counts as
    one Warp runs as a loop."""
    if not isinstance(loop, ast.For) or not _calls(loop.iter, "range") or loop.iter.keywords:
        return False
    args = loop.iter.args
    if not 1 <= len(args) <= 3 or not all(_int_literal(a) is not None or _is_static(a) for a in args):
        return False
    if any(_is_static(node) for node in walk(loop)):
        return True
    if any(_is_static(a) for a in args):
        return False
    breaks = any(isinstance(jump, ast.Break) for jump in own_jumps(loop.body))
    return len(range(*(_int_literal(a) for a in args))) <= max_unroll and not breaks


def _int_literal(expr: ast.expr) -> int | None:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        value = _int_literal(expr.operand)
        return None if value is None else -value
    return expr.value if isinstance(expr, ast.Constant) and type(expr.value) is int else None


def _is_static(expr: ast.AST) -> bool:
    """``wp.static(...)`` (under any name of Warp's module), or ``static(...)`` imported from it."""
    if not isinstance(expr, ast.Call):
        return False
    name = expr.func.attr if isinstance(expr.func, ast.Attribute) else getattr(expr.func, "id", None)
    return name == "static"


def own_jumps(body: list[ast.stmt]) -> list[ast.Break | ast.Continue]:
    """The break and continue statements of the loop with this body, not of loops nested in it."""
    jumps = []
    for statement in body:
        if isinstance(statement, ast.Break | ast.Continue):
            jumps.append(statement)
        elif isinstance(statement, ast.If):
            jumps += own_jumps(statement.body) + own_jumps(statement.orelse)
    return jumps


def lower_returns(function: ast.FunctionDef, warp: str, max_unroll: int) -> ast.FunctionDef | None:
    """``function`` with its returns from loops Warp does not unroll lowered; None when there are none, or when
    the function returns something other than nothing or an int. ``warp``: the function's name of Warp's module;
    ``max_unroll``: the module's option (see ``unrolled_by_warp``)."""
    if function.returns is not None and _type_name(function.returns) not in _INT_TYPES:
        return None
    lowering = _Lowering(function, warp, max_unroll)
    body = lowering.body(function.body)
    if body is function.body or lowering.refused:
        return None
    lowered = copy.copy(function)
    lowered.body = body
    return lowered


class _Lowering:
    def __init__(self, function: ast.FunctionDef, warp: str, max_unroll: int):
        self.warp, self.max_unroll = warp, max_unroll
        returns = function.returns  # the int type of the value, or None; Python's int is Warp's int32
        self.returns = _warp_type(warp, "int32") if isinstance(returns, ast.Name) and returns.id == "int" else returns
        self.namer = Namer.for_tree(function)
        self.refused = False  # a return with a value in a function that declares none

    def body(self, statements: list[ast.stmt]) -> list[ast.stmt]:
        """The statements with the loops among them (at any depth) lowered: the same list where none is."""
        lowered = []
        for statement in statements:
            lowered += self.statement(statement)
        return statements if lowered == statements else lowered

    def statement(self, node: ast.stmt) -> list[ast.stmt]:
        if isinstance(node, ast.For | ast.While) and not unrolled_by_warp(node, self.max_unroll) and _returns(node):
            return self.loop(node)
        if not isinstance(node, ast.If | ast.For | ast.While):
            return [node]
        blocks = {name: self.body(getattr(node, name)) for name in ("body", "orelse")}
        if all(block is getattr(node, name) for name, block in blocks.items()):
            return [node]
        new = copy.copy(node)
        for name, block in blocks.items():
            setattr(new, name, block)
        return [new]

    def loop(self, node: ast.For | ast.While) -> list[ast.stmt]:
        """``returned = wp.bool(False)`` (and ``value = T(0)``), the loop with its returns made breaks, then
        ``if returned: return value``."""
        flag = self.namer.fresh("returned")
        value = self.namer.fresh("returned_value") if self.returns is not None else None
        declared = [_at(ast.Assign([_name(flag, ast.Store())], self.cast_to(_warp_type(self.warp, "bool"),
                                                                             ast.Constant(False))), node)]  # fmt: skip
        if value is not None:
            declared.append(_at(ast.Assign([_name(value, ast.Store())], self.cast(ast.Constant(0))), node))
        loop = self.breaking(node, flag, value)
        result = _name(value, ast.Load()) if value is not None else None
        leave = _at(ast.If(_name(flag, ast.Load()), [_at(ast.Return(result), node)], []), node)
        return [*declared, loop, leave]

    def breaking(self, node: ast.stmt, flag: str, value: str | None) -> ast.stmt | list[ast.stmt]:
        """A statement inside a lowered loop: each return a break, each loop it is in followed by a break."""
        if isinstance(node, ast.Return):
            if (node.value is None) != (value is None):
                self.refused = True
                return node
            assigned = [_at(ast.Assign([_name(value, ast.Store())], self.cast(node.value)), node)] if value else []
            raised = _at(ast.Assign([_name(flag, ast.Store())], ast.Constant(True)), node)
            return [*assigned, raised, _at(ast.Break(), node)]
        if not isinstance(node, ast.If | ast.For | ast.While) or not _returns(node):
            return node
        new = copy.copy(node)
        for name in ("body", "orelse"):
            block = []
            for statement in getattr(node, name):
                lowered = self.breaking(statement, flag, value)
                block += lowered if isinstance(lowered, list) else [lowered]
                if isinstance(statement, ast.For | ast.While) and _returns(statement):
                    block.append(_at(ast.If(_name(flag, ast.Load()), [_at(ast.Break(), statement)], []), statement))
            setattr(new, name, block)
        return new

    def cast(self, value: ast.expr) -> ast.Call:
        return self.cast_to(self.returns, value)

    @staticmethod
    def cast_to(type_: ast.expr, value: ast.expr) -> ast.Call:
        return _at(ast.Call(copy.deepcopy(type_), [value], []), value)


def _returns(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Return) for n in walk(node))


def _type_name(annotation: ast.expr) -> str | None:
    """``int32`` for ``wp.int32``, ``int`` for ``int``."""
    return annotation.attr if isinstance(annotation, ast.Attribute) else getattr(annotation, "id", None)


def _calls(expr: ast.expr, name: str) -> bool:
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == name


def _name(name: str, ctx: ast.expr_context) -> ast.Name:
    return ast.Name(name, ctx)


def _warp_type(warp: str, name: str) -> ast.Attribute:
    """``wp.int32``: Warp's type, not Python's, so that ``wp.int32(0)`` declares a local a loop may change (Warp
    takes a literal for a constant) without the lint a Python ``int(0)`` draws."""
    return ast.Attribute(ast.Name(warp, ast.Load()), name, ast.Load())


def _at(node: ast.AST, where: ast.AST) -> ast.AST:
    """``node`` and every node under it placed at ``where`` (where the rewrite reports them)."""
    for inner in walk(node):
        if "lineno" in inner._attributes and not hasattr(inner, "lineno"):
            ast.copy_location(inner, where)
    return node
