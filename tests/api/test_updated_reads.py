"""A kernel that reads an array its launch updates (an atomic, ``+=``), or stores into where the value read is used
other than linearly, with no other hazard
(tests/support/updated_reads.py, WR009): the API and the command line rewrite it (``Fence.reads_written``), and its
gradients match finite differences of the original's forward through both where no gradient flows through the value
read (plain Warp's do not); where one does, a launch runs as plain Warp, with a ``RewriteWarning``, through both."""

import warnings

import numpy as np
import pytest
import warp as wp

from tests.support import updated_reads
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import Case, f64, finite_difference_gradients, i32, plain_warp_gradients
from warp_rewrite import RewriteWarning, wp_rewrite

N = 5
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6])
CELLS = [0, 1, 0, 2, 1]  # cells 0 and 1 are each reached by two threads

emitted = emitted_fixture(updated_reads)
PATTERNS = {
    "crowding": Pattern(
        lambda: [i32(CELLS), f64(X, True), i32(np.zeros(3)), f64(np.zeros(N), True)], loss=[3], wrt=[1]
    ),
    "shade_by_coverage": Pattern(
        lambda: [i32(CELLS), f64([0.5, 1.5, 2.0, 0.75, 1.25]), f64(X, True), f64(np.zeros(3)), f64(np.zeros(N), True)],
        loss=[4],
        wrt=[2],
    ),
    "histogram_in_helper": Pattern(
        lambda: [i32(CELLS), f64(X, True), i32(np.zeros(3)), f64(np.zeros(N), True)], loss=[3], wrt=[1]
    ),
    "reads_what_it_stored": Pattern(lambda: [f64(X, True), f64(np.zeros(N), True)], loss=[1], wrt=[0]),
    "sine_squared": Pattern(lambda: [f64(X, True), f64(np.zeros(N), True)], loss=[1], wrt=[0]),
}
test_through_the_api, test_through_the_command_line = end_to_end_tests(updated_reads, N, PATTERNS)


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_plain_warp_replays_the_read_against_the_final_sum(name):
    pattern = PATTERNS[name]
    case = Case(getattr(updated_reads, name), N, pattern.make, pattern.loss, pattern.wrt)
    plain, expected = plain_warp_gradients(case), finite_difference_gradients(case)
    assert any(not np.allclose(plain[i], expected[i], rtol=1e-5) for i in pattern.wrt)


def _read_back_arguments():
    return [i32([0, 0]), f64([1.0, 2.0], True), f64([0.0]), f64(np.zeros(2), True)]


def _launch_on_a_tape(launch) -> tuple[list[wp.array], list[warnings.WarningMessage]]:
    args = _read_back_arguments()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tape = wp.Tape()
        with tape:
            launch(args)
        tape.backward(grads={args[3]: wp.ones(2, dtype=wp.float64)})
    # (a module the command line wrote warns with its runtime copy's class: wp_rewrite_runtime.RewriteWarning)
    return args, [w for w in caught if w.category.__name__ == RewriteWarning.__name__]


def test_a_gradient_through_the_value_read_runs_plain_warp_with_a_warning_through_both(emitted):
    """The sum read back is squared, and its terms require grad: no gradient through memory the launch wrote is
    supported, so the launch is refused before anything runs; no atomic's return is used, so it runs as plain Warp
    (out [1, 9], c.grad [6, 12] where [8, 6] is right), and says so."""
    plain, _ = _launch_on_a_tape(lambda args: wp.launch(updated_reads.read_back, 2, inputs=args, device="cpu"))
    rewritten = wp_rewrite(updated_reads.read_back)
    for launch in (
        lambda args: wp.launch(rewritten, 2, inputs=args, device="cpu"),
        lambda args: emitted.launch_read_back(2, inputs=args, device="cpu"),
    ):
        args, said = _launch_on_a_tape(launch)
        assert len(said) == 1 and "reads 'image', which the launch also writes" in str(said[0].message)
        assert np.array_equal(args[3].numpy(), plain[3].numpy()) and np.array_equal(
            args[1].grad.numpy(), plain[1].grad.numpy()
        )


def test_a_read_through_a_copied_index_runs_plain_warp_with_a_warning_through_both(emitted):
    """``j = tid``: the read of ``out[j]`` is of the element the next store overwrites (an outside trial's, once
    silent). Forwarding knows the thread's index by its own name only, so the read would come from a record, which
    passes no gradient into ``wp.sin``: with ``out`` requiring grad, the launch runs as plain Warp, and says so."""
    rewritten = wp_rewrite(updated_reads.through_a_copied_index)
    for launch in (
        lambda args: wp.launch(rewritten, N, inputs=args, device="cpu"),
        lambda args: emitted.launch_through_a_copied_index(N, inputs=args, device="cpu"),
    ):
        args = [f64(X, True), f64(np.zeros(N), True)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with wp.Tape():
                launch(args)
        said = [w for w in caught if w.category.__name__ == RewriteWarning.__name__]
        assert len(said) == 1 and "reads 'out', which the launch also writes" in str(said[0].message)
