"""A function cut down to what it must keep: the statements that only compute values nothing kept reads go.

What must stay is given by the phase: the calls that do more than compute (``leaves_out`` says which go where
nothing reads their value), stores, returns, jumps and ``while`` loops; the names they read are needed, and so is
every assignment to a needed name, until the needed names no longer change (flow-insensitive). Then an ``if`` or a
``for`` with nothing left inside goes, where its test or range only computes. The count phase keeps what decides
trip counts (``passes.count_slice``); the replay what carries gradients (``passes.replay_needs``).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from warp_rewrite.passes.pruning import call_kept, pruned
from warp_rewrite.passes.syntax import walk

LeavesOut = Callable[[ast.Call], bool]


def sliced_function(function: ast.FunctionDef, leaves_out: LeavesOut) -> ast.FunctionDef:
    """``function`` without the statements that only compute values nothing it keeps reads: the names it needs
    grow from what it must keep (calls that do more than compute, stores, returns, jumps, ``while`` loops) until
    they no longer change; then ``pruned`` marks what is left unread."""
    needed: set[str] = set()
    while True:
        reads: set[str] = set()
        body = _swept(function.body, needed, reads, leaves_out) or [ast.Pass()]
        if reads <= needed:
            break
        needed |= reads
    if body != function.body:
        function = copy.copy(function)
        function.body = body
    return pruned(function, leaves_out)


def _swept(body: list[ast.stmt], needed: set[str], reads: set[str], leaves_out: LeavesOut) -> list[ast.stmt]:
    """``body`` less what ``needed`` (the names something kept reads) does not need (the same list where nothing
    goes); the names what it keeps reads are added to ``reads``."""
    kept: list[ast.stmt] = []
    for statement in body:
        if isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            elements = [e for target in targets for e in (target.elts if isinstance(target, ast.Tuple) else [target])]
            if any(not isinstance(e, ast.Name) or e.id in needed for e in elements):
                reads |= loaded(statement)
                if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
                    reads.add(statement.target.id)
            elif statement.value is not None and not only_computes(statement.value, leaves_out):
                reads |= loaded(statement.value)
                kept.append(call_kept(statement))
                continue
            else:
                continue
        elif isinstance(statement, ast.Expr):  # a call on its own, or what leaving out a write left of its value
            if only_computes(statement.value, leaves_out):
                continue
            reads |= loaded(statement)
        elif isinstance(statement, ast.If | ast.For | ast.While):
            inner = copy.copy(statement)
            inner.body = _swept(statement.body, needed, reads, leaves_out)
            inner.orelse = _swept(statement.orelse, needed, reads, leaves_out)
            tested = statement.iter if isinstance(statement, ast.For) else statement.test
            if idle(inner.body) and idle(inner.orelse) and _leaves(statement, needed, leaves_out):
                continue
            reads |= loaded(tested)
            inner.body = inner.body or [ast.Pass()]
            inner.orelse = [] if idle(inner.orelse) else inner.orelse
            if inner.body != statement.body or inner.orelse != statement.orelse:
                statement = inner
        else:
            reads |= loaded(statement)
        kept.append(statement)
    return body if kept == body else kept


def _leaves(statement: ast.If | ast.For | ast.While, needed: set[str], leaves_out: LeavesOut) -> bool:
    """Can the statement, with nothing left inside, go? An ``if`` whose test only computes; a ``for`` whose range
    only computes and whose variable nothing reads after it; never a ``while``."""
    if isinstance(statement, ast.If):
        return only_computes(statement.test, leaves_out)
    if isinstance(statement, ast.For):
        variable = loaded(statement.target, ast.Store)
        return not variable & needed and only_computes(_range_bounds(statement.iter), leaves_out)
    return False


def loaded(node: ast.AST, context: type[ast.expr_context] = ast.Load) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, context)}


def _range_bounds(iterated: ast.expr) -> ast.expr:
    """What ``range(...)`` iterates over computes: its bounds (a loop over anything else, the whole expression)."""
    if isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Name) and iterated.func.id == "range":
        return ast.Tuple(iterated.args, ast.Load())
    return iterated


def idle(body: list[ast.stmt]) -> bool:
    return all(isinstance(statement, ast.Pass) for statement in body)


def only_computes(expr: ast.expr, leaves_out: LeavesOut) -> bool:
    return all(leaves_out(node) for node in walk(expr) if isinstance(node, ast.Call))
