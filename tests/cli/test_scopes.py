"""rewrite/cli/scopes.py: the functions and classes around a node, found by following positions down from its
top-level statement, are those its chain of parents gives; a node positions do not lead to is still found.

Nothing here imports Warp.
"""

import ast
from pathlib import Path

from warp_rewrite.cli.scopes import Scope
from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.passes.syntax import parent_map, walk

SOURCE = """import warp as wp
x = 1; make = lambda f=lambda: 0: f
@wp.kernel(
    enable_backward=False,
)
def k(a: wp.array(dtype=float), b=lambda: helper()):
    i = wp.tid(); j = (lambda: wp.atomic_add(a, 0, 1.0))()
    text = f"{wp.atomic_add(a, 0, 1.0)!r:>{i}}"


class Outer:
    @staticmethod
    @wp.func
    def m(v: float):
        class Inner:
            def deep(self, w=lambda: v):
                return [z for z in range(3) if (lambda: z)()]
        return v
def last(): return (
    lambda: 1
)
"""


def _reference(parents: dict[ast.AST, ast.AST], node: ast.AST) -> list[Scope]:
    found = []
    current = parents.get(node)
    while current is not None:
        if isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            found.append(current)
        current = parents.get(current)
    return found


def _module(text: str) -> StaticModule:
    return StaticModule.parse(Path("m.py"), "m.py", text)


def test_scopes_are_those_of_the_chain_of_parents():
    module = _module(SOURCE)
    parents = parent_map(walk(module.tree))
    for node in walk(module.tree):
        assert module.scopes(node) == _reference(parents, node), ast.dump(node)[:80]


def test_a_node_positions_do_not_lead_to_is_found_by_a_walk():
    module = _module("def f():\n    return g(1)\n")
    call = next(n for n in walk(module.tree) if isinstance(n, ast.Call))
    call.lineno, call.col_offset = 1, 0  # as a tree rewritten by hand might place it
    assert module.scopes(call) == [module.tree.body[0]]
    assert module.scopes(module.tree) == [] and module.scopes(ast.Name("elsewhere")) == []
