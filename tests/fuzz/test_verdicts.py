"""One verdict per kernel, whichever way it comes in: every form of the fence's table (``passes.fence.FORMS``, each
written by its generator of ``tests/fuzz/grammar.py``), alone in a kernel and beside a consumed atomic, through
``wp_rewrite`` and through ``wp-rewrite FILE -o OUT``. Both must refuse it with the same message, leave it as it is,
or rewrite it with the same forward results and gradients; the API's are checked against finite differences of the
original forward. (The fuzz slice gets the same comparison: tests/fuzz/test_fuzz.py.)"""

import pytest

from tests.fuzz.generator import generate_form_kernel
from tests.fuzz.grammar import GENERATORS, KNOWN_FAILURES
from tests.fuzz.runner import FAILED, REFUSED, UNCHANGED, Outcome, check_cases
from warp_rewrite.passes.fence import BY_NAME, Kind

CASES = [(form, consumed) for form in GENERATORS for consumed in (False, True)]


# What a refusal of a form says, where it is not the form's name: a builtin is refused by its class in passes.builtins.
REFUSAL_SAYS = {"builtin the rewrite cannot replay": "is not supported by warp-rewrite yet: "}


@pytest.fixture(scope="module")
def outcomes() -> dict[tuple[str, bool], Outcome]:
    cases = [generate_form_kernel(form, consumed) for form, consumed in CASES]
    summary = check_cases(cases, batch_size=len(cases), cli=True)
    return {key: outcome for key, outcome in zip(CASES, summary.outcomes, strict=True)}


@pytest.mark.parametrize(("form", "consumed"), CASES, ids=[f"{f}-{'with' if c else 'alone'}" for f, c in CASES])
def test_one_verdict_per_form(outcomes, form, consumed):
    outcome = outcomes[form, consumed]
    assert outcome.divergence is None, f"{outcome.divergence}\n{outcome.case.source}"
    if outcome.status == FAILED and form in KNOWN_FAILURES:
        pytest.xfail(KNOWN_FAILURES[form])
    assert outcome.status != FAILED, outcome.report()
    assert outcome.status != UNCHANGED or not consumed
    if consumed and BY_NAME[form].kind is Kind.REFUSED:
        assert outcome.status == REFUSED and REFUSAL_SAYS.get(form, f"{form} (") in outcome.detail, outcome.report()


def test_a_tile_atomic_whose_return_is_used_is_refused_by_both_alone_in_a_kernel(outcomes):
    """Its return is the only one the kernel uses: the command line once left it as it was, with the gradients
    plain Warp gets wrong."""
    outcome = outcomes["tile atomic, return used", False]
    assert outcome.status == REFUSED and "tile atomic, return used" in outcome.detail
    assert outcome.divergence is None
