"""Bugs the real-code suite (tests/realcode, ``make realcode``) found in warp-rewrite, each reduced to a kernel written
here. A new one is added as ``xfail(strict=True)``: whoever fixes it sees it pass, removes its mark, and updates
tests/realcode/ledger.py and the tables of docs/realcode.md, where the real kernels it affects are counted. All of
those found so far are fixed: twelve until 2026-12-04 (three of them found by Newton's own tests on the rewritten
tree, tests/realcode/newton_suite.py) and ten on 2026-12-05 (the later tests of this file, from
``test_a_helpers_local_named_as_a_generated_parameter`` on, and the call of a builtin through a local)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import warp as wp

from tests.support import harness
from tests.support.emitted import through
from tests.support.harness import Case, check, f64, i32
from warp_rewrite import RewriteError, wp_rewrite
from warp_rewrite.cli.main import main

X = np.array([0.7, 1.3, 1.9, 0.4, 0.6, 1.1])
N = len(X)

column = wp.types.matrix(shape=(2, 1), dtype=wp.float64)


@wp.func
def put_in_column(slot: int, value: wp.float64, out: wp.array[column]):
    out[slot][0, 0] = value


@wp.kernel
def scatter_into_columns(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[column]):
    slot = wp.atomic_add(count, 0, 1)
    put_in_column(slot, x[wp.tid()], out)


def test_a_storing_helper_with_a_matrix_array_parameter():
    """Newton's Kamino _update_col_major_limit/contact_jacobians (store_col_major_jacobian_block): the component
    store ``out[slot][0, 0] = value`` reads nothing (it was recorded as a read, and the helper cloned with a twin
    whose record parameter Warp refused as generic)."""
    check(
        Case(
            scatter_into_columns,
            N,
            lambda: [f64(X, True), i32([0]), wp.zeros(N, dtype=column, requires_grad=True)],
            [2],
            [0],
        )
    )


@wp.kernel
def scaled_in_a_branch(
    x: wp.array[wp.float64], bounds: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    scaled = x[tid]
    for i in range(3):
        if x[tid] > bounds[i]:
            scaled = x[tid] * x[tid]  # assigned before it is read, in the one branch that reads it
            slot = wp.atomic_add(count, 0, 1)
            out[slot] = scaled


def test_a_float_assigned_before_it_is_read_in_a_branch_is_not_loop_carried():
    make = lambda: [f64(X, True), f64([0.5, 1.0, 1.5]), i32([0]), f64(np.zeros(3 * N), True)]  # noqa: E731
    check(Case(scaled_in_a_branch, N, make, [3], [0]))


@wp.kernel
def doubled_then_tripled(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    for _ in range(2):
        scaled = x[tid] * wp.float64(2.0)
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = scaled
    for _ in range(2):
        if x[tid] > wp.float64(1.0):
            scaled = x[tid] * wp.float64(3.0)  # after the loop, read only after this assignment
            out[2 * x.shape[0] + tid] = scaled


def test_a_float_reassigned_before_it_is_read_after_the_loop_is_not_loop_carried():
    check(Case(doubled_then_tripled, N, lambda: [f64(X, True), i32([0]), f64(np.zeros(3 * N), True)], [2], [0]))


COMPACT = """\
import warp as wp


@wp.kernel
def compact(x: wp.array(dtype=float), count: wp.array(dtype=int), out: wp.array(dtype=float)):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[wp.tid()]
"""

LAUNCH = """

if __name__ == "__main__":
    wp.config.quiet = True
    x = wp.array([0.0, 1.0, 2.0], dtype=float, requires_grad=True)
    count = wp.zeros(1, dtype=int)
    out = wp.zeros(3, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        wp.launch(compact, 3, inputs=[x, count, out], device="cpu")
    tape.backward(grads={out: wp.array([0.0, 1.0, 2.0], dtype=float)})
    print(sorted(x.grad.numpy().tolist()))
"""


def test_an_emitted_module_in_a_namespace_folder_of_a_package_imports(tmp_path):
    """Warp's warp/examples/core has no __init__.py inside the package warp.examples: its examples run as
    ``python -m warp.examples.core.example_...`` and as scripts. The emitted module (and one in a regular package)
    imports the runtime beside it either way."""
    (tmp_path / "package" / "core").mkdir(parents=True)
    (tmp_path / "package" / "__init__.py").write_text("")
    (tmp_path / "package" / "core" / "compact.py").write_text(COMPACT + LAUNCH)
    (tmp_path / "package" / "compact.py").write_text(COMPACT + LAUNCH)
    for path in (tmp_path / "package" / "core" / "compact.py", tmp_path / "package" / "compact.py"):
        assert main([str(path), "--in-place", "-q"]) == 0
    for command in (
        ["-c", "import package.core.compact"],
        ["-m", "package.core.compact"],
        [str(tmp_path / "package" / "core" / "compact.py")],
        ["-m", "package.compact"],
        [str(tmp_path / "package" / "compact.py")],
    ):
        ran = subprocess.run([sys.executable, *command], cwd=tmp_path, capture_output=True, text=True)
        assert ran.returncode == 0, f"{command}: {ran.stderr}"
        last = ran.stdout.strip().splitlines()[-1:]
        assert last == (["[0.0, 1.0, 2.0]"] if command[0] != "-c" else []), ran.stdout  # gradients, when run


def test_check_reports_a_finding_once(tmp_path, capsys):
    path = tmp_path / "made.py"
    path.write_text(
        textwrap.dedent("""\
        import warp as wp


        def make_kernel(inner):
            @wp.func
            def outer(x: float) -> float:
                return inner(x) + inner(2.0 * x)

            @wp.kernel
            def apply(x: wp.array(dtype=float)):
                x[0] = outer(x[0])

            return apply
        """)
    )
    main(["--check", str(path), "-q"])
    lines = capsys.readouterr().out.splitlines()
    # WR005 once (the helper reaches ``inner`` twice), and WR009: x[0] is read into a call and stored into
    assert len(lines) == len(set(lines)) == 2 and [" WR005 " in line for line in lines].count(True) == 1


def test_check_reads_backward_off_from_a_module_object(tmp_path, capsys):
    path = tmp_path / "made.py"
    path.write_text(
        textwrap.dedent("""\
        import warp as wp


        def make_kernels(dtype):
            module = wp.get_module(f"made_{dtype.__name__}")
            module.options.update({"enable_backward": False})

            @wp.kernel(module=module)
            def compact(x: wp.array(dtype=dtype), count: wp.array(dtype=int), out: wp.array(dtype=dtype)):
                slot = wp.atomic_add(count, 0, 1)
                out[slot] = x[wp.tid()]

            return compact
        """)
    )
    main(["--check", str(path), "--select", "ALL", "-q"])
    assert [line.split(": ")[1].split()[0] for line in capsys.readouterr().out.splitlines()] == ["WR101"]


VISITOR = """\
from __future__ import annotations

import warp as wp


def make_visitor(dtype):
    @wp.kernel
    def visit(
        x: wp.array[dtype], level: wp.array[int], head: wp.array[int], order: wp.array[int], out: wp.array[dtype]
    ):
        tid = wp.tid()
        for j in range(x.shape[0]):
            if dtype(wp.abs(x[j])) > dtype(0.5):
                old = wp.atomic_cas(level, j, -1, tid)
                if old == -1:
                    slot = wp.atomic_add(head, 0, 1)
                    order[slot] = j
        slot = wp.atomic_add(head, 1, 1)
        out[slot] = x[tid] * x[tid]

    return visit
"""


def test_an_emitted_factory_replay_keeps_what_its_annotations_use(tmp_path, monkeypatch):
    """Kamino's rcm_batch kernels: the replay leaves out a CAS probe loop, and with it the body's only use of the
    factory's 'dtype'; under 'from __future__ import annotations' its annotation 'wp.array[dtype]' would then name
    nothing Warp can find (the replay's body names 'dtype' again, so that it stays a closure variable)."""
    (tmp_path / "visitor.py").write_text(VISITOR)
    assert main([str(tmp_path / "visitor.py"), "-o", str(tmp_path / "visitor_rewritten.py"), "-q"]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    import visitor  # the original, for ground truth
    import visitor_rewritten

    original, rewritten = visitor.make_visitor(wp.float64), visitor_rewritten.make_visitor(wp.float64)

    def program(args, launcher):
        if launcher is harness.launch_original:
            wp.launch(original, N, inputs=args, device="cpu")
        else:
            rewritten.launch(N, inputs=args, device="cpu")

    make = lambda: [f64(X, True), i32([-1] * N), i32([0, 0]), i32([0] * N), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(None, N, make, [4], [0], program=program))


def test_check_finds_a_kernel_made_through_a_helper(tmp_path, capsys):
    path = tmp_path / "made.py"
    path.write_text(
        textwrap.dedent("""\
        import warp as wp

        cache = {}


        def getkernel(func, suffix=""):
            key = func.__name__ + suffix
            if key not in cache:
                cache[key] = wp.Kernel(func=func, key=key)
            return cache[key]


        def test_compact():
            def compact(x: wp.array(dtype=float), count: wp.array(dtype=int), out: wp.array(dtype=float)):
                slot = wp.atomic_add(count, 0, 1)
                out[slot] = x[wp.tid()]

            return getkernel(compact)
        """)
    )
    main(["--check", str(path), "-q"])
    assert [line.split(": ")[1].split()[0] for line in capsys.readouterr().out.splitlines()] == ["WR001"]


@wp.kernel
def sums_beside_an_absent_array(
    x: wp.array[wp.float64], n: wp.array[wp.int32], unused: wp.array[wp.float64], out: wp.array[wp.float64]
):
    i = wp.tid()
    acc = wp.float64(0.0)
    for k in range(n[i]):
        acc += x[(i + k) % 6]
    if unused:
        acc += unused[0]
    out[i] = acc * acc


def test_a_dry_run_beside_an_array_argument_passed_as_none():
    """Newton's create_soft_contacts, launched with body_q None (no bodies): the dry run that counts the trips of a
    loop of unknown length took the None argument for an array it could not copy, and refused the launch."""
    check(
        Case(
            sums_beside_an_absent_array,
            N,
            lambda: [f64(X, True), i32([2, 0, 3, 1, 4, 2]), None, wp.zeros(N, dtype=wp.float64, requires_grad=True)],
            [3],
            [0],
        )
    )


STRUCT_IN_A_LOOP_KERNEL = """\
import warp as wp


@wp.struct
class Probe:
    scale: wp.float64


@wp.func
def make_probe(scale: wp.float64) -> Probe:
    probe = Probe()
    probe.scale = scale
    return probe


@wp.kernel
def damped(x: wp.array(dtype=wp.float64), n: wp.array(dtype=int), out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    probe = make_probe(x[i])
    acc = wp.float64(0.0)
    for j in range(n[i]):
        acc = acc * probe.scale + x[j]
    out[i] = acc * acc
"""


def test_the_command_line_types_a_kernel_with_a_struct_local_and_a_loop(tmp_path, monkeypatch):
    """Newton's soft_face_contact_kernel through the command line: a kernel with a struct-typed local, rewritten for a
    loop Warp does not unroll, crashed when the locals' types were unified (``TypeError: unhashable type:
    'Project'``: the command line's struct type could not be hashed)."""
    (tmp_path / "probes.py").write_text(STRUCT_IN_A_LOOP_KERNEL)
    assert main([str(tmp_path / "probes.py"), "-o", str(tmp_path / "probes_rewritten.py"), "-q"]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    import probes
    import probes_rewritten

    counts = [3, 0, 5, 2, 1, 4]
    make = lambda: [f64(X, True), i32(counts), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(probes.damped, N, make, [2], [0], program=through(probes_rewritten, "damped", N)))


BEST_OF_A_HELPER = """\
import warp as wp


@wp.func
def nearest(points: wp.array(dtype=wp.vec3d), j: int, p: wp.vec3d):
    return points[j], j


@wp.kernel
def closest(points: wp.array(dtype=wp.vec3d), n: wp.array(dtype=int), out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    best = wp.float64(1.0e20)
    for j in range(n[i]):
        y, _ = nearest(points, j, points[i])
        distance = wp.length_sq(points[i] - y)
        if distance < best and j != i:
            best = distance
    out[i] = wp.sqrt(best)
"""


def test_the_command_line_types_a_carried_local_by_its_typed_assignment(tmp_path, monkeypatch):
    """Newton's closest_point_heightfield (create_soft_contacts) through the command line: ``best_sq =
    float(1.0e20)`` names the type, but a later ``best_sq = distance_sq`` of a value the source does not type (a
    helper's undeclared return) left the local untyped, and the kernel refused. Warp gives a local one type (it
    refuses an assignment of another), so one typed assignment types it."""
    (tmp_path / "nearest.py").write_text(BEST_OF_A_HELPER)
    assert main([str(tmp_path / "nearest.py"), "-o", str(tmp_path / "nearest_rewritten.py"), "-q"]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    import nearest
    import nearest_rewritten

    rng = np.random.default_rng(5)
    points = rng.uniform(-1.0, 1.0, size=(N, 3))

    def make():
        positions = wp.array(points, dtype=wp.vec3d, requires_grad=True, device="cpu")
        return [positions, i32([N] * N), f64(np.zeros(N), True)]

    check(Case(nearest.closest, N, make, [2], [0], program=through(nearest_rewritten, "closest", N)))


DRAWS_BY_REJECTION = """\
import warp as wp


@wp.kernel
def draws(mean: wp.array2d(dtype=float), seed: int, out: wp.array2d(dtype=float)):
    i, j = wp.tid()
    state = wp.rand_init(seed, i * 8 + j)
    sample = mean[i, j] + wp.randn(state)
    for _ in range(10):
        if sample < -1.0 or sample > 1.0:
            sample = mean[i, j] + wp.randn(state)
        else:
            break
    out[i, j] = sample * sample
"""


def test_the_command_line_types_the_indices_wp_tid_unpacks(tmp_path, monkeypatch):
    """Newton's differentiable drone example (sample_gaussian) through the command line: ``i, j = wp.tid()`` left
    ``i`` and ``j`` untyped, and with them the random state and the draw the loop carries, so the kernel was
    refused."""
    (tmp_path / "rejection.py").write_text(DRAWS_BY_REJECTION)
    assert main([str(tmp_path / "rejection.py"), "-o", str(tmp_path / "rejection_rewritten.py"), "-q"]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    import rejection
    import rejection_rewritten

    means = np.random.default_rng(6).uniform(-0.2, 0.2, size=(3, 4))

    def make():
        mean = wp.array(means, dtype=float, requires_grad=True, device="cpu")
        return [mean, 11, wp.zeros((3, 4), dtype=float, requires_grad=True, device="cpu")]

    case = Case(rejection.draws, (3, 4), make, [2], [0], program=through(rejection_rewritten, "draws", (3, 4)))
    check(case, harness.FLOAT32)


TRAILING_COMMENTS = """\
import warp as wp


@wp.kernel
def compact(x: wp.array(dtype=float), count: wp.array(dtype=int), out: wp.array(dtype=float)):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[wp.tid()]

    # an older version, kept as comments at the body's indentation
    # out[wp.tid()] = x[slot]
"""


def test_a_kernel_followed_by_comments_at_its_bodys_indentation_imports_once_rewritten(tmp_path):
    """Newton's XPBD ``solve_tetrahedra`` ends with 60 lines of commented-out code at its body's indentation. The
    command line hashes the kernel's text as ``inspect.getsource`` reads it in the original file, those comments
    included, but inserts its block after the body's last statement, before them: in the emitted file
    ``inspect.getsource`` stops at the block, the import-time ``check_fingerprint`` sees another text and raises
    ``RewriteError`` ("re-run wp-rewrite"), so newton/_src/solvers/xpbd/kernels.py, and every module importing the
    XPBD or VBD solver, does not import."""
    (tmp_path / "trailing.py").write_text(TRAILING_COMMENTS)
    assert main([str(tmp_path / "trailing.py"), "--in-place", "-q"]) == 0
    ran = subprocess.run([sys.executable, "-c", "import trailing"], cwd=tmp_path, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr


FACTORY_HELPERS = """\
import warp as wp


def make_pick(doubled: bool):
    @wp.func
    def pick(count: wp.array(dtype=int), x: float) -> float:
        slot = wp.atomic_add(count, 0, 1)
        if wp.static(doubled):
            return x * 2.0 + float(slot) * 0.0
        return x + float(slot) * 0.0

    return pick
"""

KERNEL_OF_A_MADE_HELPER = """\
import warp as wp

from helpers import make_pick

pick_doubled = make_pick(True)


@wp.kernel
def compact(x: wp.array(dtype=float), count: wp.array(dtype=int), out: wp.array(dtype=float)):
    tid = wp.tid()
    out[tid] = wp.static(pick_doubled)(count, x[tid])
"""


def test_a_helper_a_factory_of_another_file_makes_is_refused_not_imported_wrong(tmp_path, capsys):
    """Newton's tests/test_speculative_contacts.py: its kernels call ``wp.static(_prepare_speculative_convex_pair)``,
    made at import by narrow_phase.py's ``create_prepare_convex_pair(external_aabb=True, speculative=True)``. The
    command line cloned the factory's helper into the module and took the parameters it reads, ``external_aabb`` and
    ``speculative``, for names of narrow_phase.py, adding them to the module's import from there: ``from
    newton._src.geometry.narrow_phase import (..., external_aabb, ..., speculative, ...)``, an ImportError. Now it
    refuses the kernel, as it does for a factory of the kernel's own file, and the module still imports."""
    (tmp_path / "helpers.py").write_text(FACTORY_HELPERS)
    (tmp_path / "sim.py").write_text(KERNEL_OF_A_MADE_HELPER)
    assert main([str(tmp_path / "sim.py"), "--in-place", "-q"]) == 1
    said = capsys.readouterr().err
    assert "helper 'pick' must be copied beside the rewritten kernel, but it uses 'doubled', a name of" in said
    ran = subprocess.run([sys.executable, "-c", "import sim"], cwd=tmp_path, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr


@wp.kernel
def compact_float64(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[wp.tid()]


def test_a_recorded_launch_takes_new_parameters():
    """Newton's implicit MPM (``solve_rheology.py``, ``_batched_sum_max_kernel``) records a launch once
    (``record_cmd=True``) and runs it again on other arrays: ``set_param_at_index(0, data)``, then ``launch()``, as
    Warp's ``Launch`` allows (with ``set_param_by_name``, ``set_params``, ``set_dim``). The rewritten kernel's
    ``RewrittenLaunch`` had ``launch()`` only: AttributeError, 5 of test_implicit_mpm's tests."""
    rewritten = wp_rewrite(compact_float64)
    first, second = f64(X), f64(X[::-1] * 2.0)
    count, out = i32([0]), f64(np.zeros(N))
    recorded = rewritten.launch(N, inputs=[first, count, out], device="cpu", record_cmd=True)
    recorded.set_param_at_index(0, second)
    recorded.launch()
    assert sorted(out.numpy()) == sorted(X * 2.0)
    recorded.set_params([first, i32([0]), out])
    recorded.set_param_by_name("out", f64(np.zeros(N)))
    recorded.set_dim(2)
    recorded.launch()
    assert sorted(recorded.arguments["inputs"][2].numpy()[:2]) == sorted(X[:2]) and count.numpy()[0] == N


@wp.func
def flip_through_a_local(flag: wp.array[wp.int32]):
    operation = wp.atomic_xor
    operation(flag, 0, 1)


@wp.kernel
def flips_and_claims(
    flag: wp.array[wp.int32], count: wp.array[wp.int32], x: wp.array[wp.float64], out: wp.array[wp.float64]
):
    tid = wp.tid()
    flip_through_a_local(flag)
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * x[tid]


def test_a_builtin_called_through_a_local_is_refused():
    """Warp's deterministic-mode tests (``_det_set_flag``): ``operation = wp.atomic_xor; operation(flag, 0, mask)``.
    The planner did not see that the call writes ``flag`` (tests/support/invariants.py: "writes the plan missed"):
    the fence refuses a call of a local, which the rewrite cannot see into, naming the place and the fix."""
    with pytest.raises(RewriteError, match=r"call of a local \(operation\(flag, 0, 1\)\).*own name"):
        wp_rewrite(flips_and_claims)


@wp.func
def bisect_steps(x: wp.float64, n: wp.int32) -> wp.float64:
    status = wp.int32(0)  # the name of the generated trip-count status array
    thread = x  # and of the thread's row
    for _ in range(n):
        thread = thread * wp.float64(0.5) + wp.float64(0.25)
        status += 1
    return thread * thread + wp.float64(status)


@wp.kernel
def bisect_and_claim(
    x: wp.array[wp.float64], n: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = bisect_steps(x[tid], n[tid])


def test_a_helpers_local_named_as_a_generated_parameter():
    """Newton's Kamino ``solve_sliding_root``: a helper's local ``status`` and the generated trip-count status
    parameter of its clone had one name (Warp: "assigning to existing symbol status with different type")."""
    make = lambda: [f64(X, True), i32([3, 0, 2, 5, 1, 4]), i32([0]), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(bisect_and_claim, N, make, [3], [0]))


def checked(tmp_path, capsys, source: str, *options: str) -> list[str]:
    """``--check`` of one file: each finding's code and subject."""
    path = tmp_path / "kernels.py"
    path.write_text(textwrap.dedent(source))
    main(["--check", str(path), "-q", *options])
    return [" ".join(line.split(": ", 1)[1].split()[:3]) for line in capsys.readouterr().out.splitlines()]


def test_check_follows_a_helper_decorated_through_a_module_level_name(tmp_path, capsys):
    """Newton's ``support_map``: ``@_support_map_func``, bound to ``wp.func(inline=False) if ... else wp.func``."""
    found = checked(
        tmp_path,
        capsys,
        """\
        import warp as wp

        out_of_line = wp.func(inline=False) if wp.__version__ >= "1.18" else wp.func


        @out_of_line
        def biggest(x: wp.array(dtype=float), n: int) -> float:
            best = float(0.0)
            for i in range(n):
                best = wp.max(best, x[i])
            return best * best


        @wp.kernel
        def k(x: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
            out[0] = biggest(x, n)
        """,
    )
    assert found == ["WR008 kernel 'k'"]


def test_check_reports_a_helper_its_factory_decorates_with_a_decorator_of_its_own(tmp_path, capsys):
    """Newton's implicit MPM flow rule: ``make_solve_flow_rule()`` returns a function decorated with
    ``@fem.cache.dynamic_func(...)``, a Warp function only at run time: a possible hazard (WR005), not nothing."""
    found = checked(
        tmp_path,
        capsys,
        """\
        import warp as wp
        import warp.fem as fem


        def make_solve(scale: float):
            @fem.cache.dynamic_func(suffix=scale)
            def solve(x: float) -> float:
                return x * scale

            return solve


        solve = make_solve(2.0)


        @wp.kernel
        def k(x: wp.array(dtype=float)):
            x[0] = solve(x[0])
        """,
        "--select",
        "WR005",
    )
    assert found == ["WR005 kernel 'k'"]


def test_check_keeps_the_backward_a_main_guard_turns_off(tmp_path, capsys):
    """Warp's ``example_apic_fluid_multi_env``: ``wp.set_module_options({"enable_backward": False})`` under
    ``if __name__ == "__main__":`` runs only when the file is the program; imported, its kernels have a backward."""
    found = checked(
        tmp_path,
        capsys,
        """\
        import warp as wp


        @wp.kernel
        def k(x: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
            total = float(0.0)
            for i in range(n):
                total = total * x[i] + 1.0
            out[0] = total


        if __name__ == "__main__":
            wp.set_module_options({"enable_backward": False})
        """,
    )
    assert found == ["WR008 kernel 'k'"]


def test_check_sees_the_argument_a_builtin_writes_carried_by_a_loop(tmp_path, capsys):
    """Warp's ``tile_gemm``: ``wp.tile_matmul(a, b, sum)`` in a loop accumulates into ``sum``, which the loop
    carries; ``--check``, which imports no Warp, reads what builtins write off ``passes.builtin_names``."""
    found = checked(
        tmp_path,
        capsys,
        """\
        import warp as wp


        @wp.kernel
        def gemm(A: wp.array2d(dtype=float), B: wp.array2d(dtype=float), C: wp.array2d(dtype=float), count: int):
            i, j = wp.tid()
            total = wp.tile_zeros(shape=(8, 8), dtype=float)
            for k in range(count):
                a = wp.tile_load(A, shape=(8, 8), offset=(i * 8, k * 8))
                b = wp.tile_load(B, shape=(8, 8), offset=(k * 8, j * 8))
                wp.tile_matmul(a, b, total)
            wp.tile_store(C, total, offset=(i * 8, j * 8))
        """,
    )
    assert found == ["WR008 kernel 'gemm'"]


@wp.kernel
def eliminate_and_claim(
    x: wp.array[wp.float64], n: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]
):
    tid = wp.tid()
    acc = x[tid]
    for c in range(2):  # unrolled by Warp: each copy assigns the hoisted bounds below again
        for i in range(c, n[tid]):
            for k in range(i, 3):  # a constant stop, hoisted into a local inside a dynamic loop
                acc = acc * wp.float64(0.5) + x[tid] * wp.float64(k + 1)
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = acc * acc


def test_a_constant_bound_of_a_loop_inside_a_dynamic_loop():
    """Newton's surface gripper (``_solve6``'s elimination, ``for k in range(c, 6)`` inside ``for rr in ...``, inside
    ``for c in range(6)``): the generated ``stop = 6`` inside a dynamic loop is a constant, which Warp refuses to
    assign again in the next unrolled copy ("Error mutating a constant"); the bound is made a variable (``int(6)``)."""
    make = lambda: [f64(X, True), i32([3, 0, 2, 1, 1, 2]), i32([0]), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(eliminate_and_claim, N, make, [3], [0]))


OUT_OF_LINE_HELPER = """\
import warp as wp

out_of_line = wp.func(inline=False) if wp.__version__ >= "1.18" else wp.func


@out_of_line
def squared_best(x: wp.array(dtype=wp.float64), n: int) -> wp.float64:
    best = wp.float64(0.0)
    for i in range(n):
        best = wp.max(best, x[i] * x[i] - x[i])
    return best * best
"""

CLAIMS_THE_BEST = """\
import warp as wp

from out_of_line_helpers import squared_best


@wp.kernel
def claim_best(x: wp.array(dtype=wp.float64), n: int, count: wp.array(dtype=int), out: wp.array(dtype=wp.float64)):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = squared_best(x, n) * x[wp.tid()]
"""


def test_the_command_line_copies_a_helper_decorated_through_a_name_of_its_file(tmp_path, monkeypatch):
    """Newton's ``support_map`` (``@_support_map_func``) called from a test module: the copy beside the rewritten
    kernel is a ``@wp.func``, so the decorator's name in the helper's file is no name the copy needs."""
    (tmp_path / "out_of_line_helpers.py").write_text(OUT_OF_LINE_HELPER)
    (tmp_path / "claims.py").write_text(CLAIMS_THE_BEST)
    assert main([str(tmp_path / "claims.py"), "-o", str(tmp_path / "claims_rewritten.py"), "-q"]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    import claims
    import claims_rewritten

    make = lambda: [f64(X, True), N, i32([0]), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(claims.claim_best, N, make, [3], [0], program=through(claims_rewritten, "claim_best", N)))


slot_words = wp.types.vector(length=5, dtype=wp.uint64)  # a vector type Warp does not export by name


@wp.kernel
def best_slots_then_claim(
    keys: wp.array[wp.uint64],
    n: wp.array[wp.int32],
    x: wp.array[wp.float64],
    count: wp.array[wp.int32],
    out: wp.array[wp.float64],
):
    tid = wp.tid()
    words = slot_words()
    for k in range(n[tid]):  # carries an int vector
        if keys[k] > words[k % 5]:
            words[k % 5] = keys[k]
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * wp.float64(words[0] % wp.uint64(7) + wp.uint64(1))


def test_a_carried_int_vector_of_a_type_warp_does_not_export_by_name():
    """Newton's contact reducer (``slot_values = replaced_values_vec_type()``, a vector of 9 ``uint64``): an int
    vector carries no gradient and is restored plainly from a record of its own type; it was refused as a ``vec_t``
    without a carrier."""
    keys = wp.array(np.array([5, 9, 2, 11, 4, 8], dtype=np.uint64), dtype=wp.uint64)
    make = lambda: [keys, i32([3, 0, 6, 2, 5, 1]), f64(X, True), i32([0]), f64(np.zeros(N), True)]  # noqa: E731
    check(Case(best_slots_then_claim, N, make, [4], [2]))


SLOT_CONSTANTS = """\
import warp as wp

DIRECTIONS = 4
"""

SLOT_KERNEL = """\
import warp as wp

from slot_constants import DIRECTIONS

VALUES_PER_KEY = DIRECTIONS + 1
slot_words = wp.types.vector(length=VALUES_PER_KEY, dtype=wp.uint64)


@wp.kernel
def best_slots_then_claim(
    keys: wp.array(dtype=wp.uint64),
    n: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    count: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    words = slot_words()
    for k in range(n[tid]):
        if keys[k] > words[k % 5]:
            words[k % 5] = keys[k]
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * wp.float64(words[0] % wp.uint64(7) + wp.uint64(1))
"""


def test_the_command_line_types_a_vector_whose_length_is_a_module_level_sum(tmp_path, monkeypatch):
    """Newton's contact reducer: ``wp.types.vector(length=VALUES_PER_KEY + 1, dtype=wp.uint64)``, its length from
    names bound in this file and in one it imports; the command line folds them (it refused the local it types as
    one whose type the source does not tell)."""
    (tmp_path / "slot_constants.py").write_text(SLOT_CONSTANTS)
    (tmp_path / "slots.py").write_text(SLOT_KERNEL)
    assert main([str(tmp_path / "slots.py"), "-o", str(tmp_path / "slots_rewritten.py"), "-q"]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    import slots
    import slots_rewritten

    keys = wp.array(np.array([5, 9, 2, 11, 4, 8], dtype=np.uint64), dtype=wp.uint64)
    make = lambda: [keys, i32([3, 0, 6, 2, 5, 1]), f64(X, True), i32([0]), f64(np.zeros(N), True)]  # noqa: E731
    program = through(slots_rewritten, "best_slots_then_claim", N)
    check(Case(slots.best_slots_then_claim, N, make, [4], [2], program=program))


@wp.func
def toggle_flag(flag: wp.array[wp.int32], mask: wp.int32):
    wp.atomic_xor(flag, 0, mask)


@wp.func
def apply_to_flag(g: wp.Function, flag: wp.array[wp.int32], mask: wp.int32):
    g(flag, mask)


@wp.kernel
def toggles_through_a_function_parameter_and_claims(
    flag: wp.array[wp.int32], count: wp.array[wp.int32], x: wp.array[wp.float64], out: wp.array[wp.float64]
):
    tid = wp.tid()
    apply_to_flag(toggle_flag, flag, 1)
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * x[tid]


def test_a_function_parameter_handed_an_array_is_refused():
    """Warp's deterministic-mode tests (``_det_apply_flag_function(g: wp.Function, ...)``): a call of a parameter
    naming a function, handed an array, may write it where the rewrite cannot see (the plan missed the write)."""
    with pytest.raises(RewriteError, match=r"call of a local \(g\(flag, mask\)\).*own name"):
        wp_rewrite(toggles_through_a_function_parameter_and_claims)
