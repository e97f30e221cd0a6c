"""What leaving statements out of a generated function leaves behind, taken out: ``pass`` beside other statements,
and assignments to locals nothing reads any more (a loop's variable or an unpacked name they leave unread is marked
with an underscore), so that generated code reads as written and lints clean."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import TypeGuard

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.syntax import called_name, walk


def pruned(function: ast.FunctionDef, leaves_out: Callable[[ast.Call], bool] | None = None) -> ast.FunctionDef:
    """A replay, count or twin function without what leaving statements out left behind: ``pass`` beside other
    statements, and assignments to locals nothing reads any more (a call in one stays, as a statement of its own:
    it may keep an adjoint or a side effect, unless ``leaves_out`` says it goes; by default, a call that only
    constructs a value goes); so that generated code reads as written, and lints clean."""
    while True:
        read = {n.id for n in walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        body = _pruned_body(function.body, read, leaves_out or constructs)
        if body is function.body:
            return function
        function = copy.copy(function)
        function.body = body


def _pruned_body(body: list[ast.stmt], read: set[str], leaves_out: Callable[[ast.Call], bool]) -> list[ast.stmt]:
    """``body`` pruned (the same list if nothing changes; never changed in place)."""
    kept: list[ast.stmt] = []
    for statement in body:
        if isinstance(statement, ast.Pass):
            continue
        if _assigns_unread(statement, read):
            if any(isinstance(n, ast.Call) and not leaves_out(n) for n in walk(statement.value)):
                kept.append(call_kept(statement))
            continue
        for name in ("body", "orelse"):
            inner = getattr(statement, name, None)
            if isinstance(inner, list) and inner:
                pruned = _pruned_body(inner, read, leaves_out)
                if pruned is not inner:
                    statement = copy.copy(statement)
                    setattr(statement, name, pruned or ([] if name == "orelse" else [ast.Pass()]))
        kept.append(_unread_names_marked(statement, read))
    if not kept:  # nothing but passes and dead assignments: one pass
        return body if len(body) == 1 and isinstance(body[0], ast.Pass) else [ast.Pass()]
    unchanged = len(kept) == len(body) and all(k is b for k, b in zip(kept, body, strict=True))
    return body if unchanged else kept


def _unread_names_marked(statement: ast.stmt, read: set[str]) -> ast.stmt:
    """A loop's variable, or a name a tuple assignment unpacks, that nothing reads any more, given a leading
    underscore (ruff's B007 and RUF059: the name says it is unused); the statement itself if there is none."""
    targets: list[ast.expr]
    if isinstance(statement, ast.For) and isinstance(statement.target, ast.Name):
        targets = [statement.target]
    elif (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Tuple)
    ):
        targets = statement.targets[0].elts
    else:
        return statement
    unread = [t for t in targets if isinstance(t, ast.Name) and t.id not in read and not t.id.startswith("_")]
    if not unread:
        return statement
    renamed: list[ast.expr] = [
        ast.copy_location(ast.Name(f"_{t.id}", ast.Store()), t) if isinstance(t, ast.Name) and t in unread else t
        for t in targets
    ]
    statement = copy.copy(statement)
    if isinstance(statement, ast.For):
        statement.target = renamed[0]
    else:
        statement.targets = [ast.copy_location(ast.Tuple(renamed, ast.Store()), statement.targets[0])]
    return statement


def _assigns_unread(statement: ast.stmt, read: set[str]) -> TypeGuard[ast.Assign | ast.AugAssign]:
    """Does the statement only assign locals nothing reads (``coord0, coord1 = wp.tid()`` too)? ``x += v`` counts as
    an assignment: it reads ``x`` only to write it back, so it dies with the assignments before it (dropping one and
    not the other leaves ``x += v`` on a name nothing defines)."""
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AugAssign):
        targets = [statement.target]
    else:
        return False
    names = [n for t in targets for n in (t.elts if isinstance(t, ast.Tuple) else [t])]
    return all(isinstance(n, ast.Name) and n.id not in read for n in names)


def call_kept(statement: ast.Assign | ast.AugAssign | ast.AnnAssign) -> ast.stmt:
    """What stays of an assignment nothing reads whose call must stay: the call alone, or, where it assigns only
    names the user marked unused (``_ = f(x)``, ``_a, _b = g(x)``), the statement as written, so that every phase
    holds it as the user wrote it (and the command line defines the phases once, ``rewrite/cli/weave.py``)."""
    assert statement.value is not None  # (an assignment with a call in its value)
    names = [n for t in getattr(statement, "targets", []) for n in (t.elts if isinstance(t, ast.Tuple) else [t])]
    if isinstance(statement, ast.Assign) and all(isinstance(n, ast.Name) and n.id.startswith("_") for n in names):
        return statement
    return ast.copy_location(ast.Expr(statement.value), statement)


def constructs(call: ast.Call) -> bool:
    """Does the call only make a value: of a type (``int(0)``, ``wp.float64(x)``, ``wp.vec3(...)``), or the thread's
    index (``wp.tid()``, the prologue's: a count function that records nothing needs no row)?"""
    thread_index = isinstance(call.func, ast.Attribute) and call.func.attr == "tid" and not call.args
    return thread_index or dtypes.is_type_name(called_name(call))
