"""passes/layout.py: which recorded values may carry a gradient. A float read of an array the launch writes that
is only compared needs none: the launch is taken, and forward and gradients match the original's (API and command
line, against finite differences)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from tests.support import compared_reads
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import f64, i32
from warp_rewrite import RewriteError, launch, wp_rewrite

N = 4


def zeros(n=N):
    return wp.zeros(n, dtype=wp.float64, requires_grad=True, device="cpu")


# Inputs keep away from ties. The budget is differentiated, not the best: Warp's atomic_max passes the loss's weight
# back to the initial best.
KERNELS = {
    "keep_the_best": Pattern(
        lambda: [f64([0.3, 1.2, -0.7, 0.9], True), i32([0]), f64([0.5], True), zeros()], [2, 3], [0]
    ),
    "spend_if_affordable": Pattern(
        lambda: [f64([0.3, 1.2, 0.7, 0.9], True), f64([2.05], True), i32([0]), zeros()], [1, 3], [0, 1]
    ),
}
emitted = emitted_fixture(compared_reads)
test_through_the_api, test_through_the_command_line = end_to_end_tests(compared_reads, N, KERNELS)


@wp.kernel
def scale_by_the_best(
    x: wp.array[wp.float64], count: wp.array[wp.int32], best: wp.array[wp.float64], out: wp.array[wp.float64]
):
    tid = wp.tid()
    wp.atomic_max(best, 0, x[tid])
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * best[0]  # used as a number: its gradient through other threads' writes is refused


def test_a_read_used_as_a_number_stays_refused():
    args = [f64(np.array([0.3, 1.2, -0.7, 0.9]), True), i32([0]), f64([0.5], True), zeros()]
    with wp.Tape(), pytest.raises(RewriteError, match="reads 'best', which the launch also writes"):
        launch(wp_rewrite(scale_by_the_best), N, inputs=args, device="cpu")
