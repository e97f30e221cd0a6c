"""Turn a return from inside a loop Warp does not unroll into a flag and a break: ``return v`` becomes
``value = T(v)``, ``returned = True``, ``break``; each loop it was nested in breaks too, and after the outermost
one comes ``if returned: return value``. A function returning a tuple gets a value local per element:
``return a, b`` becomes ``value = T(a)``, ``value_1 = U(b)`` and the function returns ``value, value_1``.

Warp's backward cannot replay a return from such a loop: it jumps from the return into the middle of its reverse
loop, which then runs the wrong iterations. Lowered, the loop ends like any loop that breaks, which the rewrite
replays (``passes.two_phase``), and the flag and the values are ints or bools the loop hands on (``passes.plan``).
Only functions that return nothing, an int or bool (``-> int``, ``-> wp.int32``, ``-> bool``, ...) or a tuple of
them (``-> tuple[bool, int]``, ``-> typing.Tuple[...]``) are lowered, as each value's local needs its type before
the loop; a tuple function's returns from such loops must be literal tuples (``return a, b``). The planner refuses
a return left in such a loop. The tree given is never changed.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import TypeVar

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.loop_hazards import RETURNED_FROM, unrolled_by_warp
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.syntax import walk, with_blocks

_SCALAR_TYPES = frozenset(t.__name__ for t in (*dtypes.INT_TYPES, dtypes.BOOL))  # Warp's, as annotations name them
_Node = TypeVar("_Node", bound=ast.AST)
_PYTHON_TYPES = {"int": "int32", "bool": "bool"}  # Python's int and bool as Warp reads them in an annotation


def lower_returns(function: ast.FunctionDef, warp: str, max_unroll: int) -> ast.FunctionDef | None:
    """``function`` with its returns from loops Warp does not unroll lowered; None when there are none, or when
    the function returns something other than nothing, an int or bool, or a tuple of them (or returns from such a
    loop what its annotation does not declare). ``warp``: the function's name of Warp's module; ``max_unroll``: the
    module's option (see ``unrolled_by_warp``)."""
    returns = _return_types(function.returns, warp)
    if returns is None:
        return None
    lowering = _Lowering(function, returns, warp, max_unroll)
    body = lowering.body(function.body)
    if body is function.body or lowering.refused:
        return None
    lowered = copy.copy(function)
    lowered.body = body
    return lowered


@dataclass(frozen=True)
class _Returns:
    """What a function returns: the Warp type of each value (none for a function returning nothing), and whether
    they come as a tuple."""

    types: list[ast.expr]
    is_tuple: bool = False


def _return_types(annotation: ast.expr | None, warp: str) -> _Returns | None:
    """The values of a function with this return annotation; None where one is not an int or bool."""
    if annotation is None:
        return _Returns([])
    if isinstance(annotation, ast.Subscript) and _type_name(annotation.value) in ("tuple", "Tuple"):
        elements = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        types = [scalar for element in elements if (scalar := _scalar_type(element, warp)) is not None]
        return None if len(types) < len(elements) else _Returns(types, is_tuple=True)
    scalar = _scalar_type(annotation, warp)
    return None if scalar is None else _Returns([scalar])


def _scalar_type(annotation: ast.expr, warp: str) -> ast.expr | None:
    """The Warp type of an int or bool annotation (Python's int is Warp's int32), else None."""
    name = _type_name(annotation)
    if isinstance(annotation, ast.Name) and name in _PYTHON_TYPES:
        return _warp_type(warp, _PYTHON_TYPES[name])
    return annotation if name in _SCALAR_TYPES else None


class _Lowering:
    def __init__(self, function: ast.FunctionDef, returns: _Returns, warp: str, max_unroll: int):
        self.returns, self.warp, self.max_unroll = returns, warp, max_unroll
        self.namer = Namer.for_tree(function)
        self.refused = False  # a return whose value the annotation does not declare

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
        return [with_blocks(node, {name: self.body(getattr(node, name)) for name in ("body", "orelse")})]

    def loop(self, node: ast.For | ast.While) -> list[ast.stmt]:
        """``returned = wp.bool(False)`` (and ``value = T(0)`` per value), the loop with its returns made breaks,
        then ``if returned: return value`` (or ``return value, value_1, ...``)."""
        flag = self.namer.fresh("returned")
        values = [self.namer.fresh("returned_value") for _ in self.returns.types]
        declared: list[ast.stmt] = [_assign(flag, _cast(_warp_type(self.warp, "bool"), ast.Constant(False)), node)]
        declared += [
            _assign(v, _cast(t, ast.Constant(False if _type_name(t) == "bool" else 0)), node)
            for v, t in zip(values, self.returns.types, strict=True)
        ]
        loop = self.breaking(node, flag, values)
        assert isinstance(loop, ast.stmt)  # a loop stays one statement (only a return becomes several)
        loaded: list[ast.expr] = [_name(value, ast.Load()) for value in values]
        result = ast.Tuple(loaded, ast.Load()) if self.returns.is_tuple else loaded[0] if loaded else None
        leave = _at(ast.If(_name(flag, ast.Load()), [_at(ast.Return(result), node)], []), node)
        return [*declared, loop, leave]

    def breaking(self, node: ast.stmt, flag: str, values: list[str]) -> ast.stmt | list[ast.stmt]:
        """A statement inside a lowered loop: each return a break, each loop it is in followed by a break."""
        if isinstance(node, ast.Return):
            returned = self.returned(node)
            if returned is None:
                self.refused = True
                return node
            assigned = [
                _assign(v, _cast(t, e), node) for v, t, e in zip(values, self.returns.types, returned, strict=True)
            ]
            return [*assigned, _assign(flag, ast.Constant(True), node), _at(ast.Break(), node)]
        if not isinstance(node, ast.If | ast.For | ast.While) or not _returns(node):
            return node
        new = copy.copy(node)
        if isinstance(new, ast.For | ast.While):
            setattr(new, RETURNED_FROM, True)  # (passes.loop_hazards: still a loop a return leaves)
        for name in ("body", "orelse"):
            block: list[ast.stmt] = []
            for statement in getattr(node, name):
                lowered = self.breaking(statement, flag, values)
                block += lowered if isinstance(lowered, list) else [lowered]
                if isinstance(statement, ast.For | ast.While) and _returns(statement):
                    block.append(_at(ast.If(_name(flag, ast.Load()), [_at(ast.Break(), statement)], []), statement))
            setattr(new, name, block)
        return new

    def returned(self, node: ast.Return) -> list[ast.expr] | None:
        """The expression of each value the return gives, None where they do not match the annotation: a tuple
        function's return must be a literal tuple of its arity (a tuple-valued expression has no elements to
        assign)."""
        if node.value is None:
            return [] if not self.returns.types else None
        if not self.returns.is_tuple:
            return [node.value] if self.returns.types and not isinstance(node.value, ast.Tuple) else None
        elements = node.value.elts if isinstance(node.value, ast.Tuple) else None
        return elements if elements is not None and len(elements) == len(self.returns.types) else None


def _assign(name: str, value: ast.expr, where: ast.AST) -> ast.Assign:
    return _at(ast.Assign([_name(name, ast.Store())], value), where)


def _cast(type_: ast.expr, value: ast.expr) -> ast.Call:
    return _at(ast.Call(copy.deepcopy(type_), [value], []), value)


def _returns(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Return) for n in walk(node))


def _type_name(annotation: ast.expr) -> str | None:
    """``int32`` for ``wp.int32``, ``int`` for ``int``."""
    return annotation.attr if isinstance(annotation, ast.Attribute) else getattr(annotation, "id", None)


def _name(name: str, ctx: ast.expr_context) -> ast.Name:
    return ast.Name(name, ctx)


def _warp_type(warp: str, name: str) -> ast.Attribute:
    """``wp.int32``: Warp's type, not Python's, so that ``wp.int32(0)`` declares a local a loop may change (Warp
    takes a literal for a constant) without the lint a Python ``int(0)`` draws."""
    return ast.Attribute(ast.Name(warp, ast.Load()), name, ast.Load())


def _at(node: _Node, where: ast.AST) -> _Node:
    """``node`` and every node under it placed at ``where`` (where the rewrite reports them)."""
    for inner in walk(node):
        if "lineno" in inner._attributes and not hasattr(inner, "lineno"):
            ast.copy_location(inner, where)
    return node
