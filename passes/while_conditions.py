"""Move a while loop's condition into its body when the condition calls an atomic or a helper:
``while c: body`` becomes ``while True:``, then ``if not (c): break``, then ``body``.

The rewrite records what each iteration's atomics return and replays exactly the iterations the record kernel
counted (``passes.two_phase``), without the condition: in the body, the condition's calls are statements of an
iteration like any other, recorded, replayed and differentiated with it. The last test, the one that fails,
starts an iteration that leaves at once: it is counted and replayed too.

``continue`` still tests the condition again: it jumps to the loop's start, where the test now is. A loop with
an ``else`` keeps its condition (Warp does not run a while loop's ``else``; the planner refuses such loops around
atomics). The tree given is never changed: what changes is new, every statement left as it was is shared.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from warp_rewrite.passes.syntax import walk, with_blocks


def hoist_conditions(function: ast.FunctionDef, hoists: Callable[[ast.Call], bool]) -> ast.FunctionDef | None:
    """``function`` with the condition of each while loop that makes a call ``hoists`` accepts moved into the
    loop's body; None when there is no such loop."""
    body = _body(function.body, hoists)
    if body is function.body:
        return None
    hoisted = copy.copy(function)
    hoisted.body = body
    return hoisted


def _body(statements: list[ast.stmt], hoists: Callable[[ast.Call], bool]) -> list[ast.stmt]:
    """The statements with their loops' conditions hoisted: the same list where none is."""
    hoisted = [_statement(statement, hoists) for statement in statements]
    return statements if all(new is old for new, old in zip(hoisted, statements, strict=True)) else hoisted


def _statement(node: ast.stmt, hoists: Callable[[ast.Call], bool]) -> ast.stmt:
    blocks = {name: _body(getattr(node, name), hoists) for name in ("body", "orelse") if hasattr(node, name)}
    moved = (
        isinstance(node, ast.While)
        and not node.orelse
        and any(isinstance(call, ast.Call) and hoists(call) for call in walk(node.test))
    )
    new = with_blocks(node, blocks)
    if moved:
        new = copy.copy(new) if new is node else new
        assert isinstance(node, ast.While) and isinstance(new, ast.While)  # what `moved` checked
        new.test = ast.copy_location(ast.Constant(True), node.test)
        new.body = [_leave_unless(node.test), *(s for s in new.body if not isinstance(s, ast.Pass))]
    return new


def _leave_unless(test: ast.expr) -> ast.If:
    """``if not (test): break`` (``a != b`` for ``a == b`` and back); for a test that need not be a bool (a float's
    truth is not Warp's ``not``), ``if test: pass`` with ``else: break``."""
    leave = ast.copy_location(ast.Break(), test)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPPOSITES:
        opposite = ast.Compare(test.left, [_OPPOSITES[type(test.ops[0])]()], test.comparators)
        return ast.copy_location(ast.If(ast.copy_location(opposite, test), [leave], []), test)
    if isinstance(test, ast.Compare | ast.BoolOp) or (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
        negated = ast.copy_location(ast.UnaryOp(ast.Not(), test), test)
        return ast.copy_location(ast.If(negated, [leave], []), test)
    return ast.copy_location(ast.If(test, [ast.copy_location(ast.Pass(), test)], [leave]), test)


# Comparisons whose negation is another comparison, for every operand (``not a < b`` is not ``a >= b`` for a NaN).
_OPPOSITES = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
