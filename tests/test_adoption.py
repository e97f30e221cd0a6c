"""Drop-in adoption (issue 17): existing ``wp.launch`` call sites keep working with rewritten kernels, ``wp_rewrite``
is a decorator, code one cannot edit can opt in, and the rewrite says what it did."""

import io
import subprocess
import sys

import numpy as np
import pytest
import warp as wp
from harness import Case, check, f64, i32

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
def emit_decorated(trips: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32),
                   out: wp.array(dtype=wp.float64)):  # fmt: skip
    tid = wp.tid()
    for k in range(trips[tid]):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * wp.float64(k + 1)


def through_wp_launch(kernel):
    """A harness program launching ``kernel`` (the original for ground truth) with plain ``wp.launch``."""

    def program(args, launcher):
        wp.launch(kernel if launcher is not __import__("harness").launch_original else kernel.kernel, N, inputs=args,
                  device="cpu")  # fmt: skip

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
    """The same parameters as the installed Warp's wp.launch, positions included; adjoint launches refused."""
    import inspect

    ours = list(inspect.signature(RewrittenKernel.launch).parameters)[1:]
    warps = list(inspect.signature(wp.launch).parameters)[1:]
    assert ours[: len(warps)] == warps
    rewritten = wp_rewrite(compact)
    with pytest.raises(ValueError, match=r"kernel 'compact' is rewritten: its backward runs from the tape"):
        wp.launch(rewritten, N, inputs=[f64(X, True), i32([0]), zeros(N)], adjoint=True, device="cpu")


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
    code = "import warp_rewrite.runtime as r; import warp_rewrite; print(r.hook.AUTO_REWRITE is not None)"
    result = subprocess.run([sys.executable, "-c", code], env={"WP_REWRITE_LAUNCHES": "1", "PATH": ""},
                            capture_output=True, text=True)  # fmt: skip
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
