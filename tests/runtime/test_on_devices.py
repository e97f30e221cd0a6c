"""Rewritten launches on every device the suite is given (``WP_REWRITE_DEVICES=cpu,cuda:0``; default: the CPU).

On a GPU threads race: the exact gradient is the one of the order the atomics actually took, which each
operation's ticket records. These tests compute it from the tickets with NumPy and compare, under real
contention (every thread on one address), and run what only a GPU has: streams and CUDA graph capture.
``bench/gpu_check.sh`` runs them on ``cuda:0``.
"""

import numpy as np
import pytest
import warp as wp

from warp_rewrite import check, launch, wp_rewrite
from warp_rewrite.runtime import checks, exact, exact_atomics

N = 4096


@wp.kernel
def scatter_sum(
    x: wp.array[wp.float64], cells: wp.array[wp.int32], acc: wp.array[wp.float64], out: wp.array[wp.float64]
):
    tid = wp.tid()
    v = x[tid]
    before = wp.atomic_add(acc, cells[tid], v * v)
    out[tid] = before * v


@wp.kernel
def scatter_sum_f32(x: wp.array[float], cells: wp.array[wp.int32], acc: wp.array[float], out: wp.array[float]):
    tid = wp.tid()
    v = x[tid]
    before = wp.atomic_add(acc, cells[tid], v * v)
    out[tid] = before * v


@wp.kernel
def compact(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    if x[tid] > wp.float64(0.5):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid]


def _inputs(device, dtype, cells: int, n: int = N):
    rng = np.random.default_rng(11)
    x = wp.array(rng.uniform(0.2, 1.0, n), dtype=dtype, device=device, requires_grad=True)
    where = wp.array(rng.integers(0, cells, n).astype(np.int32), dtype=wp.int32, device=device)
    acc = wp.array(rng.uniform(-1.0, 1.0, cells), dtype=dtype, device=device, requires_grad=True)
    out = wp.zeros(n, dtype=dtype, device=device, requires_grad=True)
    return [x, where, acc, out]


def _gradients_from_tickets(args, initial, tickets, seed):
    """The exact gradient of sum(seed * out) for the order the tickets record: per address, the running sum
    from the target's ``initial`` values."""
    x, cells, acc = args[0].numpy().astype(np.float64), args[1].numpy(), initial.astype(np.float64)
    x_grad, acc_grad = np.zeros_like(x), np.zeros_like(acc)
    for cell in np.unique(cells):
        ops = np.flatnonzero(cells == cell)
        ops = ops[np.argsort(tickets[ops])]  # execution order on this address
        before = acc[cell] + np.concatenate([[0.0], np.cumsum(x[ops] ** 2)[:-1]])
        later = seed[ops] * x[ops]
        after = np.concatenate([np.cumsum(later[::-1])[::-1][1:], [0.0]])
        x_grad[ops] = seed[ops] * before + 2 * x[ops] * after
        acc_grad[int(cell)] = later.sum()
    return x_grad, acc_grad


@pytest.mark.parametrize("cells", [1, 37], ids=["one address", "37 addresses"])
@pytest.mark.parametrize("kernel", [scatter_sum, scatter_sum_f32], ids=["float64", "float32"])
def test_exact_gradients_follow_the_order_the_atomics_took(device, kernel, cells):
    dtype = wp.float64 if kernel is scatter_sum else wp.float32
    args = _inputs(device, dtype, cells)
    initial = args[2].numpy().copy()
    seed = np.random.default_rng(5).uniform(0.5, 1.5, N)
    tape = wp.Tape()
    with tape:
        launch(wp_rewrite(kernel), N, inputs=args, device=device)
    tape.backward(grads={args[3]: wp.array(seed, dtype=dtype, device=device)})
    check()
    (target,) = next(entry.__self__ for entry in tape.launches if callable(entry)).targets
    tickets = target.order.numpy()[:, 0]
    x_grad, acc_grad = _gradients_from_tickets(args, initial, tickets, seed)
    tolerance = {"rtol": 1e-9} if dtype is wp.float64 else {"rtol": 2e-4, "atol": 1e-3}
    np.testing.assert_allclose(args[0].grad.numpy(), x_grad, **tolerance)
    np.testing.assert_allclose(args[2].grad.numpy(), acc_grad, **tolerance)


def _cuda_only(device):
    if not wp.get_device(device).is_cuda:
        pytest.skip("CUDA only")


def test_a_launch_on_a_stream_allocates_fills_and_runs_there(device):
    _cuda_only(device)
    stream = wp.Stream(device)
    reference, on_stream = _inputs(device, wp.float64, 1), _inputs(device, wp.float64, 1)
    for args, options in ((reference, {}), (on_stream, {"stream": stream})):
        tape = wp.Tape()
        with tape:
            launch(wp_rewrite(scatter_sum), N, inputs=args, device=device, **options)
        with wp.ScopedStream(options.get("stream", wp.get_device(device).stream)):
            tape.backward(grads={args[3]: wp.ones(N, dtype=wp.float64, device=device)})
    wp.synchronize()
    check()
    # The atomics' order differs between the launches: compare what does not depend on it.
    np.testing.assert_allclose(on_stream[2].numpy(), reference[2].numpy(), rtol=1e-9)
    np.testing.assert_allclose(on_stream[2].grad.numpy(), reference[2].grad.numpy(), rtol=1e-9)


def test_forward_and_backward_captured_in_a_graph_give_the_uncaptured_gradients(device):
    """Everything a rewritten launch and its backward do is captured (max_records bounds no loop here; the
    compaction's slots and the exact order's checks stay on the device); replaying the graph gives the
    gradients of an uncaptured run. One address per element, so that the order cannot matter."""
    _cuda_only(device)

    def program(args):
        tape = wp.Tape()
        with tape:
            launch(wp_rewrite(scatter_sum), N, inputs=args, device=device)
            launch(wp_rewrite(compact), N, inputs=[args[0], count, compacted], device=device)
        tape.backward(grads={args[3]: ones, compacted: ones})

    ones = wp.ones(N, dtype=wp.float64, device=device)
    count, compacted = (
        wp.zeros(1, dtype=wp.int32, device=device),
        wp.zeros(N, dtype=wp.float64, device=device, requires_grad=True),
    )
    uncaptured = _inputs(device, wp.float64, N)
    uncaptured[1].assign(np.arange(N, dtype=np.int32))
    program(uncaptured)
    expected = uncaptured[0].grad.numpy().copy()

    captured = _inputs(device, wp.float64, N)
    captured[1].assign(np.arange(N, dtype=np.int32))
    count.zero_()
    compacted.zero_()
    compacted.grad.zero_()
    wp.synchronize()
    with wp.ScopedCapture(device) as capture:
        program(captured)
    wp.capture_launch(capture.graph)
    wp.synchronize()
    check()
    np.testing.assert_allclose(captured[0].grad.numpy(), expected, rtol=1e-9)


def test_no_host_round_trip_on_the_device(device, monkeypatch):
    counted = []
    for owner, name in [
        (wp.array, "numpy"),
        (wp.array, "list"),
        (wp, "synchronize"),
        (wp, "synchronize_device"),
        (wp, "synchronize_stream"),
        (wp, "synchronize_event"),
    ]:
        original = getattr(owner, name)

        def counting(*args, __original=original, __name=name, **kwargs):
            counted.append(__name)
            return __original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)
    for repeat in range(2):
        args = _inputs(device, wp.float64, 37)
        tape = wp.Tape()
        with tape:
            launch(wp_rewrite(scatter_sum), N, inputs=args, device=device)
        tape.backward(grads={args[3]: wp.ones(N, dtype=wp.float64, device=device)})
        if repeat == 0:
            del counted[:]  # the first compiles
    assert counted == []
    assert isinstance(checks.device_checks, checks.DeviceChecks)


@wp.kernel
def contend_float64(
    path: int,
    values: wp.array[wp.float64],
    words: wp.array2d[wp.uint64],
    returned: wp.array[wp.float64],
    tickets: wp.array[wp.int32],
):
    """Every thread adds into one of two addresses through one float64 path: 0 the ticket lock (GPUs below
    sm_90), 1 the 128-bit compare-and-swap (sm_90 and later; what exact_add takes there and on the CPU)."""
    tid = wp.tid()
    if path == 0:
        old, ticket = exact_atomics._exact_pair_locked(0, words, tid % 2, 0, values[tid], values[tid])
    else:
        old, ticket = exact_atomics._exact_pair_cas(0, words, tid % 2, 0, values[tid], values[tid])
    returned[tid] = old
    tickets[tid] = ticket


@pytest.mark.parametrize("path", [0, 1], ids=["ticket lock", "128-bit cas"])
def test_float64_paths_keep_one_order_under_contention(device, path):
    """The chain holds bit for bit in ticket order: each add returned the sum of the ones before it."""
    device_ = wp.get_device(device)
    if path == 1 and device_.is_cuda and device_.arch < 90:
        pytest.skip("the 128-bit compare-and-swap needs sm_90")
    values = np.random.default_rng(2).uniform(0.1, 1.0, N)
    target = wp.array([0.25, -0.5], dtype=wp.float64, device=device)
    shadow = exact.Shadow(target, device_)
    shadow.load()
    returned, tickets = wp.empty(N, dtype=wp.float64, device=device), wp.empty(N, dtype=wp.int32, device=device)
    inputs = [path, wp.array(values, dtype=wp.float64, device=device), shadow.words, returned, tickets]
    wp.launch(contend_float64, N, inputs=inputs, device=device)
    shadow.store()
    returned, tickets, final = returned.numpy(), tickets.numpy(), target.numpy()
    for address, initial in enumerate([0.25, -0.5]):
        ops = np.flatnonzero(np.arange(N) % 2 == address)
        ops = ops[np.argsort(tickets[ops])]
        np.testing.assert_array_equal(np.sort(tickets[ops]), np.arange(len(ops)))
        running = initial
        for op in ops:
            assert returned[op] == running
            running = running + values[op]
        assert final[address] == running
