"""The invariants every generated kernel must meet, checked where the pipeline hands it out: by the suite
(``tests/conftest.py``) and by the long fuzz run (``python -m tests.fuzz``) alike.

- its replay reads only memory the launch does not write, or records (``replay_reads``);
- its record kernel is the original plus record stores, and its count kernel the record kernel less the writes
  into arrays nothing reads back, which the record kernel indeed never reads, reporting the trips of the same loops
  (``record_kernels``);
- its replay keeps every float atomic of the original (``replay_atomics``);
- a helper's replay that Warp's backward runs again, having no ``@wp.func_replay`` twin, writes no memory
  (``replay_twins``);
- every loop of its replay that Warp does not unroll runs recorded trips, and sets each local it carries from a
  record before reading it (``loop_restores``);
- every array Warp's code generator sees it write is in its plan's written set (``written_arrays``);
- it calls only the runtime names of the ABI, and its replay none of those only the forward may call: a trip
  check, a record's store, an exact atomic (``generated_names``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.generated_names import forward_calls_in_replays, unlisted_runtime_names
from tests.support.loop_restores import unrestored_loop_locals
from tests.support.record_kernels import count_kernel_differences, dropped_reads, record_kernel_differences
from tests.support.replay_atomics import dropped_float_atomics
from tests.support.replay_reads import unrecorded_reads
from tests.support.replay_twins import rerun_writes
from tests.support.written_arrays import unseen_writes
from warp_rewrite import pipeline


def check_invariants(frontend: pipeline.Frontend, generated: pipeline.GeneratedKernel) -> None:
    """Raise AssertionError, naming the kernel and each problem, if ``generated`` breaks an invariant."""
    checks = {
        "unrecorded reads in its replay": unrecorded_reads,
        "record kernel": lambda f, g: (
            record_kernel_differences(f, g) + count_kernel_differences(f, g) + dropped_reads(f, g)
        ),
        "float atomics its replay dropped": dropped_float_atomics,
        "writes Warp's backward runs again": rerun_writes,
        "loops its replay runs without their records": unrestored_loop_locals,
        "writes the plan missed": unseen_writes,
        "runtime names not in the ABI": unlisted_runtime_names,
        "calls in its replay only the forward may make": forward_calls_in_replays,
    }
    for what, check in checks.items():
        problems = check(frontend, generated)
        assert not problems, f"kernel '{generated.kernel}': {what}:\n" + "\n".join(problems)


@contextmanager
def checking_every_generated_kernel() -> Iterator[None]:
    """While inside, every kernel the pipeline generates is checked before it is handed out."""
    rewrite_kernel = pipeline.rewrite_kernel

    def checked(frontend, *options):
        generated = rewrite_kernel(frontend, *options)
        if generated is not None:
            check_invariants(frontend, generated)
        return generated

    pipeline.rewrite_kernel = checked
    try:
        yield
    finally:
        pipeline.rewrite_kernel = rewrite_kernel
