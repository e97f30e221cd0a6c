"""Issue 34 on real code: a sample of the loops ``--check`` reports as WR008 in kernels with a backward pass (and of
loops it leaves out), each launched on real kernels of Newton, ``warp/examples`` and ``warp/tests``
(``loop_samples.py``) and checked against central finite differences of the original forward: is plain Warp's
gradient wrong there (a real hazard), and does the rewrite's match? docs/realcode.md counts what it showed."""

from __future__ import annotations

import warnings
from functools import cache

import numpy as np
import pytest
from loop_samples import DOCUMENT, Kind, Sample, render, samples, shown
from trees import TREES, check, require

from tests.support.harness import (
    Case,
    assert_gradients_match,
    finite_difference_gradients,
    plain_warp_gradients,
    tape_gradients,
)
from warp_rewrite import RewriteWarning, wp_rewrite
from warp_rewrite.runtime.errors import left_to_warp

SAMPLES = {sample.name: sample for sample in samples()}
TREE = {tree.name: tree for tree in TREES}


def case_of(sample: Sample) -> Case:
    return Case(sample.kernel, sample.dim, sample.make_args, sample.loss, sample.wrt)


@cache
def finite_differences(name: str) -> dict[int, np.ndarray]:
    sample = SAMPLES[name]
    return finite_difference_gradients(case_of(sample), sample.tolerance.epsilon)


def agrees(sample: Sample, gradients: dict[int, np.ndarray]) -> bool:
    expected, tolerance = finite_differences(sample.name), sample.tolerance
    return all(np.allclose(gradients[i], expected[i], rtol=tolerance.rtol, atol=tolerance.atol) for i in sample.wrt)


def test_the_sample_covers_each_kind_of_hazard_and_each_tree():
    reported = [sample for sample in SAMPLES.values() if sample.reported]
    assert {sample.kind for sample in reported} == set(Kind)
    assert {sample.tree for sample in SAMPLES.values()} == set(TREE)


@pytest.mark.parametrize("name", SAMPLES)
def test_check_reports_the_loop_where_a_gradient_may_depend_on_it(name):
    sample = SAMPLES[name]
    require(TREE[sample.tree])
    findings = check(TREE[sample.tree]).findings
    reported = {finding.code for finding in findings if finding.file == sample.file and finding.subject == name}
    assert ("WR008" in reported) == sample.reported, reported


@pytest.mark.parametrize("name", SAMPLES)
def test_the_rewrite_gets_the_gradient_of_finite_differences_or_leaves_it_to_warp(name):
    """A reported kernel is rewritten and gets the gradient of its original forward's finite differences, or is
    left as plain Warp, with a warning saying why; one left out is left as it is (and plain Warp's gradient is right:
    ``test_plain_warp_is_wrong_exactly_where_the_sample_found_a_real_hazard``)."""
    sample = SAMPLES[name]
    require(TREE[sample.tree])
    if not sample.reported:
        assert wp_rewrite(sample.kernel).pair is None
        return
    case = case_of(sample)
    if sample.left:
        rewritten = wp_rewrite(sample.kernel)
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always", RewriteWarning)
            gradients = tape_gradients(case)
        said = [str(w.message) for w in warned if issubclass(w.category, RewriteWarning)]
        said += [left_to_warp(rewritten.left)] if rewritten.left is not None else []
        assert any(sample.left in text for text in said), said
        plain = plain_warp_gradients(case)
        for i in sample.wrt:
            np.testing.assert_array_equal(gradients[i], plain[i])
    elif not any(np.any(gradient) for gradient in finite_differences(name).values()):  # an int output
        assert wp_rewrite(sample.kernel).pair is not None
        assert not any(np.any(gradient) for gradient in tape_gradients(case).values())
    else:
        assert wp_rewrite(sample.kernel).pair is not None
        assert_gradients_match(case, sample.tolerance)


@pytest.mark.parametrize("name", SAMPLES)
def test_plain_warp_is_wrong_exactly_where_the_sample_found_a_real_hazard(name):
    sample = SAMPLES[name]
    require(TREE[sample.tree])
    assert agrees(sample, plain_warp_gradients(case_of(sample))) == sample.plain_warp_right


def test_the_docs_show_the_sample():
    expected = render(list(SAMPLES.values()))
    assert shown(DOCUMENT.read_text()) == expected, "not current: PYTHONPATH=. python tests/realcode/loop_samples.py"
