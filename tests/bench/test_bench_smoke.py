"""The benchmark in smoke mode (tiny sizes): it keeps working, and the variants it times compute the same thing.

Not a timing test. The correctness checks are real: the rewritten kernel must leave every array exactly as the
original kernel does (the CPU runs threads in order) and produce the hand-written record/replay kernel's
gradients, or, for the exact float return cases (whose hand-written variant has only the local terms), the
exact gradients the case computes with NumPy. Kernels the rewrite refuses today (consumed atomics in loops) must
be reported as unsupported with the RewriteError, and become fully checked once the rewrite supports them.
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `bench` is not an installed package

from bench import run
from bench.kernels import BENCH_CASES

SIZE = 97  # odd, so no pattern lines up with a power of two


@pytest.mark.parametrize("case", BENCH_CASES, ids=lambda case: case.name)
def test_variants_agree(case):
    comparison = run.compare_variants(case, SIZE, "cpu")
    assert comparison.forward_equal("handwritten"), "the hand-written kernel must compute the original forward"
    assert any(np.any(g != 0) for g in comparison.gradients["handwritten"]), "vacuous case: all gradients zero"
    if comparison.unsupported is not None:
        assert comparison.unsupported.startswith("unsupported (RewriteError: ")
        assert "rewritten" not in comparison.forward
        return
    assert comparison.forward_equal(), "the rewritten forward must equal the original forward exactly"
    expected = comparison.exact if case.exact_gradient else comparison.gradients["handwritten"]
    tolerance = {"rtol": 1e-4, "atol": 1e-5} if case.exact_gradient else {"rtol": 1e-5, "atol": 1e-6}
    for reference, rewritten in zip(expected, comparison.gradients["rewritten"], strict=True):
        np.testing.assert_allclose(rewritten, reference, **tolerance)


def test_handwritten_reference_has_the_exact_gradient():
    """The reference itself is right: y[i] = (10 + i) * x[i] on the CPU, so dL/dx[i] = (10 + i) * seed[i]."""
    case = next(c for c in BENCH_CASES if c.name == "running_total")
    arguments = case.make_arguments(SIZE, "cpu")
    comparison = run.compare_variants(case, SIZE, "cpu")
    expected = (10.0 + np.arange(SIZE)) * arguments.seeds[0].numpy()
    np.testing.assert_allclose(comparison.gradients["handwritten"][0], expected, rtol=1e-6)


@pytest.mark.parametrize("name", ["neighbour_sum", "neighbour_sum_room"])
def test_a_sum_carried_through_a_loop_keeps_what_the_hand_written_records_keep(name):
    """Issue 34's cost case, with and without max_records: per thread, the sum at each trip's start and after the
    loop (4 bytes each, room for the most trips any thread makes), as the hand-written record/replay keeps it; the
    launch's status is a few bytes per launch, not per thread."""
    case = next(c for c in BENCH_CASES if c.name == name)
    record = run.time_case(case, SIZE, "cpu", 1)["record_bytes_per_thread"]
    assert record["handwritten"] == 4 * (8 + 1)
    assert record["rewritten"] == pytest.approx(record["handwritten"], abs=1.0)


def test_smoke_run_writes_results(tmp_path, capsys):
    out, png = tmp_path / "results.json", tmp_path / "bench.png"
    results = run.main(["--smoke", "--device", "cpu", "--out", str(out), "--plot", str(png)])
    written = json.loads(out.read_text())
    assert set(written["cases"]) == {c.name for c in BENCH_CASES}
    for name, case in written["cases"].items():
        for timing in case["sizes"].values():
            assert timing["original"]["forward"] > 0 and timing["handwritten"]["backward"] > 0
            assert ("rewritten" in timing) == ("unsupported" not in case), name
        if "unsupported" in case:
            assert case["unsupported"].startswith("unsupported (RewriteError: ")
        else:
            assert case["check"] == {"forward_equal": True, "gradients_equal": True}
            assert case["compile"]["rewritten_s"] > 0 and case["compile"]["rewrite_ms"] > 0
    printed = capsys.readouterr().out
    assert results["targets"] and "targets (worst over cases and sizes)" in printed
    assert png.exists() or "matplotlib is not installed" in printed
