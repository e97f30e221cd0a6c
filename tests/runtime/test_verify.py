"""Verify mode: a launch fingerprints the arrays its replay reads from memory, and its backward
raises ``RewriteError`` naming the argument, the kernel and the launch if one changed since (a free list refilled
by the next step's kill kernel); unchanged, the gradients are those of finite differences of the original."""

import re
from pathlib import Path

import numpy as np
import pytest
import warp as wp

from tests.support.harness import Case, check, f64, i32, launch_original
from warp_rewrite import RewriteError, wp_rewrite

N = 6
X = np.linspace(0.5, 1.5, N)
FREE = [3, 0, 5, 1, 4, 2]


@wp.kernel
def spawn(
    free: wp.array(dtype=wp.int32),
    top: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    pos: wp.array(dtype=wp.float64),
):
    """Takes a slot off the top of a free list and writes into it."""
    tid = wp.tid()
    k = wp.atomic_sub(top, 0, 1) - 1
    pos[free[k]] = x[tid] * x[tid]


@wp.kernel
def kill(free: wp.array(dtype=wp.int32), top: wp.array(dtype=wp.int32)):
    """The next step's kill kernel: gives every slot back, in another order."""
    tid = wp.tid()
    free[wp.atomic_add(top, 0, 1)] = wp.int32(N - 1) - wp.int32(tid)


def arguments(free=None) -> list:
    return [free if free is not None else i32(FREE), i32([N]), f64(X, True), f64(np.zeros(N), True)]


def test_unchanged_memory_passes_with_the_original_gradients():
    def program(args, launcher):
        wp.launch(
            spawn if launcher is launch_original else wp_rewrite(spawn, verify=True), N, inputs=args, device="cpu"
        )

    check(Case(None, N, arguments, [3], [2], program=program))


def launch_site(marker: str) -> str:
    """``file:line`` of the line of this file holding ``marker``."""
    lines = Path(__file__).read_text().splitlines()
    return f"{re.escape(__file__)}:{next(i + 1 for i, line in enumerate(lines) if marker in line)}"


@pytest.mark.parametrize("how", ["assign", "kill kernel on the tape", "strided view", "environment"])
def test_memory_changed_before_backward_is_refused_naming_array_kernel_and_launch(how, monkeypatch):
    free = i32(FREE)
    if how == "strided view":  # fingerprinted through a contiguous copy
        base = i32(np.repeat(FREE, 2))
        free = base[::2]
    args = arguments(free)
    if how == "environment":
        monkeypatch.setenv("WP_REWRITE_VERIFY", "1")
    rewritten = wp_rewrite(spawn, verify=how != "environment")
    tape = wp.Tape()
    with tape:
        wp.launch(rewritten, N, inputs=args, device="cpu")  # the launch
        if how == "kill kernel on the tape":
            wp.launch(kill, N, inputs=[free, args[1]], device="cpu")
    if how != "kill kernel on the tape":
        free.assign(np.arange(N, dtype=np.int32))
    message = (
        rf"kernel 'spawn': the array passed as 'free' to its launch at {launch_site('# the launch')} changed "
        r"between that launch and tape.backward\(\).*Launch it with a copy \(wp.clone\) of 'free'"
    )
    with pytest.raises(RewriteError, match=message):
        tape.backward(grads={args[3]: wp.ones(N, dtype=wp.float64, device="cpu")})
    assert not args[2].grad.numpy().any()  # the check runs before the replay's adjoint


def test_off_by_default():
    args = arguments()
    tape = wp.Tape()
    with tape:
        wp.launch(wp_rewrite(spawn), N, inputs=args, device="cpu")
    args[0].assign(np.arange(N, dtype=np.int32))
    tape.backward(grads={args[3]: wp.ones(N, dtype=wp.float64, device="cpu")})  # wrong, silently, as plain Warp
    assert not any(entry for entry in tape.launches if callable(entry))
