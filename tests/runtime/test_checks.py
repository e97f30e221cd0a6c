"""What the device checks, and when the host hears of it.

- The exact backward checks every operation: the tickets of each address form 0..m-1, each operation's result is
  what the next one returned, the last one's is the value the target held after the launch, and the replay kernel
  recomputed every operand the forward used. Each failure names what was inconsistent, and it is found before
  any gradient of the launch is written (or, for the replay's recomputation, says which were).
- A launch and its backward make no host round trip when their sizes are known at launch: the device's checks go
  into a status array that the host reads when it has arrived (at once on the CPU), or at ``warp_rewrite.check()``;
  a refused launch leaves every gradient alone meanwhile. Inside a CUDA graph capture, what needs the host raises
  at once, naming the option that avoids it.
"""

import numpy as np
import pytest
import warp as wp

from tests.support import harness
from tests.support.harness import f64, i32
from warp_rewrite import RewriteError, check, launch, wp_rewrite
from warp_rewrite.runtime import checks, exact
from warp_rewrite.runtime import launch as runtime_launch

N = 6
X = np.linspace(0.4, 1.4, N)


@wp.kernel
def running_sum(x: wp.array[wp.float64], acc: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    prev = wp.atomic_add(acc, tid % 2, x[tid] * x[tid])
    out[tid] = prev * x[tid]


@wp.kernel
def running_max(x: wp.array[wp.float64], acc: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    prev = wp.atomic_max(acc, tid % 2, wp.float64(3.0) * x[tid])
    out[tid] = prev * x[tid]


@wp.kernel
def operand_reads_an_alias(
    x: wp.array[wp.float64], acc: wp.array[wp.float64], peek: wp.array[wp.float64], out: wp.array[wp.float64]
):
    """``peek`` is ``acc`` itself: the forward reads its value before the launch, the replay its final one."""
    tid = wp.tid()
    prev = wp.atomic_add(acc, 0, x[tid] + wp.float64(0.1) * peek[0])
    out[tid] = prev * x[tid]


@wp.kernel
def operand_reads_the_target(x: wp.array[wp.float64], acc: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    prev = wp.atomic_add(acc, 0, x[tid] + wp.float64(0.1) * acc[0])
    out[tid] = prev * x[tid]


@wp.kernel
def double(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    i = wp.tid()
    y[i] = x[i] * wp.float64(2.0)


@wp.kernel
def compact(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    if x[tid] > wp.float64(0.7):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid]


@wp.kernel
def emit(x: wp.array[wp.float64], n: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    for k in range(n[tid]):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * wp.float64(k + 1)


@wp.kernel
def self_feeding(x: wp.array[wp.float64], acc: wp.array[wp.float64], out: wp.array[wp.float64]):
    """A return feeds the operand of the next atomic on the same target: the chain is as long as the data."""
    tid = wp.tid()
    first = wp.atomic_add(acc, 0, x[tid])
    second = wp.atomic_add(acc, 0, first * x[tid] * wp.float64(0.1))
    out[tid] = second


def taped_program(kernel, acc):
    """y = 2 x (a plain launch), then the rewritten kernel on y: a tape with a gradient to withhold upstream."""
    x, y, out = f64(X, True), f64(np.zeros(N), True), f64(np.zeros(N), True)
    acc = f64(acc, True)
    tape = wp.Tape()
    with tape:
        wp.launch(double, N, inputs=[x, y], device="cpu")
        launch(wp_rewrite(kernel), N, inputs=[y, acc, out], device="cpu")
    return tape, (x, y, acc, out)


def location_of(line_text: str, construct: str) -> str:
    with open(__file__) as source:
        line, text = next((n, text) for n, text in enumerate(source, 1) if line_text in text)
    return f"{__file__}:{line}:{text.index(construct) + 1}"


def exact_step(tape) -> exact.ExactBackward:
    return next(entry.__self__ for entry in tape.launches if callable(entry))


def backward(tape, out):
    tape.backward(grads={out: wp.array(np.ones(N), dtype=wp.float64, device="cpu")})


def no_gradient_written(arrays):
    return all(not np.any(array.grad.numpy()) for array in arrays)


# --- every operation is checked, and a refusal comes before any gradient ------------------------------------


def corrupt_a_returned_value(target: exact.ExactTarget) -> None:
    returned = target.returned.numpy()
    returned[3] += 1.0  # thread 3's operation on address 1 (the second there): its predecessor's result differs


def corrupt_a_ticket(target: exact.ExactTarget) -> None:
    target.order.numpy()[2, 0] = target.order.numpy()[0, 0]  # two operations on address 0 with one ticket


def drop_a_ticket(target: exact.ExactTarget) -> None:
    target.order.numpy()[2, 0] = -1  # thread 2's operation on address 0 (the second there) looks as if it never ran


def corrupt_the_final_value(target: exact.ExactTarget) -> None:
    words = target.shadow.words.numpy()
    words[1, 0] = np.float64(123.0).view(np.uint64)  # what address 1 held after the launch


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (corrupt_a_returned_value, r"the value an operation of wp\.atomic_add\(\) on 'acc' returned does not follow"),
        (corrupt_a_ticket, r"the tickets of the float atomics on 'acc' are not a permutation"),
        (drop_a_ticket, r"an operation on 'acc' took a ticket but left no record"),
        (corrupt_the_final_value, r"the last operation on an address of 'acc' .* does not give the value the target"),
    ],
    ids=["returned value", "ticket", "missing record", "final value"],
)
def test_an_inconsistent_order_is_refused_before_any_gradient(corrupt, message):
    tape, (x, y, acc, out) = taped_program(running_sum, [0.25, 0.5])
    (target,) = exact_step(tape).targets
    corrupt(target)
    with pytest.raises(RewriteError, match=message) as refused:
        backward(tape, out)
    assert "none of this launch's gradients were written" in str(refused.value)
    assert refused.value.location == location_of("prev = wp.atomic_add(acc, tid % 2", "wp.atomic_add")
    assert no_gradient_written([x, y, acc])


def test_the_last_operation_on_each_address_is_checked_for_max_too():
    tape, (x, y, acc, out) = taped_program(running_max, [1.0, 2.5])
    (target,) = exact_step(tape).targets
    corrupt_the_final_value(target)
    with pytest.raises(RewriteError, match="the last operation on an address of 'acc'"):
        backward(tape, out)
    assert no_gradient_written([x, y, acc])


def test_an_alias_of_the_target_is_refused_at_launch():
    x, acc, out = f64(X, True), f64([0.25], True), f64(np.zeros(N), True)
    with wp.Tape(), pytest.raises(RewriteError, match="arguments 'acc' and 'peek' share memory"):
        launch(wp_rewrite(operand_reads_an_alias), N, inputs=[x, acc, acc, out], device="cpu")


def test_a_replay_that_recomputes_an_operand_differently_is_refused_and_says_which_gradients_it_wrote(monkeypatch):
    """The operand reads ``acc`` through another parameter: the forward sees the value before the launch (the
    atomics work on the shadow), the replay the final one. The launch refuses such aliases first; the backward's
    check is the second line, tested here with the first one out of the way. The message names the cause."""
    monkeypatch.setattr(runtime_launch, "check_aliasing", lambda spec, args: None)
    x, acc, out = f64(X, True), f64([0.25], True), f64(np.zeros(N), True)
    tape = wp.Tape()
    with tape:
        launch(wp_rewrite(operand_reads_an_alias), N, inputs=[x, acc, acc, out], device="cpu")
    with pytest.raises(RewriteError, match=r"recomputed the operand of wp.atomic_add\(\) on 'acc' differently") as err:
        backward(tape, out)
    assert "had added its local terms to the gradients" in str(err.value)


def test_a_plain_read_of_the_target_is_refused_when_rewriting():
    with pytest.raises(RewriteError, match="a plain read of 'acc', whose float atomic returns need exact gradients"):
        wp_rewrite(operand_reads_the_target)


# --- no host round trip when sizes are known at launch -------------------------------------------------------


@pytest.fixture
def round_trips(monkeypatch):
    """Counts what would make the host wait for a GPU: reading an array back, or synchronizing."""
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
    return counted


def launch_and_backward(kernel, args, **options):
    rewritten = wp_rewrite(kernel, **options)
    out = args[-1]
    tape = wp.Tape()
    with tape:
        launch(rewritten, N, inputs=args, device="cpu")
    backward(tape, out)


PROGRAMS = {  # kernel, arguments, wp_rewrite's options, the counters to zero before the arguments are used again
    "int compaction": (compact, lambda: [f64(X, True), i32([0]), f64(np.zeros(N), True)], {}, [1]),
    "loop with max_records": (
        emit,
        lambda: [f64(X, True), i32([1, 2, 0, 1, 2, 1]), i32([0]), f64(np.zeros(2 * N), True)],
        {"max_records": 2},
        [2],
    ),
    "exact float add": (running_sum, lambda: [f64(X, True), f64([0.25, 0.5], True), f64(np.zeros(N), True)], {}, []),
    "exact float max": (running_max, lambda: [f64(X, True), f64([1.0, 2.5], True), f64(np.zeros(N), True)], {}, []),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_launch_and_backward_make_no_host_round_trip(name, round_trips):
    kernel, make, options, counters = PROGRAMS[name]
    launch_and_backward(kernel, make(), **options)  # compiles everything first
    del round_trips[:]
    launch_and_backward(kernel, make(), **options)  # new arrays: the general launch path
    args = make()
    for _ in range(2):  # the same arrays again: a prepared launch on the CPU
        for index in counters:
            args[index].zero_()
        launch_and_backward(kernel, args, **options)
    assert round_trips == []


def test_a_chain_feeding_back_into_its_target_reads_the_device_once_per_link(round_trips):
    """How many adjoint launches its backward needs depends on the data: the host reads whether any is left."""
    make = lambda: [f64(X, True), f64([0.2], True), f64(np.zeros(N), True)]  # noqa: E731
    launch_and_backward(self_feeding, make())
    del round_trips[:]
    launch_and_backward(self_feeding, make())
    assert 1 < len(round_trips) <= 2 * N + 1 and set(round_trips) == {"numpy"}


# --- what the host hears, and when -----------------------------------------------------------------------------


@pytest.fixture
def device_behind(monkeypatch):
    """As on a GPU that has not got there yet: no status arrives until ``check()`` waits for it."""
    monkeypatch.setattr(checks.PendingCheck, "arrived", lambda self: False)
    yield
    checks.device_checks.pending.clear()


def test_a_refusal_found_later_leaves_the_launchs_gradients_alone_until_check_raises(device_behind):
    tape, (x, y, acc, out) = taped_program(running_sum, [0.25, 0.5])
    (target,) = exact_step(tape).targets
    corrupt_a_returned_value(target)
    backward(tape, out)  # nothing arrives: nothing raises
    assert no_gradient_written([x, y, acc])
    with pytest.raises(RewriteError, match="does not follow from the operation before it"):
        check()
    check()  # reported once


def test_an_overflowing_loop_found_later_is_reported_by_check(device_behind):
    x, n, count, out = f64(X, True), i32([1, 3, 0, 1, 2, 1]), i32([0]), f64(np.zeros(3 * N), True)
    tape = wp.Tape()
    with tape:
        launch(wp_rewrite(emit, max_records=2), N, inputs=[x, n, count, out], device="cpu")
    tape.backward(grads={out: wp.array(np.ones(3 * N), dtype=wp.float64, device="cpu")})
    assert not np.any(x.grad.numpy())  # the replay kernel did nothing: its records were incomplete
    with pytest.raises(RewriteError, match=r"this loop ran 3 times in one execution but its records had room for 2"):
        check()


def test_on_the_cpu_an_overflowing_loop_raises_right_after_its_launch():
    x, n, count, out = f64(X, True), i32([1, 3, 0, 1, 2, 1]), i32([0]), f64(np.zeros(3 * N), True)
    with pytest.raises(RewriteError, match="Pass max_records=3 or more"), wp.Tape():
        launch(wp_rewrite(emit, max_records=2), N, inputs=[x, n, count, out], device="cpu")


@pytest.fixture
def capturing(monkeypatch):
    """As inside ``wp.ScopedCapture`` (on the CPU only what the launch decides before running anything)."""
    monkeypatch.setattr(wp._src.context.Device, "is_capturing", property(lambda self: True))


def test_in_a_capture_a_loop_of_unknown_length_asks_for_max_records(capturing):
    args = [f64(X, True), i32([1, 2, 0, 1, 2, 1]), i32([0]), f64(np.zeros(2 * N), True)]
    with pytest.raises(RewriteError, match=r"a CUDA graph capture cannot wait for\. Pass max_records=N"), wp.Tape():
        launch(wp_rewrite(emit), N, inputs=args, device="cpu")
    assert args[2].numpy()[0] == 0  # refused before anything ran


def test_in_a_capture_a_chain_feeding_back_into_its_target_asks_for_detach_returns(capturing):
    args = [f64(X, True), f64([0.2], True), f64(np.zeros(N), True)]
    with (
        pytest.raises(RewriteError, match="Rewrite with detach_returns=True, or launch this kernel outside"),
        wp.Tape(),
    ):
        launch(wp_rewrite(self_feeding), N, inputs=args, device="cpu")


def test_chains_across_targets_have_a_bound_known_when_rewriting():
    from tests.support.patterns import chained

    assert wp_rewrite(chained).pair.spec.exact_rounds == 2  # first's returns feed second's operands
    assert wp_rewrite(running_sum).pair.spec.exact_rounds == 1
    assert wp_rewrite(self_feeding).pair.spec.exact_rounds is None


@wp.kernel
def compounding(x: wp.array[wp.float64], acc: wp.array[wp.float64], out: wp.array[wp.float64]):
    """Each trip adds a step, then the balance before it times x: acc grows by (1 + x) per trip, thread by thread."""
    tid = wp.tid()
    for trip in range(wp.static(8)):
        before = wp.atomic_add(acc, 0, wp.float64(0.3) * wp.float64(trip + 1))
        grown = wp.atomic_add(acc, 0, before * x[tid])
        out[tid] += grown


def test_a_chain_whose_gradient_cancels_beyond_float64_is_refused():
    """Through its own target the chain's gradient is a sum over chain lengths; with factors 1 + x near 0 those terms
    dwarf their sum (a 2e9 ratio here) and float64 cannot give it (the gradient of x[2] came out 3e-6 wrong; in fuzz
    seed 7007's kernels 2934 and 3381, by 1e10): the backward refuses. With factors away from 0 every term has one
    sign, and the gradient is exact."""
    steep = np.array([1.06, 0.53, -0.71, -1.24, -0.62, -0.79, 0.64, -0.94])
    args = [f64(steep, True), f64([0.367], True), f64(np.zeros(8), True)]
    with wp.Tape() as tape:
        launch(wp_rewrite(compounding), 8, inputs=args, device="cpu")
    with pytest.raises(RewriteError, match=r"cannot be computed to its type's precision.*detach_returns=True"):
        tape.backward(grads={args[2]: f64(np.ones(8))})
    mild = np.array([0.6, 0.3, 0.45, 0.2, 0.5, 0.35, 0.25, 0.4])
    make = lambda: [f64(mild, True), f64([0.367], True), f64(np.zeros(8), True)]  # noqa: E731
    harness.check(harness.Case(compounding, 8, make, [2], [0, 1]))
