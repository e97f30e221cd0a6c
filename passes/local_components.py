"""Stores into a component of a local vector or matrix made copies: ``v[i] = e`` becomes
``v = wp.assign_copy(v, i, e)``, ``m[i, j] += e`` becomes ``m = wp.assign_copy(m, i, j, m[i, j] + e)``.

Warp 1.19 compiles a store into a local's component in place, and its adjoint lets the gradient of the
overwritten component flow on to what the local was made from (``p = pos[i]; p[0] = x`` sends ``p[0]``'s
gradient to ``pos[i][0]`` as well as to ``x``): the gradient is wrong, in plain Warp too. ``wp.assign_copy``
makes a new value whose adjoint routes each component's gradient to where it came from, and computes the same
forward. In a loop Warp does not unroll the copy makes the local a loop-carried value, which the replay restores
from records at each trip (``passes.loop_hazards``): in place, Warp's replay would overwrite, before the trip's
adjoint reads it, the component the adjoint needs. Locals bound to memory
(``row = grid[i]; row[j] = e`` writes ``grid``) and parameters are left alone, and so are attributes but a vector's or
quaternion's named components (``v.x = e`` is ``v[0] = e`` where the types say ``v`` is one; a struct's field
stays) and nested subscripts (``m[i][j]``).
The tree given is never changed: what changes is new.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from warp_rewrite.passes.syntax import called_name, with_blocks

_NAMED_COMPONENTS = {"x": 0, "y": 1, "z": 2, "w": 3}


def copy_component_stores(
    function: ast.FunctionDef,
    holds_a_value: Callable[[str], bool],
    warp: str,
    has_named_components: Callable[[str], bool] = lambda name: False,
) -> ast.FunctionDef | None:
    """``function`` with each store into a component of a local ``holds_a_value`` accepts made an
    ``assign_copy`` (``warp``: the module's name of Warp); None when there is none. ``has_named_components``: is
    the local a vector or quaternion, whose ``.x`` to ``.w`` are its components 0 to 3?"""
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

    def component(target: ast.expr) -> tuple[str, list[ast.expr]] | None:
        """The local and the indices of the component ``target`` names, if it names one of a local value."""
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and is_local_value(target.value.id):
            indices = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
            return target.value.id, indices
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.attr in _NAMED_COMPONENTS
            and is_local_value(target.value.id)
            and has_named_components(target.value.id)
        ):
            return target.value.id, [ast.Constant(_NAMED_COMPONENTS[target.attr])]
        return None

    body = _body(function.body, component, warp)
    if body is function.body:
        return None
    copied = copy.copy(function)
    copied.body = body
    return copied


Component = Callable[[ast.expr], "tuple[str, list[ast.expr]] | None"]


def _body(statements: list[ast.stmt], component: Component, warp: str) -> list[ast.stmt]:
    new = [_statement(statement, component, warp) for statement in statements]
    return statements if all(a is b for a, b in zip(new, statements, strict=True)) else new


def _statement(node: ast.stmt, component: Component, warp: str) -> ast.stmt:
    blocks = {name: _body(getattr(node, name), component, warp) for name in ("body", "orelse") if hasattr(node, name)}
    node = with_blocks(node, blocks)
    target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
    target = node.target if isinstance(node, ast.AugAssign) else target
    found = component(target) if target is not None else None
    if found is None:
        return node
    assert isinstance(node, ast.Assign | ast.AugAssign)  # what ``target`` came from
    local, indices = found
    value = node.value
    if isinstance(node, ast.AugAssign):
        read = ast.Subscript(ast.Name(local, ast.Load()), _index(indices), ast.Load())
        value = ast.BinOp(read, node.op, node.value)
    call = ast.Call(
        ast.Attribute(ast.Name(warp, ast.Load()), "assign_copy", ast.Load()),
        [ast.Name(local, ast.Load()), *copy.deepcopy(indices), value],
        [],
    )
    return ast.fix_missing_locations(ast.copy_location(ast.Assign([ast.Name(local, ast.Store())], call), node))


def _index(indices: list[ast.expr]) -> ast.expr:
    return copy.deepcopy(indices[0]) if len(indices) == 1 else ast.Tuple(copy.deepcopy(indices), ast.Load())
