"""What ``rewrite_launches()`` adds to a ``wp.launch`` of a kernel that needs no rewrite (issue 37, item 4).

Usage: ``python -m bench.launch_cost [--launches N] [--repeats R] [--no-newton] [--write]``.

Two measurements, each against plain Warp (``wp.launch`` as Warp defines it, the hook out of the way) in the same
process, the variants interleaved repeat by repeat and their fastest repeats compared, in CPU time of the process (on
a shared machine, wall time measures the other processes too):

- a launch-bound loop: ``--launches`` (2,000) launches of a small kernel (one add per thread, 16 threads), without a
  tape and on one, through a bare Python wrapper (the floor for anything in ``wp.launch``'s place), with the hook
  installed but off, and with ``rewrite_launches()`` on;
- Newton's differentiable ball example (``newton.examples.diffsim.example_diffsim_ball``, a null viewer): its
  forward (288 substeps and the loss) without a tape, and its forward and backward on a tape, with and without
  ``rewrite_launches()`` (where Newton 1.8 is installed: ``pip install newton==1.8.0``, as ``make realcode`` does).

The times (per launch in microseconds, per step in milliseconds) are printed; ``--write`` also puts them in the
section "Launch cost" of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import warp as wp

import warp_rewrite
from bench.kernels import add_one
from warp_rewrite.runtime import hook

RESULTS = Path(__file__).with_name("RESULTS.md")
SECTION = "## Launch cost of `rewrite_launches()`"
THREADS = 16


@dataclass(frozen=True)
class Variant:
    """How ``wp.launch`` is set up while a measurement runs."""

    name: str
    launch: Callable  # what wp.launch is meanwhile
    rewriting: bool  # rewrite_launches() on

    def __enter__(self):
        wp.launch = self.launch
        warp_rewrite.rewrite_launches(self.rewriting)

    def __exit__(self, *exc):
        wp.launch = hook.launch
        warp_rewrite.rewrite_launches(False)


def bare_wrapper(kernel, *args, **kwargs):
    """The least any Python function in ``wp.launch``'s place adds: one more frame, which Warp's launch on a tape also
    inspects (it records the caller's file and line)."""
    return hook.warp_launch(kernel, *args, **kwargs)


PLAIN = Variant("plain Warp", hook.warp_launch, False)
WRAPPER = Variant("a bare wrapper", bare_wrapper, False)
HOOKED = Variant("hook, rewrite off", hook.launch, False)
REWRITING = Variant("rewrite_launches()", hook.launch, True)


def _fastest(variants: list[Variant], repeats: int, run: Callable[[], None]) -> dict[str, float]:
    """CPU seconds of this process per ``run()``, the fastest of ``repeats``, the variants interleaved (after one
    warm-up run each): on a shared machine other processes add wall time, and the fastest run is the closest to the
    cost itself (as ``timeit`` has it). Warp runs CPU kernels on the launching thread, so their time is counted."""
    times: dict[str, list[float]] = {variant.name: [] for variant in variants}
    for repeat in range(repeats + 1):
        for variant in variants:
            with variant:
                start = time.process_time()
                run()
                elapsed = time.process_time() - start
            if repeat:
                times[variant.name].append(elapsed)
    return {name: min(values) for name, values in times.items()}


def launch_loop(launches: int, repeats: int) -> dict[str, dict[str, float]]:
    """Microseconds per launch of ``add_one``, without a tape and on one."""
    values = wp.zeros(THREADS, dtype=float, requires_grad=True, device="cpu")
    wp.load_module(add_one.module, device="cpu")

    def untaped():
        for _ in range(launches):
            wp.launch(add_one, THREADS, inputs=[values], device="cpu")

    def taped():
        with wp.Tape():
            for _ in range(launches):
                wp.launch(add_one, THREADS, inputs=[values], device="cpu")

    variants = [PLAIN, WRAPPER, HOOKED, REWRITING]
    return {
        where: {name: seconds / launches * 1e6 for name, seconds in _fastest(variants, repeats, run).items()}
        for where, run in (("no tape", untaped), ("on a tape", taped))
    }


def newton_ball(repeats: int) -> dict[str, dict[str, float]] | None:
    """Milliseconds per forward (no tape) and per forward and backward (on a tape) of Newton's ball example."""
    try:
        import newton
        from newton.examples.diffsim.example_diffsim_ball import Example
    except ImportError:
        return None
    with wp.ScopedDevice("cpu"):
        example = Example(newton.viewer.ViewerNull(), argparse.Namespace(verbose=False))
        example.graph = None

        def forward_backward():
            example.forward_backward()
            example.tape.zero()

        variants = [PLAIN, REWRITING]
        return {
            where: {name: seconds * 1e3 for name, seconds in _fastest(variants, repeats, run).items()}
            for where, run in (("forward", example.forward), ("forward + backward, taped", forward_backward))
        }


def report(loop: dict[str, dict[str, float]], ball: dict[str, dict[str, float]] | None, launches: int) -> str:
    lines = [
        "| launches of a small kernel (µs/launch) | plain Warp | a bare wrapper | hook, rewrite off | "
        "`rewrite_launches()` | added |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for where, times in loop.items():
        added = times[REWRITING.name] - times[PLAIN.name]
        lines.append(
            f"| {launches:,}, {where} | {times[PLAIN.name]:.2f} | {times[WRAPPER.name]:.2f} | {times[HOOKED.name]:.2f} "
            f"| {times[REWRITING.name]:.2f} | **{added:+.2f}** |"
        )
    if ball is not None:
        lines += ["", "| Newton's ball example (ms) | plain Warp | `rewrite_launches()` | ratio |"]
        lines.append("|---|---:|---:|---:|")
        for where, times in ball.items():
            ratio = times[REWRITING.name] / times[PLAIN.name]
            lines.append(f"| {where} | {times[PLAIN.name]:.1f} | {times[REWRITING.name]:.1f} | **{ratio:.2f}** |")
    return "\n".join(lines)


ABOUT = """Every `wp.launch` goes through the hook once warp-rewrite's runtime is loaded. A launch of a kernel with
nothing to rewrite used to bind `wp.launch`'s signature at each call (30-60 µs; Newton's ball example: forward 34 to
60 ms, taped forward and backward 120 to 183 ms); now, without a tape, it asks only whether one is active, and on a
tape what to run is decided once per kernel object and kept on it (`rewrite/runtime/hook.py`). Times are CPU time
of the process, the fastest of the repeats, the variants interleaved, on a machine shared with other jobs (their
noise is of the order of the differences). Any Python function in `wp.launch`'s place costs something on a tape,
where Warp's launch records its caller's file and line: the frame it reads is the wrapper's, made anew at each call
(\"a bare wrapper\"). The rest of the hook's cost on a tape is the check of its decision."""


def write(text: str) -> None:
    results = RESULTS.read_text()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = f"`python -m bench.launch_cost --write` ({stamp}, CPU, Warp {wp.__version__})"
    section = f"{SECTION}\n\n{command}:\n\n{text}\n\n{ABOUT}\n"
    if SECTION in results:
        start = results.index(SECTION)
        end = results.find("\n## ", start + 1)
        results = results[:start] + section + (results[end:] if end >= 0 else "")
    else:
        results = results.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(results)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--no-newton", action="store_true", help="only the launch-bound loop")
    parser.add_argument("--write", action="store_true", help="put the results in bench/RESULTS.md")
    args = parser.parse_args(argv)
    wp.init()
    loop = launch_loop(args.launches, args.repeats)
    ball = None if args.no_newton else newton_ball(max(3, args.repeats // 3))
    text = report(loop, ball, args.launches)
    print(text)
    if args.write:
        write(text)


if __name__ == "__main__":
    main()
