"""passes/dataflow.py: argument paths through fields, views and aliases, and the gradient sources of a return.

Nothing here compiles or launches a kernel.
"""

import ast

from tests.support.pass_sources import WARP, parse
from warp_rewrite.passes.atomics import find_atomic_calls
from warp_rewrite.passes.dataflow import argument_path, gradient_sources, single_assignments


def test_argument_paths_follow_struct_fields_views_and_aliases():
    kernel = parse("""
        def k(w: Writer, grid: wp.array2d[int]):
            counter = w.count
            row = grid[1]
            local = wp.zeros(3)
    """)
    aliases = single_assignments(kernel)
    params = ["w", "grid"]

    def path(text: str) -> str | None:
        return argument_path(ast.parse(text, mode="eval").body, params, aliases)

    assert path("counter") == "w.count"
    assert path("w.pairs.first") == "w.pairs.first"
    assert path("row") == "grid"
    assert path("local") is None


def test_gradient_sources_of_a_float_return():
    kernel = parse("""
        def k(x: wp.array[float], z: wp.array[float], n: wp.array[int], acc: wp.array[float], y: wp.array[float]):
            i = wp.tid()
            v = x[i] * 2.0
            k = int(z[i])
            acc[1] = z[i]
            wp.atomic_add(acc, k, v)
            before = wp.atomic_add(acc, n[i], 1.0)
            if z[i] > 0.0:
                y[i] = before
    """)
    consumed = [c for c in find_atomic_calls(kernel, WARP) if c.consumed]
    sources = gradient_sources(kernel, ["x", "z", "n", "acc", "y"], WARP, {consumed[0].node: "acc"})
    assert sources[consumed[0].node] == {"acc", "x", "z"}
