"""The invariant over generated code of what the replay may read inside a loop Warp does not unroll
(``tests/support/loop_restores.py``, applied to every kernel the suite and the fuzzer rewrite): it holds on the
rewrite of each loop form, and fails on a replay broken on purpose in each way it names."""

from __future__ import annotations

import dataclasses

import pytest

from tests.support import loops, queries
from tests.support.loop_restores import unrestored_loop_locals
from warp_rewrite import pipeline
from warp_rewrite.live_frontend import LiveFrontend


def generated(kernel):
    frontend = LiveFrontend(kernel, set())
    result = pipeline.rewrite_kernel(frontend)
    assert result is not None
    return frontend, result


def broken(kernel, old: str, new: str) -> list[str]:
    """The invariant's problems with the kernel's rewrite, its replay changed from ``old`` (once, in the replay)."""
    frontend, result = generated(kernel)
    replay_at = result.source.index(f"def {result.replay_kernel}(")
    helpers_at = min(result.source.find(f"def {d}(") for d in result.definitions if d.endswith("_replay"))
    start = min(replay_at, helpers_at)
    assert result.source.count(old, start) >= 1, f"'{old}' is not in the replay:\n{result.source[start:]}"
    source = result.source[:start] + result.source[start:].replace(old, new, 1)
    return unrestored_loop_locals(frontend, dataclasses.replace(result, source=source))


@pytest.mark.parametrize(
    "kernel",
    [
        loops.squared_sum,
        loops.squared_sum_alone,
        loops.halvings,
        loops.argmax_of_grid,
        loops.windows,
        loops.nested,
        loops.probe_while_true,
        loops.named_components,
        loops.update_then_break,
        loops.update_then_break_into_slot,
        queries.grid_neighbours,
        queries.grid_neighbours_for,
        queries.box_pairs,
        queries.mesh_boxes,
    ],
    ids=lambda kernel: kernel.key,
)
def test_the_rewrite_of_every_loop_form_meets_it(kernel):
    frontend, result = generated(kernel)
    assert unrestored_loop_locals(frontend, result) == []


def test_a_local_carried_into_the_next_trip_and_not_restored_fails_it():
    problems = broken(
        loops.squared_sum, "acc = wp_rewrite_runtime.carried_float64(acc, acc_in_loop0, coordinate0)\n", "\n"
    )
    assert [p.split(":", 2)[::2] for p in problems] == [
        ["squared_sum_replay", " 'acc' is carried into the next trip but not set from a record at each trip's start"]
    ]


def test_a_local_carried_out_of_the_loop_and_not_restored_fails_it():
    problems = broken(loops.squared_sum, "acc = wp_rewrite_runtime.carried_float64(acc, acc_after_loop0, i)", "")
    assert [p.split(":", 2)[::2] for p in problems] == [
        ["squared_sum_replay", " 'acc' is carried out of the loop but not set from a record right after it"]
    ]


def test_a_restore_from_what_is_no_record_fails_it():
    problems = broken(
        loops.windows, "carried_float64(total, total_in_loop0, coordinate0)", "carried_float64(total, x, 0)"
    )
    assert len(problems) == 1 and "'total' is carried into the next trip" in problems[0]


def test_an_int_read_before_its_restore_fails_it():
    """The restore must come before any read: a read of the carried index first sees Warp's replayed value."""
    problems = broken(loops.halvings, "        count = count_in_loop0[coordinate0]\n", "        count = count + 0\n")
    assert len(problems) == 1 and "'count' is carried into the next trip" in problems[0]


def test_a_while_loop_left_in_the_replay_fails_it():
    problems = broken(loops.halvings, "for trips0 in range(trips0_records[i]):", "while value > wp.float64(1.0):")
    assert any("a while loop" in p for p in problems)
    assert any("is not replayed as a for loop over its recorded trips" in p for p in problems)


def test_a_while_loop_replayed_over_other_trips_than_recorded_fails_it():
    problems = broken(loops.halvings, "range(trips0_records[i])", "range(trip_capacity0)")
    assert len(problems) == 1 and "is not replayed as a for loop over its recorded trips" in problems[0]


def test_a_query_loop_left_in_the_replay_fails_it():
    _, result = generated(queries.grid_neighbours_for)
    replay = result.source[result.source.index(f"def {result.replay_kernel}(") :]
    header = next(line for line in replay.splitlines() if "for trips" in line)
    problems = broken(
        queries.grid_neighbours_for,
        header.strip(),
        "for j in wp.hash_grid_query(grid, points[i], wp.float32(radius)):",
    )
    assert any("not a range" in p for p in problems)


def test_a_break_left_in_a_replayed_loop_fails_it():
    problems = broken(
        loops.halvings, "iteration0_active = False\n        if iteration0_active:", "break\n        if True:"
    )
    assert any("a break or continue" in p for p in problems)
