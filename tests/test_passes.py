"""Unit tests of the AST passes as before/after source pairs: nothing here compiles or launches a kernel."""

import ast
import textwrap

from passes.atomics import WarpNames, find_atomic_calls
from passes.dataflow import argument_path, gradient_sources, single_assignments
from passes.naming import Namer
from passes.two_phase import Names, Site, helper_functions, phase_kernel

WARP = WarpNames(frozenset({"wp"}), (("atomic_add", "add"),))


def parse(source: str) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(source)).body[0]


def same_code(actual: ast.AST, expected: str) -> None:
    assert ast.unparse(actual) == ast.unparse(ast.parse(textwrap.dedent(expected)))


COMPACTION = """
@wp.kernel
def compact(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid]
"""

NAMES = Names(
    warp="wp",
    any="Any",
    record_helper="record_returned",
    replay_helper="replay_returned",
    launch_shape="launch_shape",
    thread="thread",
    coords=("c0", "c1", "c2", "c3"),
)


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
    kernel = parse(COMPACTION)
    call = find_atomic_calls(kernel, WARP)[0].node
    record = phase_kernel(
        kernel,
        [Site(call, "slot_records", "wp.int32")],
        NAMES,
        name="compact_record",
        helper="record_returned",
        options={"enable_backward": False},
    )
    same_code(
        record,
        """
        @wp.kernel(enable_backward=False)
        def compact_record(x: wp.array[float], count: wp.array[int], out: wp.array[float],
                           slot_records: wp.array(dtype=wp.int32), launch_shape: wp.vec4i):
            c0, c1, c2, c3 = wp.tid()
            thread = ((c0 * launch_shape[1] + c1) * launch_shape[2] + c2) * launch_shape[3] + c3
            tid = wp.tid()
            slot = record_returned(wp.atomic_add(count, 0, 1), slot_records, thread)
            out[slot] = x[tid]
        """,
    )


def test_replay_kernel_wraps_nested_atomics_inner_first():
    kernel = parse("""
        @wp.kernel
        def nested(c: wp.array[int], d: wp.array[int], out: wp.array[float]):
            '''Docstring stays first.'''
            out[wp.atomic_add(d, wp.atomic_add(c, 0, 1), 1)] = 1.0
    """)
    inner, outer = sorted(find_atomic_calls(kernel, WARP), key=lambda c: c.node.col_offset, reverse=True)
    replay = phase_kernel(
        kernel,
        [Site(outer.node, "d_records", "Any"), Site(inner.node, "c_records", "Any")],
        NAMES,
        name="nested_replay",
        helper="replay_returned",
        options={},
    )
    same_code(
        replay,
        """
        @wp.kernel
        def nested_replay(c: wp.array[int], d: wp.array[int], out: wp.array[float],
                          d_records: wp.array(dtype=Any), c_records: wp.array(dtype=Any), launch_shape: wp.vec4i):
            '''Docstring stays first.'''
            c0, c1, c2, c3 = wp.tid()
            thread = ((c0 * launch_shape[1] + c1) * launch_shape[2] + c2) * launch_shape[3] + c3
            out[replay_returned(wp.atomic_add(d, replay_returned(wp.atomic_add(c, 0, 1), c_records, thread), 1),
                                d_records, thread)] = 1.0
        """,
    )


def test_helpers_take_the_modules_names():
    names = Names("warp", "AnyT", "rec", "rep", "shape", "t", ("a", "b", "c", "d"))
    record, replay = helper_functions(names)
    same_code(
        record,
        '''
        @warp.func
        def rec(value: AnyT, records: warp.array(dtype=AnyT), index: int):
            """Store an atomic's returned value for the replay kernel and pass it on unchanged."""
            records[index] = value
            return value
        ''',
    )
    assert replay.name == "rep" and ast.unparse(replay.body[-1]) == "return records[index]"


def test_argument_paths_follow_struct_fields_views_and_aliases():
    kernel = parse("""
        def k(w: Writer, grid: wp.array2d[int]):
            counter = w.count
            row = grid[1]
            local = wp.zeros(3)
    """)
    aliases = single_assignments(kernel)
    params = ["w", "grid"]
    path = lambda text: argument_path(ast.parse(text, mode="eval").body, params, aliases)  # noqa: E731
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
    sources = gradient_sources(kernel, ["x", "z", "n", "acc", "y"], WARP, consumed)
    assert sources[consumed[0].node] == {"acc", "x", "z"}


def test_namer_never_reuses_a_taken_name():
    namer = Namer.for_tree(parse("def thread(thread_1: int):\n    records = 1\n"), {"Any"})
    assert namer.fresh("thread") == "thread_2"
    assert namer.fresh("records") == "records_1"
    assert namer.fresh("records") == "records_2"
    assert namer.fresh("Any") == "Any_1"
    assert namer.fresh("fresh") == "fresh"
