"""passes/two_phase.py: the record, count and replay kernels the two-phase pass generates, as before/after source pairs.

Nothing here compiles or launches a kernel.
"""

import ast
import dataclasses

from tests.support.pass_sources import (
    COMPACTION,
    MODULE,
    NAMES,
    PROBE,
    Frontend,
    Unit,
    frontend_of,
    generated,
    parse,
    plan_of,
    same_code,
)
from warp_rewrite.passes.layout import record_params
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.plan import Planner
from warp_rewrite.passes.two_phase import (
    COUNT,
    RECORD,
    REPLAY,
    launch_arity,
    phase_functions,
    thread_index_prologue,
)


def test_record_kernel_before_after():
    same_code(
        generated(plan_of(COMPACTION), RECORD),
        """
        @wp.kernel
        def compact_record(x: wp.array[float], count: wp.array[int], out: wp.array[float],
                           slot_records: wp.array(dtype=wp.int32)):
            PROLOGUE
            tid = wp.tid()
            slot = rt.record_returned(wp.atomic_add(count, 0, 1), slot_records, thread)
            out[slot] = x[tid]
        """,
    )


def test_a_kernel_unpacking_several_indices_takes_the_launch_shape():
    """Its row in the records is computed from the launch shape; a 1-D kernel's row is wp.tid() itself."""
    two_d = dataclasses.replace(NAMES, coords=("c0", "c1"))
    same_code(
        generated(plan_of(COMPACTION.replace("tid = wp.tid()", "tid, j = wp.tid()")), RECORD, names=two_d),
        """
        @wp.kernel
        def compact_record(x: wp.array[float], count: wp.array[int], out: wp.array[float],
                           slot_records: wp.array(dtype=wp.int32), launch_shape: wp.vec4i):
            c0, c1 = wp.tid()
            thread = c0 * launch_shape[1] + c1
            tid, j = wp.tid()
            slot = rt.record_returned(wp.atomic_add(count, 0, 1), slot_records, thread)
            out[slot] = x[tid]
        """,
    )


def test_replay_kernel_reads_an_int_return_back():
    same_code(
        generated(plan_of(COMPACTION), REPLAY),
        """
        @wp.kernel
        def compact_replay(x: wp.array[float], count: wp.array[int], out: wp.array[float],
                           slot_records: wp.array(dtype=wp.int32)):
            PROLOGUE
            tid = wp.tid()
            slot = rt.recorded_int32(slot_records, thread)
            out[slot] = x[tid]
        """,
    )


def test_replay_reads_a_detached_float_return_back_keeping_its_atomic_for_its_own_adjoint():
    """Launches run such a replay only where no gradient flows through the return; the atomic stays as the
    stand-in's argument, its index read back, so that ``acc``'s gradient still reaches the operand. The kernel's
    docstring is not repeated (it stays above, in the user's kernel)."""
    plan = plan_of('''
        @wp.kernel
        def nested(c: wp.array[int], acc: wp.array[float], out: wp.array[float]):
            """A docstring, not repeated."""
            out[0] = wp.atomic_add(acc, wp.atomic_add(c, 0, 1), 2.0)
    ''')
    same_code(
        generated(plan, REPLAY),
        """
        @wp.kernel
        def nested_replay(c: wp.array[int], acc: wp.array[float], out: wp.array[float],
                          atomic_add_records: wp.array(dtype=wp.float32),
                          atomic_add_records_1: wp.array(dtype=wp.int32)):
            PROLOGUE
            out[0] = rt.replay_returned(wp.atomic_add(acc, rt.recorded_int32(atomic_add_records_1, thread), 2.0),
                                        atomic_add_records, thread)
        """,
    )


def test_a_helpers_replay_that_writes_nothing_gets_no_twin():
    """Warp's backward runs a called helper's forward again unless it has a ``@wp.func_replay``: a replay that keeps
    a write needs a twin that writes nothing. This probe's store is in a loop its replay leaves out (the slot comes
    back from its record), so its replay writes nothing and is its own twin (Newton's ``hashtable_find_or_insert``
    had one that read as it does)."""
    helpers = {
        "find": Unit("""
            @wp.func
            def find(key: int, keys: wp.array[int], active: wp.array[int]) -> int:
                n = keys.shape[0]
                idx = key % n
                for _i in range(n):
                    if wp.atomic_cas(keys, idx, -1, key) == -1:
                        active[wp.atomic_add(active, n, 1)] = idx
                        break
                    idx = (idx + 1) % n
                return idx
        """),
    }
    plan = plan_of(
        """
        @wp.kernel
        def insert(x: wp.array[float], ids: wp.array[int], keys: wp.array[int], active: wp.array[int],
                   out: wp.array[float]):
            tid = wp.tid()
            out[find(ids[tid], keys, active)] = x[tid] * x[tid]
        """,
        helpers,
    )
    same_code(
        generated(plan, REPLAY),
        """
        @wp.func
        def find_replay(key: int, keys: wp.array[int], active: wp.array[int],
                        idx_after_loop0: wp.array(dtype=wp.int32), coordinate: int) -> int:
            n = keys.shape[0]
            idx = key % n
            idx = idx_after_loop0[coordinate]
            return idx

        @wp.kernel
        def insert_replay(x: wp.array[float], ids: wp.array[int], keys: wp.array[int], active: wp.array[int],
                          out: wp.array[float], idx_after_loop0: wp.array(dtype=wp.int32)):
            PROLOGUE
            tid = wp.tid()
            out[find_replay(ids[tid], keys, active, idx_after_loop0, thread)] = x[tid] * x[tid]
        """,
    )


EMIT = """
    @wp.kernel
    def emit(n: wp.array[int], count: wp.array[int], out: wp.array[float]):
        tid = wp.tid()
        for k in range(n[tid]):
            out[wp.atomic_add(count, 0, 1)] = 1.0
"""


def test_dynamic_loop_gets_a_coordinate_and_counts_its_trips():
    same_code(
        generated(plan_of(EMIT), RECORD),
        """
        @wp.kernel
        def emit_record(n: wp.array[int], count: wp.array[int], out: wp.array[float],
                        atomic_add_records: wp.array(dtype=wp.int32), trip_capacity0: int,
                        status: wp.array(dtype=wp.int32)):
            PROLOGUE
            tid = wp.tid()
            stop0 = n[tid]
            rt.check_trips(status, 0, stop0, trip_capacity0)
            for k in range(stop0):
                coordinate0 = thread * trip_capacity0 + wp.int32(k)
                out[rt.record_if_room(wp.atomic_add(count, 0, 1), atomic_add_records, coordinate0)] = 1.0
        """,
    )


def test_a_range_stays_as_written_where_its_bounds_can_be_read_again():
    """A bound that is a literal, a name the loop does not assign or its ``.shape[i]`` is read again where it stands:
    in the trip check, one call before the loop, and in the coordinate; the loop keeps the user's ``range()``. A
    bound the loop assigns is read once, into a local before it, as Warp reads a range."""
    plan = plan_of("""
        @wp.kernel
        def walk(a: wp.array[float], n: int, count: wp.array[int], out: wp.array[float]):
            m = n
            for i in range(2, a.shape[0], 3):
                out[wp.atomic_add(count, 0, 1)] = a[i]
            for j in range(m):
                m = m - 1
                out[wp.atomic_add(count, 0, 1)] = 1.0
    """)
    same_code(
        generated(plan, RECORD),
        """
        @wp.kernel
        def walk_record(a: wp.array[float], n: int, count: wp.array[int], out: wp.array[float],
                        atomic_add_records: wp.array(dtype=wp.int32), atomic_add_records_1: wp.array(dtype=wp.int32),
                        m_in_loop1: wp.array(dtype=wp.int32), trip_capacity0: int, trip_capacity1: int,
                        status: wp.array(dtype=wp.int32)):
            PROLOGUE
            m = n
            rt.check_trips(status, 0, rt.range_length(2, a.shape[0], 3), trip_capacity0)
            for i in range(2, a.shape[0], 3):
                coordinate0 = thread * trip_capacity0 + (wp.int32(i) - 2) // 3
                out[rt.record_if_room(wp.atomic_add(count, 0, 1), atomic_add_records, coordinate0)] = a[i]
            stop1 = m
            rt.check_trips(status, 1, stop1, trip_capacity1)
            for j in range(stop1):
                coordinate1 = thread * trip_capacity1 + wp.int32(j)
                rt.record_if_room(m, m_in_loop1, coordinate1)
                m = m - 1
                out[rt.record_if_room(wp.atomic_add(count, 0, 1), atomic_add_records_1, coordinate1)] = 1.0
        """,
    )


def test_a_fixed_max_records_is_compiled_in_and_the_replay_takes_no_trip_arguments():
    """The record kernel still reports trips beyond the room into the launch's status; the replay reads the records
    and, to leave a refused launch's gradients alone, the status."""
    record, replay = (generated(plan_of(EMIT), phase, max_records=4) for phase in (RECORD, REPLAY))
    same_code(
        record,
        """
        @wp.kernel
        def emit_record(n: wp.array[int], count: wp.array[int], out: wp.array[float],
                        atomic_add_records: wp.array(dtype=wp.int32), status: wp.array(dtype=wp.int32)):
            PROLOGUE
            tid = wp.tid()
            stop0 = n[tid]
            rt.check_trips(status, 0, stop0, 4)
            for k in range(stop0):
                coordinate0 = thread * 4 + wp.int32(k)
                out[rt.record_if_room(wp.atomic_add(count, 0, 1), atomic_add_records, coordinate0)] = 1.0
        """,
    )
    same_code(
        replay,
        """
        @wp.kernel
        def emit_replay(n: wp.array[int], count: wp.array[int], out: wp.array[float],
                        atomic_add_records: wp.array(dtype=wp.int32), status: wp.array(dtype=wp.int32)):
            PROLOGUE
            if rt.refused(status):
                return
            tid = wp.tid()
            stop0 = n[tid]
            for k in range(stop0):
                coordinate0 = thread * 4 + wp.int32(k)
                out[rt.recorded_int32(atomic_add_records, coordinate0)] = 1.0
        """,
    )


def test_the_count_phase_leaves_out_writes_nothing_reads_back_and_records_but_keeps_their_calls():
    """What a dry run launches to count trips: ``out`` is never read, so its store goes, but not the atomic in
    its index, where the counter is read by the loop's stop; nor are records stored (a dry run's are thrown away),
    so the records, the thread's row and the trips' coordinates go too, and the loop's variable, read no more, is
    marked unused. Where nothing the count keeps reads the counter (``EMIT``), its atomic goes too, and with it the
    loop (``passes.count_slice.fewer_copies``). The count kernel takes only what it reads (``out`` never)."""
    bounded_by_the_counter = EMIT.replace("range(n[tid])", "range(n[tid] + count[1])")
    same_code(
        generated(plan_of(bounded_by_the_counter), COUNT),
        """
        @wp.kernel
        def emit_count(n: wp.array[int], count: wp.array[int], trip_capacity0: int, status: wp.array(dtype=wp.int32)):
            tid = wp.tid()
            stop0 = n[tid] + count[1]
            rt.check_trips(status, 0, stop0, trip_capacity0)
            for _k in range(stop0):
                wp.atomic_add(count, 0, 1)
        """,
    )
    same_code(
        generated(plan_of(EMIT), COUNT),
        """
        @wp.kernel
        def emit_count(n: wp.array[int], trip_capacity0: int, status: wp.array(dtype=wp.int32)):
            tid = wp.tid()
            stop0 = n[tid]
            rt.check_trips(status, 0, stop0, trip_capacity0)
        """,
    )


def test_probe_loop_with_break_replays_recorded_trips_lowers_jumps_and_restores_ints():
    plan = plan_of(PROBE)
    same_code(
        generated(plan, REPLAY),
        """
        @wp.kernel
        def probe_replay(table: wp.array[int], key: int, n: int, out: wp.array[float],
                         atomic_cas_records: wp.array(dtype=wp.int32), trips0_records: wp.array(dtype=wp.int32),
                         slot_in_loop0: wp.array(dtype=wp.int32), slot_after_loop0: wp.array(dtype=wp.int32),
                         trip_capacity0: int, status: wp.array(dtype=wp.int32)):
            PROLOGUE
            if rt.refused(status):
                return
            slot = key % n
            for trips0 in range(trips0_records[thread]):
                coordinate0 = thread * trip_capacity0 + trips0
                slot = slot_in_loop0[coordinate0]
                iteration0_active = True
                if rt.recorded_int32(atomic_cas_records, coordinate0) == -1:
                    iteration0_active = False
                if iteration0_active:
                    out[0] += 1.0
                    slot = (slot + 1) % n
            slot = slot_after_loop0[thread]
            out[slot] = 1.0
        """,
    )


def test_only_stores_inside_a_loop_that_may_outgrow_its_records_check_for_room():
    """The trip count and the slot the probe hands on are stored at the thread's own row, always in bounds."""
    same_code(
        generated(plan_of(PROBE), RECORD),
        """
        @wp.kernel
        def probe_record(table: wp.array[int], key: int, n: int, out: wp.array[float],
                         atomic_cas_records: wp.array(dtype=wp.int32), trips0_records: wp.array(dtype=wp.int32),
                         slot_in_loop0: wp.array(dtype=wp.int32), slot_after_loop0: wp.array(dtype=wp.int32),
                         trip_capacity0: int, status: wp.array(dtype=wp.int32)):
            PROLOGUE
            slot = key % n
            trips0 = wp.int32(0)
            while True:
                coordinate0 = thread * trip_capacity0 + trips0
                rt.record_if_room(slot, slot_in_loop0, coordinate0)
                trips0 = trips0 + 1
                if rt.record_if_room(wp.atomic_cas(table, slot, -1, key), atomic_cas_records, coordinate0) == -1:
                    break
                out[0] += 1.0
                slot = (slot + 1) % n
            rt.check_trips(status, 0, trips0, trip_capacity0)
            rt.record_returned(trips0, trips0_records, thread)
            rt.record_returned(slot, slot_after_loop0, thread)
            out[slot] = 1.0
        """,
    )


def test_phases_leave_the_planners_tree_as_it_was_and_share_what_they_keep():
    """Both phases read the one parse the planner made; an unchanged statement is one object in both."""
    plan = plan_of(PROBE)
    tree = plan.root.unit.tree
    before = ast.dump(tree, include_attributes=True)
    records = record_params(plan, Frontend(plan.root.unit, {}).array)
    record, replay = (
        phase_functions(plan, phase, MODULE, NAMES, records, frozenset({"table"}), {})[-1] for phase in (RECORD, REPLAY)
    )
    assert ast.dump(tree, include_attributes=True) == before
    store = tree.body[-1]  # out[slot] = 1.0: printed from the user's text (warp_rewrite.printing)
    assert record.body[-1] is store and replay.body[-1] is store


def test_thread_index_follows_the_kernels_own_tid():
    two_d = dataclasses.replace(NAMES, coords=("c0", "c1"))
    same_code(
        "\n".join(ast.unparse(s) for s in thread_index_prologue(two_d, "wp")),
        """
        c0, c1 = wp.tid()
        thread = c0 * launch_shape[1] + c1
        """,
    )
    assert launch_arity(parse("def k():\n    i, j, k = wp.tid()\n")) == 3
    assert launch_arity(parse("def k():\n    i = wp.tid()\n")) == 1


RUNNING_SUM = """
    @wp.kernel
    def running_sum(x: wp.array[float], acc: wp.array2d[float], out: wp.array[float]):
        tid = wp.tid()
        before = wp.atomic_add(acc, tid % 2, 0, x[tid])
        acc[1, 1] += x[tid]
        out[tid] = before * x[tid]
"""


def test_exact_float_atomics_work_on_the_targets_shadow_and_replay_as_their_recorded_values():
    """Every atomic on a target with exact float returns, consumed or not, is a runtime call on the target's
    shadow at the element's flat index; the replay stores each operand (its adjoint's entry point) and reads the
    returned value back, and returns early in a launch its status refuses."""
    frontend = frontend_of(RUNNING_SUM)
    plan = Planner(frontend, Namer.for_tree(frontend.kernel.tree, {"wp"}), frozenset({"acc"})).plan()
    records = """before_records: wp.array(dtype=wp.float32), before_values: wp.array(dtype=wp.float32),
                 before_order: wp.array2d(dtype=wp.int32), before_addresses: wp.array(dtype=wp.int32),
                 atomic_add_records: wp.array(dtype=wp.float32), atomic_add_values: wp.array(dtype=wp.float32),
                 atomic_add_order: wp.array2d(dtype=wp.int32), atomic_add_addresses: wp.array(dtype=wp.int32),
                 acc_shadow: wp.array2d(dtype=wp.uint64), status: wp.array(dtype=wp.int32)"""
    same_code(
        generated(plan, RECORD),
        f"""
        @wp.kernel
        def running_sum_record(x: wp.array[float], acc: wp.array2d[float], out: wp.array[float], {records}):
            PROLOGUE
            tid = wp.tid()
            before = rt.exact_add(rt.flat_index(acc, tid % 2, 0), x[tid], acc_shadow, before_records, before_values,
                                  before_order, before_addresses, thread)
            rt.exact_add(rt.flat_index(acc, 1, 1), x[tid], acc_shadow, atomic_add_records, atomic_add_values,
                         atomic_add_order, atomic_add_addresses, thread)
            out[tid] = before * x[tid]
        """,
    )
    same_code(
        generated(plan, REPLAY),
        f"""
        @wp.kernel
        def running_sum_replay(x: wp.array[float], acc: wp.array2d[float], out: wp.array[float], {records}):
            PROLOGUE
            if rt.refused(status):
                return
            tid = wp.tid()
            before = rt.exact_returned(x[tid], before_values, before_records, thread)
            rt.exact_returned(x[tid], atomic_add_values, atomic_add_records, thread)
            out[tid] = before * x[tid]
        """,
    )
