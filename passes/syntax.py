"""A faster ``ast.walk`` for the passes, which walk every function involved several times per rewrite."""

from __future__ import annotations

import ast


def walk(node: ast.AST) -> list[ast.AST]:
    """``node`` and every node under it, in ``ast.walk``'s (breadth-first) order.

    About twice as fast as ``ast.walk``: one list instead of a deque fed by two generators per node.
    """
    nodes = [node]
    for current in nodes:  # the list grows while it is read: a queue without pops
        for name in current._fields:
            value = getattr(current, name, None)
            if isinstance(value, list):
                nodes.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                nodes.append(value)
    return nodes
