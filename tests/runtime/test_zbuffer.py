"""Z-buffers: a read of the target of a float atomic whose returns take the exact path, only compared
(``if d < zbuf[p]``), is recorded from the target's shadow, where its values live while the record kernel runs
(``shadowed_read`` in the runtime): in the kernel or in a helper, on 1-D and 2-D targets. Forward and gradients
match the original's, through the API and the command line, against finite differences; a read whose value is used
as a number stays refused, and so does one through a view of the target handed to a helper."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from tests.support import zbuffer
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import f64, i32
from warp_rewrite import RewriteError, wp_rewrite

N = 8
PIXELS = [0, 1, 0, 1, 0, 1, 0, 1]
NEARER = np.sqrt(np.linspace(1.7, 0.3, N))  # each thread's depth passes its pixel's test: depths 2.2 down to 0.8
FARTHER = np.sqrt(np.linspace(0.3, 1.7, N))


def shades() -> wp.array:
    return f64(np.zeros(N), True)


def nearer() -> list:
    return [f64(NEARER, True), i32(PIXELS), f64([50.0, 50.0], True), shades()]


def nearer_on_a_grid() -> list:
    """Two rows of two pixels: thread t draws into (PIXELS[t], t % 2), each pixel twice, nearer the second time."""
    return [f64(NEARER, True), i32(PIXELS), f64(np.full((2, 2), 50.0), True), shades()]


# depths keep 0.2 from every test
KERNELS = {
    "nearest_shade": Pattern(nearer, [3, 2], [0, 2]),
    "farthest_shade": Pattern(
        lambda: [f64(FARTHER, True), i32(PIXELS), f64([0.1, 0.1], True), shades()], [3, 2], [0, 2]
    ),
    "winners": Pattern(nearer, [3, 2], [0, 2]),
    "winners_without_a_test": Pattern(nearer, [3, 2], [0, 2]),
    "early_test_in_a_helper": Pattern(nearer, [3, 2], [0, 2]),
    "nearest_on_a_grid": Pattern(nearer_on_a_grid, [3, 2], [0, 2]),
    "early_grid_test_in_a_helper": Pattern(nearer_on_a_grid, [3, 2], [0, 2]),
}
emitted = emitted_fixture(zbuffer)
test_through_the_api, test_through_the_command_line = end_to_end_tests(zbuffer, N, KERNELS)


def test_the_record_kernel_reads_the_shadow():
    source = wp_rewrite(zbuffer.nearest_shade).source
    assert "shadowed_read(zbuf[p], wp_rewrite_runtime.flat_index(zbuf, p), zbuf_shadow)" in source


@wp.func
def in_front_of_the_row(row: wp.array[wp.float64], column: int, depth: wp.float64) -> bool:
    return depth < row[column]


@wp.kernel
def early_test_on_a_row(
    x: wp.array[wp.float64], pixel: wp.array[wp.int32], grid: wp.array2d(dtype=wp.float64), shade: wp.array[wp.float64]
):
    tid = wp.tid()
    depth = x[tid] * x[tid] + wp.float64(0.5)
    if in_front_of_the_row(grid[pixel[tid]], tid % 2, depth):  # a view: its flat address is not the target's
        nearest = wp.atomic_min(grid, pixel[tid], tid % 2, depth)
        shade[tid] = nearest * depth


@wp.kernel
def depth_used_as_a_number(
    x: wp.array[wp.float64], pixel: wp.array[wp.int32], zbuf: wp.array[wp.float64], shade: wp.array[wp.float64]
):
    tid = wp.tid()
    depth = x[tid] * x[tid] + wp.float64(0.5)
    p = pixel[tid]
    seen = zbuf[p]
    if depth < seen:
        nearest = wp.atomic_min(zbuf, p, depth)
        shade[tid] = nearest * seen  # the value read carries a gradient: refused as before


@pytest.mark.parametrize(
    "kernel, refusal",
    [
        (early_test_on_a_row, "helper 'in_front_of_the_row' receives an array whose float atomic returns need"),
        (depth_used_as_a_number, "a plain read of 'zbuf', whose float atomic returns need exact gradients"),
    ],
)
def test_other_reads_of_the_target_stay_refused(kernel, refusal):
    with pytest.raises(RewriteError, match=refusal):
        wp_rewrite(kernel)
