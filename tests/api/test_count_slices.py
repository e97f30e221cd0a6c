"""Kernels whose dry run launches a count kernel cut down to what decides trip counts (``passes.count_slice``):
forward as the original, gradients against finite differences, through both front ends, with no ``max_records``
(every launch counts trips first)."""

import ast
from pathlib import Path

import numpy as np

from tests.api.test_frontends import both_sources
from tests.support import count_slices
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import f64, i32
from warp_rewrite.pipeline import RewriteOptions

N = 4
VALUES = np.array([0.3, 1.7, -0.8, 2.9, 0.1, 1.2])  # products with the directions are far apart: no ties
X = np.array([0.9, 0.7, 0.55, 0.8, 1.2, 0.6])  # running sums cross 2.5 at 2.95, after 2.15

emitted = emitted_fixture(count_slices)
PATTERNS = {
    "support_point": Pattern(
        lambda: [
            i32([0, 1, 2, 0]),
            f64(VALUES, True),
            i32([6, 2, 3, 4]),
            f64([0.7, -1.3, 0.4, -1.1], True),
            f64(np.zeros(N), True),
        ],
        loss=[4],
        wrt=[1, 3],
    ),
    "counted_by_helper": Pattern(
        lambda: [f64(VALUES), i32([6, 2, 4, 1]), f64(X, True), f64(np.zeros(N), True)], loss=[3], wrt=[2]
    ),
    "walk_and_branch": Pattern(lambda: [f64(X, True), i32([3, 1, 2, 0]), f64(np.zeros(N), True)], loss=[2], wrt=[0]),
}
test_through_the_api, test_through_the_command_line = end_to_end_tests(count_slices, N, PATTERNS)


def test_the_count_clone_keeps_only_the_branch_that_counts_through_both_front_ends():
    """The support map's count clone keeps the one branch that reaches a loop: the others, the native call among
    them (handed a value, it writes nothing: the fence's "opaque call"), go; the record clone keeps them all."""
    api, cli = both_sources(count_slices.support_point, Path(count_slices.__file__), RewriteOptions())
    assert api == cli and api is not None
    source = api.partition("KernelSpec(")[0]  # (the source, then the spec's repr)
    functions = {f.name: ast.unparse(f) for f in ast.parse(source).body if isinstance(f, ast.FunctionDef)}
    count = next(text for name, text in functions.items() if name.startswith("support") and name.endswith("_count"))
    record = next(text for name, text in functions.items() if name.startswith("support") and name.endswith("_record"))
    assert "native_rsqrt" in record and "native_rsqrt" not in count and "farthest" in count
    assert count.count("\n") < 5  # the signature, the branch, the call
