"""Drop-in adoption: existing ``wp.launch`` call sites keep working with rewritten kernels, ``wp_rewrite``
is a decorator, code one cannot edit can opt in, and the rewrite says what it did. Forward-only
launches of refused kernels run the original; bad input and backward-less modules are met as plain
Warp meets them; options are checked and threads share one rewrite."""

import io
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np
import pytest
import warp as wp

from tests.support.harness import (
    Case,
    arrays_of,
    assert_same_forward,
    check,
    f64,
    finite_difference_gradients,
    i32,
    launch_original,
)
from warp_rewrite import RewriteError, RewrittenKernel, launch, rewrite_launches, wp_rewrite

N = 6
X = np.array([0.7, 1.3, 1.9, 0.4, 0.6, 1.1])


def zeros(n: int) -> wp.array:
    return f64(np.zeros(n), True)


@wp.kernel
def compact(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * x[tid]


@wp_rewrite
@wp.kernel
def compact_decorated(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * wp.float64(3.0)


@wp_rewrite(max_records=3)
@wp.kernel
def emit_decorated(
    trips: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    count: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    for k in range(trips[tid]):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * wp.float64(k + 1)


def through_wp_launch(kernel):
    """A harness program launching ``kernel`` (the original for ground truth) with plain ``wp.launch``."""

    def program(args, launcher):
        launched = kernel.kernel if launcher is launch_original else kernel
        wp.launch(launched, N, inputs=args, device="cpu")

    return program


def test_wp_launch_takes_a_rewritten_kernel():
    make = lambda: [f64(X, True), i32([0]), zeros(N)]  # noqa: E731
    check(Case(None, N, make, [2], [0], program=through_wp_launch(wp_rewrite(compact))))


def test_wp_rewrite_as_a_decorator_with_and_without_options():
    assert isinstance(compact_decorated, RewrittenKernel) and isinstance(emit_decorated, RewrittenKernel)
    assert emit_decorated.max_records == 3 and emit_decorated.record_kernel.module.name.endswith(".max_records3")
    make = lambda: [f64(X, True), i32([0]), zeros(N)]  # noqa: E731
    check(Case(None, N, make, [2], [0], program=through_wp_launch(compact_decorated)))
    trips = [1, 2, 0, 3, 1, 2]
    make = lambda: [i32(trips), f64(X, True), i32([0]), zeros(sum(trips))]  # noqa: E731
    check(Case(None, N, make, [3], [1], program=through_wp_launch(emit_decorated)))


def test_launch_takes_every_keyword_of_wp_launch_in_its_order():
    """The same parameters as the installed Warp's wp.launch, positions included."""
    import inspect

    ours = list(inspect.signature(RewrittenKernel.launch).parameters)[1:]
    warps = list(inspect.signature(wp.launch).parameters)[1:]
    assert ours[: len(warps)] == warps


def test_an_adjoint_launch_adds_the_gradient_and_leaves_memory_as_it_was():
    """``adjoint=True`` with explicit adjoints (not the arrays' own gradients): out = x^2 compacted in thread order,
    so d(sum w*out)/dx = 2 x w; the counter and the output keep what they held."""
    x, count, out = f64(X, True), i32([0]), zeros(N)
    adj_x, adj_out = f64(np.zeros(N)), f64(np.linspace(0.5, 1.5, N))
    wp.launch(
        wp_rewrite(compact), N, inputs=[x, count, out], adj_inputs=[adj_x, None, adj_out], adjoint=True, device="cpu"
    )
    case = Case(compact, N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0], weights={2: np.linspace(0.5, 1.5, N)})
    np.testing.assert_allclose(adj_x.numpy(), finite_difference_gradients(case)[0], rtol=1e-5, atol=1e-7)
    assert count.numpy().tolist() == [0] and not out.numpy().any() and not x.grad.numpy().any()


def test_record_cmd_returns_a_launch_that_runs_both_phases():
    rewritten = wp_rewrite(compact)
    x, count, out = f64(X, True), i32([0]), zeros(N)
    command = wp.launch(rewritten, N, inputs=[x, count, out], record_cmd=True, device="cpu")
    assert count.numpy().tolist() == [0]  # nothing ran yet
    tape = wp.Tape()
    with tape:
        command.launch()
    tape.backward(grads={out: wp.ones(N, dtype=wp.float64, device="cpu")})
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * X)
    assert count.numpy().tolist() == [N]


def test_launch_is_wp_launch_for_plain_kernels():
    x, count, out = f64(X), i32([0]), zeros(N)
    launch(compact, N, inputs=[x, count, out], device="cpu")
    assert count.numpy().tolist() == [N]


@wp.kernel
def compact_unedited(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * x[tid] * x[tid]


@wp.kernel
def picks_its_counter(a: wp.array(dtype=wp.int32), b: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    counter = a
    if wp.tid() > 2:
        counter = b
    out[wp.atomic_add(counter, 0, 1)] = wp.float64(1.0)


def test_code_one_cannot_edit_can_opt_in():
    """With rewrite_launches(), wp.launch of a plain kernel consuming an atomic's return, on a tape, is rewritten;
    off again, plain Warp's (wrong) gradient comes back."""
    make = lambda: [f64(X, True), i32([0]), zeros(N)]  # noqa: E731

    def program(args, launcher):
        wp.launch(compact_unedited, N, inputs=args, device="cpu")

    rewrite_launches()
    try:
        check(Case(None, N, make, [2], [0], program=program))
        with pytest.raises(RewriteError, match="not a kernel argument or a struct field"), wp.Tape():
            wp.launch(picks_its_counter, N, inputs=[i32([0]), i32([0]), zeros(2 * N)], device="cpu")
    finally:
        rewrite_launches(False)
    x, count, out = make()
    tape = wp.Tape()
    with tape:
        wp.launch(compact_unedited, N, inputs=[x, count, out], device="cpu")
    assert tape.launches[0][0] is compact_unedited  # the original kernel, as before


def test_the_environment_switch_turns_it_on():
    """(The programs that import nothing of warp-rewrite, the launcher and ``enabled()``: test_switch.py.)"""
    code = "import warp_rewrite.api as api; print(api.hook.AUTO_REWRITE is not None)"
    result = subprocess.run(
        [sys.executable, "-c", code], env={"WP_REWRITE_LAUNCHES": "1", "PATH": ""}, capture_output=True, text=True
    )
    assert result.stdout.strip().endswith("True"), result.stderr


def test_a_short_repr_and_a_log_line_per_rewritten_kernel(monkeypatch):
    assert repr(wp_rewrite(compact)) == "<RewrittenKernel 'compact': 1 site, record+replay>"

    @wp.kernel
    def logged(count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float32)):
        out[wp.atomic_add(count, 0, 1)] = 1.0

    lines = io.StringIO()
    monkeypatch.setattr(wp.config, "log_level", wp.LOG_INFO)
    monkeypatch.setattr(sys, "stdout", lines)  # Warp's default logger writes info to stdout
    wp_rewrite(logged)
    assert (
        "warp-rewrite: kernel 'logged' rewritten (1 recorded value) into Warp module 'wp_rewrite." in lines.getvalue()
    )
    monkeypatch.setattr(wp.config, "log_level", wp.LOG_WARNING)
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stdout", quiet)
    wp_rewrite(logged, max_records=2)  # another variant: it would log, but the level says no
    assert quiet.getvalue() == ""


def test_the_docstring_has_an_example():
    assert "@wp_rewrite" in wp_rewrite.__doc__ and "wp.launch(compact" in wp_rewrite.__doc__


def test_importing_the_passes_loads_no_runtime_and_leaves_wp_launch_alone():
    """The package's ``__init__`` is lazy: a pass imported alone changes nothing in Warp."""
    code = (
        "import sys, warp; original = warp.launch; import warp_rewrite.passes.syntax; "
        "print(warp.launch is original, 'warp_rewrite.runtime' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "False"]


def values(args: list) -> dict[str, list]:
    return {path: array.tolist() for path, array in arrays_of(args).items()}


def test_refused_kernels_run_as_they_are_where_no_gradient_can_flow():
    """Under ``rewrite_launches()``, and for ``on_refusal="original"``: forward-only launches of a kernel the rewrite
    refuses run the original (no tape, or nothing handed to it requires grad); a launch a gradient could flow
    through raises the refusal before anything runs."""
    make = lambda grad: [i32([0]), i32([0]), f64(np.zeros(2 * N), grad)]  # noqa: E731
    expected = make(False)
    wp.launch(picks_its_counter, N, inputs=expected, device="cpu")
    rewritten = wp_rewrite(picks_its_counter, on_refusal="original")
    assert rewritten.refusal is not None and repr(rewritten).endswith("refused>")
    rewrite_launches()
    try:
        for launcher in (
            lambda args: wp.launch(picks_its_counter, N, inputs=args, device="cpu"),
            lambda args: wp.launch(rewritten, N, inputs=args, device="cpu"),
        ):
            for on_tape in (False, True):
                args = make(False)
                tape = wp.Tape()
                with tape if on_tape else nullcontext():
                    launcher(args)
                assert values(args) == values(expected) and not tape.launches
            args = make(True)
            with pytest.raises(RewriteError, match="not a kernel argument or a struct field"), wp.Tape():
                launcher(args)
            assert not arrays_of(args)["0"].any()
    finally:
        rewrite_launches(False)
    with pytest.raises(RewriteError, match="not a kernel argument or a struct field"):
        wp_rewrite(picks_its_counter)  # on_refusal="raise", the default


@wp.kernel(module="unique", module_options={"enable_backward": False})
def compact_without_backward(
    x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)
):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[wp.tid()] * x[wp.tid()]


@wp.kernel(enable_backward=False)
def scaled_without_backward(
    x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)
):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[wp.tid()] * wp.float64(2.0)


@pytest.mark.parametrize("kernel", [compact_without_backward, scaled_without_backward])
def test_without_a_backward_pass_it_warns_and_gives_zero_gradients_as_plain_warp(kernel, capfd):
    """A module (or kernel) with ``enable_backward=False``: the original runs and the tape skips it, with Warp's
    warning, never Warp's "Failed to find backward kernel"."""
    expected = [f64(X), i32([0]), zeros(N)]
    wp.launch(kernel, N, inputs=expected, device="cpu")
    for launched in (wp_rewrite(kernel), kernel):
        args = [f64(X, True), i32([0]), zeros(N)]
        tape = wp.Tape()
        with tape:
            wp.launch(launched, N, inputs=args, device="cpu")
        rewrite_launches()
        try:
            tape.backward(grads={args[2]: wp.ones(N, dtype=wp.float64, device="cpu")})
        finally:
            rewrite_launches(False)
        assert values(args) == values(expected) and not args[0].grad.numpy().any()
        assert "may produce incorrect gradients" in "".join(capfd.readouterr())


def test_wp_rewrite_takes_kernels_only_and_says_how_to_order_decorators():
    for value in (None, 3, "compact"):
        with pytest.raises(TypeError, match="expects a Warp kernel"):
            wp_rewrite(value)
    with pytest.raises(TypeError, match=r"plain function 'swapped': put @wp_rewrite above @wp.kernel"):

        @wp.kernel
        @wp_rewrite
        def swapped(count: wp.array(dtype=wp.int32)):
            wp.atomic_add(count, 0, 1)

    assert wp_rewrite(wp_rewrite(compact)) is wp_rewrite(compact)  # from its original kernel
    assert wp_rewrite(max_records=2)(compact) is wp_rewrite(compact, max_records=2)


@pytest.mark.parametrize("on_tape", [False, True])
def test_bad_arguments_get_plain_warps_error_naming_the_kernel_and_argument(on_tape):
    """With or without a tape (the original runs without one): Warp's own exception and message, for the user's
    kernel and parameter, never a generated kernel; nothing runs."""
    rewritten = wp_rewrite(compact)
    count = i32([0])
    bad = {
        r"Error launching kernel 'compact', passed 2 arguments but kernel requires 3": [f64(X, True), count],
        r"Error launching kernel 'compact', argument 'count' expects an array with dtype=.*int32": [
            f64(X, True),
            f64([0.0]),
            zeros(N),
        ],
        r"Error launching kernel 'compact', argument 'out' expects an array with 1 dimension": [
            f64(X, True),
            count,
            f64(np.zeros((N, 1)), True),
        ],
    }
    for message, args in bad.items():
        with pytest.raises(RuntimeError, match=message), wp.Tape() if on_tape else nullcontext():
            wp.launch(rewritten, N, inputs=args, device="cpu")
    assert count.numpy().tolist() == [0]


def test_options_are_checked():
    for options in (
        {"max_records": True},
        {"max_records": 2.0},
        {"detach_returns": "no"},
        {"detach_returns": 1},
        {"on_refusal": 0},
    ):
        with pytest.raises(TypeError):
            wp_rewrite(compact, **options)
    for options in ({"max_records": -1}, {"on_refusal": "skip"}):
        with pytest.raises(ValueError):
            wp_rewrite(compact, **options)


def test_threads_share_one_rewrite_and_launch_as_in_sequence():
    """Threads share one rewrite and launch concurrently; each gets what a launch alone gets.

    Warp keeps one active tape per process (entering a second raises), so the concurrent launches run
    without one; a taped launch and its gradient are checked once, in sequence."""

    @wp.kernel
    def fresh(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[wp.tid()] + wp.float64(1.0)

    with ThreadPoolExecutor(4) as pool:
        rewritten = list(pool.map(lambda _: wp_rewrite(fresh), range(8)))
    assert all(other is rewritten[0] for other in rewritten)
    assert sum(name.startswith("fresh") for name in rewritten[0].module.kernels) == 2  # its record and replay

    def run(_):
        args = [f64(X, True), i32([0]), zeros(N)]
        wp.launch(rewritten[0], N, inputs=args, device="cpu")
        return args[2].numpy().tolist(), args[1].numpy().tolist()

    sequential = run(0)
    with ThreadPoolExecutor(4) as pool:
        assert all(result == sequential for result in pool.map(run, range(8)))

    args = [f64(X, True), i32([0]), zeros(N)]
    tape = wp.Tape()
    with tape:
        wp.launch(rewritten[0], N, inputs=args, device="cpu")
    tape.backward(grads={args[2]: wp.ones(N, dtype=wp.float64, device="cpu")})
    assert args[2].numpy().tolist() == sequential[0]
    assert args[0].grad.numpy().tolist() == [1.0] * N


@wp.kernel
def compact_on_a_grid(
    x: wp.array(dtype=wp.float64),
    unused: wp.array(dtype=wp.float64),
    count: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    i, j = wp.tid()  # j is 0 in a 1-d launch
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[(i + j) % 6] * x[(i + j) % 6]


LAUNCH_FORMS = {
    "a numpy integer": np.int64(6),
    "a tuple of numpy integers": (np.int32(2), np.int64(3)),
    "a 0-d numpy array": np.array(6),
    "a 1-element numpy array": np.array([6]),
    "a list": [3, 2],
    "a tuple with a zero": (2, 0),
    "zero": 0,
    "negative": -1,
    "a float": 6.0,
    "a string": "6",
    "None": None,
    "five dimensions": (1, 1, 1, 1, 6),
}


def grid_arguments(grad: bool = True) -> list:
    """``unused`` is None: an array the kernel never touches may be passed as None, in plain Warp."""
    return [f64(np.linspace(0.5, 1.5, 6), grad), None, i32([0]), zeros(6)]


@pytest.mark.parametrize("form", LAUNCH_FORMS)
def test_every_launch_form_gets_plain_warps_verdict(form):
    """Run each ``dim`` through plain Warp's forward first: what it accepts runs rewritten with the original's
    forward and finite-difference gradients (with or without a tape), what it refuses is refused with the same
    exception type before anything runs, leaving nothing on the tape."""
    dim = LAUNCH_FORMS[form]
    args = grid_arguments(False)
    try:
        wp.launch(compact_on_a_grid, dim, inputs=args, device="cpu")  # forward only: its backward is the bug
        refused = None
    except Exception as error:
        refused = type(error)
    if refused is None:
        case, threads = Case(compact_on_a_grid, dim, grid_arguments, [3], [0]), int(np.prod(np.asarray(dim)))
        if threads:
            check(case)
        else:
            assert_same_forward(case)  # nothing ran: no gradient to check
        args = grid_arguments()
        wp.launch(wp_rewrite(compact_on_a_grid), dim, inputs=args, device="cpu")
        assert args[2].numpy().tolist() == [threads]
        return
    for on_tape in (False, True):
        args, tape = grid_arguments(), wp.Tape()
        with pytest.raises(refused), tape if on_tape else nullcontext():
            wp.launch(wp_rewrite(compact_on_a_grid), dim, inputs=args, device="cpu")
        assert args[2].numpy().tolist() == [0] and not tape.launches


@wp.kernel
def emit_per_trip(
    trips: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    count: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    for k in range(trips[tid]):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * wp.float64(k + 1)


def test_records_too_large_say_which_record_and_room():
    count = i32([0])
    with (
        pytest.raises(
            RewriteError,
            match=r"record 'slot_records' needs 6597069766656 values \(6 threads × room for "
            r"1099511627776 per execution of the loop at .*test_adoption.py:\d+:\d+\).*cannot be allocated"
            r".*Pass a smaller max_records",
        ),
        wp.Tape(),
    ):
        wp.launch(
            wp_rewrite(emit_per_trip),
            N,
            inputs=[i32([1] * N), f64(X, True), count, zeros(N)],
            device="cpu",
            max_records=2**40,
        )
    assert count.numpy().tolist() == [0]
