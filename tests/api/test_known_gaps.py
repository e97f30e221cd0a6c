"""The kernels of ``tests/support/known_gaps.py``, whose gradients the rewrite still gets wrong with no error or
warning: each an expected failure, strict, so that a fix shows here (move the kernel to the tests of its fix)."""

import pytest

from tests.support import known_gaps
from tests.support.harness import Case, check, f64, i32

X = [0.5, 1.1, 0.8]
GAPS = {
    "depth_read_back": Case(
        known_gaps.depth_read_back,
        2,
        lambda: [f64([0.7, 0.6], True), i32([0, 0]), f64([10.0], True), f64([0.0], True)],
        [3],
        [0],
    ),
    "last_writer": Case(known_gaps.last_writer, 2, lambda: [f64(X[:2], True), f64([0.0], True)], [1], [0]),
    "neighbour_read": Case(
        known_gaps.neighbour_read, 3, lambda: [f64(X, True), f64([0.0] * 3, True), f64([0.0] * 3, True)], [2], [0]
    ),
}


@pytest.mark.xfail(strict=True, reason="a known gap: wrong gradient, no error (tests/support/known_gaps.py)")
@pytest.mark.parametrize("name", sorted(GAPS))
def test_a_known_gap_is_still_wrong(name):
    check(GAPS[name])
