"""passes/local_components.py: a store into a component of a local vector or matrix becomes ``wp.assign_copy``
(before/after source pairs), in loops too; stores through locals bound to memory, into parameters, tiles and
attributes stay. The gradients it makes right are checked end to end in test_memory_locals.py
(``component_of_a_local_value``)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from warp_rewrite.passes.local_components import copy_component_stores

MEMORY = {"row"}  # locals the test says are bound to memory


def copied(source: str) -> str | None:
    function = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(function, ast.FunctionDef)
    new = copy_component_stores(function, lambda name: name not in MEMORY, "wp")
    return None if new is None else ast.unparse(new)


PAIRS = {
    "store": (
        "def k(x):\n    v = wp.vec3()\n    v[0] = x",
        "def k(x):\n    v = wp.vec3()\n    v = wp.assign_copy(v, 0, x)",
    ),
    "matrix entry": (
        "def k(x):\n    m = wp.mat22()\n    m[0, 1] = x",
        "def k(x):\n    m = wp.mat22()\n    m = wp.assign_copy(m, 0, 1, x)",
    ),
    "augmented": (
        "def k(x):\n    v = wp.vec3()\n    v[2] *= x",
        "def k(x):\n    v = wp.vec3()\n    v = wp.assign_copy(v, 2, v[2] * x)",
    ),
    "in a loop": (
        "def k(x):\n    v = wp.vec3()\n    for i in range(3):\n        v[i] = x",
        "def k(x):\n    v = wp.vec3()\n    for i in range(3):\n        v = wp.assign_copy(v, i, x)",
    ),
    "in a branch": (
        "def k(x):\n    v = wp.vec3()\n    if x > 0.0:\n        v[1] = x",
        "def k(x):\n    v = wp.vec3()\n    if x > 0.0:\n        v = wp.assign_copy(v, 1, x)",
    ),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_component_stores_become_copies(name):
    before, after = PAIRS[name]
    assert copied(before) == after


@pytest.mark.parametrize(
    "source",
    [
        "def k(v, x):\n    v[0] = x",  # a parameter
        "def k(grid, x):\n    row = grid[0]\n    row[1] = x",  # memory
        "def k(x):\n    t = wp.tile_zeros(shape=4, dtype=float)\n    t[0] = x",  # a tile
        "def k(x):\n    v = wp.vec3()\n    v.x = x",  # an attribute
        "def k(x):\n    m = wp.mat22()\n    m[0][1] = x",  # nested
    ],
)
def test_other_stores_stay(source):
    assert copied(source) is None


def test_a_vectors_named_components_are_components_where_the_types_say_so():
    function = ast.parse("def k(x):\n    v = wp.vec3()\n    v.y += x\n    s.depth = x").body[0]
    assert isinstance(function, ast.FunctionDef)
    new = copy_component_stores(function, lambda name: True, "wp", lambda name: name == "v")
    assert new is not None
    assert ast.unparse(new) == "def k(x):\n    v = wp.vec3()\n    v = wp.assign_copy(v, 1, v[1] + x)\n    s.depth = x"
