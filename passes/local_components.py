"""Stores into a component of a local vector or matrix made copies: ``v[i] = e`` becomes
``v = wp.assign_copy(v, i, e)``, ``m[i, j] += e`` becomes ``m = wp.assign_copy(m, i, j, m[i, j] + e)``.

Warp 1.19 compiles a store into a local's component in place, and its adjoint lets the gradient of the
overwritten component flow on to what the local was made from (``p = pos[i]; p[0] = x`` sends ``p[0]``'s
gradient to ``pos[i][0]`` as well as to ``x``): the gradient is wrong, in plain Warp too. ``wp.assign_copy``
makes a new value whose adjoint routes each component's gradient to where it came from, and computes the same
forward. Stores in loops are left alone: the copy rebinds the local, which makes it a loop-carried value that
the planner refuses around consumed atomics (Warp's in-place adjoint stays wrong there). Locals bound to memory
(``row = grid[i]; row[j] = e`` writes ``grid``) and parameters are left alone, and so are attributes (``v.x``: the
passes cannot tell a vector's component from a struct's field without types) and nested subscripts (``m[i][j]``).
The tree given is never changed: what changes is new.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from warp_rewrite.passes.syntax import called_name, with_blocks


def copy_component_stores(
    function: ast.FunctionDef, holds_a_value: Callable[[str], bool], warp: str
) -> ast.FunctionDef | None:
    """``function`` with each store into a component of a local ``holds_a_value`` accepts made an
    ``assign_copy`` (``warp``: the module's name of Warp); None when there is none."""
    parameters = {a.arg for a in function.args.args}
    tiles = {  # tiles take stores into elements, and assign_copy does not take tiles
        target.id
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and (called_name(node.value) or "").startswith("tile")
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def is_local_value(name: str) -> bool:
        return name not in parameters and name not in tiles and holds_a_value(name)

    body = _body(function.body, is_local_value, warp)
    if body is function.body:
        return None
    copied = copy.copy(function)
    copied.body = body
    return copied


def _body(statements: list[ast.stmt], is_local_value: Callable[[str], bool], warp: str) -> list[ast.stmt]:
    new = [_statement(statement, is_local_value, warp) for statement in statements]
    return statements if all(a is b for a, b in zip(new, statements, strict=True)) else new


def _statement(node: ast.stmt, is_local_value: Callable[[str], bool], warp: str) -> ast.stmt:
    if isinstance(node, ast.For | ast.While):
        return node  # a copy would make the local loop-carried, which the planner refuses around consumed atomics
    blocks = {
        name: _body(getattr(node, name), is_local_value, warp) for name in ("body", "orelse") if hasattr(node, name)
    }
    node = with_blocks(node, blocks)
    target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
    target = node.target if isinstance(node, ast.AugAssign) else target
    if not isinstance(target, ast.Subscript) or not isinstance(target.value, ast.Name):
        return node
    if not is_local_value(target.value.id):
        return node
    assert isinstance(node, ast.Assign | ast.AugAssign)  # what ``target`` came from
    local = target.value.id
    indices = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
    value = node.value
    if isinstance(node, ast.AugAssign):
        read = ast.Subscript(ast.Name(local, ast.Load()), copy.deepcopy(target.slice), ast.Load())
        value = ast.BinOp(read, node.op, node.value)
    call = ast.Call(
        ast.Attribute(ast.Name(warp, ast.Load()), "assign_copy", ast.Load()),
        [ast.Name(local, ast.Load()), *indices, value],
        [],
    )
    return ast.fix_missing_locations(ast.copy_location(ast.Assign([ast.Name(local, ast.Store())], call), node))
