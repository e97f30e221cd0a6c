"""Append pools: a launch reads elements of an array below the count it started with and appends to it above."""

import warp as wp


@wp.kernel
def refine_level(x: wp.array[wp.float64], first: int, count: wp.array[wp.int32], nodes: wp.array[wp.float64]):
    """One level of a tree refined one launch per level: this launch's threads read their parents (at ``first +
    tid``, below the count the launch started with) and append four children each."""
    tid = wp.tid()
    parent = nodes[first + tid]
    base = wp.atomic_add(count, 0, 4)
    for k in range(4):
        nodes[base + k] = parent * parent * x[k] + wp.sin(parent * x[k])


@wp.kernel
def refine_vectors(x: wp.array[wp.float64], first: int, count: wp.array[wp.int32], nodes: wp.array[wp.vec2d]):
    tid = wp.tid()
    parent = nodes[first + tid]
    base = wp.atomic_add(count, 0, 2)
    nodes[base] = parent * x[0]
    nodes[base + 1] = wp.vec2d(parent[1] * parent[0], x[1])
