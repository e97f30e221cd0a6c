"""passes/own_writes.py: a thread's reads of the element it stored itself earlier in the launch read the stored
value, so the gradient flows through it (through the API and the command line, against finite differences of the
original forward); a store that does not reach the read on every path forwards nothing."""

from __future__ import annotations

import ast
import textwrap

import numpy as np
import pytest
import warp as wp

from tests.support import own_stores
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import f64, i32
from warp_rewrite import RewriteError, launch, wp_rewrite
from warp_rewrite.passes.own_writes import forward_own_writes, leading_thread_index

N = 5
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6])


def zeros(n=N):
    return wp.zeros(n, dtype=wp.float64, requires_grad=True, device="cpu")


# x is differentiated
KERNELS = {
    "refine_own_value": Pattern(lambda: [f64(X, True), i32([0, 3, 1, 2, 0]), i32([0]), zeros(), zeros()], [3, 4], [0]),
    "square_own_value": Pattern(lambda: [f64(X, True), i32([0]), zeros(), zeros()], [2, 3], [0]),
    "stored_in_both_branches": Pattern(lambda: [f64(X, True), i32([0]), zeros(), zeros()], [2, 3], [0]),
}
emitted = emitted_fixture(own_stores)
test_through_the_api, test_through_the_command_line = end_to_end_tests(own_stores, N, KERNELS)


def test_a_store_in_a_loop_forwards_nothing_and_the_read_stays_refused():
    args = [f64(X, True), i32([0]), zeros(), zeros()]
    with wp.Tape(), pytest.raises(RewriteError, match="reads 'y', which the launch also writes"):
        launch(wp_rewrite(own_stores.stored_in_a_loop), N, inputs=args, device="cpu")


def forwarded(source: str) -> str | None:
    function = ast.parse(textwrap.dedent(source)).body[0]
    result = forward_own_writes(function, "tid", {"y": "wp.float64", "z": None})
    return None if result is None else ast.unparse(result)


def test_stores_and_reads_at_the_thread_index_become_a_local():
    assert forwarded("""
        def k(y, x, tid):
            y[tid] = x[tid]
            out[0] = y[tid] * y[tid + 1]
    """) == textwrap.dedent("""\
        def k(y, x, tid):
            y_own = wp.float64(x[tid])
            y[tid] = y_own
            out[0] = y_own * y[tid + 1]""")


@pytest.mark.parametrize(
    "body",
    [
        "if x[tid] > 0.0:\n    y[tid] = x[tid]\nout[0] = y[tid]",  # not stored on every path
        "y[tid] = x[tid]\ny[tid + 1] = x[tid]\nout[0] = y[tid]",  # another thread's element is written too
        "y[tid] = x[tid]\ny[tid] += x[tid]\nout[0] = y[tid]",  # an atomic
        "y[tid] = x[tid]\nhelper(y)\nout[0] = y[tid]",  # handed to a call
        "y[tid] = x[tid]\nv = y\nout[0] = y[tid]",  # bound to a local
        "out[0] = y[tid]\ny[tid] = x[tid]",  # read before the store
        "y[tid] = x[tid]\nwhile x[0] > 0.0:\n    out[0] = y[tid]\n    y[tid] = x[0]",  # stored again in the loop
    ],
)
def test_nothing_is_forwarded_where_another_write_could_reach_the_read(body):
    assert forwarded("def k(y, x, tid):\n" + textwrap.indent(body, "    ")) is None


def _is_tid(value: ast.expr) -> bool:
    return ast.unparse(value) == "wp.tid()"


@pytest.mark.parametrize(
    ("body", "index"),
    [
        ("tid = wp.tid()\ny[tid] = x[tid]", "tid"),
        ('"""A docstring first."""\ni = wp.tid()\ny[i] = x[i]', "i"),
        ("n = x.shape[0]\ntid = wp.tid()\ny[tid] = x[tid]", None),  # not the first statement
        ("tid = wp.tid()\nif x[tid] > 0.0:\n    tid = tid + 1\ny[tid] = x[tid]", None),  # assigned again
        ("tid = wp.tid() + 1\ny[tid] = x[tid]", None),  # not the thread index itself
    ],
)
def test_the_leading_thread_index_is_the_first_statements_and_never_assigned_again(body, index):
    function = ast.parse("def k(y, x):\n" + textwrap.indent(body, "    ")).body[0]
    assert isinstance(function, ast.FunctionDef)
    assert leading_thread_index(function, _is_tid) == index


def test_the_generated_kernels_index_records_by_the_kernels_own_thread_index():
    """``refine_own_value`` binds ``tid = wp.tid()`` first: its phases record at ``tid``, with no ``wp.tid()`` of
    their own (``tests/support/own_stores.py``; its gradients: ``test_through_the_api``, above)."""
    source = wp_rewrite(own_stores.refine_own_value).source
    assert "thread" not in source and source.count("wp.tid()") == 2, source  # (the record and replay kernels)
