"""passes/replay_needs.py: which calls a replay leaves out where nothing reads their value, and which records it
reads (what ``pipeline.unread_reads`` keeps recorded)."""

import ast

from tests.support.pass_sources import MODULE, parse
from warp_rewrite.passes.replay_needs import leaves_out, records_read


def test_a_record_only_handed_to_a_clone_that_does_not_read_it_is_not_read():
    replay = [
        parse("""
            @wp.func
            def update_replay(values: wp.array[int], values_reads: wp.array(dtype=wp.int32), coordinate: int):
                pass
        """),
        parse("""
            @wp.kernel
            def insert_replay(values: wp.array[int], out: wp.array[float], values_reads: wp.array(dtype=wp.int32),
                              slot_records: wp.array(dtype=wp.int32)):
                thread = wp.tid()
                update_replay(values, values_reads, thread)
                out[rt.recorded_int32(slot_records, thread)] = 1.0
        """),
    ]
    assert "slot_records" in records_read(replay) and "values_reads" not in records_read(replay)


def test_readers_of_records_and_constructors_go_where_nothing_reads_them_other_calls_stay():
    goes = leaves_out(frozenset(), MODULE.runtime)
    calls = {text: ast.parse(text, mode="eval").body for text in ["rt.recorded_float32(r, 0)", "wp.vec3(x, y, z)"]}
    assert all(goes(call) for call in calls.values())
    kept = ["rt.replay_returned(wp.atomic_add(a, 0, 1.0), r, 0)", "helper(a)", "other.recorded_float32(r, 0)"]
    assert not any(goes(ast.parse(text, mode="eval").body) for text in kept)
