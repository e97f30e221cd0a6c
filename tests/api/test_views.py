"""Targets, records and outputs passed as non-contiguous views: gradients against finite
differences of the original kernel, which reads and writes the views through their strides."""

import numpy as np
import pytest
import warp as wp

from tests.support.harness import Case, check, f64, i32
from warp_rewrite import RewriteError

N = 6
X = np.linspace(0.4, 1.4, N)
IDX = [0, 1, 2, 0, 1, 2]
TABLE = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])


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
    before = wp.atomic_max(peak, idx[tid], wp.float64(3.0) * x[tid])
    out[tid] = before * x[tid]


@wp.kernel
def running_sum_2d(x: wp.array[wp.float64], grid: wp.array2d[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    prev = wp.atomic_add(grid, tid % 2, tid % 3, x[tid] * x[tid])
    out[tid] = prev * wp.sin(x[tid])


@wp.kernel
def running_sum_vec(v: wp.array[wp.vec3d], acc: wp.array[wp.vec3d], out: wp.array[wp.float64]):
    tid = wp.tid()
    before = wp.atomic_add(acc, tid % 2, v[tid] * wp.float64(0.5))
    out[tid] = wp.dot(before, v[tid])


@wp.kernel
def running_sum_f32(x: wp.array[wp.float32], acc: wp.array[wp.float32], out: wp.array[wp.float32]):
    tid = wp.tid()
    out[tid] = wp.atomic_add(acc, tid % 2, x[tid]) * x[tid]


@wp.kernel
def compact(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    if x[tid] > wp.float64(0.9):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid] + wp.sin(x[tid])


@wp.kernel
def emit_loop(x: wp.array[wp.float64], n: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    for k in range(n[tid]):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * wp.float64(k + 1)


def _table_column(kernel):
    """The kernel gets column 0 of a 3x2 table (a stride of two elements), the table's gradient is checked whole:
    column 1, which the kernel never touches, must get none."""

    def program(args, launcher):
        launcher(kernel, N, [args[0], args[1], args[2][:, 0], args[3]])

    return program


@pytest.mark.parametrize("kernel", [running_sum, running_max], ids=["add", "max"])
def test_float_target_is_a_column_of_a_table(kernel):
    make = lambda: [f64(X, True), i32(IDX), f64(TABLE, True), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(None, N, make, [2, 3], [0, 2], program=_table_column(kernel)))


def test_float_target_is_a_column_of_a_table_that_needs_no_gradient():
    make = lambda: [f64(X, True), i32(IDX), f64(TABLE), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(None, N, make, [3], [0], program=_table_column(running_sum)))


def test_float_target_is_every_other_element():
    def program(args, launcher):
        launcher(running_sum, N, [args[0], args[1], args[2][::2], args[3]])

    make = lambda: [f64(X, True), i32(IDX), f64([1.0, 9.0, 2.0, 9.0, 3.0, 9.0], True), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(None, N, make, [2, 3], [0, 2], program=program))


def test_float_target_is_a_transposed_2d_view():
    def program(args, launcher):
        launcher(running_sum_2d, N, [args[0], args[1].transpose(), args[2]])  # (3, 2) seen as (2, 3)

    make = lambda: [f64(X, True), f64(np.arange(6.0).reshape(3, 2) * 0.1, True), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(None, N, make, [1, 2], [0, 1], program=program))


def test_vector_target_is_a_strided_view():
    def program(args, launcher):
        launcher(running_sum_vec, N, [args[0], args[1][1::2], args[2]])

    v = np.linspace(-1.0, 1.2, 3 * N).reshape(N, 3)
    acc = np.arange(12.0).reshape(4, 3) * 0.1

    def make():
        return [
            wp.array(v, dtype=wp.vec3d, requires_grad=True, device="cpu"),
            wp.array(acc, dtype=wp.vec3d, requires_grad=True, device="cpu"),
            f64(np.zeros(N), True),
        ]

    check(Case(None, N, make, [1, 2], [0, 1], program=program))


def test_float32_target_is_a_column():
    """float32 targets live in 64-bit shadow words packing value and ticket; the column is read and written back
    through its stride."""

    def program(args, launcher):
        launcher(running_sum_f32, N, [args[0], args[1][:, 1], args[2]])

    x = np.linspace(0.5, 1.0, N).astype(np.float32)
    table = np.array([[5.0, 0.25], [6.0, 0.5]], dtype=np.float32)

    def make():
        return [
            wp.array(x, dtype=wp.float32, requires_grad=True, device="cpu"),
            wp.array(table, dtype=wp.float32, requires_grad=True, device="cpu"),
            wp.zeros(N, dtype=wp.float32, requires_grad=True, device="cpu"),
        ]

    args, tape = _taped(program, make)
    # out_k = (acc0 + prefix of x) * x_k: the column's gradient is the sum of x over its ops, the other column's 0
    tape.backward(grads={args[2]: wp.ones(N, dtype=wp.float32, device="cpu")})
    expected = np.zeros((2, 2))
    expected[0, 1], expected[1, 1] = x[0::2].sum(), x[1::2].sum()
    np.testing.assert_allclose(args[1].grad.numpy(), expected, rtol=1e-6)


def _taped(program, make):
    from tests.support.harness import rewritten_launcher

    args = make()
    tape = wp.Tape()
    with tape:
        program(args, rewritten_launcher())
    return args, tape


def test_int_counter_is_a_column():
    def program(args, launcher):
        launcher(compact, N, [args[0], args[1][:, 1], args[2]])

    check(
        Case(None, N, lambda: [f64(X, True), i32([[7, 0], [7, 0]]), f64(np.zeros(N), True)], [2], [0], program=program)
    )


def test_compaction_output_is_every_other_element():
    def program(args, launcher):
        launcher(compact, N, [args[0], args[1], args[2][::2]])

    check(Case(None, N, lambda: [f64(X, True), i32([0]), f64(np.zeros(2 * N), True)], [2], [0], program=program))


@pytest.mark.parametrize("max_records", [None, 2], ids=["counted", "max_records"])
def test_loop_with_counter_and_output_views(max_records):
    def program(args, launcher):
        launcher(emit_loop, N, [args[0], args[1], args[2][:, 1], args[3][::2]])

    def make():
        return [f64(X, True), i32([1, 2, 0, 1, 2, 1]), i32([[5, 0], [5, 0]]), f64(np.zeros(2 * 7), True)]

    check(Case(None, N, make, [3], [0], program=program, max_records=max_records))


@wp.kernel
def running_sum_indexed(x: wp.array[wp.float64], acc: wp.indexedarray[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[tid] = wp.atomic_add(acc, tid % 2, x[tid]) * x[tid]


def test_an_indexed_array_target_is_refused_where_its_returns_need_exact_gradients():
    """The exact order is kept in a shadow of a wp.array; an indexedarray target is fine where the returns are
    constants (nothing they are made of requires grad)."""
    from tests.support.harness import rewritten_launcher

    def args(x_requires_grad):
        acc = f64([0.5, 1.0, 2.0])
        indexed = wp.indexedarray(acc, [wp.array([2, 0], dtype=wp.int32, device="cpu")])
        return [f64(X, x_requires_grad), indexed, f64(np.zeros(N), True)]

    refusal = r"the target 'acc' .* is a indexedarray; .* shadow of a wp\.array"
    with pytest.raises(RewriteError, match=refusal), wp.Tape():
        rewritten_launcher()(running_sum_indexed, N, args(True))
    constant = args(False)
    with wp.Tape():
        rewritten_launcher()(running_sum_indexed, N, constant)
    original = args(False)
    wp.launch(running_sum_indexed, N, inputs=original, device="cpu")
    np.testing.assert_array_equal(constant[2].numpy(), original[2].numpy())
