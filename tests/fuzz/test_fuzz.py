"""A fixed slice of the differential fuzzer (tests/fuzz): random kernels that consume atomic returns.

Each kernel must give the original's forward exactly and tape gradients equal to finite differences of the
original, or be refused with a ``RewriteError``; and the command line (``wp-rewrite FILE -o OUT``) must give it the
same verdict, forward results and gradients as ``wp_rewrite``. Longer runs: ``python -m tests.fuzz --seed S --count
N`` (``--cli`` for the command line too). A failure found here or there is minimized by hand into
tests/regressions/test_fuzz_regressions.py.
"""

import re

import numpy as np
import pytest

from tests.fuzz.combinations import CELLS, cell_counts
from tests.fuzz.features import FEATURES, exercised
from tests.fuzz.generator import THRESHOLD_GAP, generate_kernel
from tests.fuzz.grammar import GENERATORS, KNOWN_FAILURES, exercised_forms, forms_of
from tests.fuzz.loops import ALONE_EVERY, HALVINGS_GAP, LOOP_FORMS, forms_of_loops
from tests.fuzz.runner import FAILED, LEFT, PASSED, REFUSED, Outcome, agrees, richardson, run
from warp_rewrite.passes.fence import BY_NAME

SEED = 2026
COUNT = 200
COUNT_WITH_MAX_RECORDS = 50
MAX_RECORDS = 4


@pytest.fixture(scope="module")
def outcomes() -> dict[int, Outcome]:
    """All kernels of the slice, checked once, through the API and the command line: compiling their modules
    dominates the cost."""
    summary = run(SEED, COUNT, cli=True)
    return {outcome.case.index: outcome for outcome in summary.outcomes}


def _check(outcome: Outcome) -> None:
    known = sorted(forms_of(outcome.case) & KNOWN_FAILURES.keys())
    if outcome.status == FAILED and known:
        pytest.xfail(f"{known[0]}: {KNOWN_FAILURES[known[0]]}")
    assert outcome.status in (PASSED, REFUSED, LEFT), outcome.report()


@pytest.mark.parametrize("index", range(COUNT))
def test_fuzzed_kernel(outcomes, index):
    _check(outcomes[index])


@pytest.mark.parametrize("index", range(COUNT))
def test_fuzzed_kernel_has_one_verdict_through_both_front_ends(outcomes, index):
    """``wp_rewrite`` and ``wp-rewrite FILE -o OUT``: refused with the same message, or rewritten with the same
    forward results and gradients (tests/fuzz/test_verdicts.py: the same for every form of the fence's table)."""
    outcome = outcomes[index]
    assert outcome.divergence is None, f"{outcome.divergence}\n{outcome.case.source}"


@pytest.fixture(scope="module")
def outcomes_with_max_records() -> dict[int, Outcome]:
    """A smaller slice rewritten with ``max_records``, which the kernels have compiled in (a loop that runs
    more often than that is refused at its launch)."""
    summary = run(SEED + 1, COUNT_WITH_MAX_RECORDS, max_records=MAX_RECORDS)
    return {outcome.case.index: outcome for outcome in summary.outcomes}


@pytest.mark.parametrize("index", range(COUNT_WITH_MAX_RECORDS))
def test_fuzzed_kernel_with_max_records(outcomes_with_max_records, index):
    _check(outcomes_with_max_records[index])


def test_finite_differences_too_noisy_to_tell_are_not_a_failure():
    """Once seen in a fuzzed kernel: a float chain in a loop makes the loss ~3e4, and its finite differences at
    steps 1e-6 and 1e-7 disagree by 4e-5 on a gradient entry that is exactly a loss weight (0.52195566); the tape's
    is 8e-6 from the first. A wrong gradient is off by far more than the differences' spread, so it still fails."""
    tape, coarse, fine = np.array([0.52195566]), np.array([0.52196366]), np.array([0.52192366])
    assert agrees(tape, coarse, fine).all()
    assert not agrees(tape + 1e-3, coarse, fine).any()


def test_most_kernels_are_checked_rather_than_refused(outcomes):
    """Refusals are acceptable, but a slice that is mostly refused would check little. The generator makes some
    shapes that must be refused on purpose (aliased arguments, float reads of what other threads write, atomics of
    different kinds on one float target, the fence's refused forms, one kernel in twenty for sure): 42 of this
    slice's 200."""
    refused = sum(1 for o in outcomes.values() if o.status == REFUSED)
    assert refused <= COUNT // 4, f"{refused} of {COUNT} kernels refused"


def test_the_slice_covers_every_pattern():
    """Every construct the fuzzer is meant to combine appears in the slice (no compile needed)."""
    counts = exercised([generate_kernel(SEED, i) for i in range(COUNT)])
    assert not [name for name in FEATURES if not counts[name]], counts


def test_the_slice_draws_every_combination():
    """Every cell of dtype x path x target (tests/fuzz/combinations.py) appears in the slice, several times: the
    kernels consuming an atomic's return (all but every ALONE_EVERY-th) take the cells in turn."""
    counts = cell_counts([generate_kernel(SEED, i) for i in range(COUNT)])
    consuming = COUNT - COUNT // ALONE_EVERY
    assert set(counts) == set(CELLS) and min(counts.values()) >= consuming // len(CELLS), counts


def test_every_form_of_the_fence_has_a_generator():
    """The fence's table is the fuzzer's grammar (tests/fuzz/grammar.py): no form without a generator."""
    assert set(GENERATORS) == set(BY_NAME)


def test_the_slice_exercises_every_form_of_the_fence():
    """Every form of the fence's table, accepted or refused, appears in the slice (no compile needed)."""
    counts = exercised_forms([generate_kernel(SEED, i) for i in range(COUNT)])
    assert not [name for name in BY_NAME if not counts[name]], counts


def test_the_slice_exercises_every_form_of_loop():
    """Every form of loop Warp does not unroll the fuzzer writes (tests/fuzz/loops.py) appears in the slice."""
    counts = forms_of_loops([generate_kernel(SEED, i) for i in range(COUNT)])
    assert not [name for name in LOOP_FORMS if not counts[name]], counts


def test_halvings_keep_away_from_their_threshold():
    """A while loop halving ``|x| * s`` until it is at most 1 (tests/fuzz/loops.py): no input's halvings come near 1,
    where a step of the finite differences could change the trip count."""
    scales = [
        (case, float(scale))
        for case in (generate_kernel(SEED, i) for i in range(COUNT))
        for scale in re.findall(r"wp\.abs\(xv\) \* wp\.float64\(([\d.]+)\)", case.source)
    ]
    assert scales
    for case, scale in scales:
        halvings = [abs(v) * scale / 2**k for v in case.arrays[0].values for k in range(8)]
        assert min(abs(h - 1) for h in halvings) > HALVINGS_GAP, case.name


def test_inputs_keep_away_from_a_tie_at_one():
    """seed 9001, index 1391 had x = 1.0, where ``a * x`` ties with ``a`` in an atomic_min: a false failure."""
    inputs = [v for i in (1391, *range(100)) for v in generate_kernel(9001, i).arrays[0].values]
    assert min(abs(abs(v) - 1) for v in inputs) >= THRESHOLD_GAP - 1e-12


def test_richardson_cancels_the_step_squared_term():
    """Central differences at h and h/10 err by c h^2 and c h^2/100: the extrapolation leaves the derivative."""
    exact, c, h = np.array([2.0, -3.0]), np.array([5e5, -7e5]), 1e-6
    assert np.allclose(richardson(exact + c * h**2, exact + c * h**2 / 100), exact, rtol=0, atol=1e-15)


def test_generation_is_reproducible_from_seed_and_index():
    first, again = generate_kernel(SEED, 7), generate_kernel(SEED, 7)
    assert first.source == again.source
    assert [a.values for a in first.arrays] == [a.values for a in again.arrays]
    assert generate_kernel(SEED, 8).source != first.source
