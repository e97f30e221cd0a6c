"""Faster ``ast.walk`` and parent map for the passes, which read every function involved several times, and the
copy-on-change step of the passes that rebuild statements, and the name a call calls."""

from __future__ import annotations

import ast
import copy
from typing import Protocol, runtime_checkable

# Operators and load/store contexts: the passes read them as attributes (``node.op``, ``node.ctx``), never
# as nodes of their own, and the parser shares one object per kind between all nodes, so they have no parent.
_ATTRIBUTES_ONLY = frozenset({"ctx", "op", "ops"})


def walk(node: ast.AST) -> list[ast.AST]:
    """``node`` and every node under it but operators and contexts, in ``ast.walk``'s (breadth-first) order.

    About three times as fast as ``ast.walk``: one list instead of a deque fed by two generators per node, and a
    third fewer nodes.
    """
    nodes = [node]
    for current in nodes:  # the list grows while it is read: a queue without pops
        for name in current._fields:
            if name in _ATTRIBUTES_ONLY:
                continue
            value = getattr(current, name, None)
            if isinstance(value, list):
                nodes.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                nodes.append(value)
    return nodes


def parent_map(nodes: list[ast.AST]) -> dict[ast.AST, ast.AST]:
    """The parent of each node under the first of ``nodes`` (``walk``'s result)."""
    parents = {}
    for parent in nodes:
        for name in parent._fields:
            if name in _ATTRIBUTES_ONLY:
                continue
            value = getattr(parent, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        parents[item] = parent
            elif isinstance(value, ast.AST):
                parents[value] = parent
    return parents


def with_blocks(node: ast.stmt, blocks: dict[str, list[ast.stmt]]) -> ast.stmt:
    """``node`` with its statement lists (``body``, ``orelse``) replaced by ``blocks``: a copy, or ``node`` itself
    when each list is the one it has, so that a pass shares every statement it leaves as it was."""
    if all(block is getattr(node, name) for name, block in blocks.items()):
        return node
    new = copy.copy(node)
    for name, block in blocks.items():
        setattr(new, name, block)
    return new


def called_name(call: ast.Call) -> str | None:
    """``tile_load`` for ``wp.tile_load(...)`` or a bare ``tile_load(...)``."""
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def end_line(node: ast.stmt | ast.expr | ast.keyword) -> int:
    """The node's last line: ``ast.parse`` sets it on every node (typeshed allows None, for nodes built by hand)."""
    assert node.end_lineno is not None
    return node.end_lineno


def end_column(node: ast.stmt | ast.expr | ast.keyword) -> int:
    """The node's end offset on its last line (set by ``ast.parse`` as ``end_line`` is)."""
    assert node.end_col_offset is not None
    return node.end_col_offset


@runtime_checkable
class Located(Protocol):
    """A node with a start position: every statement, expression, argument and keyword that ``ast.parse`` made."""

    lineno: int
    col_offset: int
