"""Backward is repeatable: a second ``tape.backward`` after zeroing one's own gradients gives
the same gradients, and Warp's own checkers (``wp.autograd.jacobian``, ``jacobian_fd``, ``gradcheck``,
``gradcheck_tape``) pass on functions that launch rewritten kernels, both an int compaction and exact float
returns. They take a ``RewrittenKernel`` as a kernel too, and so do ``Tape.visualize`` and
``wp.load_module``. Ground truth: central differences of the original kernels (``launch``
without a tape runs them)."""

import numpy as np
import pytest
import warp as wp
import warp.autograd

from tests.support.harness import f64, i32
from warp_rewrite import launch, wp_rewrite

N = 6
X = np.linspace(0.4, 1.4, N)
IDX = [0, 1, 0, 1, 0, 1]
SEED = np.linspace(0.5, 1.5, N)


@wp.kernel
def compact(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    if x[tid] > wp.float64(0.7):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid] + wp.sin(x[tid])


@wp.kernel
def running_sum(x: wp.array[wp.float64], idx: wp.array[wp.int32], acc: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    v = x[tid] * x[tid]
    prev = wp.atomic_add(acc, idx[tid], v)
    out[tid] = prev * x[tid]


@wp.kernel
def running_max(
    x: wp.array[wp.float64], idx: wp.array[wp.int32], peak: wp.array[wp.float64], out: wp.array[wp.float64]
):
    tid = wp.tid()
    before = wp.atomic_max(peak, idx[tid], wp.float64(2.0) * x[tid])
    out[tid] = before * x[tid] + wp.float64(0.5) * x[tid]


def compaction(x, count):
    out = wp.zeros(N, dtype=wp.float64, device="cpu", requires_grad=True)
    launch(wp_rewrite(compact), N, inputs=[x, count], outputs=[out], device="cpu")
    return out


def exact_sum(x, acc):
    out = wp.zeros(N, dtype=wp.float64, device="cpu", requires_grad=True)
    launch(wp_rewrite(running_sum), N, inputs=[x, i32(IDX), acc], outputs=[out], device="cpu")
    return out


def exact_max(x, peak):
    out = wp.zeros(N, dtype=wp.float64, device="cpu", requires_grad=True)
    launch(wp_rewrite(running_max), N, inputs=[x, i32(IDX), peak], outputs=[out], device="cpu")
    return out


@wp.kernel
def below_peak(x: wp.array[wp.float64], peak: wp.array[wp.float64], out: wp.array[wp.float64]):
    """Consumes an atomic's return but leaves its target as it found it (every value is below the peak): launched
    again and again, as ``jacobian_fd`` of a kernel launches it, it gives the same result each time."""
    tid = wp.tid()
    before = wp.atomic_max(peak, 0, x[tid])
    out[tid] = before * x[tid] * x[tid]


def peak_unchanged(x, peak):
    out = wp.zeros(N, dtype=wp.float64, device="cpu", requires_grad=True)
    launch(wp_rewrite(below_peak), N, inputs=[x, peak], outputs=[out], device="cpu")
    return out


FUNCTIONS = {
    "compaction": (compaction, lambda: [f64(X, True), i32([0])]),
    "exact_add": (exact_sum, lambda: [f64(X, True), f64([0.5, 0.25], True)]),
    "exact_max": (exact_max, lambda: [f64(X, True), f64([1.0, 2.5], True)]),
    "exact_max_kept": (peak_unchanged, lambda: [f64(X, True), f64([5.0], True)]),
}


def finite_difference_jacobians(name: str, eps: float = 1e-6) -> dict[int, np.ndarray]:
    """d out / d input for each input requiring grad, by central differences of the original kernel."""
    function, make = FUNCTIONS[name]
    jacobians = {}
    for k, array in enumerate(make()):
        if not array.requires_grad:
            continue
        columns = []
        for j in range(array.size):
            outs = []
            for sign in (1.0, -1.0):
                inputs = make()
                inputs[k].numpy().reshape(-1)[j] += sign * eps
                outs.append(function(*inputs).numpy().copy())  # no tape: the original kernel runs
            columns.append((outs[0] - outs[1]) / (2 * eps))
        jacobians[k] = np.stack(columns, axis=1)
    return jacobians


@pytest.mark.parametrize("name", FUNCTIONS)
def test_repeated_backward_with_only_your_own_gradients_zeroed(name):
    function, make = FUNCTIONS[name]
    inputs = make()
    tape = wp.Tape()
    with tape:
        out = function(*inputs)
    expected = {k: SEED @ jacobian for k, jacobian in finite_difference_jacobians(name).items()}
    for _ in range(3):
        for array in [*inputs, out]:
            if array.requires_grad:
                array.grad.zero_()
        tape.backward(grads={out: wp.array(SEED, dtype=wp.float64, device="cpu")})
        for k, gradient in expected.items():
            np.testing.assert_allclose(inputs[k].grad.numpy(), gradient, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_jacobian_and_jacobian_fd_match_finite_differences(name):
    function, make = FUNCTIONS[name]
    truth = finite_difference_jacobians(name)
    jacobians = wp.autograd.jacobian(function, inputs=make())
    differences = wp.autograd.jacobian_fd(function, inputs=make(), eps=1e-6)
    for (k, _), jacobian in jacobians.items():
        np.testing.assert_allclose(jacobian.numpy(), truth[k], rtol=1e-5, atol=1e-7, err_msg=f"jacobian, input {k}")
        np.testing.assert_allclose(differences[k, 0].numpy(), truth[k], rtol=1e-4, atol=1e-6, err_msg="jacobian_fd")
    assert set(k for k, _ in jacobians) == set(truth)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_gradcheck_passes(name):
    function, make = FUNCTIONS[name]
    assert wp.autograd.gradcheck(
        function, inputs=make(), eps=1e-6, atol=1e-6, rtol=1e-4, raise_exception=False, show_summary=False
    )


@pytest.mark.parametrize("name", FUNCTIONS)
def test_gradcheck_tape_checks_the_replay_kernel_against_the_recorded_values(name):
    """``gradcheck_tape`` checks each kernel launch on the tape on its own: for a rewritten launch that is the
    replay kernel, whose recorded returned values are inputs like any other (and its Jacobian w.r.t. them is
    checked). It never runs the exact backward's routing: see docs/user-guide.md (Floating-point returns)."""
    function, make = FUNCTIONS[name]
    inputs = make()
    tape = wp.Tape()
    with tape:
        out = function(*inputs)
    before = [array.numpy().copy() for array in [*inputs, out]]
    assert wp.autograd.gradcheck_tape(tape, eps=1e-6, atol=1e-6, rtol=1e-4, raise_exception=False, show_summary=False)
    for array, values in zip([*inputs, out], before, strict=True):
        np.testing.assert_array_equal(array.numpy(), values)
    checked = [entry[0].key for entry in tape.launches if not callable(entry)]
    rewritten = wp_rewrite(FUNCTIONS_KERNELS[name])
    assert checked == [rewritten.key] == [rewritten.replay_kernel.key]


def test_gradcheck_tape_lists_take_a_rewritten_kernels_key(monkeypatch):
    """A rewritten kernel's ``key`` is the one the tape holds, so ``gradcheck_tape``'s lists select its launches."""
    function, make = FUNCTIONS["compaction"]
    tape = wp.Tape()
    with tape:
        function(*make())
    checked = []
    monkeypatch.setattr(warp._src.autograd, "gradcheck", lambda kernel, *_, **__: checked.append(kernel.key) or True)
    key = wp_rewrite(compact).key
    assert wp.autograd.gradcheck_tape(tape, whitelist_kernels=[key])
    assert wp.autograd.gradcheck_tape(tape, blacklist_kernels=[key])
    assert checked == [key]


FUNCTIONS_KERNELS = {
    "compaction": compact,
    "exact_add": running_sum,
    "exact_max": running_max,
    "exact_max_kept": below_peak,
}


def kernel_inputs(name: str, inputs: list) -> list:
    """The kernel's own inputs for the function's (the index arrays the functions make themselves added)."""
    return inputs if name in ("compaction", "exact_max_kept") else [inputs[0], i32(IDX), inputs[1]]


def as_kernel_input(name: str, k: int) -> int:
    """Where the function's input ``k`` is among the kernel's inputs."""
    return k if name in ("compaction", "exact_max_kept") else {0: 0, 1: 2}[k]


def memory(arrays: list) -> list[np.ndarray]:
    return [array.numpy().copy() for array in arrays]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_jacobian_takes_a_rewritten_kernel_as_a_kernel(name):
    """``jacobian`` records the kernel on a tape without running it and launches it with ``adjoint=True``: the
    gradient of its forward from memory as it is, which stays as it is (counters and targets included)."""
    rewritten = wp_rewrite(FUNCTIONS_KERNELS[name])
    assert isinstance(rewritten, wp.Kernel) and rewritten.kernel is FUNCTIONS_KERNELS[name]
    truth = finite_difference_jacobians(name)
    inputs = kernel_inputs(name, FUNCTIONS[name][1]())
    out = wp.zeros(N, dtype=wp.float64, device="cpu", requires_grad=True)
    before = memory([*inputs, out])
    jacobians = wp.autograd.jacobian(rewritten, dim=N, inputs=inputs, outputs=[out])
    assert set(jacobians) == {(as_kernel_input(name, k), 0) for k in truth}
    for k, expected in truth.items():
        actual = jacobians[as_kernel_input(name, k), 0].numpy()
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-7, err_msg=f"input {k}")
    for array, values in zip([*inputs, out], before, strict=True):
        np.testing.assert_array_equal(array.numpy(), values)


def test_jacobian_fd_and_gradcheck_take_a_rewritten_kernel_as_a_kernel():
    """``jacobian_fd`` of a kernel launches it without a tape (the original runs) and keeps its outputs apart, but
    not its inputs: a kernel whose atomics leave their targets as they found them gives the same result each
    time, as plain Warp's would."""
    rewritten = wp_rewrite(below_peak)
    truth = finite_difference_jacobians("exact_max_kept")
    make = FUNCTIONS["exact_max_kept"][1]
    out = wp.zeros(N, dtype=wp.float64, device="cpu", requires_grad=True)
    differences = wp.autograd.jacobian_fd(rewritten, dim=N, inputs=make(), outputs=[out], eps=1e-6)
    for k, expected in truth.items():
        np.testing.assert_allclose(differences[k, 0].numpy(), expected, rtol=1e-4, atol=1e-6)
    assert wp.autograd.gradcheck(
        rewritten,
        dim=N,
        inputs=make(),
        outputs=[out],
        eps=1e-6,
        atol=1e-6,
        rtol=1e-4,
        raise_exception=False,
        show_summary=False,
    )


def test_a_rewritten_kernel_has_the_generated_module_and_options():
    rewritten = wp_rewrite(compact)
    assert rewritten.module is rewritten.record_kernel.module is rewritten.replay_kernel.module
    assert rewritten.module.name.startswith("wp_rewrite.") and rewritten.key == rewritten.replay_kernel.key
    assert rewritten.options is rewritten.replay_kernel.options  # the backward's: it has one
    assert rewritten.adj is compact.adj  # the parameters Warp's tools name
    wp.load_module(rewritten.module, device="cpu")
    wp.load_module(rewritten, device="cpu")  # its generated module
    assert rewritten.module.execs  # compiled and loaded
    with pytest.raises(TypeError, match="Argument must be a module"):
        wp.load_module(compact)  # a plain kernel is no module to Warp


def test_load_module_without_a_module_still_loads_the_callers():
    """Warp's default is the module that called it: the hook asks one frame further up."""
    wp.load_module(device="cpu")  # this test module, which holds kernels
    assert compact.module.execs


@pytest.mark.parametrize("name", ["compaction", "exact_add"])
def test_tape_visualize_draws_rewritten_launches(name, tmp_path):
    function, make = FUNCTIONS[name]
    tape = wp.Tape()
    with tape:
        function(*make())
    drawing = tmp_path / "tape.dot"
    tape.visualize(str(drawing))
    text = drawing.read_text()
    assert f"<b>{wp_rewrite(FUNCTIONS_KERNELS[name]).replay_kernel.key}</b>" in text and ">x</font>" in text
