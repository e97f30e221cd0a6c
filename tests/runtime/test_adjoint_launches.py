"""``wp.launch(k, ..., adjoint=True, adj_inputs=..., adj_outputs=...)`` of a rewritten kernel, as custom autograd
functions and training loops call Warp's adjoint: every launch plain Warp accepts adds the gradients of the forward
from memory as it is into the adjoints given (checked against finite differences of the original forward), or
raises before anything runs; memory and the arrays' own gradients stay as they were. Through ``wp_rewrite`` and
through the command line's copy of the kernels' file."""

import numpy as np
import pytest
import warp as wp
import warp.autograd

from tests.support import adjoint_kernels
from tests.support.emitted import emitted_fixture
from tests.support.harness import Case, f64, finite_difference_gradients, i32
from warp_rewrite import RewriteError, wp_rewrite

N = 5
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6])
Y = np.array([1.1, 0.3, -0.8, 1.6, 0.9])
S = 1.5
SEED = np.array([0.5, 1.5, 0.75, 1.25, 2.0])  # the adjoint of ``out``: the loss's weights

emitted = emitted_fixture(adjoint_kernels)


@pytest.fixture(params=["api", "cli"])
def rewritten(request):
    """The rewritten kernels by name: ``wp_rewrite``'s, or the command line's (its module binds each kernel's name
    to its ``RewrittenKernel``)."""
    if request.param == "api":
        return lambda name: wp_rewrite(getattr(adjoint_kernels, name))
    module = request.getfixturevalue("emitted")
    return lambda name: getattr(module, name)


def zeros(n=N):
    return f64(np.zeros(n))


def truth(make, wrt, output):
    """d (SEED . out) / d argument, for each argument in ``wrt``, by finite differences of the original."""
    case = Case(adjoint_kernels.scaled_product, N, make, [output], wrt, weights={output: SEED})
    return finite_difference_gradients(case)


def product_args(a, b):
    return [a, b, wp.float64(S), i32([0]), f64(np.zeros(N), True)]


def test_one_array_for_two_parameters_none_and_scalar_adjoints_and_a_counter_zeroed_before(rewritten):
    """The form that gave zeros: ``x`` for both ``a`` and ``b`` (without requires_grad), ``None`` for the counter's
    adjoint, 0.0 for the scalar's, and the counter zeroed by the user after the forward launch: each parameter gets
    its own term, as Warp's adjoint gives it."""
    kernel = rewritten("scaled_product")
    x, count, out = f64(X), i32([0]), f64(np.zeros(N), True)
    wp.launch(kernel, N, inputs=[x, x, wp.float64(S), count], outputs=[out], device="cpu")
    forward = out.numpy().copy()
    count.zero_()
    adj_a, adj_b = zeros(), zeros()
    wp.launch(
        kernel,
        N,
        inputs=[x, x, wp.float64(S), count],
        outputs=[out],
        adj_inputs=[adj_a, adj_b, 0.0, None],
        adj_outputs=[f64(SEED)],
        adjoint=True,
        device="cpu",
    )
    expected = truth(lambda: product_args(f64(X), f64(X)), [0, 1], 4)
    np.testing.assert_allclose(adj_a.numpy(), expected[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(adj_b.numpy(), expected[1], rtol=1e-6, atol=1e-8)
    assert count.numpy().tolist() == [0] and out.numpy().tolist() == forward.tolist()
    assert x.grad is None and not x.requires_grad


def test_adjoints_accumulate_over_several_launches_and_the_arrays_keep_their_own_gradients(rewritten):
    kernel = rewritten("scaled_product")
    x, y = f64(X, True), f64(Y, True)
    own = x.grad
    adj_x, adj_y = zeros(), zeros()
    for _ in range(3):
        wp.launch(
            kernel,
            N,
            inputs=[x, y, wp.float64(S), i32([0])],
            outputs=[f64(np.zeros(N), True)],
            adj_inputs=[adj_x, adj_y, wp.float64(0.0), None],
            adj_outputs=[f64(SEED)],  # Warp's adjoint of a store consumes it: a fresh one each time
            adjoint=True,
            device="cpu",
        )
    expected = truth(lambda: product_args(f64(X), f64(Y)), [0, 1], 4)
    np.testing.assert_allclose(adj_x.numpy(), 3 * expected[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(adj_y.numpy(), 3 * expected[1], rtol=1e-6, atol=1e-8)
    assert x.grad is own and not x.grad.numpy().any() and not y.grad.numpy().any()


def test_an_adjoint_with_other_strides_than_its_array_is_added_into(rewritten):
    kernel = rewritten("scaled_product")
    base = zeros(2 * N)
    adj_x = base[::2]  # every other element: not the strides of the copy the launch runs on
    wp.launch(
        kernel,
        N,
        inputs=[f64(X), f64(Y), wp.float64(S), i32([0])],
        outputs=[zeros()],
        adj_inputs=[adj_x, None, 0.0, None],
        adj_outputs=[f64(SEED)],
        adjoint=True,
        device="cpu",
    )
    expected = truth(lambda: product_args(f64(X), f64(Y)), [0], 4)
    np.testing.assert_allclose(adj_x.numpy(), expected[0], rtol=1e-6, atol=1e-8)
    assert not base.numpy()[1::2].any()


def test_exact_float_returns_through_one_array_for_two_parameters(rewritten):
    """``x`` for both ``x`` and ``weight``: the exact backward of the float return adds each parameter's term."""
    kernel = rewritten("running_total")
    x, total, out = f64(X), f64([0.25]), zeros()
    adj_x, adj_weight, adj_total = zeros(), zeros(), zeros(1)
    wp.launch(
        kernel,
        N,
        inputs=[x, x, total],
        outputs=[out],
        adj_inputs=[adj_x, adj_weight, adj_total],
        adj_outputs=[f64(SEED)],
        adjoint=True,
        device="cpu",
    )
    case = Case(
        adjoint_kernels.running_total,
        N,
        lambda: [f64(X), f64(X), f64([0.25]), zeros()],
        [3],
        [0, 1, 2],
        weights={3: SEED},
    )
    expected = finite_difference_gradients(case)
    np.testing.assert_allclose(adj_x.numpy(), expected[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(adj_weight.numpy(), expected[1], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(adj_total.numpy(), expected[2], rtol=1e-6, atol=1e-8)
    assert total.numpy().tolist() == [0.25] and not out.numpy().any()


def particles(x, count):
    value = adjoint_kernels.Particles()
    value.x, value.count = x, count
    return value


def test_a_struct_argument_takes_a_struct_of_adjoints(rewritten):
    kernel = rewritten("gather")
    adjoint = particles(zeros(), None)
    wp.launch(
        kernel,
        N,
        inputs=[particles(f64(X), i32([0]))],
        outputs=[zeros()],
        adj_inputs=[adjoint],
        adj_outputs=[f64(SEED)],
        adjoint=True,
        device="cpu",
    )
    case = Case(
        None,
        N,
        lambda: [f64(X), i32([0]), zeros()],
        [2],
        [0],
        program=lambda args, launcher: launcher(adjoint_kernels.gather, N, [particles(args[0], args[1]), args[2]]),
        weights={2: SEED},
    )
    np.testing.assert_allclose(adjoint.x.numpy(), finite_difference_gradients(case)[0], rtol=1e-6, atol=1e-8)


def test_the_jacobian_of_the_rewritten_kernel(rewritten):
    """``wp.autograd.jacobian`` records the kernel on a tape and launches its adjoint once per output element."""
    x, y, count, out = f64(X, True), f64(Y, True), i32([0]), f64(np.zeros(N), True)
    jacobians = wp.autograd.jacobian(
        rewritten("scaled_product"), dim=N, inputs=[x, y, wp.float64(S), count], outputs=[out]
    )
    for row in range(N):
        weights = np.eye(N)[row]
        case = Case(adjoint_kernels.scaled_product, N, lambda: product_args(f64(X), f64(Y)), [4], [0, 1])
        case.weights = {4: weights}
        expected = finite_difference_gradients(case)
        for argument in (0, 1):
            np.testing.assert_allclose(jacobians[argument, 0].numpy()[row], expected[argument], rtol=1e-6, atol=1e-8)
    assert count.numpy().tolist() == [0] and not out.numpy().any()


@wp.kernel
def loop_with_else(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    for _ in range(2):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid]
    else:
        out[0] = x[tid]


def test_an_adjoint_launch_of_a_refused_kernel_raises_its_refusal_before_anything_runs():
    """``on_refusal="original"`` launches the original where no gradient can flow; its adjoint would give wrong
    gradients, so an adjoint launch raises."""
    kernel = wp_rewrite(loop_with_else, on_refusal="original")
    count, adj_x = i32([0]), zeros()
    with pytest.raises(RewriteError, match="loop with an 'else' clause"):
        wp.launch(
            kernel,
            N,
            inputs=[f64(X), count, zeros(2 * N)],
            adj_inputs=[adj_x, None, f64(np.ones(2 * N))],
            adjoint=True,
            device="cpu",
        )
    assert count.numpy().tolist() == [0] and not adj_x.numpy().any()


def test_an_adjoint_per_parameter_is_needed(rewritten):
    """Warp packs the adjoints it is given and reads past them; the rewrite says how many it needs."""
    count = i32([0])
    with pytest.raises(RuntimeError, match=r"passed 2 adjoints \(adj_inputs and adj_outputs\) but kernel requires 5"):
        wp.launch(
            rewritten("scaled_product"),
            N,
            inputs=[f64(X), f64(Y), wp.float64(S), count],
            outputs=[zeros()],
            adj_inputs=[zeros(), zeros()],
            adjoint=True,
            device="cpu",
        )
    assert count.numpy().tolist() == [0]
