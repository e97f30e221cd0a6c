"""rewrite/runtime/replays.py: ``@replays(f)`` makes its function what Warp's backward runs in place of ``f``, and
leaves it a ``wp.func`` that other functions call (a twin's callers' twins do)."""

import numpy as np
import warp as wp

from warp_rewrite.runtime import replays


@wp.func
def deposit_replay(total: wp.array(dtype=wp.float64), x: wp.float64) -> wp.float64:
    wp.atomic_add(total, 0, x)  # kept for its adjoint; Warp's backward must not run it again
    return x * x


@replays(deposit_replay)
@wp.func
def deposit_replay_forward(total: wp.array(dtype=wp.float64), x: wp.float64) -> wp.float64:
    return x * x


@wp.func
def twice_forward(total: wp.array(dtype=wp.float64), x: wp.float64) -> wp.float64:
    return deposit_replay_forward(total, x) * wp.float64(2.0)


@wp.kernel
def deposit_all(total: wp.array(dtype=wp.float64), xs: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    out[tid] = deposit_replay(total, xs[tid]) + twice_forward(total, xs[tid])


def test_backward_runs_the_twin_and_functions_still_call_it():
    total = wp.zeros(1, dtype=wp.float64, requires_grad=True)
    xs = wp.array([0.5, 2.0], dtype=wp.float64, requires_grad=True)
    out = wp.zeros(2, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(deposit_all, 2, inputs=[total, xs, out])
    tape.backward(grads={out: wp.ones(2, dtype=wp.float64), total: wp.ones(1, dtype=wp.float64)})
    assert total.numpy()[0] == 2.5  # the forward's atomics, once: the backward ran the twin
    # d out / d x = 2x + 4x, and the atomic's adjoint d total / d x = 1
    np.testing.assert_allclose(xs.grad.numpy(), 6.0 * xs.numpy() + 1.0)
    assert isinstance(deposit_replay_forward, wp.Function)
