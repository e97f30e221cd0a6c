"""passes/own_writes.py at slots: a thread's reads of the element it stored itself at a slot taken from
a counter (``s = wp.atomic_add(count, 0, 1)``) read the stored value, through the API and the command line against
finite differences of the original forward; where no proof says that no other thread writes the slot, the read
stays a read of memory the launch writes, refused at launch as before."""

from __future__ import annotations

import ast
import textwrap

import numpy as np
import pytest
import warp as wp

from tests.support import own_slots
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import f64, i32
from warp_rewrite import RewriteError, launch, wp_rewrite
from warp_rewrite.passes.atomics import WarpNames
from warp_rewrite.passes.own_writes import counter_slots

N = 5
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6])


def zeros(n: int) -> wp.array:
    return f64(np.zeros(n), True)


KERNELS = {
    "refine_at_slot": Pattern(
        lambda: [f64(X, True), f64(X * 0.5 + 1.0, True), i32([0]), f64([0.25], True), zeros(N)],
        [4, 3],
        [0, 1, 3],
    ),
    "two_slots": Pattern(lambda: [f64(X, True), i32([0]), zeros(3 * N), zeros(3 * N)], [2, 3], [0]),
}
emitted = emitted_fixture(own_slots)
test_through_the_api, test_through_the_command_line = end_to_end_tests(own_slots, N, KERNELS)


def test_the_read_becomes_the_stored_value():
    source = wp_rewrite(own_slots.refine_at_slot).source
    assert "z_own = wp.float64(z_own * z_own * w[tid] + prev)" in source


@wp.kernel
def slot_given_back(x: wp.array[wp.float64], count: wp.array[wp.int32], z: wp.array[wp.float64]):
    tid = wp.tid()
    s = wp.atomic_add(count, 0, 1)
    z[s] = x[tid]
    z[s] = z[s] * z[s]
    if tid % 2 == 0:
        wp.atomic_sub(count, 0, 1)  # the counter goes down too: another thread may take the same slot


@wp.kernel
def slot_and_thread_index(x: wp.array[wp.float64], count: wp.array[wp.int32], z: wp.array[wp.float64]):
    tid = wp.tid()
    s = wp.atomic_add(count, 0, 1)
    z[tid] = x[tid]  # another thread's slot may be this thread's index
    z[s] = x[tid] * x[tid]
    z[s] = z[s] * z[s]


@wp.kernel
def slot_of_a_varying_increment(
    x: wp.array[wp.float64], k: wp.array[wp.int32], count: wp.array[wp.int32], z: wp.array[wp.float64]
):
    tid = wp.tid()
    s = wp.atomic_add(count, 0, k[tid])  # not a positive constant: it may add zero
    z[s] = x[tid]
    z[s] = z[s] * z[s]


UNPROVEN = {
    slot_given_back: lambda: [f64(X, True), i32([0]), zeros(N)],
    slot_and_thread_index: lambda: [f64(X, True), i32([0]), zeros(N)],
    slot_of_a_varying_increment: lambda: [f64(X, True), i32([1, 0, 1, 0, 1]), i32([0]), zeros(N)],
}


@pytest.mark.parametrize("kernel", list(UNPROVEN), ids=lambda k: k.key)
def test_without_a_proof_the_read_stays_refused(kernel):
    with wp.Tape(), pytest.raises(RewriteError, match="reads 'z', which the launch also writes"):
        launch(wp_rewrite(kernel), N, inputs=UNPROVEN[kernel](), device="cpu")


def slots(source: str) -> dict[str, tuple]:
    return counter_slots(ast.parse(textwrap.dedent(source)).body[0], WarpNames(), frozenset({"count", "other"}))


def test_counter_slots_are_locals_assigned_once_outside_loops_from_positive_constant_adds():
    assert slots("""
        def k(count, other):
            s = wp.atomic_add(count, 0, 1)
            t = wp.atomic_add(count, 0, 3)
            u = wp.atomic_add(other, 1, 1)
            if count[0] > 2:
                pass
    """) == {"s": ("count", 0), "t": ("count", 0), "u": ("other", 1)}


@pytest.mark.parametrize(
    "body",
    [
        "for i in range(2):\n    s = wp.atomic_add(count, 0, 1)",  # assigned once per trip
        "s = wp.atomic_add(count, 0, 1)\ns = s + 1",  # assigned twice
        "s = wp.atomic_add(count, 0, 0)",  # adds nothing
        "s = wp.atomic_add(count, 0, 1)\ncount[0] = 0",  # stored into
        "s = wp.atomic_add(count, 0, 1)\ncount[0] += 1",  # another kind of write
        "s = wp.atomic_add(count, 0, 1)\nhelper(count)",  # handed on
        "s = wp.atomic_add(count, tid, 1)",  # an element that is not a constant
    ],
)
def test_anything_else_is_no_counter_slot(body):
    assert slots("def k(count, other, tid):\n" + textwrap.indent(body, "    ")) == {}
