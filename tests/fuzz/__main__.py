"""Long mode: ``python -m tests.fuzz --seed S --count N`` checks N generated kernels of stream S.

Every generated kernel is checked against the invariants of tests/support/invariants.py too (a breach is a
failure). Prints every failure (with the kernel's source, to minimize into tests/regressions/test_fuzz_regressions.py),
how many of the kernels exercised each feature the fuzzer generates (tests/fuzz/features.py), each form of the fence's
table (tests/fuzz/grammar.py), each combination cell (tests/fuzz/combinations.py) and each form of loop Warp does not
unroll (tests/fuzz/loops.py), and the line
``fuzz: N passed, N failed (N refused)``; exits non-zero on any failure. ``--show INDEX`` prints one kernel.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests.fuzz, tests.support

import warp as wp

from tests.fuzz.combinations import cell_counts
from tests.fuzz.features import exercised
from tests.fuzz.generator import KernelCase, generate_kernel
from tests.fuzz.grammar import exercised_forms
from tests.fuzz.loops import forms_of_loops
from tests.fuzz.runner import FAILED, LEFT, PASSED, REFUSED, Outcome, Summary, run
from tests.support.invariants import checking_every_generated_kernel


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--seed", type=int, default=0, help="stream of kernels (default 0)")
    parser.add_argument("--count", type=int, default=1000, help="kernels to check (default 1000)")
    parser.add_argument("--start", type=int, default=0, help="index of the first kernel (default 0)")
    parser.add_argument("--batch", type=int, default=50, help="kernels per compiled module (default 50)")
    parser.add_argument("--max-records", type=int, metavar="N", help="wp_rewrite's max_records for every kernel")
    parser.add_argument("--show", type=int, metavar="INDEX", help="print kernel INDEX of the stream and exit")
    parser.add_argument("--verbose", action="store_true", help="let Warp log each module's load and compile time")
    parser.add_argument("--refusals", action="store_true", help="print every refusal's message too")
    parser.add_argument(
        "--cli", action="store_true", help="each batch through wp-rewrite too: a verdict unlike the API's fails"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.show is not None:
        case = generate_kernel(args.seed, args.show)
        print(case.source)
        for spec in case.arrays:
            print(f"# {spec.name}: {spec.dtype} {spec.shape} {spec.values}")
        return 0
    if not args.verbose:
        wp.config.log_level = wp.LOG_WARNING  # no line per module load
    wp.init()
    began = time.perf_counter()

    def progress(summary: Summary, outcomes: list[Outcome]) -> None:
        for outcome in outcomes:
            if outcome.status == FAILED or (args.refusals and outcome.status == REFUSED):
                print(f"{outcome.status.upper()} {outcome.report()}", flush=True)
            if outcome.divergence is not None:
                print(f"DIVERGED {outcome.divergence}\n{outcome.report()}", flush=True)
        elapsed = time.perf_counter() - began
        print(f"  ... {len(summary.outcomes)} kernels, {elapsed:.0f} s: {summary.line()}", file=sys.stderr, flush=True)

    with checking_every_generated_kernel():
        summary = run(
            args.seed, args.count, args.batch, args.start, progress, max_records=args.max_records, cli=args.cli
        )
    print("kernels exercising each feature (checked / refused):")
    checked = exercised([o.case for o in summary.outcomes if o.status == PASSED])
    refused = exercised([o.case for o in summary.outcomes if o.status == REFUSED])
    for name, count in checked.items():
        print(f"  {count:6d} / {refused[name]:<5d} {name}")
    _print_by_status("kernels using each form of the fence's table", exercised_forms, summary)
    _print_by_status("kernels drawing each combination, dtype x path x target", cell_counts, summary)
    _print_by_status("kernels using each form of loop Warp does not unroll", forms_of_loops, summary)
    print(summary.line())
    diverged = sum(outcome.divergence is not None for outcome in summary.outcomes)
    if args.cli:
        print(f"fuzz: {diverged} kernels with another verdict through wp-rewrite")
    return 1 if summary.count(FAILED) or diverged else 0


def _print_by_status(title: str, count: Callable[[list[KernelCase]], Counter], summary: Summary) -> None:
    """A table of what ``count`` counts in the kernels that passed, were refused and failed."""
    print(f"{title} (passed / refused / left as plain Warp / failed):")
    statuses = (PASSED, REFUSED, LEFT, FAILED)
    counts = {status: count([o.case for o in summary.outcomes if o.status == status]) for status in statuses}
    for name in counts[PASSED]:
        passed, refused, left, failed = (counts[status][name] for status in statuses)
        print(f"  {passed:6d} / {refused:<5d} / {left:<5d} / {failed:<3d} {name}")


if __name__ == "__main__":
    sys.exit(main())
