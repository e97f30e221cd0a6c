"""A fixed slice of the differential fuzzer (tests/fuzz): random kernels that consume atomic returns.

Each kernel must give the original's forward exactly and tape gradients equal to finite differences of the
original, or be refused with a ``RewriteError``. Longer runs: ``python -m tests.fuzz --seed S --count N``.
A failure found here or there is minimized by hand into tests/test_fuzz_regressions.py.
"""

import re

import pytest
from fuzz.generator import FLOAT_OPS, INT_OPS, generate_kernel
from fuzz.runner import PASSED, REFUSED, Outcome, run

SEED = 2026
COUNT = 200
COUNT_WITH_MAX_RECORDS = 50
MAX_RECORDS = 4


@pytest.fixture(scope="module")
def outcomes() -> dict[int, Outcome]:
    """All kernels of the slice, checked once: compiling their modules dominates the cost."""
    summary = run(SEED, COUNT)
    return {outcome.case.index: outcome for outcome in summary.outcomes}


@pytest.mark.parametrize("index", range(COUNT))
def test_fuzzed_kernel(outcomes, index):
    outcome = outcomes[index]
    assert outcome.status in (PASSED, REFUSED), outcome.report()


@pytest.fixture(scope="module")
def outcomes_with_max_records() -> dict[int, Outcome]:
    """A smaller slice rewritten with ``max_records``, which the kernels have compiled in (a loop that runs
    more often than that is refused at its launch)."""
    summary = run(SEED + 1, COUNT_WITH_MAX_RECORDS, max_records=MAX_RECORDS)
    return {outcome.case.index: outcome for outcome in summary.outcomes}


@pytest.mark.parametrize("index", range(COUNT_WITH_MAX_RECORDS))
def test_fuzzed_kernel_with_max_records(outcomes_with_max_records, index):
    outcome = outcomes_with_max_records[index]
    assert outcome.status in (PASSED, REFUSED), outcome.report()


def test_finite_differences_too_noisy_to_tell_are_not_a_failure():
    """fz_47_8: a float chain in a loop makes the loss ~3e4, and its finite differences at steps 1e-6 and
    1e-7 disagree by 4e-5 on a gradient entry that is exactly a loss weight (0.52195566); the tape's is 8e-6
    from the first. A wrong gradient is off by far more than the differences' spread, so it still fails."""
    (outcome,) = run(47, 1, start=8).outcomes
    assert outcome.status == PASSED, outcome.report()


def test_most_kernels_are_checked_rather_than_refused(outcomes):
    """Refusals are acceptable, but a slice that is mostly refused would check little."""
    refused = sum(1 for o in outcomes.values() if o.status == REFUSED)
    assert refused <= COUNT // 10, f"{refused} of {COUNT} kernels refused"


FEATURES = {
    **{f"int atomic_{op}": rf"s\d+ = wp\.atomic_{op}\(c\d" for op in INT_OPS},
    **{f"float atomic_{op}": rf"a\d+ = wp\.atomic_{op}\(f\d" for op in FLOAT_OPS},
    "int target with 4 indices": r"s\d+ = wp\.atomic_\w+\(c\d+, [^,]+, 0, 0, 0, ",
    "float target with 2 indices": r"a\d+ = wp\.atomic_\w+\(f\d+, [^,]+, 0, ",
    "vec3d target": r"f\d+: wp\.array\(dtype=wp\.vec3d\)",
    "if": r"\n\s+if (xv|tid|keys)",
    "for over a constant range": r"for k\d+ in range\((0, )?\d\)",
    "for over an array-read bound": r"for k\d+ in range\(trips\[tid\]\)",
    "nested for": r"\n( +)for k\d+ in range[^\n]*\n(\1 [^\n]*\n)*?\1 +for k\d+ in range",
    "break": r"\bbreak\b",
    "continue": r"\bcontinue\b",
    "while probe loop": r"while (True|done\d+ == 0):\n\s+prev\d+ = wp\.atomic_cas",
    "helper": r"@wp\.func",
    "helper two calls deep": r"@wp\.func\ndef \w+\([^\n]*\n(    [^\n]*\n)*?    [^\n]*fz_\d+_\d+_h\d+\(",
    "helper returning a slot": r"r\d+ = fz_\d+_\d+_h\d+\(",
    "int chain": r"i\d+ = s\d+ % \d\n\s+s\d+ = wp\.atomic",
    "slot indexing a float target": r"a\d+ = wp\.atomic_\w+\(f\d+, s\d+ % \d",
    "float chain": r"a\d+ = wp\.atomic_\w+\(f\d+, [^,]+, [^\n]*a\d+",
    "plain store at a slot": r"o\d+\[\w+, s\d+( - 1)?\] = ",
    "float return in math": r"wp\.sin\(a\d+\)",
    "unconsumed augmented assignment": r"\n\s+[cf]\d+\[[^]]+\] [-+&|^]= ",
    "unconsumed bare call": r"\n\s+wp\.atomic_\w+\([cf]\d+",
    "int carried through a loop": r"n\d+ = n\d+ \+ s\d+",
}


def test_the_slice_covers_every_pattern():
    """Every construct the fuzzer is meant to combine appears in the slice (no compile needed)."""
    sources = "\n".join(generate_kernel(SEED, i).source for i in range(COUNT))
    missing = [name for name, pattern in FEATURES.items() if not re.search(pattern, sources)]
    assert not missing, missing


def test_generation_is_reproducible_from_seed_and_index():
    first, again = generate_kernel(SEED, 7), generate_kernel(SEED, 7)
    assert first.source == again.source
    assert [a.values for a in first.arrays] == [a.values for a in again.arrays]
    assert generate_kernel(SEED, 8).source != first.source
