"""passes/loop_hazards.py: the loops Warp's backward replays wrong, and the rewrite that replays them from records
(issue 34). Each form gets the gradient of the original forward (finite differences) through the API and the
command line, with and without a consumed atomic; plain Warp gets every one of them wrong."""

from __future__ import annotations

import ast
import textwrap

import numpy as np
import pytest
import warp as wp

from tests.support import loops
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import FLOAT32, Case, check, f64, finite_difference_gradients, i32, vec3d
from warp_rewrite import rewrite_launches
from warp_rewrite.passes.atomics import PLAIN
from warp_rewrite.passes.loop_carried import LoopFlow
from warp_rewrite.passes.loop_hazards import Callees, Hazard, loop_hazards, reads_overwritten, values_needed

N = 4
X = [0.31, 0.17, 0.26, 0.12]
COUNTS = [3, 0, 5, 2]


def zeros(n=N):
    return wp.zeros(n, dtype=wp.float64, requires_grad=True, device="cpu")


def zeros32(n=N):
    return wp.zeros(n, dtype=wp.float32, requires_grad=True, device="cpu")


def f32(values, grad, dtype):
    return wp.array(np.asarray(values), dtype=dtype, requires_grad=grad, device="cpu")


KERNELS = {
    "squared_sum": Pattern(lambda: [f64(X, True), i32(COUNTS), i32([0]), zeros()], [3], [0]),
    "squared_sum_alone": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "neighbour_energy": Pattern(lambda: [f64(X, True), i32([1, 0, 2, 3]), i32(COUNTS), zeros()], [3], [0]),
    "substeps": Pattern(lambda: [f64([0.5, -0.3, 0.8, 0.2], True), f64(X, True), i32(COUNTS), zeros()], [3], [0, 1]),
    "halvings": Pattern(lambda: [f64([5.3, 12.4, 0.5, 31.0], True), f64([1.07], True), zeros()], [2], [0, 1]),
    "long_constant_range": Pattern(lambda: [f64(X, True), zeros()], [1], [0]),
    "argmax_of_grid": Pattern(lambda: [f64(X, True), i32([0]), zeros()], [2], [0]),
    "windows": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "nested": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "vector_sum": Pattern(
        lambda: [vec3d(np.arange(12.0).reshape(4, 3) * 0.1 + 0.05, True), i32(COUNTS), i32([0]), zeros()], [3], [0]
    ),
    "probe_while_true": Pattern(lambda: [f64(X, True), zeros()], [1], [0]),
    "argmax_while_true": Pattern(lambda: [f64(X, True), i32([3, 9, 1, 7]), i32(COUNTS), zeros()], [3], [0]),
    "gathered_sum": Pattern(lambda: [i32([0]), f64(X, True), zeros()], [2], [1]),
    "component_sums": Pattern(lambda: [i32([0]), f64(X, True), i32(COUNTS), zeros()], [3], [1]),
    "named_components": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "named_bound": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "variable_after": Pattern(lambda: [i32([3, 1, 2, 4]), f64([0.9, 0.7, 0.55, 0.8, 1.2], True), zeros()], [2], [1]),
    "strided_and_shrinking": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "update_then_break": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "update_then_break_into_slot": Pattern(lambda: [f64(X, True), i32(COUNTS), i32([0]), zeros()], [3], [0]),
    "root_then_doubled": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "quotient_then_summed": Pattern(lambda: [f64(X, True), i32(COUNTS), zeros()], [2], [0]),
    "exp_then_long_drag": Pattern(lambda: [f64(X, True), zeros()], [1], [0]),
    "direction_bounces": Pattern(
        lambda: [vec3d(np.arange(12.0).reshape(4, 3) * 0.1 + 0.05, True), i32(COUNTS), zeros()], [2], [0]
    ),
}
emitted = emitted_fixture(loops)
test_through_the_api, test_through_the_command_line = end_to_end_tests(loops, N, KERNELS)


@pytest.mark.parametrize(
    "name",
    [
        "squared_sum_alone",
        "substeps",
        "halvings",
        "windows",
        "argmax_of_grid",
        "argmax_while_true",
        "variable_after",
        "update_then_break",
        "update_then_break_into_slot",
        "root_then_doubled",
        "quotient_then_summed",
        "exp_then_long_drag",
        "direction_bounces",
    ],
)
def test_plain_warp_is_wrong_on_these(name):
    """What the rewrite fixes: plain Warp's tape gives another gradient than finite differences of its forward."""
    pattern = KERNELS[name]
    case = Case(getattr(loops, name), N, pattern.make, pattern.loss, pattern.wrt)
    args = case.make_args()
    with wp.Tape() as tape:
        wp.launch(case.kernel, N, inputs=args, device="cpu")
    tape.backward(grads={args[i]: wp.array(case.weight(i, args[i]), dtype=args[i].dtype) for i in case.loss_outputs})
    expected = finite_difference_gradients(case)
    assert any(not np.allclose(args[i].grad.numpy(), expected[i], rtol=1e-5) for i in case.wrt)


FOLLOWS_NO_HELPER = Callees()


def hazards_of(
    source: str, max_unroll: int = 16, callees: Callees = FOLLOWS_NO_HELPER
) -> list[tuple[str, set[str], tuple[str, ...]]]:
    function = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(function, ast.FunctionDef)
    parameters = {argument.arg for argument in function.args.args}
    flow = LoopFlow(function, lambda name: name not in parameters)  # locals hold values, parameters memory
    found = loop_hazards(function, flow, max_unroll, callees)
    return [(ast.unparse(h.loop).splitlines()[0], {hazard.name for hazard in h.hazards}, h.carried) for h in found]


def test_which_loops_warp_replays_wrong():
    assert hazards_of("""
        def k(x, n, out):
            acc = float(0.0)
            for j in range(n[0]):       # dynamic, carries acc out
                acc += x[j]
            for j in range(4):          # unrolled: straight code to Warp's backward
                acc += x[j]
            for j in range(n[0]):       # dynamic, carries nothing
                out[j] = x[j] * 2.0
            for j in range(20):         # longer than max_unroll, carries acc
                acc = acc * x[j]
            out[0] = acc
    """) == [("for j in range(n[0]):", {"CARRIED"}, ("acc",)), ("for j in range(20):", {"CARRIED"}, ("acc",))]


def test_while_loops_and_jumps():
    assert hazards_of("""
        def k(x, out):
            k = int(0)
            while x[k] > 0.0:           # while: its condition is evaluated again in backward
                out[k] = x[k] * 2.0
                k += 1
            for j in range(8):          # unrolled, but it breaks: a loop to Warp
                if x[j] < 0.0:
                    break
                out[j] = x[j]
            while x[0] > 1.0:           # a spin: nothing to replay
                pass
    """) == [
        ("while x[k] > 0.0:", {"CARRIED", "WHILE"}, ("k",)),
        ("for j in range(8):", {"JUMPS"}, ()),
    ]


def test_a_constant_range_within_max_unroll_is_unrolled():
    source = """
        def k(x, out):
            acc = float(0.0)
            for j in range(8):
                acc = acc * x[j]
            out[0] = acc
    """
    assert hazards_of(source) == []
    assert hazards_of(source, max_unroll=4) == [("for j in range(8):", {"CARRIED"}, ("acc",))]


def test_a_loop_assigning_a_builtins_result_whose_adjoint_reads_it():
    """Warp's forward assigns a local the loop changes into its variable from before the loop, in place: where that
    variable holds what ``wp.sqrt``, ``wp.exp``, ``wp.normalize``, a division or a power returned, the builtin's
    adjoint reads the loop's value. Whatever else the loop does: here it only adds (a sum Warp gets right)."""
    assert hazards_of("""
        def k(x, n, out):
            a = wp.sqrt(x[0])
            b = x[1] / x[2]
            c = wp.sin(x[3])            # sin's adjoint reads its argument, not its result
            d = x[4] ** 2.0
            for j in range(n[0]):
                a = a + 1.0
                b += 1.0
                c = c + 1.0
            for j in range(n[1]):
                d = d + x[j]
            e = wp.exp(x[5])            # after the loop: no value of the loop's reaches it
            for j in range(4):          # unrolled: no variable is overwritten in place
                a = a + e
            out[0] = a + b + c + d + e
    """) == [
        ("for j in range(n[0]):", {"OVERWRITES_RESULT"}, ()),  # (sums: no other hazard)
        ("for j in range(n[1]):", {"OVERWRITES_RESULT"}, ()),
    ]
    function = ast.parse("def k(x, n):\n    a = wp.sqrt(x)\n    for j in range(n):\n        a = a + 1.0").body[0]
    assert isinstance(function, ast.FunctionDef)
    found = loop_hazards(function, LoopFlow(function, lambda name: False), 16, KERNEL)
    assert [h.overwritten for h in found] == [("a",)]
    assert "assigns 'a', which holds a value a builtin returned before the loop" in found[0].why()


def test_hazard_reasons_say_why():
    assert "evaluates again" in Hazard.WHILE.value and "jumping past" in Hazard.JUMPS.value


def test_rewrite_launches_rewrites_a_kernel_whose_only_hazard_is_a_loop():
    """Code one cannot edit: under ``rewrite_launches()``, ``wp.launch`` of a kernel with no atomic whose loop Warp
    replays wrong, on a tape, gets the gradient of the original forward; off again, plain Warp's (0) comes back."""
    pattern = KERNELS["substeps"]

    def program(args, launcher):
        wp.launch(loops.substeps, N, inputs=args, device="cpu")

    rewrite_launches()
    try:
        check(Case(None, N, pattern.make, pattern.loss, pattern.wrt, program=program))
    finally:
        rewrite_launches(False)
    args = pattern.make()
    with wp.Tape() as tape:
        wp.launch(loops.substeps, N, inputs=args, device="cpu")
    assert tape.launches[0][0] is loops.substeps  # the original kernel, as before


# --- precision: loops no gradient depends on (passes.loop_hazards._no_gradient_depends_on) ---------------------

KERNEL = Callees(kernel=True)


def loops_of(source: str, callees: Callees = KERNEL) -> list[str]:
    """The first lines of the loops reported as hazards."""
    return [line for line, _, _ in hazards_of(source, callees=callees)]


def test_a_loop_that_only_counts_into_int_arrays_is_no_hazard():
    """What Warp's backward sees wrong reaches only int stores: no adjoint depends on it (stores are not replayed)."""
    assert (
        loops_of("""
        def k(x: wp.array(dtype=float), n: wp.array(dtype=int), count: wp.array[wp.int32]):
            i = wp.tid()
            found = int(0)
            for j in range(n[i]):
                if x[j] > 0.5:
                    found += 1
            count[i] = found
    """)
        == []
    )
    assert loops_of("""
        def k(x: wp.array(dtype=float), n: wp.array(dtype=int), out: wp.array(dtype=float)):
            i = wp.tid()
            found = int(0)
            for j in range(n[i]):
                if x[j] > 0.5:
                    found += 1
            out[i] = x[i] * float(found)
    """) == ["for j in range(n[i]):"]


def test_a_carried_index_feeding_a_float_store_or_read_is_a_hazard():
    source = """
        def k(x: wp.array(dtype=float), n: wp.array(dtype=int), best: wp.array(dtype=int), out: wp.array(dtype=float)):
            i = wp.tid()
            at = int(0)
            for j in range(n[i]):
                if x[j] > x[at]:
                    at = j
            best[i] = at
            {use}
    """
    assert loops_of(source.format(use="pass")) == []
    assert loops_of(source.format(use="out[i] = x[at]")) == ["for j in range(n[i]):"]
    assert loops_of(source.format(use="out[at] = x[i]")) == ["for j in range(n[i]):"]
    assert loops_of(source.format(use="if at > 2:\n                out[i] = x[i]")) == ["for j in range(n[i]):"]


def test_a_query_loop_writing_int_results_is_no_hazard():
    """Newton's broad phases and Warp's query tests: a while loop over a BVH, results and counts into int arrays."""
    assert (
        loops_of("""
        def k(bvh: wp.uint64, lower: wp.array(dtype=wp.vec3), upper: wp.array(dtype=wp.vec3),
              rows: int, results: wp.array2d(dtype=int)):
            tid = wp.tid()
            count = wp.int32(0)
            index = wp.int32(-1)
            query = wp.bvh_query_aabb(bvh, lower[tid], upper[tid])
            while count < rows - 1 and wp.bvh_query_next(query, index):
                if wp.length(upper[index] - lower[tid]) > 0.1:
                    results[count + 1, tid] = index
                    count += 1
            results[0, tid] = count
    """)
        == []
    )


def test_a_sum_used_only_linearly_is_no_hazard():
    """Warp's reverse pass keeps a sum's adjoint across the trips it replays: a sum stored, added, or scaled by a
    literal or a kernel's value parameter gets its gradient; squared or scaled by another value it does not."""
    source = """
        def k(x: wp.array(dtype=float), n: wp.array(dtype=int), scale: float, out: wp.array(dtype=float)):
            i = wp.tid()
            acc = float(0.0)
            for j in range(n[i]):
                acc += x[j] * x[j]
            {use}
    """
    linear = [
        "out[i] = acc",
        "out[i] = 2.0 * acc + x[i]",
        "out[i] = scale * acc",
        "wp.atomic_add(out, 0, -acc)",
        "total = acc - x[i]\n            out[i] += total / 2.0",
    ]
    for use in linear:
        assert loops_of(source.format(use=use)) == [], use
    for use in ["out[i] = acc * acc", "out[i] = x[i] * acc", "out[i] = wp.sqrt(acc)", "out[int(acc)] = x[i]"]:
        assert loops_of(source.format(use=use)) == ["for j in range(n[i]):"], use
    # a helper's value parameter gets a gradient from its caller: a product with it needs the sum's value
    assert loops_of(source.format(use="out[i] = scale * acc"), Callees()) == ["for j in range(n[i]):"]


def test_only_a_sum_assigned_before_the_loop_and_only_added_to_is_one():
    """A local first assigned in the loop loses, at each replayed trip, the adjoint that flowed into it after the
    loop (test_warp_loops.py); a sum reassigned in the loop, or read there, is no sum."""
    for body in ["last = x[j]", "acc = x[j]", "acc += acc * x[j]", "acc = acc * 0.5 + x[j]", "acc[0] += x[j]"]:
        source = f"""
            def k(x: wp.array(dtype=float), n: wp.array(dtype=int), out: wp.array(dtype=float)):
                i = wp.tid()
                acc = wp.vec2()
                last = float(0.0)
                for j in range(n[i]):
                    {body}
                out[i] = acc.x + last
        """
        assert loops_of(source) == ["for j in range(n[i]):"], body
    assert (
        loops_of("""
        def k(x: wp.array(dtype=float), n: wp.array(dtype=int), out: wp.array(dtype=float)):
            i = wp.tid()
            acc = float(0.0)
            for j in range(n[i]):
                acc = acc + x[j] * 2.0
                if j > 2:
                    acc -= x[i]
            out[i] = acc
    """)
        == []
    )


def test_a_for_loops_variable_read_after_it_is_no_sum():
    """The loop sets its variable at each trip: carried out of the loop (Python keeps its last value), it is wrong in
    Warp's backward, which leaves the loop out, even with nothing in the loop's body (found by a helper writing
    kernels against the count phase: plain Warp and the rewrite both gave zero gradients)."""
    assert loops_of("""
        def k(counts: wp.array(dtype=int), x: wp.array(dtype=float), out: wp.array(dtype=float)):
            tid = wp.tid()
            i = int(0)
            for i in range(counts[tid]):
                pass
            s = float(1.0)
            for j in range(i + 1):
                s = s * x[j] + 1.0
            out[tid] = s
    """) == ["for i in range(counts[tid]):", "for j in range(i + 1):"]


def test_a_while_loop_or_jumps_make_every_value_of_the_loop_wrong():
    """Warp replays other trips: even a sum's adjoint is wrong, and the body's own stores get it wrong."""
    assert loops_of("""
        def k(x: wp.array(dtype=float), n: wp.array(dtype=int), out: wp.array(dtype=float)):
            i = wp.tid()
            acc = float(0.0)
            j = int(0)
            while j < n[i]:
                acc += x[j]
                j += 1
            out[i] = acc
    """) == ["while j < n[i]:"]
    assert loops_of("""
        def k(x: wp.array(dtype=float), n: wp.array(dtype=int), out: wp.array(dtype=float)):
            i = wp.tid()
            for j in range(n[i]):
                if x[j] < 0.0:
                    break
                out[j] = x[j] * x[j]
    """) == ["for j in range(n[i]):"]
    assert (
        loops_of("""
        def k(x: wp.array(dtype=float), n: wp.array(dtype=int), flags: wp.array(dtype=wp.int32)):
            i = wp.tid()
            for j in range(n[i]):
                if x[j] < 0.0:
                    break
                flags[j] = 1
    """)
        == []
    )


def test_a_helper_returning_an_int_from_its_loop_is_no_hazard_unless_it_says_nothing_of_its_type():
    """The caller gets the helper's return from its forward, called whole in Warp's replay: an int return carries
    no gradient. A return whose type the helper does not declare counts as a float."""
    source = """
        def find(keys: wp.array(dtype=wp.uint64), key: wp.uint64, values: wp.array(dtype=float)){returns}:
            slot = int(0)
            for probe in range(keys.shape[0]):
                if keys[slot] == key:
                    return slot
                slot = (slot + 1) % keys.shape[0]
            return -1
    """
    assert loops_of(source.format(returns=" -> int"), Callees()) == []
    assert loops_of(source.format(returns=""), Callees()) == ["for probe in range(keys.shape[0]):"]


def test_a_while_loop_with_a_return_stays_a_hazard():
    """Warp's backward evaluates its condition again on values it replays, and may never leave it (design notes)."""
    assert loops_of(
        """
        def probe(keys: wp.array(dtype=int), key: int) -> int:
            slot = int(0)
            while True:
                if keys[slot] == key:
                    return slot
                slot += 1
    """,
        Callees(),
    ) == ["while True:"]


def test_calls_the_loop_reaches_count_by_what_they_write():
    source = """
        def k(x: wp.array(dtype=float), n: wp.array(dtype=int), count: wp.array(dtype=int), out: wp.array(dtype=float)):
            i = wp.tid()
            found = int(0)
            for j in range(n[i]):
                found += 1
            {call}
    """
    assert loops_of(source.format(call="report(count, found)")) == ["for j in range(n[i]):"]  # a helper: may write
    assert loops_of(source.format(call="report(count, found)"), Callees(helper_writes=lambda call: False)) == []
    assert loops_of(source.format(call="wp.atomic_add(count, i, found)")) == []
    assert loops_of(source.format(call="wp.atomic_add(out, i, float(found))")) == ["for j in range(n[i]):"]
    assert loops_of(source.format(call="wp.tile_store(count, wp.tile(found))")) == ["for j in range(n[i]):"]
    assert loops_of(source.format(call="wp.printf('%d', found)")) == []


def test_a_store_into_a_struct_or_an_unannotated_parameter_counts_as_a_gradient():
    for annotation in ["", ": Contacts", ": Any", ": wp.array(dtype=Any)"]:
        assert loops_of(f"""
            def k(n: wp.array(dtype=int), out{annotation}):
                i = wp.tid()
                found = int(0)
                for j in range(n[i]):
                    found += 1
                out[found] = 1
        """) == ["for j in range(n[i]):"], annotation


def test_check_the_command_line_and_the_api_agree_on_which_loops_are_hazards(capsys, tmp_path):
    """``--check`` reports WR008 in the kernels whose loops are hazards and nowhere else; ``wp_rewrite`` leaves the
    others as they are and rewrites these; the command line rewrites these alone."""
    import json
    import shutil

    from tests.support import loop_precision
    from tests.support.emitted import run_cli
    from warp_rewrite import wp_rewrite

    path = tmp_path / "loop_precision.py"
    shutil.copy(loop_precision.__file__, path)
    _, out, _ = run_cli(capsys, "--check", path, "--select", "ALL", "--output-format", "json")
    reported = {finding["message"].split("'")[1] for finding in json.loads(out) if finding["code"] == "WR008"}
    assert reported == {kernel.key for kernel in loop_precision.HAZARD}
    assert all(wp_rewrite(kernel).pair is None for kernel in loop_precision.NO_HAZARD)
    assert all(wp_rewrite(kernel).pair is not None for kernel in loop_precision.HAZARD)
    _, _, err = run_cli(capsys, path, "-o", tmp_path / "out.py")
    assert "rewrote 2 kernels (squared_window, scaled_by_count)" in err


def test_the_loops_no_gradient_depends_on_get_plain_warps_gradient_which_is_right():
    """What leaving them out relies on: plain Warp's tape gives finite differences' gradient on each."""
    from tests.support import loop_precision
    from tests.support.harness import plain_warp_gradients

    keys = lambda: wp.array([3, 0, 1, 2], dtype=wp.int32, device="cpu")  # noqa: E731
    x = lambda: f32(X, True, wp.float32)  # noqa: E731
    counts = [3, 0, 4, 2]  # within x
    launches = {
        "count_above": (lambda: [x(), i32(counts), i32([0] * N)], (), (0,)),
        "lookup": (lambda: [keys(), x(), zeros32()], (2,), (1,)),
        "sum_of_squares": (lambda: [x(), i32(counts), 1.5, zeros32()], (3,), (0,)),
        "smoothed_sums": (lambda: [x(), i32(counts), zeros32()], (2,), (0,)),
    }
    for kernel in loop_precision.NO_HAZARD:
        make, loss, wrt = launches[kernel.key]
        case = Case(kernel, N, make, loss, wrt)
        expected = finite_difference_gradients(case, FLOAT32.epsilon)
        assert (kernel.key == "count_above") == (not np.any(expected[wrt[0]]))
        np.testing.assert_allclose(plain_warp_gradients(case)[wrt[0]], expected[wrt[0]], rtol=1e-2, atol=1e-3)


def test_a_continue_before_a_trips_work_skips_no_adjoint():
    """A replayed ``continue`` jumps past the adjoint of what its trip ran before it (test_warp_loops.py): nothing,
    where it skips the trip first (Newton's forward kinematics: ``if not joint_mask[i]: continue``)."""
    source = """
        def fk(order: wp.array(dtype=int), mask: wp.array(dtype=bool), q: wp.array(dtype=float),
               n: int, body_q: wp.array(dtype=float)):
            for joint in range(n):
                i = order[joint]
                if not mask[i]:
                    continue
                {before}
                body_q[i] = q[i] * q[i]
                {after}
    """
    assert loops_of(source.format(before="pass", after="pass")) == []
    assert loops_of(source.format(before="pass", after="if q[i] > 1.0:\n                    continue")) == [
        "for joint in range(n):"
    ]
    assert loops_of(source.format(before="pass", after="if q[i] > 1.0:\n                    break")) == [
        "for joint in range(n):"
    ]


# --- reads of memory the launch writes: reads_overwritten, values_needed -------------------------------------


def overwritten_and_needed(source: str) -> tuple[int, bool]:
    """How many reads of ``y`` a store into ``y`` at their index may overwrite after them, and whether a value of
    those reads is needed, in the kernel ``source``."""
    function = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(function, ast.FunctionDef)
    subscripts = [n for n in ast.walk(function) if isinstance(n, ast.Subscript) and ast.unparse(n.value) == "y"]
    reads = [n for n in subscripts if isinstance(n.ctx, ast.Load)]
    stores = [n for n in subscripts if isinstance(n.ctx, ast.Store)]
    overwritten = reads_overwritten(function, reads, stores)
    return len(overwritten), values_needed(function, overwritten, PLAIN, kernel=True)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # the outside trial's: stored, read into a product, stored again
        ("def k(x, y):\n t = wp.tid()\n y[t] = wp.sin(x[t])\n y[t] = y[t] * y[t] + x[t]", (2, True)),
        # in place, into a builtin
        ("def k(y):\n t = wp.tid()\n y[t] = wp.normalize(y[t])", (1, True)),
        # only added to, or scaled by a literal: no adjoint needs the value
        ("def k(x, y):\n t = wp.tid()\n y[t] = x[t]\n y[t] = y[t] + x[t] * 2.0", (1, False)),
        ("def k(x, y):\n t = wp.tid()\n v = y[t] * 0.5\n y[t] = v - x[t]", (1, False)),
        # followed through a local into a product
        ("def k(x, y):\n t = wp.tid()\n v = y[t] + 1.0\n y[t] = v * x[t]", (1, True)),
        # a condition on it
        ("def k(x, y):\n t = wp.tid()\n if y[t] > 0.0:\n  x[t] = 1.0\n y[t] = 0.0", (1, True)),
        # stored at another index (a parent read, a child stored): not told here
        ("def k(p, c, y):\n t = wp.tid()\n v = y[p[t]]\n y[c[t]] = v * v", (0, False)),
        # stored before the read only, and not in a loop around both: the replay reads what the forward read
        ("def k(x, y):\n t = wp.tid()\n y[t] = x[t]\n x[t] = y[t] * y[t]", (0, False)),
        # stored before the read, in a loop around both: the next trip's store overwrites it
        ("def k(x, y, n):\n t = wp.tid()\n for i in range(n):\n  y[t] = x[i]\n  x[i] = y[t] * y[t]", (2, True)),
        # through a copy of the thread's index: the same element (an outside trial's; once read as another one)
        ("def k(x, y):\n t = wp.tid()\n j = t\n y[j] = wp.sin(x[t])\n y[t] = y[j] * y[j]", (2, True)),
        # a copy of a name assigned again is no copy of it
        ("def k(x, y):\n t = wp.tid()\n j = t\n t = t + 1\n v = y[j]\n y[t] = v * v", (0, False)),
    ],
)
def test_reads_a_later_store_overwrites_and_whether_their_values_are_needed(source, expected):
    assert overwritten_and_needed(source) == expected
