"""Append pools: a launch that reads elements of an array below the count it started with and appends
to it above (``base = wp.atomic_add(count, 0, 4)``, children at ``base + k``). Where a read needs a gradient the
record kernel marks every element the launch reads and writes (the runtime's ``pool_read``); the replay then reads
memory, whose gradient reaches the pool's, and a launch that wrote an element it read is refused at the next
check, naming the array. Through the API and the command line, against finite differences of the original
forward, over a tree refined one launch per level."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from tests.support import append_pool, harness
from tests.support.emitted import emitted_fixture
from tests.support.harness import Case, check, f64, i32
from warp_rewrite import RewriteError, launch, wp_rewrite

X = [0.9, -0.4, 0.7, 1.1]


def levels(module, name: str, fanout: int, depth: int):
    """A harness program: the kernel launched once per level, each level's threads reading the one before."""

    def program(args, launcher):
        x, count, nodes = args
        first, width = 0, 1
        for _ in range(depth):
            inputs = [x, first, count, nodes]
            if launcher is harness.launch_original or module is None:
                launcher(getattr(append_pool, name), width, inputs)
            else:
                getattr(module, f"launch_{name}")(width, inputs=inputs, device="cpu")
            first, width = first + width, width * fanout

    return program


def tree():
    nodes = np.zeros(21)
    nodes[0] = 0.8
    return [f64(X, True), i32([1]), f64(nodes, True)]


def vector_tree():
    nodes = np.zeros((7, 2))
    nodes[0] = [0.6, 1.3]
    return [f64(X, True), i32([1]), wp.array(nodes, dtype=wp.vec2d, requires_grad=True, device="cpu")]


# kernel -> (its arguments, children per parent, levels)
KERNELS = {"refine_level": (tree, 4, 2), "refine_vectors": (vector_tree, 2, 2)}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_through_the_api(name):
    make, fanout, depth = KERNELS[name]
    check(Case(None, None, make, [2], [0, 2], program=levels(None, name, fanout, depth)))


emitted = emitted_fixture(append_pool)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_through_the_command_line(emitted, name):
    make, fanout, depth = KERNELS[name]
    check(Case(None, None, make, [2], [0, 2], program=levels(emitted, name, fanout, depth)))


def test_the_replay_reads_memory_the_launch_checked():
    source = wp_rewrite(append_pool.refine_level).source
    assert "wp_rewrite_runtime.pool_written(wp_rewrite_runtime.flat_index(nodes, base + k), nodes_marks" in source
    assert "parent = wp_rewrite_runtime.pool_value(nodes[first + tid], nodes_reads, tid, nodes_marks)" in source


def test_a_launch_that_reads_what_it_wrote_is_refused_at_the_next_check_naming_the_array():
    """Two parents where the count allows one: thread 1 reads nodes[1], which thread 0's children take."""
    x, count, nodes = tree()
    with wp.Tape(), pytest.raises(RewriteError, match="this reads 'nodes', which the launch also writes") as error:
        launch(wp_rewrite(append_pool.refine_level), 2, inputs=[x, 0, count, nodes], device="cpu")
    assert error.value.location.endswith("append_pool.py:11:14")


def test_without_a_gradient_to_take_nothing_is_checked():
    """Nothing requires grad: the reads are recorded as before, and the same overlapping launch runs."""
    nodes = np.zeros(21)
    nodes[0] = 0.8
    args = [f64(X), i32([1]), f64(nodes)]
    with wp.Tape():
        launch(wp_rewrite(append_pool.refine_level), 2, inputs=[args[0], 0, *args[1:]], device="cpu")
    expected = [f64(X), i32([1]), f64(nodes)]
    wp.launch(append_pool.refine_level, 2, inputs=[expected[0], 0, *expected[1:]], device="cpu")
    assert args[2].numpy().tolist() == expected[2].numpy().tolist()
