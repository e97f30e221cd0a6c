"""The ``wp-rewrite`` command line: emitted modules against finite differences, ``--check``, ``--diff``, errors.

The emitted module of tests/support/patterns.py is written to a temporary folder, imported with importlib
and launched only through its generated ``launch_<kernel>`` functions: it must not need this project.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import warp_rewrite.runtime
from tests.support import harness
from tests.support.emitted import import_file, run_cli, through, zeros
from tests.support.harness import Case, check, f64, i32, vec3d
from warp_rewrite import launch, wp_rewrite
from warp_rewrite.cli.emit import runtime_import
from warp_rewrite.cli.main import main
from warp_rewrite.cli.project import SEARCHED

SUPPORT = Path(__file__).parents[1] / "support"
SAMPLES = SUPPORT / "cli_samples"
PATTERNS = SUPPORT / "patterns.py"  # the same kernels the API's tests check
SHARED_HELPERS = SUPPORT / "shared_helpers.py"
N = 8
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6, 1.1, 2.3, -2.1])
KEYS = np.array([5, 3, 7, 2, 9, 1, 4, 6])


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    """patterns.py rewritten into a temporary folder and imported from there (its helpers from tests/)."""
    out = tmp_path_factory.mktemp("emitted") / "patterns_rewritten.py"
    assert main([str(PATTERNS), "-o", str(out)]) == 0
    return import_file(out, "patterns_rewritten")


def pair_writer(module, args):
    writer = module.PairWriter()
    writer.count, writer.value = args[1], args[2]
    return [args[0], writer]


X2 = np.array([[0.5, -1.0, 1.5, 2.0], [-0.3, 0.8, 1.2, -0.7], [0.9, 1.1, -1.4, 0.6]])
# kernel -> (dim, arguments, loss outputs, differentiate with respect to[, how to pack the arguments])
CASES = {
    "compact_positive": (N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0]),
    "compact_with_capacity": (N, lambda: [f64(X, True), i32([0]), 5, zeros(5)], [3], [0]),
    "take_from_stack": (N, lambda: [f64(X, True), i32([N]), zeros(N)], [2], [0]),
    "scale_by_running_min": (N, lambda: [f64(X, True), i32(KEYS), i32([8]), zeros(N)], [3], [0]),
    "scale_by_running_max": (N, lambda: [f64(X, True), i32(KEYS), i32([0]), zeros(N)], [3], [0]),
    "claim_lock": (N, lambda: [f64(X, True), i32([0, 0, 0]), zeros(N)], [2], [0]),
    "chain_of_owners": (N, lambda: [f64(X, True), i32([-1]), zeros(N + 1)], [2], [0]),
    "clear_bits": (N, lambda: [f64(X, True), i32([255]), zeros(N)], [2], [0]),
    "set_bits": (N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0]),
    "toggle_bits": (N, lambda: [f64(X, True), i32([6]), zeros(N)], [2], [0]),
    "scale_by_peak": (N, lambda: [f64(X, True), f64([1.5, 1.5]), zeros(N)], [2], [0]),
    "project_on_running_sum": (
        N,
        lambda: [vec3d(np.linspace(-1, 1, 3 * N).reshape(N, 3), True), vec3d([[0.5, 0.0, -0.5]]), zeros(N)],
        [2],
        [0],
    ),
    "accumulate_input": (N, lambda: [f64(X, True), f64(X * 2.0, True), f64([1.0], True), zeros(N)], [2, 3], [0, 1, 2]),
    "compact_rows": (
        (3, 4),
        lambda: [f64(X2, True), zeros((3, 2), wp.int32), zeros((3, 2, 4))],
        [2],
        [0],
    ),
    "count_in_4d": (N, lambda: [f64(X, True), zeros((1, 2, 2, 1), wp.int32), zeros(N)], [2], [0]),
    "bucket_by_arrival": (N, lambda: [f64(X, True), i32([0]), i32([0, 0]), zeros((2, N))], [3], [0]),
    "reserve_then_take": (N, lambda: [f64(X, True), i32([0]), zeros(3 * N)], [2], [0]),
    "emit_particles": (6, lambda: [i32([2, 0, 3, 1, 2, 1]), f64(X[:6], True), i32([0]), zeros(9)], [3], [1]),
    "contacts_per_pair": (N, lambda: [f64(X, True), i32([0]), zeros(3 * N)], [2], [0]),
    "insert_keys": (6, lambda: [i32([3, 10, 17, 5, 24, 12]), f64(X[:6], True), i32([-1] * 7), 7, zeros(7)], [4], [1]),
    "generate_contacts": (N, lambda: [f64(X, True), i32([0]), 7, zeros(7), zeros(7)], [3, 4], [0]),
    "append_imported": (N, lambda: [f64(X, True), i32([0]), zeros(2 * N)], [2], [0]),
    "write_pairs": (N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0], pair_writer),
    "compact_generic": (N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0]),
    "compact_deterministic": (N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0]),
    # atomics in while conditions (moved into the loops' bodies), returns from loops (made breaks)
    "spend_budget": (N, lambda: [f64(X, True), i32([3, 2, 4]), i32([0]), zeros(9)], [3], [0]),
    "spend_budget_skipping": (N, lambda: [f64(X, True), i32([3, 2, 4]), i32([0]), zeros(9)], [3], [0]),
    "fill_from_pool": (N, lambda: [f64(X, True), i32([4]), i32([0]), zeros(4)], [3], [0]),
    "tally_under_a_lock": (N, lambda: [f64(X, True), i32([0]), i32([0]), zeros(N)], [3], [0]),
    "deposit_while_counting_down": (N, lambda: [f64(X, True), i32([7]), zeros(2)], [2], [0]),
    "take_until_full": (N, lambda: [f64(X, True), i32([0]), zeros(7 + N)], [2], [0]),
    "drain_work_queue": (N, lambda: [f64(X, True), i32([3, 0, 4, 1, 2]), i32([0]), i32([0, 0, 0]), zeros(8)], [4], [0]),
    # exact gradients through float returns: through the operands and the target's initial values
    "per_bucket_sum": (
        N,
        lambda: [f64(X, True), f64(np.arange(6.0).reshape(3, 2) * 0.1, True), zeros(N)],
        [1, 2],
        [0, 1],
    ),
    "hand_over": (N, lambda: [f64(X, True), f64([0.25, -0.75], True), zeros(N)], [1, 2], [0, 1]),
    "record_high": (N, lambda: [f64(X, True), f64([1.0, 0.1], True), zeros(N)], [1, 2], [0, 1]),
    "chained": (N, lambda: [f64(X, True), f64([0.2], True), f64([-0.4], True), zeros(N)], [1, 2, 3], [0, 1, 2]),
    "float_returns_in_a_loop": (N, lambda: [f64(X, True), f64([0.1, 0.2], True), zeros(3 * N)], [1, 2], [0, 1]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_emitted_module_matches_finite_differences(emitted, name):
    dim, make, loss, wrt, *pack = CASES[name]
    check(Case(None, dim, make, loss, wrt, program=through(emitted, name, dim, *pack)))


def test_reported_example(emitted):
    x, total, y = f64([3.0], True), f64([10.0]), f64([0.0], True)
    x = wp.array([3.0], dtype=float, requires_grad=True)
    total = wp.array([10.0], dtype=float)
    y = wp.array([0.0], dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        emitted.launch_scale_by_previous(1, inputs=[x, total, y])
    tape.backward(grads={y: wp.array([1.0], dtype=float)})
    assert (y.numpy().tolist(), x.grad.numpy().tolist(), total.numpy().tolist()) == ([30.0], [10.0], [11.0])


@pytest.mark.parametrize("name", ["bucket_by_arrival", "chained"])
def test_same_forward_and_gradients_as_the_api_bit_for_bit(emitted, name):
    """The emitted launch and the API's launch of the same kernel agree exactly (int slots; exact float returns)."""
    for kernel in ("bucket_by_arrival", "chained"):  # rewrite both first: the API's module then compiles once
        wp_rewrite(getattr(emitted, kernel).kernel)  # the emitted module's name is its RewrittenKernel
    dim, make, loss, wrt, *_ = CASES[name]
    results = []
    for launcher in (getattr(emitted, f"launch_{name}"), partial(launch, wp_rewrite(getattr(emitted, name).kernel))):
        args = make()
        tape = wp.Tape()
        with tape:
            launcher(dim, inputs=args, device="cpu")
        tape.backward(grads={args[i]: wp.ones_like(args[i]) for i in loss})
        results.append([args[i].numpy() for i in loss] + [args[i].grad.numpy() for i in wrt])
    for emitted_value, api_value in zip(*results, strict=True):
        np.testing.assert_array_equal(emitted_value, api_value)


DETACHED = """import warp as wp


@wp.kernel
def scale_by_running_sum(x: wp.array[float], acc: wp.array[float], out: wp.array[float]):
    tid = wp.tid()
    before = wp.atomic_add(acc, 0, x[tid])
    out[tid] = before * x[tid]
"""


def test_detach_returns_records_float_returns_as_constants(tmp_path, capsys):
    """As wp_rewrite(detach_returns=True): exact when nothing the return is made of needs a gradient, else the
    launch is refused before it runs, with the API's message."""
    source, out = tmp_path / "detached.py", tmp_path / "detached_rewritten.py"
    source.write_text(DETACHED)
    assert run_cli(capsys, source, "--detach-returns", "-o", out)[0] == 0
    assert "ExactBackward" not in out.read_text()
    module = import_file(out, "detached_rewritten")
    x, acc, out_ = wp.array(X, dtype=float), wp.array([1.0], dtype=float), wp.zeros(N, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        module.launch_scale_by_running_sum(N, inputs=[x, acc, out_])
    x.requires_grad = True
    refusal = r"detached_rewritten\.py:12:14: kernel 'scale_by_running_sum': .*depends on 'x'"  # the emitted file's
    with pytest.raises(module.wp_rewrite_runtime.RewriteError, match=refusal), wp.Tape():
        module.launch_scale_by_running_sum(N, inputs=[x, acc, out_])
    assert acc.numpy().tolist() == [1.0 + X.sum().astype(np.float32)]


COUNTED = """
import warp as wp


@wp.kernel
def scale_by_count(x: wp.array(dtype=wp.float32), total: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    tid = wp.tid()
    previous = wp.atomic_add(total, 0, 1.0)
    y[tid] = previous * x[tid]
"""


def test_detached_float_returns_are_read_back_from_their_records_keeping_the_atomics_adjoint(tmp_path, capsys):
    """The reported kernel with ``x`` requiring grad: y_k = (10 + k) x_k on the CPU, so x.grad = 10 + k. The atomic
    stays as the stand-in's argument: its own adjoint (d total / d value) reaches the operand where ``total``
    requires grad (tests/test_zbuffer.py)."""
    source, out = tmp_path / "counted.py", tmp_path / "counted_rewritten.py"
    source.write_text(COUNTED)
    assert run_cli(capsys, source, "--detach-returns", "-o", out)[0] == 0
    stand_in = (  # laid out for ruff's default line length, 88: no configuration above tmp_path
        "            previous = wp_rewrite_runtime.replay_returned(\n"
        "                wp.atomic_add(total, 0, 1.0), previous_records, tid\n"
    )
    assert stand_in in out.read_text()
    module = import_file(out, "counted_rewritten")
    x = wp.array(X, dtype=wp.float32, requires_grad=True)
    total, y = wp.array([10.0], dtype=wp.float32), wp.zeros(N, dtype=wp.float32, requires_grad=True)
    tape = wp.Tape()
    with tape:
        module.launch_scale_by_count(N, inputs=[x, total, y])
    tape.backward(grads={y: wp.ones(N, dtype=wp.float32)})
    np.testing.assert_allclose(x.grad.numpy(), 10.0 + np.arange(N))
    np.testing.assert_allclose(y.numpy(), (10.0 + np.arange(N)) * X.astype(np.float32))


LAID_OUT = """
import warp as wp


@wp.kernel
def compact_tripled(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = (x[tid]  # the user's comment
                 * wp.float64(3.0))
"""


def test_statements_left_as_they_were_keep_the_users_text(tmp_path, capsys):
    """In the one definition of the record and the replay kernel (``rewrite/cli/weave.py``), re-indented; out = 3 x
    in thread order on the CPU, so x.grad = 3."""
    source, out = tmp_path / "laid_out.py", tmp_path / "laid_out_rewritten.py"
    source.write_text(LAID_OUT)
    assert run_cli(capsys, source, "-o", out)[0] == 0
    statement = "    out[slot] = (x[tid]  # the user's comment\n                 * wp.float64(3.0))\n"
    assert out.read_text().count(statement) == 1  # the user's kernel, kept as it is
    phases = "        out[slot] = (x[tid]  # the user's comment\n                     * wp.float64(3.0))\n"
    assert out.read_text().count(phases) == 1
    module = import_file(out, "laid_out_rewritten")
    x, count, y = f64(X, grad=True), i32([0]), zeros(N)
    tape = wp.Tape()
    with tape:
        module.launch_compact_tripled(N, inputs=[x, count, y], device="cpu")
    tape.backward(grads={y: wp.ones(N, dtype=wp.float64)})
    np.testing.assert_allclose(y.numpy(), 3.0 * X)
    np.testing.assert_allclose(x.grad.numpy(), np.full(N, 3.0))


def test_bad_launch_is_refused_before_anything_runs(emitted):
    count = i32([0])
    with pytest.raises(RuntimeError, match="passed 2 arguments but kernel requires 3"), wp.Tape():
        emitted.launch_compact_positive(N, inputs=[f64(X), count], device="cpu")
    assert count.numpy().tolist() == [0]


def test_without_a_tape_the_original_kernel_runs(emitted):
    x, count, out = f64(X), i32([0]), zeros(N)
    emitted.launch_compact_positive(N, inputs=[x, count, out], device="cpu")
    reference = [f64(X), i32([0]), zeros(N)]
    wp.launch(emitted.compact_positive, N, inputs=reference, device="cpu")
    np.testing.assert_array_equal(out.numpy(), reference[2].numpy())
    assert count.numpy().tolist() == reference[1].numpy().tolist()


def test_explicit_max_records_and_a_too_small_one(emitted):
    """A launch function takes max_records per launch: the kernels take the room as an argument, then the
    launch's status, where wp_rewrite(kernel, max_records=N) compiles it in."""
    replay_params = [arg.label for arg in emitted.emit_particles_replay.adj.args]
    record_params = [arg.label for arg in emitted.emit_particles_record.adj.args]
    assert replay_params[-2:] == ["trip_capacity0", "status"] and record_params == replay_params

    def program(args, launcher):
        if launcher is harness.launch_original:
            wp.launch(emitted.emit_particles, 6, inputs=args, device="cpu")
        else:
            emitted.launch_emit_particles(6, inputs=args, device="cpu", max_records=3)

    make_args = lambda: [i32([2, 0, 3, 1, 2, 1]), f64(X[:6], True), i32([0]), zeros(9)]  # noqa: E731
    check(Case(None, 6, make_args, [3], [1], program=program))
    args = make_args()
    with (
        pytest.raises(
            emitted.wp_rewrite_runtime.RewriteError,
            match=r"ran 3 times in one execution but its records had room for 2",
        ),
        wp.Tape(),
    ):
        emitted.launch_emit_particles(6, inputs=args, device="cpu", max_records=2)


def test_module_with_its_own_warp_alias_and_a_bare_atomic(tmp_path, capsys):
    out = tmp_path / "aliased_rewritten.py"
    assert run_cli(capsys, SAMPLES / "aliased.py", "-o", out)[0] == 0
    text = out.read_text()
    assert "pop_and_scale_record = w.kernel(enable_backward=False)(\n    pop_and_scale_phases(record=True)\n)" in text
    recorded = "top = wp_rewrite_runtime.record_returned(\n                atomic_sub(stack, 0, 1), top_records, tid\n"
    assert f"        if w.static(record):\n            {recorded}" in text
    assert runtime_import("wp_rewrite_runtime") in text
    module = import_file(out, "aliased_rewritten")
    make = lambda: [i32([N]), f64(X, True), zeros(N)]  # noqa: E731
    check(Case(None, N, make, [2], [1], program=through(module, "pop_and_scale", N)))


BRANCH_ALIAS = """import warp as wp

EXACT = True


@wp.func
def put_square(count: wp.array[int], out: wp.array[float], v: float):
    out[wp.atomic_add(count, 0, 1)] = v * v


@wp.func
def put_exp(count: wp.array[int], out: wp.array[float], v: float):
    out[wp.atomic_add(count, 0, 1)] = wp.exp(v)


if EXACT:
    put = put_square
else:
    put = put_exp


@wp.kernel
def emit(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
    put(count, out, x[wp.tid()])
"""


def test_a_helper_bound_on_branches_is_not_cloned_from_the_last_binding(tmp_path, capsys):
    """``put`` is ``put_square`` when the module runs; the rewrite once cloned ``put_exp``, the last binding in the
    text, so that the emitted kernel wrote ``exp(x)`` with its gradient, and said nothing. Which helper runs only
    running the module tells, and each one uses an atomic's return: the kernel is refused, saying why and what to do
    (a helper that may also be one using none is a warning: ``test_lint.py``)."""
    source = tmp_path / "branches.py"
    source.write_text(BRANCH_ALIAS)
    status, out, err = run_cli(capsys, source, "--in-place")
    assert status == 1 and "1 kernel refused" in out + err
    assert source.read_text() == BRANCH_ALIAS
    assert (
        "branches.py:24:5: kernel 'emit': it calls 'put', bound on different branches to 'put_exp' or 'put_square', "
        "known only at run time; each of those uses an atomic's returned value, so the kernel's gradients are wrong "
        "in plain Warp, and the source alone does not tell which one to rewrite. Bind the helper once, "
        "unconditionally (one helper that branches inside), or launch wp_rewrite(emit) instead" in err
    )


# --- the emitted text -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rewritten_text(emitted):
    return Path(emitted.__file__).read_text()


GENERATED_BLOCK = re.compile(
    r"\n\n# ---- wp-rewrite: generated from kernel '(\w+)'.*?"
    r"# ---- wp-rewrite: end of the code generated from kernel '\1' ----\n",
    re.DOTALL,
)
RUNTIME_IMPORT = "\n" + runtime_import("wp_rewrite_runtime")  # after the imports, a blank line before it


def without_generated(text: str) -> str:
    """An emitted module without its generated blocks and the import of the runtime: the input, if all is well."""
    return GENERATED_BLOCK.sub("", text).replace(RUNTIME_IMPORT, "", 1)


def test_original_text_is_kept_byte_for_byte(rewritten_text):
    """Take out each generated block (with the blank lines before it) and the runtime's import: what is left is
    the input, exactly."""
    assert without_generated(rewritten_text) == PATTERNS.read_text()
    assert set(GENERATED_BLOCK.findall(rewritten_text)) == {*CASES, "scale_by_previous"}  # not plain_accumulate


def test_emitted_module_imports_only_what_the_input_imports(emitted, rewritten_text):
    def imported(text):
        modules = set()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module.split(".")[0])
            elif isinstance(node, ast.ImportFrom):  # from . import wp_rewrite_runtime
                modules |= {alias.name for alias in node.names}
        return modules

    added = imported(rewritten_text) - imported(PATTERNS.read_text())
    assert added == {"wp_rewrite_runtime"}  # written beside the module, a copy of warp_rewrite.runtime
    assert not {"warp_rewrite", "rewrite", "passes"} & imported(rewritten_text)
    copy = Path(emitted.__file__).parent / "wp_rewrite_runtime"
    package = Path(warp_rewrite.runtime.__file__).parent
    assert sorted(path.name for path in copy.glob("*.py")) == sorted(path.name for path in package.glob("*.py"))
    assert all((copy / path.name).read_bytes() == path.read_bytes() for path in package.glob("*.py"))


def test_generated_code_follows_the_kernel_and_its_spec_points_into_the_emitted_file(emitted, rewritten_text):
    lines = rewritten_text.splitlines()
    begin = next(
        i
        for i, s in enumerate(lines)
        if s.startswith("# ---- wp-rewrite: generated from kernel 'compact_positive' above")
    )
    kernel = lines.index(next(s for s in lines if s.startswith("def compact_positive(")))
    assert kernel < begin and all(line.startswith("    ") or not line for line in lines[kernel + 1 : begin])
    assert "\nlaunch_compact_positive = compact_positive_rewritten.launch" in rewritten_text
    atomic = next(i for i, s in enumerate(lines) if "slot = wp.atomic_add(count, 0, 1)" in s and i > kernel) + 1
    # where the launch's errors point: its site, Op.ADD("count", "line:col") in the file the spec's location names
    assert re.search(rf'\.Op\.ADD\(\s*"count",\s*"{atomic}:16"', rewritten_text)
    assert re.search(r'location="patterns_rewritten\.py:\d+:1"', rewritten_text)
    assert emitted.compact_positive_spec.sites[0].location == f"patterns_rewritten.py:{atomic}:16"
    assert "launch_plain_accumulate" not in rewritten_text  # nothing to rewrite there


def test_running_on_its_own_output_changes_nothing(emitted, tmp_path, capsys):
    again = tmp_path / "again.py"
    status, _, _ = run_cli(capsys, emitted.__file__, "-o", again)
    assert status == 0
    assert again.read_text() == Path(emitted.__file__).read_text()


# --- --check ------------------------------------------------------------------------------------------------


CHECKED = """import warp as wp
from warp import atomic_max as highest


@wp.func
def take(count: wp.array[int]) -> int:
    return wp.atomic_add(count, 0, 1)


@wp.func
def take_twice(count: wp.array[int]) -> int:
    return take(count) + take(count)


@wp.kernel
def direct(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0
    wp.atomic_add(count, 0, 1)
    count[0] += 1


@wp.kernel
def through_helper(count: wp.array[int], out: wp.array[float]):
    out[take_twice(count)] = 1.0


@wp.kernel
def bare_import(best: wp.array[int], out: wp.array[float]):
    out[0] = float(highest(best, 0, 3))


@wp.kernel
def clean(total: wp.array[float]):
    wp.atomic_add(total, 0, 1.0)
"""


def test_check_reports_every_kind_with_stable_codes(tmp_path, capsys):
    (tmp_path / "kernels.py").write_text(CHECKED)
    status, out, err = run_cli(capsys, "--check", tmp_path)
    path = tmp_path / "kernels.py"
    assert status == 1 and err == "Found 4 errors.\n"
    wrong, fix = "gradients through it are wrong in plain Warp", "run wp-rewrite on this file, or launch wp_rewrite"
    assert out.splitlines() == [
        f"{path}:7:12: WR002 helper 'take' uses the value returned by wp.atomic_add(); {wrong}: run wp-rewrite on the "
        "files of the kernels that call it, or launch them with wp_rewrite()",
        f"{path}:17:9: WR001 kernel 'direct' uses the value returned by wp.atomic_add(); {wrong}: {fix}(direct) "
        "(enable_backward=False if it needs no gradient)",
        f"{path}:24:9: WR003 kernel 'through_helper' calls helper 'take_twice', which uses the value returned by "
        f"wp.atomic_add() (in helper 'take' at {path}:7:12); {wrong}: {fix}(through_helper) (enable_backward=False "
        "if it needs no gradient)",
        f"{path}:29:20: WR001 kernel 'bare_import' uses the value returned by wp.atomic_max(); {wrong}: "
        f"{fix}(bare_import) (enable_backward=False if it needs no gradient)",
    ]


def test_check_follows_imported_helpers_and_takes_files_and_folders(capsys):
    status, out, _ = run_cli(capsys, "--check", SAMPLES, PATTERNS)
    assert status == 1
    assert "WR003 kernel 'append_imported' calls helper 'append_scaled', which uses the value returned by " in out
    assert "(in helper 'claim_slot' at " in out
    assert run_cli(capsys, "--check", SAMPLES / "aliased.py", PATTERNS)[1] == out
    helpers = run_cli(capsys, "--check", SHARED_HELPERS)[1]
    assert "shared_helpers.py:10:12: WR002 helper 'claim_slot'" in helpers


def test_check_exit_zero_without_findings(tmp_path, capsys):
    (tmp_path / "clean.py").write_text(
        CHECKED[CHECKED.index("@wp.kernel\ndef clean") :].join(["import warp as wp\n\n\n", ""])
    )
    assert run_cli(capsys, "--check", tmp_path / "clean.py") == (0, "", "All checks passed!\n")


def test_check_does_not_import_the_files(tmp_path, capsys):
    (tmp_path / "bomb.py").write_text("raise SystemExit('imported!')\nimport warp as wp\n")
    assert run_cli(capsys, "--check", tmp_path) == (0, "", "All checks passed!\n")


def test_check_on_rewritten_output_reports_only_the_helper_itself(emitted, capsys):
    """Rewritten kernels and generated code are not reported; a consuming helper that only rewritten kernels call
    is no hazard (WR101, informational), so a check of the rewritten file passes."""
    assert run_cli(capsys, "--check", emitted.__file__)[:2] == (0, "")
    status, out, _ = run_cli(capsys, "--check", "--select", "ALL", emitted.__file__)
    assert status == 0
    findings = [line.split(": ", 1)[1] for line in out.splitlines()]
    assert all(
        f.startswith("WR101 helper '") and "but only kernels wp-rewrite rewrote call it: not a hazard" in f
        for f in findings
    )
    # one finding per consumed atomic
    assert [f.split("'")[1] for f in findings] == [
        *["reserve_from_pool"] * 3,
        "deposit_and_count_down",
        *["pop_item"] * 2,
        *["first_to_mark"] * 2,
        "write_contact",
    ]


# --- --diff, stdout, --in-place -----------------------------------------------------------------------------


SMALL = """import warp as wp


@wp.kernel
def compact(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
    # a comment that must survive
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid]
"""


def test_diff_prints_a_unified_diff_and_writes_nothing(tmp_path, capsys):
    source = tmp_path / "small.py"
    source.write_text(SMALL)
    status, out, _ = run_cli(capsys, source, "--diff")
    assert status == 0
    assert out.startswith(f"--- {source}\n+++ {source}\n@@ ")
    assert "+compact_record = " in out and "+launch_compact = compact_rewritten.launch" in out
    assert not any(line.startswith("-") and not line.startswith("---") for line in out.splitlines())
    assert source.read_text() == SMALL


def test_stdout_without_output_and_in_place(tmp_path, capsys):
    source = tmp_path / "small.py"
    source.write_text(SMALL)
    status, out, _ = run_cli(capsys, source)
    assert status == 0 and without_generated(out) == SMALL and "\nlaunch_compact = " in out
    assert run_cli(capsys, source, "--in-place")[0] == 0
    assert source.read_text() == out


@pytest.mark.parametrize(
    "command", [[sys.executable, "-m", "warp_rewrite"], [str(Path(sys.executable).with_name("wp-rewrite"))]]
)
def test_console_script_and_python_dash_m(tmp_path, command):
    if not Path(command[0]).exists():
        pytest.skip("wp-rewrite is not installed in this environment")
    source = tmp_path / "small.py"
    source.write_text(SMALL)
    result = subprocess.run([*command, str(source)], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert result.returncode == 0, result.stderr
    assert without_generated(result.stdout) == SMALL and "\nlaunch_compact = " in result.stdout
    result = subprocess.run([*command, "--check", str(tmp_path / "missing.py")], capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_max_records_option_becomes_the_launch_default(tmp_path, capsys):
    source = tmp_path / "small.py"
    source.write_text(SMALL)
    status, out, _ = run_cli(capsys, source, "--max-records", "7")
    assert status == 0 and "\n    max_records=7,\n)\n" in out


def test_line_endings_and_form_feeds_are_kept(tmp_path, capsys):
    text = SMALL.replace("import warp as wp\n", "import warp as wp\n\x0c\n").replace("\n", "\r\n")
    source, out = tmp_path / "crlf.py", tmp_path / "out.py"
    source.write_bytes(text.encode())
    assert run_cli(capsys, source, "-o", out)[0] == 0
    result = out.read_bytes().decode()
    assert without_generated(result.replace("\r\n", "\n")).replace("\n", "\r\n") == text
    assert "\nlaunch_compact = " in result.replace("\r\n", "\n")
    assert "\n" not in result.replace("\r\n", "")


def test_helper_imported_from_a_file_not_found_is_a_warning(tmp_path, capsys):
    source = tmp_path / "user.py"
    source.write_text(
        SMALL.replace("import warp as wp\n", "import warp as wp\nfrom elsewhere import scale\n").replace(
            "out[slot] = x[tid]", "out[slot] = scale(x[tid])"
        )
    )
    status, _, err = run_cli(capsys, source, "-o", tmp_path / "out.py", "--quiet")
    assert status == 0 and "\nlaunch_compact = " in (tmp_path / "out.py").read_text()
    assert err == (
        f"{source}:10:17: warning: kernel 'compact' calls helper 'scale' from 'elsewhere', whose file wp-rewrite "
        f"could not find ({SEARCHED}); if it uses an atomic's returned value, its gradients stay wrong: launch "
        "wp_rewrite(compact) instead, which sees the value at run time\n"
    )


def test_file_without_kernels_to_rewrite_is_copied(tmp_path, capsys):
    source, out = tmp_path / "plain.py", tmp_path / "out.py"
    source.write_text(CHECKED[CHECKED.index("@wp.kernel\ndef clean") :].join(["import warp as wp\n\n\n", ""]))
    status, _, err = run_cli(capsys, source, "-o", out)
    assert status == 0 and out.read_text() == source.read_text()
    assert "no kernel to rewrite" in err
    assert run_cli(capsys, source, "--diff", "-q") == (0, "", "")


def test_kernels_in_a_module_set_up_without_backward_are_left_as_they_are(tmp_path, capsys):
    """Nothing runs backward through them (a module object's options, as Newton's Kamino sets them): no block."""
    source, out = tmp_path / "no_backward.py", tmp_path / "out.py"
    source.write_text(
        "import warp as wp\n\n\ndef make(name):\n    module = wp.get_module(name)\n"
        '    module.options.update({"enable_backward": False})\n\n    @wp.kernel(module=module)\n'
        "    def compact(x: wp.array[float], count: wp.array[int], out: wp.array[float]):\n"
        "        out[wp.atomic_add(count, 0, 1)] = x[wp.tid()]\n\n    return compact\n"
    )
    status, _, err = run_cli(capsys, source, "-o", out)
    assert status == 0 and out.read_text() == source.read_text()
    assert "no kernel to rewrite (none with a backward pass uses an atomic's returned value)" in err


# --- errors ---------------------------------------------------------------------------------------------------


def test_file_that_does_not_parse(tmp_path, capsys):
    source = tmp_path / "broken.py"
    source.write_text("import warp as wp\n\ndef f(:\n    pass\n")
    out = tmp_path / "out.py"
    status, stdout, err = run_cli(capsys, source, "-o", out)
    assert status == 2 and stdout == ""
    assert err == f"{source}:3:7: E999 SyntaxError: invalid syntax\n"
    assert not out.exists()
    assert run_cli(capsys, "--check", source) == (
        1,
        f"{source}:3:7: E999 SyntaxError: invalid syntax\n",
        "Found 1 error.\n",
    )  # a finding, as ruff check has it; every other file is still checked


def test_missing_path(tmp_path, capsys):
    status, _, err = run_cli(capsys, tmp_path / "nope.py")
    assert status == 2 and "nope.py: no such file or directory" in err
    status, _, err = run_cli(capsys, "--check", tmp_path / "nope")
    assert status == 2 and "no such file or directory" in err


def test_output_naming_the_input_is_refused(tmp_path, capsys):
    source = tmp_path / "small.py"
    source.write_text(SMALL)
    status, _, err = run_cli(capsys, source, "-o", source)
    assert status == 2 and "use --in-place (without -o)" in err
    assert source.read_text() == SMALL
    assert run_cli(capsys, source, "-o", source, "--in-place")[0] == 2  # contradicting options
    assert run_cli(capsys, source, "--in-place")[0] == 0
    assert "\nlaunch_compact = " in source.read_text()


AMBIGUOUS = """import warp as wp


@wp.kernel
def pick(a: wp.array[int], b: wp.array[int], flag: int, out: wp.array[float]):
    counter = a
    if flag > 0:
        counter = b
    slot = wp.atomic_add(counter, 0, 1)
    out[slot] = 1.0
"""


def test_unsupported_pattern_is_left_as_it_is_and_says_why_as_the_api_does(tmp_path, capsys):
    source = tmp_path / "ambiguous.py"
    source.write_text(AMBIGUOUS)
    out = tmp_path / "out.py"
    status, stdout, err = run_cli(capsys, source, "-o", out)
    assert (status, stdout) == (1, "")
    assert err == (
        f"{source}:9:26: kernel 'pick': the target of wp.atomic_add() is not a kernel argument or a struct field of "
        "one. Pass the target array to the kernel as an argument and apply the atomic to it directly\n"
        f"{source} -> {out}: 1 kernel refused (see above)\n"
    )
    assert out.read_text() == AMBIGUOUS  # the file as far as it could be rewritten: here, not at all
    assert not (tmp_path / "wp_rewrite_runtime").exists()


PROBING = """\
import warp as wp

STEP = wp.constant(1)


@wp.func
def _wrapped(index: int, size: int) -> int:
    return index % size


@wp.func
def take_slot(count: wp.array[int], size: int) -> int:
    return _wrapped(wp.atomic_add(count, 0, STEP), size)
"""

SCATTER = """\
import warp as wp

from .probing import take_slot


@wp.kernel
def scatter(x: wp.array[wp.float64], count: wp.array[int], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[take_slot(count, out.shape[0])] = x[tid] * x[tid]
"""


def test_a_copied_helper_gets_what_it_uses_from_its_own_file(tmp_path, capsys, monkeypatch):
    """Newton's hashtable_find_or_insert calls _hashtable_hash, which the kernels' module does not import: the
    rewritten module imports it, and the constant, from the helper's file as it imports the helper."""
    package = tmp_path / "copying"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "probing.py").write_text(PROBING)
    (package / "scatter.py").write_text(SCATTER)
    assert run_cli(capsys, package / "scatter.py", "--in-place")[0] == 0
    text = (package / "scatter.py").read_text()
    assert "from .probing import STEP, _wrapped, take_slot\n" in text and text.count("from .probing") == 1  # merged
    assert run_cli(capsys, package / "scatter.py", "--in-place")[2].endswith("nothing to change\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import copying.scatter as module

    program = through(module, "scatter", N)
    check(Case(None, N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0], program=program))


def test_a_copied_helper_using_a_name_the_module_binds_otherwise_is_refused(tmp_path, capsys):
    (tmp_path / "probing.py").write_text(PROBING)
    source = tmp_path / "scatter.py"
    source.write_text(SCATTER.replace("from .probing", "from probing") + "\n\nSTEP = 2\n")
    status, _, err = run_cli(capsys, source, "-o", tmp_path / "out.py")
    assert status == 1
    assert (
        f"probing.py:13:45: kernel 'scatter': helper 'take_slot' (in {tmp_path / 'probing.py'}) must be copied into "
        f"the rewritten module, but it uses 'STEP', which {source} binds to something else. Give one of the two "
        f"another name, or define 'take_slot' in {source}"
    ) in err


HELPERS_IN_CLASSES_AND_ATTRIBUTES = """import warp as wp


class Slot(wp.types.vector(length=2, dtype=wp.int32)):
    @wp.func
    def claim(count: wp.array[wp.int32]) -> wp.int32:
        return wp.atomic_add(count, 0, 1)


def make_scaler():
    @wp.func
    def scale_core(x: wp.float64, count: wp.array[wp.int32]) -> wp.float64:
        return x * wp.float64(wp.atomic_add(count, 1, 1) + 1)

    @wp.func
    def scale(x: wp.float64, count: wp.array[wp.int32]) -> wp.float64:
        return scale_core(x, count)

    scale.core = scale_core
    return scale


@wp.kernel
def compact_scaled(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    out[Slot.claim(count)] = wp.static(make_scaler().core)(x[tid], count)
"""


def test_helpers_in_classes_and_set_as_attributes_by_factories_are_rewritten(tmp_path, capsys):
    """``SomeVector.method(...)`` and ``wp.static(make(...).core)`` (Newton's vector types and GJK/MPR solvers):
    followed and cloned, against finite differences (out[slot] = x * (arrival + 1) in thread order)."""
    source, out = tmp_path / "attributes.py", tmp_path / "attributes_rewritten.py"
    source.write_text(HELPERS_IN_CLASSES_AND_ATTRIBUTES)
    assert run_cli(capsys, source, "-o", out)[0] == 0
    module = import_file(out, "attributes_rewritten")
    make = lambda: [f64(X, True), i32([0, 0]), zeros(N)]  # noqa: E731
    check(Case(None, N, make, [2], [0], program=through(module, "compact_scaled", N)))


def test_a_factory_helper_using_the_factorys_names_is_refused_not_copied_blind(tmp_path, capsys):
    """Its copy beside the kernel would not see ``scale_by``: a clear refusal, not generated code Warp cannot build."""
    source = tmp_path / "closure.py"
    source.write_text(
        HELPERS_IN_CLASSES_AND_ATTRIBUTES.replace("def make_scaler():", "def make_scaler(scale_by: float):")
        .replace("wp.float64(wp.atomic_add(count, 1, 1) + 1)", "wp.float64(wp.atomic_add(count, 1, 1) + 1) * scale_by")
        .replace("make_scaler().core", "make_scaler(2.0).core")
    )
    status, _, err = run_cli(capsys, source, "-o", tmp_path / "closure_rewritten.py")
    assert status == 1
    assert f"{source}:13:" in err
    assert (
        "kernel 'compact_scaled': helper 'scale_core' must be copied beside the rewritten kernel, but it uses "
        "'scale_by', a name of 'make_scaler' around the helper, which the kernel cannot see. Pass 'scale_by' to "
        "the helper as an argument, or rewrite the kernel at run time with wp_rewrite()"
    ) in err


def test_usage_errors_exit_two_without_traceback(tmp_path, capsys):
    source = tmp_path / "small.py"
    source.write_text(SMALL)
    for argv in ([], ["--bogus", source], [source, source], [source, "--diff", "-o", tmp_path / "x.py"], [tmp_path]):
        status, _, err = run_cli(capsys, *argv)
        assert status == 2 and "Traceback" not in err, argv
