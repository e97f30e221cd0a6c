"""Loops over a ``range()`` of module-level int constants, which Warp unrolls as it does a range of literals.

When Warp decides whether to unroll a loop (``codegen.get_unroll_range``), it reads a name the kernel's globals or
closure bind to an int, and a ``wp.static(...)``, as a number: with ``NUM_DIRECTIONS = 6``, ``for d in
range(NUM_DIRECTIONS)`` and ``for d in range(wp.static(NUM_DIRECTIONS))`` are six trips of straight code to its
backward, as ``range(6)`` is. The passes read literals only, so the front end's reading of such a bound is written
into the tree first, as ``wp.static(<runtime>.known_int(NUM_DIRECTIONS, 6))``: the passes take the loop for a range
of literals (``bound_value``), the generated loop still reads the user's name, and ``known_int`` stops Warp's build
of a generated kernel where the name holds another value than the rewrite read (changed since, or read wrong), which
would make its loops other loops than the rewrite planned for.
"""

from __future__ import annotations

import ast
import copy
import operator
from collections.abc import Callable

from warp_rewrite.passes.syntax import walk

KNOWN_INT = "known_int"  # the runtime's check of a value read at rewrite time (``RuntimeNames.known_int``)
# The int arithmetic the rewrite folds where Python folds it (in a ``wp.static(...)``, a type's length): the operators
FOLDED: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
DIVIDES = (ast.FloorDiv, ast.Mod)  # (by zero: not folded)


def known_bounds(
    function: ast.FunctionDef, value_of: Callable[[str], int | None], warp: str, runtime: str
) -> ast.FunctionDef | None:
    """``function`` with each bound of a ``range()`` loop that the front end reads as an int constant written as
    ``<warp>.static(<runtime>.known_int(<bound>, <value>))``, where every bound of the loop is then known (else the
    loop is one of unknown length whatever its known bounds); None where none is. ``value_of``: the int a name of
    the function's module (or closure) holds, None where the front end cannot tell. A name the function binds itself
    (a parameter, a local) is none of those: Warp reads it first."""
    bound_here = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
    bound_here |= {n.id for n in walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}

    def value(expr: ast.expr) -> int | None:
        literal = bound_value(expr)
        if literal is not None:
            return literal
        if isinstance(expr, ast.Name) and expr.id not in bound_here:
            read = value_of(expr.id)
            return read if type(read) is int else None
        if isinstance(expr, ast.BinOp) and type(expr.op) in FOLDED:
            left, right = value(expr.left), value(expr.right)
            if left is None or right is None or (right == 0 and type(expr.op) in DIVIDES):
                return None
            return FOLDED[type(expr.op)](left, right)
        return None

    def bound(expr: ast.expr) -> int | None:
        """A bound's value as Warp reads it: a literal, a name, or a ``wp.static(...)`` of literals and names (Warp
        does not fold other arithmetic in a range's arguments)."""
        if is_static(expr):
            assert isinstance(expr, ast.Call)
            return value(expr.args[0]) if len(expr.args) == 1 and not expr.keywords else None
        return value(expr) if isinstance(expr, ast.Name) or bound_value(expr) is not None else None

    def written(loop: ast.For) -> dict[int, int]:
        """The bounds of ``loop`` to write out, by argument: none unless every bound is known."""
        if not _is_range(loop.iter):
            return {}
        assert isinstance(loop.iter, ast.Call)
        values = [bound(arg) for arg in loop.iter.args]
        if None in values or all(bound_value(arg) is not None for arg in loop.iter.args):
            return {}
        return {
            i: v
            for i, (arg, v) in enumerate(zip(loop.iter.args, values, strict=True))
            if bound_value(arg) is None and v is not None
        }

    loops = [node for node in walk(function) if isinstance(node, ast.For)]
    plans = [written(loop) for loop in loops]
    if not any(plans):
        return None  # (no copy: the command line's check asks about every function of a tree)
    tree = copy.deepcopy(function)
    for loop, plan in zip([node for node in walk(tree) if isinstance(node, ast.For)], plans, strict=True):
        for index, known in plan.items():
            assert isinstance(loop.iter, ast.Call)  # (a range(), as planned)
            arg = loop.iter.args[index]
            read = arg.args[0] if isinstance(arg, ast.Call) else arg
            check = ast.Call(_attribute(runtime, KNOWN_INT), [read, ast.Constant(known)], [])
            static = arg.func if isinstance(arg, ast.Call) else _attribute(warp, "static")
            loop.iter.args[index] = ast.copy_location(ast.Call(static, [check], []), arg)
    return ast.fix_missing_locations(tree)


def _attribute(module: str, name: str) -> ast.Attribute:
    return ast.Attribute(ast.Name(module, ast.Load()), name, ast.Load())


def _is_range(expr: ast.expr) -> bool:
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "range"
        and 1 <= len(expr.args) <= 3
        and not expr.keywords
    )


def bound_value(expr: ast.expr) -> int | None:
    """The value of a range bound that holds one as written: an int literal (negated or not), a ``wp.static(...)`` of
    one, or a bound ``known_bounds`` wrote."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        value = bound_value(expr.operand)
        return None if value is None or not isinstance(expr.operand, ast.Constant) else -value
    if isinstance(expr, ast.Constant):
        return expr.value if type(expr.value) is int else None
    if is_static(expr) and isinstance(expr, ast.Call) and len(expr.args) == 1:
        check = expr.args[0]
        if isinstance(check, ast.Constant | ast.UnaryOp):  # wp.static(17)
            return bound_value(check)
        if is_known_int(check):
            assert isinstance(check, ast.Call)
            return bound_value(check.args[1])  # (an int literal)
    return None


def is_known_int(expr: ast.AST) -> bool:
    """A check ``known_bounds`` wrote, ``<runtime>.known_int(<bound>, <int literal>)``."""
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == KNOWN_INT
        and len(expr.args) == 2
        and isinstance(expr.args[1], ast.Constant)
        and type(expr.args[1].value) is int
    )


def is_static(expr: ast.AST) -> bool:
    """``wp.static(...)`` (under any name of Warp's module), or ``static(...)`` imported from it."""
    if not isinstance(expr, ast.Call):
        return False
    name = expr.func.attr if isinstance(expr.func, ast.Attribute) else getattr(expr.func, "id", None)
    return name == "static"
