"""passes/plan.py: the planner: helpers cloned per call site, and refusals that name the construct.

Nothing here compiles or launches a kernel.
"""

import pytest

from tests.support.pass_sources import Unit, generated, plan_of, same_code
from warp_rewrite.passes.refusals import Refusal
from warp_rewrite.passes.two_phase import REPLAY


def test_helper_is_cloned_for_each_call_site():
    helper = Unit("""
        @wp.func
        def take(count: wp.array[int]) -> int:
            return wp.atomic_add(count, 0, 1)
    """)
    plan = plan_of(
        """
        @wp.kernel
        def uses(count: wp.array[int], out: wp.array[float]):
            out[take(count)] = 1.0
            out[take(count)] = 2.0
        """,
        {"take": helper},
    )
    same_code(
        generated(plan, REPLAY),
        """
        @wp.func
        def take_1_replay(count: wp.array[int], atomic_add_records_1: wp.array(dtype=wp.int32), coordinate: int) -> int:
            return rt.recorded_int32(atomic_add_records_1, coordinate)

        @wp.func
        def take_replay(count: wp.array[int], atomic_add_records: wp.array(dtype=wp.int32), coordinate: int) -> int:
            return rt.recorded_int32(atomic_add_records, coordinate)

        @wp.kernel
        def uses_replay(count: wp.array[int], out: wp.array[float], atomic_add_records: wp.array(dtype=wp.int32),
                        atomic_add_records_1: wp.array(dtype=wp.int32)):
            PROLOGUE
            out[take_replay(count, atomic_add_records, thread)] = 1.0
            out[take_1_replay(count, atomic_add_records_1, thread)] = 2.0
        """,
    )


def test_the_plan_notes_where_each_array_it_copies_is_read():
    """A dry run may copy fewer arrays than the launch reads back (``passes.count_slice.fewer_copies``): for each,
    the plan has the places its functions read it, an atomic's marked as read only where its value is used."""
    plan = plan_of("""
        @wp.kernel
        def emit(n: wp.array[int], count: wp.array[int], marks: wp.array[float], out: wp.array[float]):
            tid = wp.tid()
            marks[tid] = marks[tid] + 1.0
            for k in range(n[tid]):
                out[wp.atomic_add(count, 0, 1)] = marks[tid]
    """)
    assert plan.copied == set(plan.read_at) == {"count", "marks"}
    (atomic,) = plan.read_at["count"]
    assert (atomic.line, atomic.only_its_value) == (7, True)  # (the source's first line is blank)
    assert sorted((place.line, place.only_its_value) for place in plan.read_at["marks"]) == [(5, False), (7, False)]


def test_refusals_name_the_construct():
    with pytest.raises(Refusal, match="atomic in a while loop's condition"):
        plan_of("""
            @wp.kernel
            def probe(table: wp.array[int], key: int, n: int, out: wp.array[float]):
                slot = key % n
                while wp.atomic_cas(table, slot, -1, key) != -1:
                    out[slot] += 1.0  # differentiable work: the replay runs the loop
                    slot = (slot + 1) % n
        """)
    with pytest.raises(Refusal, match=r"'total' is first assigned inside this loop and read after it"):
        plan_of("""
            @wp.kernel
            def accumulate(count: wp.array[int], x: wp.array[float], n: int, out: wp.array[float]):
                for i in range(n):
                    total = x[wp.atomic_add(count, 0, 1)]
                out[0] = total
        """)
