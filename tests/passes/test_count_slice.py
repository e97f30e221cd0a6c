"""passes/count_slice.py: the count phase cut down to what decides trip counts, as before/after source pairs; then
kernels whose dry run launches such a count kernel (``tests/support/count_slices.py``) end to end: forward as the
original, gradients against finite differences, through both front ends, with no ``max_records`` (every launch counts
trips first).
"""

import ast
from pathlib import Path

import numpy as np

from tests.api.test_frontends import both_sources
from tests.support import count_slices
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import empty_keys, f64, i32, u64
from tests.support.pass_sources import Unit, generated, plan_of, same_code
from warp_rewrite.passes.two_phase import COUNT
from warp_rewrite.pipeline import RewriteOptions

TRIPS = "trip_capacity0: int, loop0: int, status: wp.array(dtype=wp.int32)"


def test_a_helper_whose_value_nothing_reads_keeps_only_the_branch_that_counts():
    """Newton's support map: the kernel's store is into an array nothing reads back, so neither helper's value is
    read: both return nothing, and of the branches only the one reaching the loop stays; the loop itself, with
    nothing left in it, goes (its trips are counted before it); so does the print. Each function takes only what it
    reads: the clones no record (the count phase stores none) and no point, the kernel no record, no point, no
    direction and no output (the launch passes it only what it takes)."""
    helpers = {
        "farthest": Unit("""
            @wp.func
            def farthest(points: wp.array[wp.vec3], n: int, d: wp.vec3) -> float:
                best = float(-1.0e10)
                for i in range(n):
                    best = wp.max(best, wp.dot(points[i], d))
                return best
        """),
        "support": Unit("""
            @wp.func
            def support(kind: int, points: wp.array[wp.vec3], n: int, d: wp.vec3) -> float:
                result = float(0.0)
                if kind == 0:
                    result = farthest(points, n, d)
                elif kind == 1:
                    result = wp.length(d) * 2.0
                else:
                    wp.printf("another kind\\n")
                    result = wp.sqrt(wp.dot(d, d))
                return result
        """),
    }
    kernel = """
        @wp.kernel
        def probe(kinds: wp.array[int], points: wp.array[wp.vec3], n: wp.array[int], d: wp.array[wp.vec3],
                  out: wp.array[float]):
            tid = wp.tid()
            out[tid] = support(kinds[tid], points, n[tid], d[tid])
    """
    same_code(
        generated(plan_of(kernel, helpers), COUNT),
        f"""
        @wp.func
        def farthest_count(n: int, {TRIPS}):
            rt.check_trips(status, loop0, n, trip_capacity0)

        @wp.func
        def support_count(kind: int, n: int, {TRIPS}):
            if kind == 0:
                farthest_count(n, trip_capacity0, loop0, status)

        @wp.kernel
        def probe_count(kinds: wp.array[int], n: wp.array[int], trip_capacity0: int, status: wp.array(dtype=wp.int32)):
            tid = wp.tid()
            support_count(kinds[tid], n[tid], trip_capacity0, 0, status)
        """,
    )


def test_a_value_that_decides_a_trip_count_stays():
    """``m``, a helper's value, is the loop's stop; what the loop computes, and the store after it, go."""
    helpers = {
        "rising": Unit("""
            @wp.func
            def rising(values: wp.array[float], n: int) -> int:
                rises = int(0)
                best = float(-1.0e10)
                for i in range(n):
                    if values[i] > best:
                        best = values[i]
                        rises += 1
                return rises
        """)
    }
    kernel = """
        @wp.kernel
        def climb(values: wp.array[float], n: wp.array[int], x: wp.array[float], out: wp.array[float]):
            tid = wp.tid()
            m = rising(values, n[tid])
            s = float(1.0)
            for j in range(m):
                s = s * x[j] + 1.0
            out[tid] = s
    """
    same_code(
        generated(plan_of(kernel, helpers), COUNT),
        """
        @wp.kernel
        def climb_count(values: wp.array[float], n: wp.array[int], trip_capacity0: int,
                        status: wp.array(dtype=wp.int32)):
            tid = wp.tid()
            m = rising(values, n[tid])
            rt.check_trips(status, 0, m, trip_capacity0)
        """,
    )


def test_a_clone_left_with_nothing_to_do_goes_and_so_does_its_call():
    """``twice`` reads ``a``, which the launch writes (a record, in the record phase), into a store nothing reads
    back: its count clone would compute a value nothing reads, so it is not defined. ``a`` is read back by the loop,
    but only to compute what is stored into ``a``, which decides no trip count: the store goes, then the loop, and
    the dry run copies nothing (``fewer_copies``)."""
    helpers = {
        "twice": Unit("""
            @wp.func
            def twice(a: wp.array[float], i: int) -> float:
                return a[i] * 2.0
        """)
    }
    kernel = """
        @wp.kernel
        def halves(a: wp.array[float], n: wp.array[int], b: wp.array[float]):
            tid = wp.tid()
            s = float(0.0)
            for j in range(n[tid]):
                s = s * 0.5 + a[j]
            b[tid] = twice(a, tid) + s
            a[tid] = s
    """
    same_code(
        generated(plan_of(kernel, helpers), COUNT),
        """
        @wp.kernel
        def halves_count(n: wp.array[int], trip_capacity0: int, status: wp.array(dtype=wp.int32)):
            tid = wp.tid()
            stop0 = n[tid]
            rt.check_trips(status, 0, stop0, trip_capacity0)
        """,
    )


def test_a_while_loop_stays_and_so_does_a_branch_between_two_that_count():
    """Leaving out a ``while`` loop could change whether the kernel ends, so it stays with what its test reads;
    the middle branch has nothing left, but leaving it out would run the next test where the forward does not."""
    kernel = """
        @wp.kernel
        def walk(x: wp.array[float], n: wp.array[int], out: wp.array[float]):
            tid = wp.tid()
            s = float(0.0)
            i = int(0)
            while s < 10.0:
                s += x[i]
                i += 1
            t = float(0.0)
            if tid == 0:
                for j in range(n[tid]):
                    t += x[j]
            elif tid == 1:
                t = 2.0
            elif tid == 2:
                for j in range(n[0]):
                    t = t * x[j]
            out[tid] = s + t
    """
    same_code(
        generated(plan_of(kernel), COUNT),
        """
        @wp.kernel
        def walk_count(x: wp.array[float], n: wp.array[int], trip_capacity0: int, trip_capacity1: int,
                       trip_capacity2: int, status: wp.array(dtype=wp.int32)):
            tid = wp.tid()
            s = float(0.0)
            i = int(0)
            trips0 = wp.int32(0)
            while s < 10.0:
                trips0 = trips0 + 1
                s += x[i]
                i += 1
            rt.check_trips(status, 0, trips0, trip_capacity0)
            if tid == 0:
                stop1 = n[tid]
                rt.check_trips(status, 1, stop1, trip_capacity1)
            elif tid == 1:
                pass
            elif tid == 2:
                stop2 = n[0]
                rt.check_trips(status, 2, stop2, trip_capacity2)
        """,
    )


def test_a_clone_keeps_its_value_where_returning_nothing_would_leave_out_little():
    """Nothing reads ``step``'s value in this kernel, but what computes it is stored into ``a``, which the loop's
    stop reads: returning nothing would leave out only the return, and make another variant of the clone."""
    helpers = {
        "step": Unit("""
            @wp.func
            def step(a: wp.array[float], n: int, i: int) -> float:
                acc = float(0.0)
                for j in range(n + wp.int32(a[i])):
                    acc = acc * 0.5 + a[j]
                a[i] = acc
                return acc
        """)
    }
    kernel = """
        @wp.kernel
        def steps(a: wp.array[float], n: wp.array[int], b: wp.array[float]):
            tid = wp.tid()
            b[tid] = step(a, n[tid], tid)
    """
    same_code(
        generated(plan_of(kernel, helpers), COUNT),
        f"""
        @wp.func
        def step_count(a: wp.array[float], n: int, i: int, {TRIPS}) -> float:
            acc = float(0.0)
            stop0 = n + wp.int32(a[i])
            rt.check_trips(status, loop0, stop0, trip_capacity0)
            for j in range(stop0):
                acc = acc * 0.5 + a[j]
            a[i] = acc
            return acc

        @wp.kernel
        def steps_count(a: wp.array[float], n: wp.array[int], trip_capacity0: int, status: wp.array(dtype=wp.int32)):
            tid = wp.tid()
            step_count(a, n[tid], tid, trip_capacity0, 0, status)
        """,
    )


def test_an_atomic_whose_value_decides_no_trip_count_goes_with_the_store_it_indexes():
    """A counter's slot only indexes a store into ``out``, which decides no trip count: the count phase leaves out
    the store, then the atomic (``dropped_atomics``), and the dry run copies neither array (``fewer_copies``). The
    helper returning the slot returns nothing: its last ``if``, ending in a bare return, goes, and so does the rest,
    then its call."""
    helpers = {
        "reserve": Unit("""
            @wp.func
            def reserve(counter: wp.array[int], limit: int) -> int:
                slot = wp.atomic_add(counter, 0, 1)
                if slot < limit:
                    return slot
                return -1
        """)
    }
    kernel = """
        @wp.kernel
        def scan_and_emit(x: wp.array[float], n: wp.array[int], counter: wp.array[int], out: wp.array[float]):
            tid = wp.tid()
            s = float(0.0)
            for j in range(n[tid]):
                s = s * 0.5 + x[j]
            slot = reserve(counter, out.shape[0])
            if slot >= 0:
                out[slot] = s
    """
    plan = plan_of(kernel, helpers)
    assert plan.copied == {"counter"}  # the launch reads it back (the slot), so the planner would copy it
    same_code(
        generated(plan, COUNT),
        """
        @wp.kernel
        def scan_and_emit_count(n: wp.array[int], trip_capacity0: int, status: wp.array(dtype=wp.int32)):
            tid = wp.tid()
            stop0 = n[tid]
            rt.check_trips(status, 0, stop0, trip_capacity0)
        """,
    )


def test_what_a_write_left_out_leaves_of_its_value_goes_and_then_a_value_it_alone_read():
    """Newton's heightfield contacts: where the closest cell is near enough, a key made of it is claimed in an array
    nothing reads back, and a contact emitted. The claim goes, and what is left of its key, a value nothing reads,
    goes too; the emission goes; then nothing reads the search's value, whichever of the two clones is cut first:
    the search's count clone keeps only the range it counts. The kernel takes only what it reads."""
    helpers = {
        "order_bits": Unit("""
            @wp.func
            def order_bits(value: float) -> wp.uint64:
                return wp.uint64(value * 1.0e6)
        """),
        "closest": Unit("""
            @wp.func
            def closest(values: wp.array[float], begin: int, end: int, d: float):
                best = float(1.0e10)
                cell = int(-1)
                for i in range(begin, end):
                    gap = wp.abs(values[i] - d)
                    if gap < best:
                        best = gap
                        cell = i
                return best, cell
        """),
        "emit": Unit("""
            @wp.func
            def emit(counter: wp.array[int], out: wp.array[float], value: float):
                slot = wp.atomic_add(counter, 0, 1)
                if slot < out.shape[0]:
                    out[slot] = value
        """),
    }
    kernel = """
        @wp.kernel
        def closest_then_claim(values: wp.array[float], begins: wp.array[int], ends: wp.array[int],
                               d: wp.array[float], winners: wp.array[wp.uint64], counter: wp.array[int],
                               out: wp.array[float]):
            tid = wp.tid()
            distance, cell = closest(values, begins[tid], ends[tid], d[tid])
            if distance < 0.5:
                key = (order_bits(distance) << wp.uint64(32)) | wp.uint64(cell)
                wp.atomic_min(winners, 0, key)
                emit(counter, out, distance * d[tid])
    """
    same_code(
        generated(plan_of(kernel, helpers), COUNT),
        f"""
        @wp.func
        def closest_count(begin: int, end: int, {TRIPS}):
            rt.check_trips(status, loop0, rt.range_length(begin, end, 1), trip_capacity0)

        @wp.kernel
        def closest_then_claim_count(begins: wp.array[int], ends: wp.array[int], trip_capacity0: int,
                                     status: wp.array(dtype=wp.int32)):
            tid = wp.tid()
            closest_count(begins[tid], ends[tid], trip_capacity0, 0, status)
        """,
    )


# --- end to end ---------------------------------------------------------------------------------------------------

N = 4
VALUES = np.array([0.3, 1.7, -0.8, 2.9, 0.1, 1.2])  # products with the directions are far apart: no ties
X = np.array([0.9, 0.7, 0.55, 0.8, 1.2, 0.6])  # running sums cross 2.5 at 2.95, after 2.15

emitted = emitted_fixture(count_slices)
PATTERNS = {
    "support_point": Pattern(
        lambda: [
            i32([0, 1, 2, 0]),
            f64(VALUES, True),
            i32([6, 2, 3, 4]),
            f64([0.7, -1.3, 0.4, -1.1], True),
            f64(np.zeros(N), True),
        ],
        loss=[4],
        wrt=[1, 3],
    ),
    "counted_by_helper": Pattern(
        lambda: [f64(VALUES), i32([6, 2, 4, 1]), f64(X, True), f64(np.zeros(N), True)], loss=[3], wrt=[2]
    ),
    "walk_and_branch": Pattern(lambda: [f64(X, True), i32([3, 1, 2, 0]), f64(np.zeros(N), True)], loss=[2], wrt=[0]),
    # sums 0 (no trip), 0.9, 1.15 and 1.375: three emit, into a buffer with room for two
    "scan_and_emit": Pattern(
        lambda: [f64(X, True), i32([0, 1, 2, 3]), i32([0]), f64(np.zeros(2), True)], loss=[3], wrt=[0]
    ),
    # 11 probes from 3's slot and moves on: four entries of a table of 8 (the active-slot counter at its length)
    # the closest cells are 0.1 and 0.3 away (emitted, into a buffer with room for three), 0.6, and none (no cell)
    "closest_then_claim": Pattern(
        lambda: [
            f64(VALUES, True),
            i32([0, 2, 4, 1]),
            i32([3, 5, 6, 1]),
            f64([0.2, 2.6, -0.5, 0.7], True),
            u64([np.iinfo(np.uint64).max]),
            i32([0]),
            f64(np.zeros(3), True),
        ],
        loss=[6],
        wrt=[0, 3],
    ),
    "insert_then_scan": Pattern(
        lambda: [
            f64(X, True),
            u64([3, 11, 15, 4]),
            empty_keys(8),
            i32(np.zeros(9)),
            i32([2, 0, 3, 1]),
            f64(np.zeros(8), True),
        ],
        loss=[5],
        wrt=[0],
    ),
}
test_through_the_api, test_through_the_command_line = end_to_end_tests(count_slices, N, PATTERNS)


def test_the_count_clone_keeps_only_the_branch_that_counts_through_both_front_ends():
    """The support map's count clone keeps the one branch that reaches a loop: the others, the native call among
    them (handed a value, it writes nothing: the fence's "opaque call"), go; the record clone keeps them all."""
    api, cli = both_sources(count_slices.support_point, Path(count_slices.__file__), RewriteOptions())
    assert api == cli and api is not None
    source = api.partition("KernelSpec(")[0]  # (the source, then the spec's repr)
    functions = {f.name: ast.unparse(f) for f in ast.parse(source).body if isinstance(f, ast.FunctionDef)}
    count = next(text for name, text in functions.items() if name.startswith("support") and name.endswith("_count"))
    record = next(text for name, text in functions.items() if name.startswith("support") and name.endswith("_record"))
    assert "native_rsqrt" in record and "native_rsqrt" not in count and "farthest" in count
    assert count.count("\n") < 5  # the signature, the branch, the call
