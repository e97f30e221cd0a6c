"""passes/syntax.py: the fast walk lists exactly what a plain walk of every field lists, in the same order, and
its variants (child nodes, owners) agree with it.

Nothing here compiles or launches a kernel.
"""

import ast
from pathlib import Path

from warp_rewrite.passes.syntax import child_nodes, parent_map, walk, walk_with_owners

_SKIPPED = ("ctx", "op", "ops")


def _reference_walk(node: ast.AST) -> list[ast.AST]:
    """Breadth-first over every field, as ``walk`` did before it listed the fields that can hold nodes."""
    nodes = [node]
    for current in nodes:
        for name in current._fields:
            value = getattr(current, name, None)
            if name in _SKIPPED:
                continue
            if isinstance(value, list):
                nodes.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                nodes.append(value)
    return nodes


SOURCE = """
from . import a as b, c
global_names = {**extra, "k": 1}
def f(x, /, y=1, *args, z, w=2, **kw) -> "T":
    global g
    async def inner(): nonlocal_value = [i async for i in aiter() if i]
    match x:
        case {"a": 1, **rest}: pass
        case Point(x=0, y=None) | [1, *others]: pass
        case None: pass
    try:
        lam = lambda q=1: q + f"{y!r:>{w}}"
    except* ValueError as error:
        raise RuntimeError() from error
    with open(p) as (h, j):
        del h[0]
    return (yield from z)
"""


def test_walk_matches_a_plain_walk_of_every_field():
    trees = [ast.parse(SOURCE)]
    trees += [ast.parse(path.read_text(encoding="utf-8")) for path in sorted(Path(ast.__file__).parent.glob("a*.py"))]
    for tree in trees:
        fast, reference = walk(tree), _reference_walk(tree)
        assert len(fast) == len(reference) and all(a is b for a, b in zip(fast, reference, strict=True))


def test_child_nodes_are_iter_child_nodes_without_operators_and_contexts():
    for node in walk(ast.parse(SOURCE)):
        expected = [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.expr_context | ast.operator)]
        expected = [c for c in expected if not isinstance(c, ast.boolop | ast.unaryop | ast.cmpop)]
        assert child_nodes(node) == expected


def test_walk_with_owners_gives_each_node_its_nearest_function():
    tree = ast.parse(SOURCE)
    owners = walk_with_owners(tree, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    parents = parent_map(walk(tree))
    assert list(owners) == walk(tree) and owners[tree] is None
    for node, owner in owners.items():
        parent = parents.get(node)
        while parent is not None and not isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            parent = parents.get(parent)
        assert owner is parent
    lam = next(n for n in walk(tree) if isinstance(n, ast.Lambda))
    assert owners[lam.body] is lam and owners[lam] is tree.body[2]


def test_walk_reads_a_tree_built_by_hand():
    call = ast.Call(ast.Name("f", ast.Load()), [ast.Constant(1)], [])
    assert [type(n).__name__ for n in walk(call)] == ["Call", "Name", "Constant"]
