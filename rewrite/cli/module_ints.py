"""The ints module-level names hold, read off source files as Warp reads them when it builds a kernel: a type's length
or shape (``static_frontend``), a range's bounds (``passes.constant_ranges``, for the rewrite and for ``--check``,
which imports neither Warp nor numpy)."""

from __future__ import annotations

import ast
from typing import Any

from warp_rewrite.cli.project import Project
from warp_rewrite.cli.source_file import Imported
from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.passes.constant_ranges import DIVIDES, FOLDED


def int_constant(project: Project, module: StaticModule, expr: ast.expr, depth: int = 0) -> Any:
    """The value of a type constructor's length or shape, or of a range's bound: a literal, or ints folded from
    module-level names bound to them, in this file or one it imports (``length=VALUES_PER_KEY + 1``,
    ``wp.constant(6)``); None where it is not."""
    if depth > 20:
        return None
    if isinstance(expr, ast.Tuple):
        items = [int_constant(project, module, item, depth + 1) for item in expr.elts]
        return None if None in items else tuple(items)
    if isinstance(expr, ast.Constant):
        return expr.value if isinstance(expr.value, int) and not isinstance(expr.value, bool) else None
    if isinstance(expr, ast.BinOp) and type(expr.op) in FOLDED:
        left, right = (int_constant(project, module, side, depth + 1) for side in (expr.left, expr.right))
        if not (isinstance(left, int) and isinstance(right, int)) or (right == 0 and type(expr.op) in DIVIDES):
            return None
        return FOLDED[type(expr.op)](left, right)
    if isinstance(expr, ast.Call) and module.warp.is_warp(expr.func, "constant") and len(expr.args) == 1:
        return int_constant(project, module, expr.args[0], depth + 1)
    if not isinstance(expr, ast.Name):
        return None
    bound = project.binding(module, expr.id, [])
    if isinstance(bound, Imported) and bound.name is not None:
        path = project.module_file(module, bound.level, bound.module)
        target = project.load(path) if path is not None else None
        return int_constant(project, target, ast.Name(bound.name), depth + 1) if target is not None else None
    return int_constant(project, module, bound, depth + 1) if isinstance(bound, ast.expr) else None


def module_int(project: Project, module: StaticModule, function: ast.FunctionDef, name: str) -> int | None:
    """The int a name that ``function`` does not bind holds as Warp reads it (``Frontend.int_constant``): a module-level
    name's (``int_constant``), for a function defined at module level (one defined in another function may read the
    name from its closure); None elsewhere."""
    top = {(s.name, s.lineno) for s in module.tree.body if isinstance(s, ast.FunctionDef)}
    if (function.name, function.lineno) not in top:
        return None
    value = int_constant(project, module, ast.Name(name))
    return value if type(value) is int else None
