"""Exact float returns on a target held by a struct argument, in helpers handed the struct whole, beside helpers
reading or updating its other fields: forward and gradients against finite differences of the original, through the
API and the command line. A helper that reads the target itself without consuming its atomics stays refused."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from tests.support import exact_structs
from tests.support.emitted import emitted_fixture, through
from tests.support.harness import Case, check, f64, i32
from warp_rewrite import RewriteError, launch, wp_rewrite

N = 5
X = np.array([0.3, 1.2, -0.7, 0.9, -1.1])
KERNELS = ["pay", "pay_and_count", "pay_at_the_rate"]


def arguments() -> list:
    """x, the bank's balance, its tally of customers and the outputs; the struct is made per launch (``banked``)."""
    return [f64(X, True), f64([10.0], True), i32([0]), f64(np.zeros(N), True)]


def banked(module, args: list) -> list:
    """The kernel's arguments, with the struct of ``module`` (the support module's, or the emitted copy's)."""
    bank = module.Bank()
    bank.balance, bank.served, bank.rate = args[1], args[2], 1.5
    return [args[0], bank, args[3]]


def case(program) -> Case:
    return Case(None, N, arguments, [1, 3], [0, 1], program=program)


@pytest.mark.parametrize("name", KERNELS)
def test_through_the_api(name):
    rewritten = wp_rewrite(getattr(exact_structs, name))

    def program(args, launcher):
        if launcher.__name__ == "launch_original":
            launcher(getattr(exact_structs, name), N, banked(exact_structs, args))
        else:
            launch(rewritten, N, inputs=banked(exact_structs, args), device="cpu")

    check(case(program))


emitted = emitted_fixture(exact_structs)


@pytest.mark.parametrize("name", KERNELS)
def test_through_the_command_line(emitted, name):
    check(case(through(emitted, name, N, pack=banked)))


@wp.func
def peek(bank: exact_structs.Bank) -> wp.float64:
    """A plain read of the exact target, in a helper that consumes nothing: refused."""
    return bank.balance[0]


@wp.kernel
def pay_and_peek(x: wp.array[wp.float64], bank: exact_structs.Bank, out: wp.array[wp.float64]):
    tid = wp.tid()
    before = exact_structs.charge(bank, x[tid] * x[tid])
    out[tid] = before * x[tid] + peek(bank)


def test_a_helper_reading_the_target_itself_stays_refused():
    with pytest.raises(RewriteError, match="helper 'peek' receives an array whose float atomic returns need exact"):
        wp_rewrite(pay_and_peek)
