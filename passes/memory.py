"""What a function does to the memory of its array arguments: which arrays it writes, which elements it reads.

The replay kernel runs after the forward, against memory in its final state: a plain read of an array that the
launch writes (in the kernel, in a helper, by any thread) would see what the launch left there, not what the
forward read. The planner therefore records every such read, like an atomic's returned value, and the replay
reads the record (``passes.plan``); arrays the launch never writes keep their plain reads. These functions
find the reads and writes in one function's tree; the planner follows them through helper calls.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from warp_rewrite.passes.atomics import WarpNames, positional_arguments


def stored_arrays(node: ast.AST) -> list[ast.expr]:
    """The array expressions a statement stores into: ``arr`` for ``arr[i] = v``, ``arr[i].x = v``,
    ``arr[i][0] += v`` or ``s.arr[i] = v``; nothing for stores into locals (``v[0] = 1.0`` of a local vector is
    not told apart here: the caller keeps only expressions that name an argument array)."""
    if isinstance(node, ast.Assign):
        targets = [t for target in node.targets for t in _elements(target)]
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    else:
        return []
    arrays = []
    for target in targets:
        indexed = None
        while isinstance(target, ast.Subscript | ast.Attribute):
            if isinstance(target, ast.Subscript):
                indexed = target.value  # the outermost indexing decides nothing: the innermost array is written
            target = target.value
        if indexed is not None:
            arrays.append(indexed)
    return arrays


def _elements(target: ast.expr) -> Iterator[ast.expr]:
    """The targets of ``a, b[i] = ...`` one by one."""
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _elements(element)
    else:
        yield target


def index_count(subscript: ast.Subscript) -> int:
    """How many indices one ``[...]`` applies: ``arr[i, j]`` two, ``arr[i]`` one."""
    return len(subscript.slice.elts) if isinstance(subscript.slice, ast.Tuple) else 1


def depth(expr: ast.expr, aliases: dict[str, ast.expr]) -> int:
    """How many indices ``expr`` has applied to an argument array, through locals bound to views
    (``row = grid[i]; row[j]``: two)."""
    total, seen = 0, set()
    while True:
        if isinstance(expr, ast.Subscript):
            total += index_count(expr)
            expr = expr.value
        elif isinstance(expr, ast.Name) and expr.id in aliases and expr.id not in seen:
            seen.add(expr.id)
            expr = aliases[expr.id]
        else:
            return total


def loads(nodes: list[ast.AST], parents: dict[ast.AST, ast.AST], names: WarpNames) -> list[ast.Subscript]:
    """The ``[...]`` loads of a function, in source order: candidates for reads of an array's element. Which of
    them reads one, the caller decides from the array's number of dimensions (``depth``): in ``pos[i][0]`` the
    load ``pos[i]`` reads a vector element of a 1-D ``pos``, and ``[0]`` takes a component of the value read.

    Subscripts that are stored into, or the target of an atomic (a view ``arr[i]`` handed to it), are not loads;
    nor is the element an assignment stores a component or field of (``out[i]`` in ``out[i][0, 0] = v``,
    ``out[i].x = v``, ``tally[c][1] += w`` or ``bodies[b].mass += m``): Warp writes the component in place,
    and lowers the augmented forms to an atomic on that one slot (``emit_AugAssign`` in Warp's codegen), so
    the element is never read into a value the kernel holds. Wrapping it in a record call would make the
    update land on a temporary and lose it in the forward.
    """
    found = []
    for node in nodes:
        if not isinstance(node, ast.Subscript) or not isinstance(node.ctx, ast.Load):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Call) and names.atomic_op(parent) and positional_arguments(parent)[0] is node:
            continue
        if _assigned_into(node, parents):
            continue
        found.append(node)
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _assigned_into(node: ast.expr, parents: dict[ast.AST, ast.AST]) -> bool:
    """Is ``node`` what the target of an assignment (plain or augmented) indexes or takes an attribute of, at
    any depth?"""
    child, parent = node, parents.get(node)
    while isinstance(parent, ast.Subscript | ast.Attribute) and parent.value is child:
        child, parent = parent, parents.get(parent)
    if child is node or not isinstance(parent, ast.Assign | ast.AnnAssign | ast.AugAssign):
        return False
    return any(child is target for target in (parent.targets if isinstance(parent, ast.Assign) else [parent.target]))


def pool_arrays(function: ast.FunctionDef, ndims: dict[str, int], names: WarpNames) -> frozenset[str]:
    """The array parameters of ``function`` (``ndims``: each one's number of dimensions) that it reads and writes
    only element by element, by name: every use an element read ``p[i]`` or a plain store ``p[j] = v`` with all of
    its indices, or ``.shape``; no atomic, no ``+=``, no store into a component, never handed to a call or bound to
    a local; and every store at an index made of a slot (a local assigned from an expression calling
    ``wp.atomic_add``). Only the function itself then touches the array, at elements it names by index: an append
    pool (``base = wp.atomic_add(count, 0, 4)``, children stored at ``base + k``, parents read below the count the
    launch started with), whose reads the launch checks element by element against its writes. (Stores at other
    indices, ``total[0]`` under a spin lock or a thread's own ``w[tid]``, keep the refusal at launch of reads that
    need a gradient.)"""
    nodes = [node for node in ast.walk(function)]
    parents = {id(child): node for node in nodes for child in ast.iter_child_nodes(node)}
    slots = {
        node.targets[0].id
        for node in nodes
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and any(isinstance(call, ast.Call) and names.atomic_op(call) == "add" for call in ast.walk(node.value))
    }
    pools = set(ndims)
    for node in nodes:
        if not (isinstance(node, ast.Name) and node.id in pools):
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.attr == "shape":
            continue
        if not (isinstance(parent, ast.Subscript) and parent.value is node and index_count(parent) == ndims[node.id]):
            pools.discard(node.id)  # not an element: handed on, bound, or a row
            continue
        grand = parents.get(id(parent))
        if isinstance(parent.ctx, ast.Load):
            atomic = isinstance(grand, ast.Call) and names.atomic_op(grand) is not None
            stored_into = isinstance(grand, ast.Attribute | ast.Subscript) and grand.value is parent
            ok = not atomic and not (stored_into and not isinstance(getattr(grand, "ctx", None), ast.Load))
        else:
            at_slot = any(isinstance(n, ast.Name) and n.id in slots for n in ast.walk(parent.slice))
            ok = isinstance(grand, ast.Assign) and grand.targets == [parent] and at_slot
        if not ok:
            pools.discard(node.id)
    return frozenset(pools)


def path_parts(expr: ast.expr) -> list[str] | None:
    """['w', 'count'] for ``w.count`` or ``w.count[i]``; None for anything not an attribute chain."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    return [expr.id, *reversed(parts)]
