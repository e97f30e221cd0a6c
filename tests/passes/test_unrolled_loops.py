"""passes/plan.py on loops Warp unrolls: a consumed atomic inside gets a record per trip, and nothing the loop carries
is restored, since Warp's backward replays unrolled trips as straight code (``tests/support/unrolled_loops.py``);
gradients against finite differences through the API and the command line."""

import pytest

from tests.support import unrolled_loops
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import f64, i32
from warp_rewrite import wp_rewrite
from warp_rewrite.runtime import RecordKind

N = 3
X = [0.41, 0.63, 0.27]


def _plain():
    return [f64(X, True), i32([0]), f64([0.0] * N, True)]


KERNELS = {
    "literal_range_slots": Pattern(_plain, [2], [0]),
    "later_static_slots": Pattern(_plain, [2], [0]),
    "literal_range_inside_dynamic": Pattern(
        lambda: [f64(X, True), i32([2, 0, 3]), i32([0]), f64([0.0] * N, True)], [3], [0]
    ),
    "literal_range_with_continue": Pattern(_plain, [2], [0]),
    "static_range_slots": Pattern(_plain, [2], [0]),
    "named_range_slots": Pattern(_plain, [2], [0]),
    "static_range_past_max_unroll": Pattern(_plain, [2], [0]),
}
emitted = emitted_fixture(unrolled_loops)
test_through_the_api, test_through_the_command_line = end_to_end_tests(unrolled_loops, N, KERNELS)


def _carried(name: str) -> dict[str, tuple[int, ...]]:
    pair = wp_rewrite(getattr(unrolled_loops, name)).pair
    assert pair is not None
    return {record.name: record.loops for record in pair.spec.records if record.kind == RecordKind.CARRIED}


@pytest.mark.parametrize(
    "name",
    [
        "literal_range_slots",
        "later_static_slots",
        "literal_range_with_continue",
        "static_range_slots",
        "named_range_slots",
    ],
)
def test_a_loop_warp_unrolls_carries_nothing(name):
    assert _carried(name) == {}


def test_only_the_loop_warp_does_not_unroll_carries():
    carried = _carried("literal_range_inside_dynamic")
    assert carried and all(loops in ((0,), ()) for loops in carried.values()), carried


def test_a_constant_range_past_max_unroll_is_replayed_as_a_loop_of_known_length():
    """The static's value, read off the module (``LONG_STEPS + 1``, 18 trips, folded as Warp evaluates it) is past
    ``max_unroll`` for a loop holding no other static: Warp runs it as a loop, of known length (no count, no check)."""
    assert _carried("static_range_past_max_unroll") == {"acc_in_loop0": (0,), "acc_after_loop0": ()}
    pair = wp_rewrite(unrolled_loops.static_range_past_max_unroll).pair
    assert pair is not None and [loop.trips for loop in pair.spec.loops] == [18]
