"""Unit tests of the AST passes as before/after source pairs: nothing here compiles or launches a kernel."""

import ast
import dataclasses
import textwrap

import pytest
import warp as wp

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.atomics import WarpNames, find_atomic_calls
from warp_rewrite.passes.dataflow import argument_path, gradient_sources, single_assignments
from warp_rewrite.passes.int_types import IntLocals
from warp_rewrite.passes.layout import record_params
from warp_rewrite.passes.loop_carried import LoopFlow
from warp_rewrite.passes.loop_returns import lower_returns, unrolled_by_warp
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.plan import Planner
from warp_rewrite.passes.plan_types import KernelPlan, is_int_path
from warp_rewrite.passes.refusals import Refusal
from warp_rewrite.passes.two_phase import (
    COUNT,
    RECORD,
    REPLAY,
    KernelNames,
    ModuleNames,
    launch_arity,
    phase_functions,
    thread_index_prologue,
)
from warp_rewrite.passes.while_conditions import hoist_conditions
from warp_rewrite.runtime.abi import RuntimeNames

WARP = WarpNames(frozenset({"wp"}), (("atomic_add", "add"),))
MODULE = ModuleNames(warp="wp", runtime=RuntimeNames.spelled("rt"))
NAMES = KernelNames(
    thread="thread",
    coordinate="coordinate",
    launch_shape="launch_shape",
    coords=("c0",),
    trip_capacity="trip_capacity",
    status="status",
)
PROLOGUE = ["thread = wp.tid()"]
COMPACTION = """
    @wp.kernel
    def compact(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
        tid = wp.tid()
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid]
"""

PROBE = """
    @wp.kernel
    def probe(table: wp.array[int], key: int, n: int, out: wp.array[float]):
        slot = key % n
        while True:
            if wp.atomic_cas(table, slot, -1, key) == -1:
                break
            out[0] += 1.0
            slot = (slot + 1) % n
        out[slot] = 1.0
"""


def parse(source: str) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(source)).body[0]


class Unit:
    """A kernel's or helper's source as the planner sees it, without Warp."""

    def __init__(self, source: str):
        self.text = textwrap.dedent(source)
        self.tree = ast.parse(self.text).body[0]
        self.name = self.tree.name

    def location(self, node: ast.AST) -> str:
        return f"test.py:{node.lineno}:{node.col_offset + 1}"


def parameter_types(unit: Unit) -> dict:
    """The parameters' Warp types, from annotations evaluated against warp (None where that fails)."""
    types = {}
    for arg in unit.tree.args.args:
        try:
            types[arg.arg] = dtypes.normalized(eval(ast.unparse(arg.annotation), {"wp": wp}))
        except Exception:
            types[arg.arg] = None
    return types


class Frontend:
    """``passes.plan_types.Frontend`` over test sources: helpers found by name, types from the annotations."""

    max_unroll = 16  # Warp's default

    def __init__(self, kernel: Unit, helpers: dict[str, Unit]):
        self.kernel, self.helpers = kernel, helpers

    def warp_names(self, unit: Unit) -> WarpNames:
        return WARP

    def resolve_helper(self, unit: Unit, call: ast.Call) -> Unit | None:
        return self.helpers.get(getattr(call.func, "id", None))

    def parameter_types(self, unit: Unit) -> dict:
        return parameter_types(unit)

    def local_types(self, unit: Unit) -> dict:
        return {}

    def return_type(self, unit: Unit) -> None:
        return None

    def is_builtin(self, unit: Unit, call: ast.Call) -> bool:
        return True  # the test kernels call only Warp's builtins and the helpers they are given

    def array(self, path: str) -> dtypes.ArrayInfo | None:
        return dtypes.array_info(parameter_types(self.kernel).get(path))


def frontend_of(source: str, helpers: dict[str, Unit] | None = None) -> Frontend:
    return Frontend(Unit(source), helpers or {})


def plan_of(source: str, helpers: dict[str, Unit] | None = None) -> KernelPlan:
    frontend = frontend_of(source, helpers)
    everything = ast.Module([frontend.kernel.tree, *(h.tree for h in frontend.helpers.values())], [])
    return Planner(frontend, Namer.for_tree(everything, {"wp"})).plan()


def generated(plan: KernelPlan, phase: str, names: KernelNames = NAMES, max_records: int | None = None) -> str:
    frontend = Frontend(plan.root.unit, {})
    records = record_params(plan, frontend.array)
    int_paths = frozenset(s.target for s in plan.sites if is_int_path(frontend, s.target))
    functions = phase_functions(plan, phase, MODULE, names, records, int_paths, {}, max_records)
    return "\n\n".join(ast.unparse(f) for f in functions)


def same_code(actual: str, expected: str) -> None:
    """Compare as code; a line saying PROLOGUE in ``expected`` stands for the thread-index prologue."""
    lines = []
    for line in textwrap.dedent(expected).splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        lines += [indent + p for p in PROLOGUE] if line.strip() == "PROLOGUE" else [line]
    assert actual == ast.unparse(ast.parse("\n".join(lines)))


def test_consumed_and_unconsumed_atomics():
    kernel = parse("""
        def k(a: wp.array[int], b: wp.array[float]):
            wp.atomic_add(a, 0, 1)
            b[0] += 1.0
            s = wp.atomic_max(a, 1, 2)
            b[wp.atomic_sub(a, 2, 1)] = float(s)
            atomic_add(a, 3, 1) + 1
            wp.atomic_cas(a, 0, s, 3)
    """)
    calls = find_atomic_calls(kernel, WARP)
    assert [(c.op, c.consumed) for c in calls] == [
        ("add", False),
        ("max", True),
        ("sub", True),
        ("add", True),
        ("cas", False),
    ]
    cas = calls[-1]
    assert [ast.unparse(a) for a in cas.index_args] == ["0"]
    assert [ast.unparse(a) for a in cas.value_args] == ["s", "3"]


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
    stand-in's argument, its index read back, so that ``acc``'s gradient still reaches the operand (issue 23)."""
    plan = plan_of('''
        @wp.kernel
        def nested(c: wp.array[int], acc: wp.array[float], out: wp.array[float]):
            """Docstring stays first."""
            out[0] = wp.atomic_add(acc, wp.atomic_add(c, 0, 1), 2.0)
    ''')
    same_code(
        generated(plan, REPLAY),
        '''
        @wp.kernel
        def nested_replay(c: wp.array[int], acc: wp.array[float], out: wp.array[float],
                          atomic_add_records: wp.array(dtype=wp.float32),
                          atomic_add_records_1: wp.array(dtype=wp.int32)):
            """Docstring stays first."""
            PROLOGUE
            out[0] = rt.replay_returned(wp.atomic_add(acc, rt.recorded_int32(atomic_add_records_1, thread), 2.0),
                                        atomic_add_records, thread)
        ''',
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
            start0 = 0
            stop0 = n[tid]
            step0 = 1
            if rt.range_length(start0, stop0, step0) > trip_capacity0:
                rt.report_trips(status, 0, rt.range_length(start0, stop0, step0))
            for k in range(start0, stop0, step0):
                coordinate0 = thread * trip_capacity0 + wp.int32(k)
                out[rt.record_if_room(wp.atomic_add(count, 0, 1), atomic_add_records, coordinate0)] = 1.0
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
            start0 = 0
            stop0 = n[tid]
            step0 = 1
            if rt.range_length(start0, stop0, step0) > 4:
                rt.report_trips(status, 0, rt.range_length(start0, stop0, step0))
            for k in range(start0, stop0, step0):
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
            start0 = 0
            stop0 = n[tid]
            step0 = 1
            for k in range(start0, stop0, step0):
                coordinate0 = thread * 4 + wp.int32(k)
                out[rt.recorded_int32(atomic_add_records, coordinate0)] = 1.0
        """,
    )


def test_the_count_phase_leaves_out_writes_nothing_reads_back_but_keeps_their_calls():
    """What a dry run launches to count trips: ``out`` is never read, so its store goes, but not the atomic in
    its index (the counter is read back: its values decide the slots)."""
    same_code(
        generated(plan_of(EMIT), COUNT),
        """
        @wp.kernel
        def emit_count(n: wp.array[int], count: wp.array[int], out: wp.array[float],
                       atomic_add_records: wp.array(dtype=wp.int32), trip_capacity0: int,
                       status: wp.array(dtype=wp.int32)):
            PROLOGUE
            tid = wp.tid()
            start0 = 0
            stop0 = n[tid]
            step0 = 1
            if rt.range_length(start0, stop0, step0) > trip_capacity0:
                rt.report_trips(status, 0, rt.range_length(start0, stop0, step0))
            for k in range(start0, stop0, step0):
                coordinate0 = thread * trip_capacity0 + wp.int32(k)
                rt.record_if_room(wp.atomic_add(count, 0, 1), atomic_add_records, coordinate0)
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
            if trips0 > trip_capacity0:
                rt.report_trips(status, 0, trips0)
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
    with pytest.raises(Refusal, match=r"'total' is changed in a loop .* and is not an int"):
        plan_of("""
            @wp.kernel
            def accumulate(count: wp.array[int], x: wp.array[float], out: wp.array[float]):
                total = float(0.0)
                for i in range(4):
                    total = total + x[wp.atomic_add(count, 0, 1)]
                out[0] = total
        """)


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


def test_int_locals_settle_on_loop_carried_updates():
    kernel = parse("""
        def k(keys: wp.array[wp.int32], n: int, x: wp.array[float]):
            slot = keys[0] % n
            done = int(0)
            v = x[0]
            while done == 0:
                slot = (slot + 1) % n
                done = 1
                v = v * 2.0
    """)
    kinds = IntLocals(kernel, parameter_types(Unit(ast.unparse(kernel)))).locals
    assert kinds["slot"] is wp.int32 and kinds["done"] is wp.int32 and "v" not in kinds


# (body of a kernel, with the loop asked about over 'i' or a while loop; locals carried into later iterations,
# out of the loop)
CARRIED_SHAPES = {
    "a running minimum read after the loop": (
        """
        m = x[0]
        for i in range(n):
            m = wp.min(m, x[i])
        y[0] = m
        """,
        {"m"},
        {"m"},
    ),
    "reassigned late in an iteration, read early in the next": (
        """
        s = x[0]
        for i in range(n):
            y[i] = s
            s = x[i] * 2.0
        """,
        {"s"},
        set(),
    ),
    "assigned before it is read, in the branch that reads it": (
        """
        s = x[0]
        for i in range(n):
            if x[i] > 0.0:
                s = x[i] * x[i]
                y[i] = s
        """,
        set(),
        set(),
    ),
    "assigned on both branches before the read": (
        """
        s = x[0]
        for i in range(n):
            if x[i] > 0.0:
                s = x[i]
            else:
                s = -x[i]
            y[i] = s
        """,
        set(),
        set(),
    ),
    "assigned on one branch only before the read": (
        """
        s = x[0]
        for i in range(n):
            if x[i] > 0.0:
                s = x[i]
            y[i] = s
        """,
        {"s"},
        set(),
    ),
    "after the loop, read only where a later branch assigned it first": (
        """
        for i in range(n):
            s = x[i] * 2.0
            y[i] = s
        for j in range(n):
            if x[j] > 1.0:
                s = x[j] * 3.0
                y[j] = s
        """,
        set(),
        set(),
    ),
    "after the loop, read on a path that skips the later assignment": (
        """
        for i in range(n):
            s = x[i] * 2.0
        if x[0] > 1.0:
            s = x[0]
        y[0] = s
        """,
        set(),
        {"s"},
    ),
    "a continue skips the assignment before the read": (
        """
        s = x[0]
        for i in range(n):
            if i == 1:
                continue
            y[i] = s
            s = x[i]
        """,
        {"s"},
        set(),
    ),
    "a break leaves before the assignment that later code would see": (
        """
        s = x[0]
        for i in range(n):
            s = x[i]
            if s > 1.0:
                break
            s = 0.0
        y[0] = s
        """,
        set(),
        {"s"},
    ),
    "read in the next iteration of a loop around it": (
        """
        s = x[0]
        for k in range(n):
            for i in range(n):
                s = x[i]
            y[k] = s
        """,
        set(),
        {"s"},
    ),
    "a while loop's condition reads what its body changes": (
        """
        s = x[0]
        while s < 4.0:
            s = s * 2.0
        """,
        {"s"},
        set(),
    ),
    "a local first assigned in the loop carries nothing into the next iteration": (
        """
        for i in range(n):
            if i > 0:
                y[i] = t
            t = x[i]
        """,
        set(),
        set(),
    ),
    "a vector changed one component at a time": (
        """
        acc = wp.vec2d()
        for i in range(n):
            acc[0] = acc[0] + x[i]
            y[i] = 2.0
        y[0] = acc[0]
        """,
        {"acc"},
        {"acc"},
    ),
    "a vector made in each iteration before its components are set": (
        """
        p = wp.vec2d()
        for i in range(n):
            p = wp.vec2d()
            p[1] = x[i]
            y[i] = p[1]
        """,
        set(),
        set(),
    ),
    "a loop variable is set by its own loop": (
        """
        for i in range(n):
            for j in range(n):
                y[j] = x[i]
        y[0] = float(i + j)
        """,
        set(),
        set(),
    ),
}


@pytest.mark.parametrize("shape", CARRIED_SHAPES)
def test_loop_carried_locals_are_those_a_read_can_see_across_an_iteration(shape):
    body, into, out = CARRIED_SHAPES[shape]
    kernel = parse("def k(x: wp.array[float], y: wp.array[float], n: int):\n" + textwrap.indent(body, "    "))
    asked = lambda n: isinstance(n, ast.While) or (isinstance(n, ast.For) and n.target.id == "i")  # noqa: E731
    loop = next(n for n in ast.walk(kernel) if asked(n))
    values = {"acc", "p"}  # the locals that hold a vector, as the planner tells them from the arrays
    carried = LoopFlow(kernel, values.__contains__).carried(loop)
    assert (set(carried.into_iterations), set(carried.out_of_loop)) == (into, out)
    assert carried.updated_only == ({"acc"} if shape == "a vector changed one component at a time" else set())


def hoisted(source: str) -> str:
    """The function with its while conditions that call an atomic hoisted, or 'unchanged'."""
    tree = hoist_conditions(parse(source), lambda call: WARP.atomic_op(call) is not None)
    return "unchanged" if tree is None else ast.unparse(tree)


def test_a_while_condition_that_calls_an_atomic_moves_into_the_loop():
    same_code(
        hoisted("""
            def k(budget: wp.array[int], count: wp.array[int], n: int):
                while wp.atomic_sub(budget, 0, 1) > 0:
                    slot = wp.atomic_add(count, 0, 1)
                    if slot % 2 == 1:
                        continue  # jumps to the test, which is now the body's first statement
                    while n > 0:  # nothing to hoist
                        n = n - 1
        """),
        """
        def k(budget: wp.array[int], count: wp.array[int], n: int):
            while True:
                if not wp.atomic_sub(budget, 0, 1) > 0:
                    break
                slot = wp.atomic_add(count, 0, 1)
                if slot % 2 == 1:
                    continue
                while n > 0:
                    n = n - 1
        """,
    )
    assert "if wp.atomic_add(count, 0, -1):\n            pass\n        else:\n            break" in hoisted("""
        def k(count: wp.array[int]):
            while wp.atomic_add(count, 0, -1):  # not a bool: Warp's 'not' takes no float
                pass
    """)
    assert (
        hoisted("""
        def k(count: wp.array[int]):
            while wp.atomic_add(count, 0, -1) > 0:
                pass
            else:  # Warp never runs it: the planner refuses such a loop around an atomic
                pass
    """)
        == "unchanged"
    )


def lowered(source: str) -> str:
    tree = lower_returns(parse(source), "wp", 16)
    return "unchanged" if tree is None else ast.unparse(tree)


def test_a_return_from_a_loop_warp_does_not_unroll_becomes_a_flag_and_breaks():
    same_code(
        lowered("""
            def take(count: wp.array[int], n: int) -> int:
                while True:
                    for k in range(n):
                        if wp.atomic_add(count, 0, 1) > k:
                            return k
                    if n > 3:
                        return -1
                    n = n + 1
                for k in range(3):  # unrolled: its return is left alone
                    if k == n:
                        return k
                return 0
        """),
        """
        def take(count: wp.array[int], n: int) -> int:
            returned = wp.bool(False)
            returned_value = wp.int32(0)
            while True:
                for k in range(n):
                    if wp.atomic_add(count, 0, 1) > k:
                        returned_value = wp.int32(k)
                        returned = True
                        break
                if returned:
                    break
                if n > 3:
                    returned_value = wp.int32(-1)
                    returned = True
                    break
                n = n + 1
            if returned:
                return returned_value
            for k in range(3):
                if k == n:
                    return k
            return 0
        """,
    )
    assert (
        lowered("""
        def first(count: wp.array[int], x: wp.array[float], n: int) -> float:
            for i in range(n):
                if wp.atomic_add(count, 0, 1) == i:
                    return x[i]  # a float: left for the planner to refuse
            return 0.0
    """)
        == "unchanged"
    )


def test_a_tuple_return_from_a_loop_gets_a_local_per_element():
    same_code(
        lowered("""
            def pop(items: wp.array[int], head: wp.array[int]) -> tuple[bool, int]:
                while True:
                    current = wp.atomic_add(head, 0, 0)
                    if current >= items.shape[0]:
                        return False, 0
                    if wp.atomic_cas(head, 0, current, current + 1) == current:
                        return True, items[current]
        """),
        """
        def pop(items: wp.array[int], head: wp.array[int]) -> tuple[bool, int]:
            returned = wp.bool(False)
            returned_value = wp.bool(False)
            returned_value_1 = wp.int32(0)
            while True:
                current = wp.atomic_add(head, 0, 0)
                if current >= items.shape[0]:
                    returned_value = wp.bool(False)
                    returned_value_1 = wp.int32(0)
                    returned = True
                    break
                if wp.atomic_cas(head, 0, current, current + 1) == current:
                    returned_value = wp.bool(True)
                    returned_value_1 = wp.int32(items[current])
                    returned = True
                    break
            if returned:
                return (returned_value, returned_value_1)
        """,
    )
    same_code(
        lowered("""
            def claim(flags: wp.array[int], n: int) -> typing.Tuple[wp.int64, wp.bool]:
                for i in range(n):
                    if wp.atomic_cas(flags, i, 0, 1) == 0:
                        return wp.int64(i), True
                return wp.int64(-1), False
        """),
        """
        def claim(flags: wp.array[int], n: int) -> typing.Tuple[wp.int64, wp.bool]:
            returned = wp.bool(False)
            returned_value = wp.int64(0)
            returned_value_1 = wp.bool(False)
            for i in range(n):
                if wp.atomic_cas(flags, i, 0, 1) == 0:
                    returned_value = wp.int64(wp.int64(i))
                    returned_value_1 = wp.bool(True)
                    returned = True
                    break
            if returned:
                return (returned_value, returned_value_1)
            return (wp.int64(-1), False)
        """,
    )


def test_a_bool_return_from_a_loop_gets_a_bool_local():
    same_code(
        lowered("""
            def mark(marks: wp.array[int], n: int) -> bool:
                for i in range(n):
                    if wp.atomic_cas(marks, i, 0, 1) == 0:
                        return True
                return False
        """),
        """
        def mark(marks: wp.array[int], n: int) -> bool:
            returned = wp.bool(False)
            returned_value = wp.bool(False)
            for i in range(n):
                if wp.atomic_cas(marks, i, 0, 1) == 0:
                    returned_value = wp.bool(True)
                    returned = True
                    break
            if returned:
                return returned_value
            return False
        """,
    )


@pytest.mark.parametrize(
    ("returns", "value"),
    [
        ("tuple[bool, int]", "pair"),  # a tuple-valued expression: no elements to assign
        ("tuple[bool, int]", "pop(count)"),
        ("tuple[bool, int]", "True, i, 0"),  # not the declared arity
        ("tuple[bool, float]", "True, 0.5"),  # a float element
        ("tuple[bool, wp.vec3]", "True, wp.vec3()"),
        ("tuple", "True, i"),  # no element types
        ("int", "i, i"),
        ("float", "0.5"),
    ],
)
def test_returns_from_a_loop_the_annotation_types_no_local_for_are_left_to_the_planner(returns, value):
    assert (
        lowered(f"""
        def take(count: wp.array[int], pair: tuple[bool, int], n: int) -> {returns}:
            for i in range(n):
                if wp.atomic_add(count, 0, 1) == i:
                    return {value}
            return pair
    """)
        == "unchanged"
    )


@pytest.mark.parametrize(
    ("loop", "max_unroll", "unrolled"),
    [
        ("for i in range(4):\n    pass", 16, True),
        ("for i in range(4):\n    pass", 3, False),  # the module's max_unroll
        ("for i in range(n):\n    pass", 16, False),
        ("for i in range(4):\n    if i > n:\n        break", 16, False),
        ("for i in range(wp.static(N + 1)):\n    pass", 0, True),  # a wp.static() makes Warp unroll it
        ("for i in range(N):\n    pass", 16, False),  # a global's value is not looked up
        ("while i < 4:\n    pass", 16, False),
    ],
)
def test_which_loops_warp_unrolls(loop, max_unroll, unrolled):
    assert unrolled_by_warp(ast.parse(loop).body[0], max_unroll) == unrolled


def test_argument_paths_follow_struct_fields_views_and_aliases():
    kernel = parse("""
        def k(w: Writer, grid: wp.array2d[int]):
            counter = w.count
            row = grid[1]
            local = wp.zeros(3)
    """)
    aliases = single_assignments(kernel)
    params = ["w", "grid"]

    def path(text: str) -> str | None:
        return argument_path(ast.parse(text, mode="eval").body, params, aliases)

    assert path("counter") == "w.count"
    assert path("w.pairs.first") == "w.pairs.first"
    assert path("row") == "grid"
    assert path("local") is None


def test_gradient_sources_of_a_float_return():
    kernel = parse("""
        def k(x: wp.array[float], z: wp.array[float], n: wp.array[int], acc: wp.array[float], y: wp.array[float]):
            i = wp.tid()
            v = x[i] * 2.0
            k = int(z[i])
            acc[1] = z[i]
            wp.atomic_add(acc, k, v)
            before = wp.atomic_add(acc, n[i], 1.0)
            if z[i] > 0.0:
                y[i] = before
    """)
    consumed = [c for c in find_atomic_calls(kernel, WARP) if c.consumed]
    sources = gradient_sources(kernel, ["x", "z", "n", "acc", "y"], WARP, {consumed[0].node: "acc"})
    assert sources[consumed[0].node] == {"acc", "x", "z"}


def test_namer_never_reuses_a_taken_name():
    namer = Namer.for_tree(parse("def thread(thread_1: int):\n    records = 1\n"), {"Any"})
    assert namer.fresh("thread") == "thread_2"
    assert namer.fresh("records") == "records_1"
    assert namer.fresh("records") == "records_2"
    assert namer.fresh("Any") == "Any_1"
    assert namer.fresh("fresh") == "fresh"
    assert namer.fresh_base("compact") == "compact" and namer.fresh_base("compact") == "compact_1"


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
