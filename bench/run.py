"""Benchmark: original vs hand-written record/replay vs rewritten kernels, forward and backward.

Usage: ``python -m bench.run [--smoke] [--sizes 1e4 1e5 ...] [--repeats N] [--device cpu|cuda] [--cases ...]
[--clock wall|thread] [--out bench/results.json] [--plot bench/bench.png]``.

The three variants of a pattern run side by side in one process, interleaved repeat by repeat, so that a
slower stretch of a shared machine hits all three alike; medians of the repeats give the ratios. A warm-up
launch of each variant comes first, so compilation is never timed. Compile time and rewrite time are
measured in a separate process with an empty kernel cache (see ``compile_probe``).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

from warp_rewrite import RewriteError, launch, wp_rewrite

VARIANTS = ("original", "handwritten", "rewritten")
CPU_SIZES = (10_000, 100_000, 1_000_000)
CUDA_SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
SMOKE_SIZES = (64, 200)
# Quick sizes repeat more, up to this much time per variant: a launch of 10,000 threads takes under a
# millisecond, where one stretch of a busy shared machine moves a median of 21 by 5%.
REPEAT_SECONDS = 1.0
MOST_REPEATS = 301
TARGETS = {
    "forward vs hand-written": 1.05,
    "backward vs hand-written": 1.05,
    "forward vs original": 1.10,
    "rewrite ms (passes)": 5.0,
    "cached rewrite ms": 0.01,
    "compile vs original": 1.6,
    "record bytes vs hand-written": 1.01,  # a few bytes per launch (not per thread) are fine
    # Cases with exact float returns (BenchCase.exact_gradient): against the original forward, and against the
    # hand-written local-term backward (which lacks the gradient through the returns) at the largest CPU size.
    "exact forward vs original": 1.3,
    "exact backward vs hand-written at 1e6": 3.0,
}
EXACT_SIZE = "1000000"


# --- launching the three variants ---------------------------------------------------------------------


@dataclass
class Variant:
    """How to launch one variant of a case forward (under a tape, which the caller opens)."""

    name: str
    launch: Callable[[Any, str], None]  # (arguments, device)


def variants_of(case: Any) -> tuple[list[Variant], str | None]:
    """The case's variants; a kernel the rewrite refuses leaves out "rewritten" and says why."""
    variants = [
        Variant("original", lambda a, d: wp.launch(case.original, a.dim, inputs=a.values, device=d)),
        Variant("handwritten", lambda a, d: wp.launch(case.handwritten, a.dim, inputs=a.values + a.records, device=d)),
    ]
    try:
        rewritten = wp_rewrite(case.original, **case.rewrite_options)
    except RewriteError as error:
        return variants, f"unsupported (RewriteError: {error})"
    variants.append(Variant("rewritten", lambda a, d: launch(rewritten, a.dim, inputs=a.values, device=d)))
    verified = wp_rewrite(case.original, **case.rewrite_options, verify=True)  # what verify mode costs
    variants.append(Variant("verified", lambda a, d: launch(verified, a.dim, inputs=a.values, device=d)))
    return variants, None


# What a repeat is timed with: the wall clock, or the CPU time of the calling thread, which runs Warp's CPU kernels
# (a shared machine's load then slows a repeat without lengthening it; meaningless where a GPU does the work).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "thread": time.thread_time}


def run_once(
    variant: Variant, arguments: Any, device: str, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, float, Any]:
    """One timed forward under a tape and one timed backward; returns (forward s, backward s, tape)."""
    arguments.reset()
    wp.synchronize_device(device)
    tape = wp.Tape()
    start = clock()
    with tape:
        variant.launch(arguments, device)
    wp.synchronize_device(device)
    forward = clock() - start
    arguments.seed()
    wp.synchronize_device(device)
    start = clock()
    tape.backward()
    wp.synchronize_device(device)
    return forward, clock() - start, tape


def record_bytes(tape: Any, arguments: Any) -> int:
    """Bytes of the arrays a launch put on the tape besides the kernel's own arguments (its records)."""
    own = {id(v) for v in arguments.values}
    extra = {}
    for entry in tape.launches:
        if callable(entry):  # a backward step (exact float returns) holds no arrays of its own
            continue
        for value in [*entry[3], *entry[4]]:
            if isinstance(value, wp.array) and id(value) not in own:
                extra[id(value)] = value.size * wp.types.type_size_in_bytes(value.dtype)
    return sum(extra.values())


def time_case(
    case: Any, size: int, device: str, repeats: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, Any]:
    """Median forward/backward seconds of every variant at one size, plus record bytes per thread.

    ``repeats`` is the least number of timed repeats; quick sizes get more (``REPEAT_SECONDS``).
    """
    variants, unsupported = variants_of(case)
    arguments = case.make_arguments(size, device)
    times: dict[str, dict[str, list[float]]] = {v.name: {"forward": [], "backward": []} for v in variants}
    result: dict[str, Any] = {"record_bytes_per_thread": {}}
    slowest = 0.0
    for variant in variants:  # warm-up: compiles, and measures what each variant keeps for backward
        _, _, tape = run_once(variant, arguments, device, clock)
        forward, backward, _ = run_once(variant, arguments, device, clock)  # compiled now: how long a repeat takes
        slowest = max(slowest, forward + backward)
        if variant.name == "handwritten":
            result["record_bytes_per_thread"][variant.name] = sum(r.capacity for r in arguments.records) / size
        elif variant.name == "rewritten":
            result["record_bytes_per_thread"][variant.name] = record_bytes(tape, arguments) / size
        tape.reset()
    if repeats > 1:  # not in smoke runs
        repeats = max(repeats, min(MOST_REPEATS, int(REPEAT_SECONDS / slowest)))
    result["repeats"] = repeats
    for repeat in range(repeats):
        shift = repeat % len(variants)  # rotate the order so no variant always runs first
        for variant in variants[shift:] + variants[:shift]:
            forward, backward, tape = run_once(variant, arguments, device, clock)
            tape.reset()
            times[variant.name]["forward"].append(forward)
            times[variant.name]["backward"].append(backward)
    for name, phases in times.items():
        result[name] = {phase: statistics.median(values) for phase, values in phases.items()}
    if unsupported is None:
        result["ratios"] = ratios(result)
    return result


def ratios(result: dict[str, Any]) -> dict[str, float]:
    rewritten, handwritten, original = result["rewritten"], result["handwritten"], result["original"]
    verified = result["verified"]
    return {
        "forward vs hand-written": rewritten["forward"] / handwritten["forward"],
        "backward vs hand-written": rewritten["backward"] / handwritten["backward"],
        "forward vs original": rewritten["forward"] / original["forward"],
        "hand-written forward vs original": handwritten["forward"] / original["forward"],
        "verified forward vs rewritten": verified["forward"] / rewritten["forward"],
        "verified backward vs rewritten": verified["backward"] / rewritten["backward"],
    }


# --- correctness: the smoke test's check, and the benchmark's own ------------------------------------


@dataclass
class Comparison:
    """Every array after the forward of each variant, and each variant's gradients of the ``wrt`` inputs,
    all from identical arguments. ``forward["rewritten"]`` is absent when the rewrite refuses the kernel,
    and ``unsupported`` says why."""

    forward: dict[str, list[np.ndarray]]
    gradients: dict[str, list[np.ndarray]]
    unsupported: str | None
    exact: list[np.ndarray] | None = None  # the exact gradients, for cases whose hand-written variant lacks them

    def forward_equal(self, variant: str = "rewritten") -> bool:
        """The variant leaves every array exactly as the original does (CPU: threads run in order)."""
        pairs = zip(self.forward["original"], self.forward[variant], strict=True)
        return all(np.array_equal(a, b) for a, b in pairs)

    def gradients_equal(self) -> bool:
        """The rewritten variant's gradients are the hand-written record/replay kernel's (or the exact ones)."""
        if self.exact is not None:  # float32 kernels against a float64 reference
            pairs = zip(self.exact, self.gradients["rewritten"], strict=True)
            return all(np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in pairs)
        pairs = zip(self.gradients["handwritten"], self.gradients["rewritten"], strict=True)
        return all(np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in pairs)


def compare_variants(case: Any, size: int, device: str) -> Comparison:
    """Run every variant from the same arguments and keep what each leaves behind.

    The forward comparison is exact, so it is only meaningful where thread order is deterministic (CPU).
    """
    variants, unsupported = variants_of(case)
    arguments = case.make_arguments(size, device)
    forward: dict[str, list[np.ndarray]] = {}
    gradients: dict[str, list[np.ndarray]] = {}
    for variant in variants:
        _, _, tape = run_once(variant, arguments, device)
        forward[variant.name] = [v.numpy().copy() for v in arguments.values if isinstance(v, wp.array)]
        gradients[variant.name] = [w.grad.numpy().copy() for w in arguments.wrt]
        tape.reset()
    exact = case.exact_gradient(arguments) if case.exact_gradient else None
    return Comparison(forward, gradients, unsupported, exact)


# --- compile and rewrite time, in a fresh process -----------------------------------------------------


def compile_probe(case_names: Sequence[str], device: str) -> dict[str, Any]:
    """Runs in a child process: compile times with an empty kernel cache, and rewrite times.

    A trivial module is compiled first so that one-time compiler start-up is charged to no kernel. The
    rewrite is timed last, uncached, by dropping the kernel from wp_rewrite's cache: each extra rewrite
    adds kernels to the rewritten module, which must not happen before that module's compile is timed.
    """
    wp.config.kernel_cache_dir = tempfile.mkdtemp(prefix="wp-rewrite-bench-cache-")
    quiet_warp()
    from bench.kernels import BENCH_CASES, warm_up_compiler  # after the cache directory is set

    warm_up_compiler(device)
    results: dict[str, Any] = {}
    loaded: dict[int, dict[str, float]] = {}  # cases sharing their kernels (options apart) compile them once
    for case in (c for c in BENCH_CASES if c.name in case_names):
        if id(case.original) not in loaded:
            loaded[id(case.original)] = {
                "original_s": _load_seconds(case.original, device),
                "handwritten_s": _load_seconds(case.handwritten, device),
            }
        entry: dict[str, Any] = dict(loaded[id(case.original)])
        start = time.perf_counter()
        try:
            rewritten = wp_rewrite(case.original, **case.rewrite_options)
        except RewriteError as error:
            entry["unsupported"] = f"unsupported (RewriteError: {error})"
            entry["first_rewrite_ms"] = (time.perf_counter() - start) * 1e3
            results[case.name] = entry
            continue
        entry["first_rewrite_ms"] = (time.perf_counter() - start) * 1e3
        cached_rewrite = functools.partial(wp_rewrite, case.original, **case.rewrite_options)
        entry["cached_rewrite_ms"] = _median_ms(cached_rewrite, 200)
        entry["rewritten_s"] = sum(_load_seconds(k, device) for k in _generated_kernels(rewritten))
        entry.update(_detached_compile(rewritten, device))
        entry["rewrite_ms"], entry["passes_ms"] = _uncached_rewrite_ms(case, entry["first_rewrite_ms"])
        results[case.name] = entry
    return results


def quiet_warp() -> None:
    """Initialize Warp without its greeting and per-module load messages (they would bury the table)."""
    wp.config.log_level = wp.LOG_WARNING
    wp.init()


def _generated_kernels(rewritten: Any) -> list[Any]:
    """One generated kernel per Warp module the rewrite created (whatever attributes hold them)."""
    kernels = [rewritten.record_kernel, rewritten.replay_kernel] if rewritten.pair else []
    return list({id(k.module): k for k in kernels}.values())


def _detached_compile(rewritten: Any, device: str) -> dict[str, float]:
    """Rewrite and compile time of the variant that launches needing no exact gradient use, if there is one.

    Kernels with float returns get it at their first such launch (``RewrittenKernel.detached``), in a Warp
    module of its own: a program compiles it, the exact variant, or both, depending on what its launches need.
    """
    if not rewritten.pair or not any(site.exact for site in rewritten.pair.spec.sites):
        return {}
    start = time.perf_counter()
    detached = rewritten.detached()
    rewrite_ms = (time.perf_counter() - start) * 1e3
    return {"detached_rewrite_ms": rewrite_ms, "detached_s": _load_seconds(detached.record, device)}


def _load_seconds(kernel: Any, device: str) -> float:
    start = time.perf_counter()
    kernel.module.load(wp.get_device(device))
    return time.perf_counter() - start


def _median_ms(action: Callable[[], Any], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def _uncached_rewrite_ms(case: Any, first_ms: float) -> tuple[float, float]:
    """Median time of a rewrite that misses wp_rewrite's caches, whole and without Warp's part.

    Warp's part is building the generated ``wp.Kernel`` objects from the generated source (inside
    ``warp_rewrite.api.compile_generated``); what is left is the AST passes and their bookkeeping, which the
    rewrite-time target is about. The caches are private: the kernel is dropped from every weak-keyed
    dictionary of ``warp_rewrite.api``, whatever they are called. Were there none, the first call is all there is.
    """
    from warp_rewrite import api as rewrite_api

    caches = [v for v in vars(rewrite_api).values() if isinstance(v, weakref.WeakKeyDictionary)]
    if not caches:
        return first_ms, first_ms
    build_kernels = rewrite_api.compile_generated
    warp_seconds: list[float] = []

    def timed_build(text: str, namespace: dict[str, Any], label: str, module: str) -> dict[str, Any]:
        start = time.perf_counter()
        scope = build_kernels(text, namespace, label, module)
        warp_seconds[-1] += time.perf_counter() - start
        return scope

    def rewrite_uncached() -> None:
        for cache in caches:
            cache.pop(case.original, None)
        warp_seconds.append(0.0)
        wp_rewrite(case.original, **case.rewrite_options)

    rewrite_api.compile_generated = timed_build
    try:
        samples = []
        for _ in range(15):
            start = time.perf_counter()
            rewrite_uncached()
            samples.append((time.perf_counter() - start, warp_seconds[-1]))
    finally:
        rewrite_api.compile_generated = build_kernels
    whole = statistics.median(total for total, _ in samples) * 1e3
    passes = statistics.median(total - warp for total, warp in samples) * 1e3
    return whole, passes


def measure_compile(case_names: Sequence[str], device: str) -> dict[str, Any]:
    """Run ``compile_probe`` in a child process (a fresh Warp with its own empty kernel cache)."""
    root = Path(__file__).resolve().parent.parent
    command = [sys.executable, "-m", "bench.run", "--compile-probe", ",".join(case_names), "--device", device]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": f"compile probe failed ({done.returncode}): {done.stderr.strip()[-2000:]}"}
    results = json.loads(lines[-1])
    for entry in results.values():
        if "rewritten_s" in entry:
            entry["ratio"] = entry["rewritten_s"] / entry["original_s"]
        if "detached_s" in entry:
            entry["detached_ratio"] = entry["detached_s"] / entry["original_s"]
    return results


# --- reporting ----------------------------------------------------------------------------------------


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        names = [
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return {
        "cpu": f"{cpu}, {os.cpu_count()} logical cores",
        "gpu": ", ".join(d.name for d in wp.get_cuda_devices()) or "none",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "warp": wp.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _measured_values(case: dict[str, Any]) -> list[tuple[str, float]]:
    """(target name, measured value) for every measurement of one case that a target is about."""
    values = []
    for size, timing in case["sizes"].items():
        ratios_ = timing.get("ratios", {})
        if case.get("exact"):  # the exact path's own targets: its records and work are what exactness costs
            values += [("exact forward vs original", ratios_["forward vs original"])] if ratios_ else []
            if ratios_ and size == EXACT_SIZE:
                values.append(("exact backward vs hand-written at 1e6", ratios_["backward vs hand-written"]))
            continue
        values += [(name, value) for name, value in ratios_.items() if name in TARGETS]
        record = timing["record_bytes_per_thread"]
        if "rewritten" in record:
            values.append(("record bytes vs hand-written", record["rewritten"] / max(record["handwritten"], 1e-9)))
    keys = [
        ("rewrite ms (passes)", "passes_ms"),
        ("cached rewrite ms", "cached_rewrite_ms"),
        ("compile vs original", "ratio"),
        ("compile vs original", "detached_ratio"),
    ]
    values += [(name, case["compile"][key]) for name, key in keys if key in case.get("compile", {})]
    return values


def check_targets(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Worst value of each target over every supported case (and size), and whether it is met."""
    worst: dict[str, float] = {}
    for case in results["cases"].values():
        for name, value in _measured_values(case):
            worst[name] = max(worst.get(name, value), value)
    return {
        name: {"worst": worst[name], "target": t, "met": worst[name] <= t}
        for name, t in TARGETS.items()
        if name in worst
    }


def _row(name: str, size: str, timing: dict[str, Any]) -> str:
    """One table row: medians in ms, the ratios the targets are about, and record bytes per thread."""
    cells = [f"{name:14s} {size:>8s}"]
    for phase in ("forward", "backward"):
        cells.append(" ".join(f"{timing[v][phase] * 1e3:9.3f}" if v in timing else f"{'n/a':>9s}" for v in VARIANTS))
    r = timing.get("ratios")
    if r:
        cells.append(f"{r['forward vs hand-written']:11.3f} {r['backward vs hand-written']:5.3f}")
        cells.append(f"{r['forward vs original']:12.3f}")
    else:
        cells += [f"{'n/a':>17s}", f"{'n/a':>12s}"]
    b = timing["record_bytes_per_thread"]
    cells.append(
        f"{b.get('handwritten', 0):9.1f} {b['rewritten']:5.1f}"
        if "rewritten" in b
        else f"{b['handwritten']:9.1f}   n/a"
    )
    return " | ".join(cells)


def _compile_line(c: dict[str, Any]) -> str:
    detached = f", detached variant {c['detached_s']:.2f} s ({c['detached_ratio']:.2f}x)" if "detached_s" in c else ""
    return (
        f"compile: original {c['original_s']:.2f} s, hand-written {c['handwritten_s']:.2f} s, rewritten "
        f"{c['rewritten_s']:.2f} s ({c['ratio']:.2f}x){detached}; rewrite {c['rewrite_ms']:.2f} ms (passes "
        f"{c['passes_ms']:.2f} ms, first {c['first_rewrite_ms']:.2f} ms, cached {c['cached_rewrite_ms'] * 1e3:.2f} us)"
    )


def print_table(results: dict[str, Any]) -> None:
    machine_, clock = results["machine"], results.get("clock", "wall")
    print(f"\n{machine_['cpu']} | device {results['device']} | Warp {machine_['warp']} | {clock} clock")
    print(
        f"{'case':14s} {'threads':>8s} | {'fwd ms: original, hand-written, rewritten':>29s} | "
        f"{'bwd ms: (same order)':>29s} | rew/hand fwd bwd | rew/orig fwd | record B/thread hand rew"
    )
    for name, case in results["cases"].items():
        for size, timing in case["sizes"].items():
            print(_row(name, size, timing))
            r = timing.get("ratios", {})
            if "verified forward vs rewritten" in r:
                forward, backward = r["verified forward vs rewritten"], r["verified backward vs rewritten"]
                print(
                    f"{'':14s} {size:>8s} | verify mode vs rewritten: forward {forward:.2f}x, backward {backward:.2f}x"
                )
        if "unsupported" in case:
            print(f"{'':14s} rewritten: {case['unsupported']}")
        if "rewritten_s" in case.get("compile", {}):
            print(f"{'':14s} {_compile_line(case['compile'])}")
        elif "error" in case.get("compile", {}):
            print(f"{'':14s} {case['compile']['error']}")
    print("\ntargets (worst over cases and sizes):")
    for name, t in results["targets"].items():
        print(f"  {name:30s} {t['worst']:8.3f}  target <= {t['target']:<6}  {'met' if t['met'] else 'MISSED'}")


def plot(results: dict[str, Any], path: Path) -> str:
    """Time against size for the three variants (forward and backward per case); needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: plot skipped (pip install matplotlib)"
    cases = results["cases"]
    figure, axes = plt.subplots(2, len(cases), figsize=(4.2 * len(cases), 7.5), squeeze=False)
    for column, (name, case) in enumerate(cases.items()):
        sizes = [int(s) for s in case["sizes"]]
        for row, phase in enumerate(("forward", "backward")):
            axis = axes[row][column]
            for variant, style in zip(VARIANTS, ("o-", "s--", "^-"), strict=True):
                points = [
                    (n, t[variant][phase] * 1e3)
                    for n, t in zip(sizes, case["sizes"].values(), strict=True)
                    if variant in t
                ]
                if points:
                    axis.plot(*zip(*points, strict=True), style, label=variant)
            axis.set_xscale("log")
            axis.set_yscale("log")
            axis.set_title(f"{name}: {phase}" + (" (rewrite unsupported)" if "unsupported" in case else ""), fontsize=9)
            axis.set_xlabel("threads")
            axis.set_ylabel("ms (median)")
            axis.grid(True, which="both", alpha=0.3)
            axis.legend(fontsize=8)
    m = results["machine"]
    hardware = m["cpu"] if results["device"] == "cpu" else m["gpu"]
    figure.suptitle(f"warp-rewrite benchmark on {results['device']} ({hardware}), Warp {m['warp']}, {m['date']}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return f"plot written to {path}"


# --- entry point --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: checks that it all runs")
    parser.add_argument("--sizes", nargs="+", type=lambda s: int(float(s)), help="threads per launch (1e4 ok)")
    parser.add_argument("--repeats", type=int, default=None, help="least timed repeats per size, default 21")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present, else cpu)")
    parser.add_argument("--cases", nargs="+", help="only these cases (contacts, emission, running_total, ...)")
    parser.add_argument("--no-compile", action="store_true", help="skip the compile/rewrite-time probe")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="time repeats by the wall clock (default) or by the "
        "CPU time of the thread running the CPU kernels (steadier on a loaded machine; CPU only)",
    )
    parser.add_argument("--out", type=Path, help="JSON results (default bench/results.json; smoke: a temp dir)")
    parser.add_argument("--plot", type=Path, help="PNG plot (default bench/bench.png; smoke: a temp dir)")
    parser.add_argument("--compile-probe", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def output_paths(options: argparse.Namespace) -> tuple[Path, Path]:
    """Where the JSON and the plot go. A smoke run never overwrites the checked-in results."""
    folder = Path(tempfile.mkdtemp(prefix="wp-rewrite-bench-smoke-")) if options.smoke else Path("bench")
    return options.out or folder / "results.json", options.plot or folder / "bench.png"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table, write JSON and the plot; returns the results."""
    options = parse_args(argv)
    if options.compile_probe:
        print(json.dumps(compile_probe(options.compile_probe.split(","), options.device or "cpu")))
        return {}
    quiet_warp()
    from bench.kernels import BENCH_CASES  # defines kernels: after Warp is initialized

    device = options.device or ("cuda" if wp.is_cuda_available() else "cpu")
    if options.clock == "thread" and device != "cpu":
        raise SystemExit("--clock thread times the CPU's kernels: a GPU's work runs on no thread of this process")
    sizes = options.sizes or (SMOKE_SIZES if options.smoke else CUDA_SIZES if device.startswith("cuda") else CPU_SIZES)
    repeats = options.repeats or (1 if options.smoke else 21)
    cases = [c for c in BENCH_CASES if not options.cases or c.name in options.cases]
    results: dict[str, Any] = {
        "machine": machine(),
        "device": device,
        "repeats": repeats,
        "clock": options.clock,
        "cases": {},
    }
    compile_results = {} if options.no_compile else measure_compile([c.name for c in cases], device)
    for case in cases:
        entry: dict[str, Any] = {"description": case.description, "sizes": {}, "exact": bool(case.exact_gradient)}
        _, unsupported = variants_of(case)
        if unsupported:
            entry["unsupported"] = unsupported
        entry["compile"] = compile_results.get(case.name) or {k: v for k, v in compile_results.items() if k == "error"}
        for size in sizes:
            entry["sizes"][str(size)] = time_case(case, size, device, repeats, CLOCKS[options.clock])
            print(f"  {case.name} {size}: done", file=sys.stderr, flush=True)
        if device == "cpu" and not unsupported:
            comparison = compare_variants(case, min(sizes), device)
            entry["check"] = {
                "forward_equal": comparison.forward_equal(),
                "gradients_equal": comparison.gradients_equal(),
            }
        results["cases"][case.name] = entry
    results["targets"] = check_targets(results)
    print_table(results)
    out, png = output_paths(options)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results written to {out}")
    print(plot(results, png))
    return results


if __name__ == "__main__":
    main()
