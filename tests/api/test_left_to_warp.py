"""A kernel whose only hazard is a loop Warp's backward replays wrong, in a form the rewrite cannot replay right, is
left as plain Warp with a ``RewriteWarning`` (``pipeline.LeftToWarp``): it launches as it did before it was
rewritten, through ``wp_rewrite``, ``rewrite_launches()`` and the command line alike. The same form beside a consumed
atomic is refused: the promise covers the whole kernel."""

from __future__ import annotations

import textwrap
import warnings

import numpy as np
import pytest
import warp as wp

from tests.support.harness import f64, i32
from warp_rewrite import RewriteError, RewriteWarning, rewrite_launches, wp_rewrite
from warp_rewrite.cli.main import OK, main

X = [0.6, 0.9, 0.7, 0.8]
COUNTS = [2, 0, 3, 1]
N = len(X)


@wp.kernel
def halved_in_scratch(x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    i = wp.tid()
    scratch = wp.zeros(shape=2, dtype=wp.float64)  # a thread-local array: refused
    acc = wp.float64(0.0)
    for _ in range(n[i]):
        acc = acc * wp.float64(0.5) + x[i]
    scratch[0] = acc
    out[i] = scratch[0] * scratch[0]


@wp.kernel
def halved_in_scratch_and_claimed(
    x: wp.array[wp.float64], n: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]
):
    i = wp.tid()
    scratch = wp.zeros(shape=2, dtype=wp.float64)
    acc = wp.float64(0.0)
    for _ in range(n[i]):
        acc = acc * wp.float64(0.5) + x[i]
    scratch[0] = acc
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = scratch[0] * scratch[0]


def plain_warp_gradient(kernel: wp.Kernel) -> tuple[np.ndarray, np.ndarray]:
    x, n, out = f64(X, True), i32(COUNTS), f64(np.zeros(N), True)
    with wp.Tape() as tape:
        wp.launch(kernel, N, [x, n, out])
    tape.backward(grads={out: wp.ones(N, dtype=wp.float64)})
    return out.numpy(), x.grad.numpy()


def test_wp_rewrite_leaves_it_as_plain_warp_and_warns():
    with pytest.warns(RewriteWarning, match=r"kernel 'halved_in_scratch' is left as plain Warp.*'wp\.zeros'"):
        rewritten = wp_rewrite(halved_in_scratch)
    assert rewritten.pair is None and rewritten.refusal is None and rewritten.left is not None
    assert "left as plain Warp" in rewritten.source
    expected = plain_warp_gradient(halved_in_scratch)
    for got, want in zip(plain_warp_gradient(rewritten), expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_beside_a_consumed_atomic_the_same_form_is_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RewriteWarning)
        with pytest.raises(RewriteError, match=r"'wp\.zeros'"):
            wp_rewrite(halved_in_scratch_and_claimed)


@wp.kernel
def composed_in_place(x: wp.array[wp.float64], n: wp.array[wp.int32], state: wp.array[wp.float64]):
    i = wp.tid()
    acc = state[i]  # read, then written below: its gradient through what the launch writes is not supported
    for _ in range(n[i]):
        acc = acc * x[i] + wp.float64(0.25)
    state[i] = acc * acc


def test_a_launch_the_rewrite_refuses_before_running_runs_as_plain_warp():
    """Newton's ``fk_accum``, kinematic weld: a loop-only kernel that reads what the launch writes, with a gradient
    needed, is refused at a launch on a tape; left to Warp, the launch runs the original kernel instead and warns."""
    rewritten = wp_rewrite(composed_in_place)
    assert rewritten.pair is not None

    def launched(kernel) -> tuple[np.ndarray, np.ndarray]:
        x, n, state = f64(X, True), i32(COUNTS), f64([1.1, 1.2, 1.3, 1.4], True)
        with wp.Tape() as tape:
            wp.launch(kernel, N, [x, n, state])
        tape.backward(grads={state: wp.ones(N, dtype=wp.float64)})
        return state.numpy(), x.grad.numpy()

    expected = launched(composed_in_place)
    with pytest.warns(RewriteWarning, match=r"left as plain Warp.*reads 'state', which the launch also writes"):
        got = launched(rewritten)
    for value, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(value, want)


def test_rewrite_launches_keeps_its_launches_as_they_were():
    rewrite_launches()
    try:
        with pytest.warns(RewriteWarning):
            got = plain_warp_gradient(halved_in_scratch)
    finally:
        rewrite_launches(False)
    for value, want in zip(got, plain_warp_gradient(halved_in_scratch), strict=True):
        np.testing.assert_array_equal(value, want)


def test_the_command_line_leaves_it_and_says_so(tmp_path, capsys):
    path = tmp_path / "scratch.py"
    path.write_text(
        textwrap.dedent("""\
        import warp as wp


        @wp.kernel
        def halved_in_scratch(x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
            i = wp.tid()
            scratch = wp.zeros(shape=2, dtype=wp.float64)
            acc = wp.float64(0.0)
            for _ in range(n[i]):
                acc = acc * wp.float64(0.5) + x[i]
            scratch[0] = acc
            out[i] = scratch[0] * scratch[0]
        """)
    )
    before = path.read_text()
    assert main([str(path), "--in-place"]) == OK
    assert path.read_text() == before
    said = capsys.readouterr().err
    assert f"{path}:7:15: warning: kernel 'halved_in_scratch' is left as plain Warp" in said, said
    assert "1 kernel left as plain Warp" in said
