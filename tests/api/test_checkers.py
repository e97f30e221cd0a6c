"""Core patterns, and a slice of the fuzzer's generated kernels, under Warp's own checkers: array bounds checks,
floating-point verification and autograd array-access verification.

- Bounds checks: Warp 1.19 compiles its array-access ``assert``s in only in debug mode (``wp.config.mode =
  "debug"``, or the module option ``"mode"``: the CPU build then leaves ``NDEBUG`` undefined). A failed
  check calls ``_wp_assert``, which prints ``Assertion failed`` and aborts the process.
- ``wp.config.verify_fp = True``: every element an array hands out (``index()``, for stores too: the value
  overwritten) and every builtin's result is checked to be finite; a failed check prints ``file.h:line -
  function(...)`` from native code, to the process's standard output, and goes on.
- ``wp.config.verify_autograd_array_access = True``: codegen and the tape warn (``warnings.warn``) about an
  array written after it was read, within a kernel or across recorded launches.

Because a failed bounds check aborts the process, because floating-point reports bypass Python's ``sys.stdout``,
and because the settings must hold before any module is built (they are part of a module's build options), the
checks run in child processes (this file run as a script) rather than in the test process: nothing there can leak
into the other tests' configuration, and the parent reads the child's output whole.

In the children that run the fuzzer's slice, every array the rewrite's runtime allocates with ``wp.empty`` is first
filled with garbage (``poison_allocations``): memory fresh from the system is zeros, so reads of memory no kernel
wrote would otherwise pass unseen. A float record read before it is written then shows as a NaN (and wrong
gradients), an int one as an index out of bounds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import warp as wp

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600


# --- the patterns (small copies of test_core / test_coverage / test_exact kernels) -------------------


@wp.kernel
def compact_positive(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    v = x[tid]
    if v > wp.float64(0.0):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = v * v + wp.sin(v)


@wp.kernel
def emit_particles(
    counts: wp.array[wp.int32], origin: wp.array[wp.float64], next_free: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    for k in range(counts[tid]):
        slot = wp.atomic_add(next_free, 0, 1)
        out[slot] = origin[tid] * origin[tid] + wp.float64(k) * origin[tid]


@wp.kernel
def insert_keys(
    keys: wp.array[wp.int32],
    weights: wp.array[wp.float64],
    table: wp.array[wp.int32],
    n: int,
    out: wp.array[wp.float64],
):
    tid = wp.tid()
    key = keys[tid]
    slot = (key * 7) % n
    while True:
        prev = wp.atomic_cas(table, slot, -1, key)
        if prev == -1 or prev == key:
            break
        slot = (slot + 1) % n
    out[slot] += weights[tid] * weights[tid]


@wp.func
def write_contact(count: wp.array[wp.int32], capacity: int, contacts: wp.array[wp.float64], value: wp.float64) -> int:
    slot = wp.atomic_add(count, 0, 1)
    if slot >= capacity:
        return -1
    contacts[slot] = value
    return slot


@wp.kernel
def generate_contacts(
    x: wp.array[wp.float64], count: wp.array[wp.int32], capacity: int, contacts: wp.array[wp.float64]
):
    tid = wp.tid()
    write_contact(count, capacity, contacts, x[tid] * x[tid])


@wp.kernel
def running_sum(x: wp.array[wp.float64], acc: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    before = wp.atomic_add(acc, 0, x[tid] * x[tid])
    out[tid] = before * wp.sin(x[tid])


X = [0.7, -1.3, 1.9, 0.4, -0.6, 1.1]
N = len(X)


def _cases():
    """name -> harness Case, built in the child process (the harness imports the rewrite)."""
    from tests.support.harness import Case, f64, i32

    zeros = lambda n: f64(np.zeros(n), True)  # noqa: E731
    keys = [3, 10, 17, 5, 24, 12]
    return {
        "compaction": Case(compact_positive, N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0]),
        "loop": Case(emit_particles, N, lambda: [i32([2, 0, 3, 1, 2, 1]), f64(X, True), i32([0]), zeros(9)], [3], [1]),
        "cas_probe_loop": Case(insert_keys, N, lambda: [i32(keys), f64(X, True), i32([-1] * 7), 7, zeros(7)], [4], [1]),
        "helper": Case(generate_contacts, N, lambda: [f64(X, True), i32([0]), 4, zeros(4)], [3], [0]),
        "exact_float_return": Case(running_sum, N, lambda: [f64(X, True), f64([0.3], True), zeros(N)], [1, 2], [0, 1]),
    }


# --- the child process --------------------------------------------------------------------------------


class _Recorder:
    """A Warp logger (``wp.set_logger``) that keeps the warnings: Warp's default logger writes them to stderr
    through its own ``warnings.showwarning``, past ``warnings.catch_warnings(record=True)``."""

    def __init__(self):
        self.warnings: list[str] = []

    def debug(self, message: str) -> None:
        pass

    def info(self, message: str) -> None:
        pass

    def warning(self, message: str, category=None, stacklevel: int = 1) -> None:
        self.warnings.append(message)

    def error(self, message: str) -> None:
        self.warnings.append(message)

    def take(self) -> list[str]:
        taken, self.warnings = self.warnings, []
        return taken


def _child() -> None:
    """Turn the checkers on before anything is built, check every pattern, print one JSON line of results."""
    sys.path[:0] = [str(ROOT)]
    wp.config.mode = "debug"
    wp.config.verify_autograd_array_access = True
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    from tests.support.harness import check
    from warp_rewrite import wp_rewrite

    recorder = _Recorder()
    wp.set_logger(recorder)
    cases = _cases()
    results = {"mode": wp.config.mode, "verify": wp.config.verify_autograd_array_access, "patterns": {}}
    for case in cases.values():
        wp_rewrite(case.kernel)
    for name, case in cases.items():
        try:
            check(case)
            error = None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        results["patterns"][name] = {"error": error, "warnings": recorder.take()}
    _read_then_write()
    results["probe_warnings"] = recorder.take()
    print(json.dumps(results))


def _read_then_write() -> None:
    """Proof that the verification is on: a kernel that overwrites what it read must be reported."""

    @wp.kernel(module="unique")
    def overwrite(a: wp.array[wp.float64]):
        v = a[0]
        a[0] = v * wp.float64(2.0)

    a = wp.ones(1, dtype=wp.float64, requires_grad=True, device="cpu")
    with wp.Tape():
        wp.launch(overwrite, 1, inputs=[a], device="cpu")


def _out_of_bounds_child() -> None:
    """Proof that bounds checks are on: a write past the end must abort this process."""
    wp.config.mode = "debug"
    wp.init()

    @wp.kernel(module="unique")
    def write_past_the_end(out: wp.array[wp.float64]):
        out[wp.tid() + 1] = wp.float64(1.0)

    wp.launch(write_past_the_end, 2, inputs=[wp.zeros(2, dtype=wp.float64, device="cpu")], device="cpu")
    wp.synchronize()
    print("no bounds check")


def poison_allocations() -> None:
    """Fill every array ``wp.empty`` makes, as the runtime calls it, with NaN (floats) or 0x7f7f7f7f (ints, an index
    past any array's end)."""
    empty = wp.empty

    def poisoned(*args, **kwargs) -> wp.array:
        array = empty(*args, **kwargs)
        if array.size and not isinstance(array.dtype, wp._src.codegen.Struct):
            floats = wp._src.types.type_scalar_type(array.dtype) in wp._src.types.float_types
            array.numpy().view(np.uint8)[...] = 0xFF if floats else 0x7F
        return array

    wp.empty = poisoned


# kernels of the fuzzer's slice run under each checker: the first 60, which draw every combination cell
# (tests/fuzz/combinations.py; every sixth kernel's only hazard is its loops, and draws none)
FUZZ_SEED, FUZZ_COUNT = 2026, 60
CHECKERS = {"verify_fp": {"verify_fp": True}, "debug": {"mode": "debug"}}
FP_REPORT = re.compile(r"\.h:\d+ - \w+\(")  # how native/array.h and builtin.h report a value that is not finite


def _fuzz_child(checker: str, count: int = FUZZ_COUNT) -> None:
    """The fuzzer's slice (through the API) and the z-buffer patterns (exact returns and compared reads, through the
    command line: the runtime copied beside the emitted file allocates alike) under one checker, with poisoned
    allocations; prints the slice's summary line, then every failure. ``count``: kernels of the slice (the whole
    slice by hand: ``python tests/api/test_checkers.py --fuzz-debug 200``)."""
    sys.path[:0] = [str(ROOT)]
    for name, value in CHECKERS[checker].items():
        setattr(wp.config, name, value)
    wp.config.log_level = wp.LOG_ERROR
    wp.init()
    poison_allocations()
    from tests.fuzz.runner import FAILED, run

    summary = run(FUZZ_SEED, count)
    print(summary.line(), flush=True)
    for outcome in summary.outcomes:
        if outcome.status == FAILED:
            print(outcome.report(), flush=True)
    for name, error in _emitted_patterns().items():
        print(f"FAILED {name} through the command line: {error}", flush=True)


def _emitted_patterns() -> dict[str, str]:
    """The z-buffer patterns through the command line's copy of their module: name -> error, for those that fail."""
    import tempfile

    from tests.runtime.test_zbuffer import KERNELS, N
    from tests.support import zbuffer
    from tests.support.emitted import rewritten_copy, through
    from tests.support.harness import Case, check

    failed = {}
    with tempfile.TemporaryDirectory(prefix="wp-checked-") as folder:
        emitted = rewritten_copy(zbuffer, Path(folder))
        for name, pattern in KERNELS.items():
            try:
                check(Case(None, N, pattern.make, pattern.loss, pattern.wrt, program=through(emitted, name, N)))
            except Exception as error:
                failed[name] = f"{type(error).__name__}: {error}"
    return failed


def _not_finite_child() -> None:
    """Proof that floating-point verification is on: a kernel storing a NaN must be reported."""
    wp.config.verify_fp = True
    wp.init()

    @wp.kernel(module="unique")
    def store_nan(out: wp.array[wp.float64]):
        out[0] = out[0] / out[0]

    wp.launch(store_nan, 1, inputs=[wp.zeros(1, dtype=wp.float64, device="cpu")], device="cpu")
    wp.synchronize()


def _run_child(mode: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(Path(__file__).resolve()), mode]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, env=env, cwd=ROOT)


# --- the tests ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checked() -> dict:
    """Every pattern checked once in one child process (with the checkers on, every module is rebuilt)."""
    done = _run_child("--child")
    assert done.returncode == 0, f"child process failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_checkers_were_on(checked):
    assert checked["mode"] == "debug"
    assert checked["verify"] is True
    assert any("written to after it has been read" in m for m in checked["probe_warnings"]), checked["probe_warnings"]


@pytest.mark.parametrize("pattern", ["compaction", "loop", "cas_probe_loop", "helper", "exact_float_return"])
def test_pattern_passes_with_the_checkers_on(checked, pattern):
    result = checked["patterns"][pattern]
    assert result["error"] is None, result["error"]
    assert result["warnings"] == [], result["warnings"]


def test_debug_mode_really_checks_bounds_on_the_cpu():
    done = _run_child("--out-of-bounds")
    assert done.returncode != 0 and "Assertion failed" in done.stderr, (done.returncode, done.stdout, done.stderr)


def test_floating_point_verification_really_reports_on_the_cpu():
    done = _run_child("--not-finite")
    assert done.returncode == 0 and FP_REPORT.search(done.stdout), (done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize("checker", sorted(CHECKERS))
def test_the_fuzzers_slice_under_the_checker(checker):
    """Rewritten kernels read no memory they did not write: with allocations poisoned, no floating-point report
    (verify_fp: the runtime zeroes float records then, since every store checks the value it overwrites), no
    bounds check failing (debug), and every kernel checked or refused as without the checker, through the API (the
    slice) and the command line (the z-buffer patterns)."""
    done = _run_child(f"--fuzz-{checker}")
    failed = f"child process failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, failed
    reports = [line for line in done.stdout.splitlines() if FP_REPORT.search(line)]
    assert not reports, f"{len(reports)} floating-point reports, the first: {reports[:5]}"
    summary = next(line for line in done.stdout.splitlines() if line.startswith("fuzz: "))
    assert " 0 failed" in summary and "FAILED" not in done.stdout, done.stdout[-8000:]


if __name__ == "__main__":
    children = {"--child": _child, "--out-of-bounds": _out_of_bounds_child, "--not-finite": _not_finite_child}
    children |= {
        f"--fuzz-{checker}": lambda checker=checker: _fuzz_child(checker, *map(int, sys.argv[2:3]))
        for checker in CHECKERS
    }
    children[sys.argv[1]]()
