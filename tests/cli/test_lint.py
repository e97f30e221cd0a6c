"""``wp-rewrite --check`` as a linter: ruff's conventions, and precision on the idioms of real Warp code.

Every kernel here is written for these tests; none runs (the check never imports what it reads).
"""

from __future__ import annotations

import ast
import io
import json
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from warp_rewrite import __version__
from warp_rewrite.cli.hazards import launched_kernel
from warp_rewrite.cli.lint import Finding, _launch_call, noqa_lines, noqa_of, rule_url, suppressed
from warp_rewrite.cli.main import main
from warp_rewrite.cli.source_file import split_lines
from warp_rewrite.cli.static_module import StaticModule

REPO = Path(__file__).parents[2]
WP_REWRITE = Path(sys.executable).with_name("wp-rewrite")


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def check(capsys, tmp_path: Path, source: str, *options: str, name: str = "kernels.py") -> list[str]:
    """The findings of ``--check`` on ``source`` as ``line:col: CODE`` (the message left out)."""
    path = tmp_path / name
    path.write_text(source)
    _, out, _ = run_cli(capsys, "--check", path, *options)
    return [
        line.split(": ", 2)[0].removeprefix(f"{path}:") + ": " + line.split(": ", 2)[1].split()[0]
        for line in out.splitlines()
    ]


FOUR_CODES = """import warp as wp


@wp.func
def take(count: wp.array[int]) -> int:
    return wp.atomic_add(count, 0, 1)


@wp.kernel
def direct(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0


@wp.kernel
def through_helper(count: wp.array[int], out: wp.array[float]):
    out[take(count)] = 2.0
"""


# --- noqa, --select, --ignore ------------------------------------------------------------------------------------


def test_noqa_bare_and_with_codes_silence_the_reported_line(capsys, tmp_path):
    assert check(capsys, tmp_path, FOUR_CODES) == ["6:12: WR002", "11:9: WR001", "16:9: WR003"]
    silenced = FOUR_CODES.replace("return wp.atomic_add(count, 0, 1)", "return wp.atomic_add(count, 0, 1)  # noqa")
    silenced = silenced.replace("out[take(count)] = 2.0", "out[take(count)] = 2.0  # NOQA:WR001, WR003")
    silenced = silenced.replace(
        "out[wp.atomic_add(count, 0, 1)] = 1.0", "out[wp.atomic_add(count, 0, 1)] = 1.0  # noqa: WR003"
    )
    assert check(capsys, tmp_path, silenced) == ["11:9: WR001"]  # a noqa naming other codes does not silence it


def test_select_and_ignore_take_codes_and_prefixes_most_specific_wins(capsys, tmp_path):
    assert check(capsys, tmp_path, FOUR_CODES, "--select", "WR001,WR003") == ["11:9: WR001", "16:9: WR003"]
    assert check(capsys, tmp_path, FOUR_CODES, "--ignore", "WR00") == []
    assert check(capsys, tmp_path, FOUR_CODES, "--select", "WR002", "--ignore", "WR0") == ["6:12: WR002"]
    assert check(capsys, tmp_path, FOUR_CODES, "--ignore", "wr002") == ["11:9: WR001", "16:9: WR003"]
    assert check(capsys, tmp_path, FOUR_CODES, "--select", "ALL", "--ignore", "WR003") == ["6:12: WR002", "11:9: WR001"]
    status, _, err = run_cli(capsys, "--check", tmp_path, "--select", "F401")
    assert status == 2 and "unknown rule selector 'F401'" in err


# --- output formats, exit codes, summary, version ----------------------------------------------------------------


def test_json_output_has_ruffs_fields(capsys, tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(FOUR_CODES)
    status, out, err = run_cli(capsys, "--check", path, "--output-format", "json")
    assert status == 1 and err == "Found 3 errors.\n"
    findings = json.loads(out)
    assert [f["code"] for f in findings] == ["WR002", "WR001", "WR003"]
    assert findings[1] == {
        "cell": None,
        "code": "WR001",
        "end_location": {"column": 35, "row": 11},
        "filename": str(path.resolve()),
        "fix": None,
        "location": {"column": 9, "row": 11},
        "message": "kernel 'direct' uses the value returned by wp.atomic_add(); gradients through it are wrong in "
        "plain Warp: run wp-rewrite on this file, or launch wp_rewrite(direct) (enable_backward=False if it needs no "
        "gradient)",
        "noqa_row": 11,
        "url": rule_url("WR001"),
    }
    assert rule_url("WR001") == (REPO / "docs/rules/WR001.md").as_uri()  # the page shipped
    assert run_cli(capsys, "--check", path, "--output-format", "json", "--ignore", "WR")[1] == "[]\n"


def test_github_output_is_workflow_annotations(capsys, tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(FOUR_CODES)
    _, out, _ = run_cli(capsys, "--check", path, "--output-format", "github", "--select", "WR001")
    assert out == (
        f"::error file={path.resolve()},line=11,col=9,endLine=11,endColumn=35,title=wp-rewrite (WR001)::"
        f"{path}:11:9: WR001 kernel 'direct' uses the value returned by wp.atomic_add(); gradients through it are "
        "wrong in plain Warp: run wp-rewrite on this file, or launch wp_rewrite(direct) (enable_backward=False if it "
        "needs no gradient)\n"
    ).replace(",title=", ",title=")


def test_exit_zero_summary_quiet_and_version(capsys, tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(FOUR_CODES)
    assert run_cli(capsys, "--check", path, "--exit-zero")[::2] == (0, "Found 3 errors.\n")
    assert run_cli(capsys, "--check", path, "--select", "WR001", "-q")[::2] == (1, "")
    assert run_cli(capsys, "--check", path, "--ignore", "WR0")[::2] == (0, "All checks passed!\n")
    assert run_cli(capsys, "--version")[:2] == (0, f"wp-rewrite {__version__}\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["--in-place", "-o", "x.py", "FILE"],
        ["--max-records", "-3", "FILE"],
        ["--max-records", "0", "FILE"],
        ["--max-records", "many", "FILE"],
        ["--check", "-o", "x.py", "FILE"],
        ["--check", "--in-place", "FILE"],
        ["--check", "--max-records", "4", "FILE"],
        ["--check", "--detach-returns", "FILE"],
        ["--check", "--diff", "FILE"],
        ["--diff", "-o", "x.py", "FILE"],
        ["--diff", "--in-place", "FILE"],
        ["--select", "WR001", "FILE"],
        ["--output-format", "json", "FILE"],
        ["--exit-zero", "FILE"],
        ["--output-format", "sarif", "--check", "FILE"],
        ["FILE", "FILE"],
    ],
)
def test_contradicting_or_invalid_options_are_refused_when_parsing(capsys, tmp_path, argv):
    path = tmp_path / "kernels.py"
    path.write_text(FOUR_CODES)
    status, out, err = run_cli(capsys, *[str(path) if a == "FILE" else a for a in argv])
    assert (status, out) == (2, "") and err.startswith("usage: wp-rewrite") and "Traceback" not in err
    assert path.read_text() == FOUR_CODES and not (tmp_path / "x.py").exists()


def test_syntax_error_is_e999_with_its_column_and_other_files_are_still_checked(capsys, tmp_path):
    # wp.launch: in a folder, --check parses the files whose code names a kernel, a launch or an atomic
    # (test_check_files)
    (tmp_path / "broken.py").write_text("import warp as wp\nx = (wp.launch,\n")
    (tmp_path / "kernels.py").write_text(FOUR_CODES)
    status, out, _ = run_cli(capsys, "--check", tmp_path, "--select", "WR001")
    assert status == 1
    assert out.splitlines()[0] == f"{tmp_path / 'broken.py'}:2:5: E999 SyntaxError: '(' was never closed"
    assert out.splitlines()[1].startswith(f"{tmp_path / 'kernels.py'}:11:9: WR001")


LATIN_1 = "# -*- coding: latin-1 -*-\n" + FOUR_CODES.replace("def direct(", "def direct(  # café\n    ")


def test_pep_263_encodings_are_read_and_columns_count_characters(capsys, tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(LATIN_1.encode("latin-1"))
    text = FOUR_CODES.replace("out[wp.atomic_add(count, 0, 1)] = 1.0", "out[wp.atomic_add(count, 0, 1)] = 1.0  # é")
    assert check(capsys, tmp_path, LATIN_1, name="latin_text.py")  # utf-8 written: also fine
    _, out, _ = run_cli(capsys, "--check", path, "--select", "WR001")
    assert out.startswith(f"{path}:13:9: WR001 kernel 'direct'")
    accented = tmp_path / "accented.py"
    accented.write_text(
        text.replace("    out[wp.atomic_add", "    é = 1\n    out[wp.atomic_add").replace(
            "out[wp.atomic_add(count, 0, 1)] = 1.0  # é", "ö = out[wp.atomic_add(count, 0, 1)]"
        )
    )
    _, out, _ = run_cli(capsys, "--check", accented, "--select", "WR001", "--output-format", "json")
    assert json.loads(out)[0]["location"] == {"row": 12, "column": 13}  # 9 characters before it, 10 bytes


# --- pre-commit ---------------------------------------------------------------------------------------------------


def test_pre_commit_hook_definition_runs_the_check_on_the_files(tmp_path):
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "wp-rewrite-check")
    assert {"id", "name", "entry", "language"} <= set(hook) and hook["language"] == "python"
    assert hook["types"] == ["python"] and hook["entry"] == "wp-rewrite --check"
    if not WP_REWRITE.exists():
        pytest.skip("wp-rewrite is not installed in this environment")
    (tmp_path / "bad.py").write_text(FOUR_CODES)
    (tmp_path / "good.py").write_text("import warp as wp\n")
    command = [str(WP_REWRITE), *shlex.split(hook["entry"])[1:], *hook.get("args", [])]
    result = subprocess.run([*command, "good.py"], cwd=tmp_path, capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (0, "")
    result = subprocess.run([*command, "good.py", "bad.py"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1 and [line[:7] for line in result.stdout.splitlines()] == ["bad.py:"] * 3


# --- precision: what is not a hazard ---------------------------------------------------------------------------------


BACKWARD_OFF = """import warp as wp


@wp.func
def take(count: wp.array[int]) -> int:
    return wp.atomic_add(count, 0, 1)


@wp.kernel(enable_backward=False)
def no_backward(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0
    out[take(count)] = 2.0


@wp.kernel(module_options={"enable_backward": False}, module="unique")
def no_backward_module(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0
"""


def test_kernels_without_backward_are_informational_only(capsys, tmp_path):
    """WR101, off by default: a kernel with enable_backward=False (or its module's option) is no hazard, and
    neither is a helper that only such kernels call."""
    assert check(capsys, tmp_path, BACKWARD_OFF) == []
    assert check(capsys, tmp_path, BACKWARD_OFF, "--select", "WR101") == [
        "6:12: WR101",
        "11:9: WR101",
        "12:9: WR101",
        "17:9: WR101",
    ]
    _, out, _ = run_cli(capsys, "--check", tmp_path / "kernels.py", "--select", "WR101")
    assert (
        "kernel 'no_backward' uses the value returned by wp.atomic_add() through helper 'take', but it is built "
        "with enable_backward=False: not a hazard" in out
    )
    assert (
        "helper 'take' uses the value returned by wp.atomic_add(), but only kernels without a backward pass "
        "call it" in out
    )


MODULE_OPTIONS_OFF = """import warp as wp

wp.set_module_options({"enable_backward": False})


@wp.func
def take(count: wp.array[int]) -> int:
    return wp.atomic_add(count, 0, 1)


@wp.kernel
def compact(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0


@wp.kernel(enable_backward=True)
def asks_for_backward(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0
"""


def test_module_option_disabling_backward(capsys, tmp_path):
    assert check(capsys, tmp_path, MODULE_OPTIONS_OFF) == ["18:9: WR001"]  # its own option wins
    assert check(capsys, tmp_path, MODULE_OPTIONS_OFF, "--select", "WR101") == ["8:12: WR101", "13:9: WR101"]


MODULE_OBJECTS = """import warp as wp

wp.set_module_options({"enable_backward": False})
wp.get_module("shared").options.update(enable_backward=False)


@wp.kernel(module="unique")
def own_module(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0


@wp.kernel(module="unique")
def own_module_off(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0


wp.set_module_options({"enable_backward": False}, module=own_module_off.module)


@wp.kernel(module="shared")
def named_module(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0


def make_kernels(suffix):
    module = wp.get_module(f"made_{suffix}")
    module.options["enable_backward"] = False
    other = wp.get_module(f"other_{suffix}")

    @wp.kernel(module=module)
    def held_module(count: wp.array[int], out: wp.array[float]):
        out[wp.atomic_add(count, 0, 1)] = 1.0

    @wp.kernel(module=other)
    def other_module(count: wp.array[int], out: wp.array[float]):
        out[wp.atomic_add(count, 0, 1)] = 1.0

    return held_module, other_module
"""


def test_module_objects_and_their_options(capsys, tmp_path):
    """Options set on a module object (``wp.get_module(...)``, held in a variable or not, ``k.module``) reach the
    kernels built into it; a ``module="unique"`` kernel gets a module of its own, which the file's options do not
    reach (Warp: it starts from ``wp.config``)."""
    assert check(capsys, tmp_path, MODULE_OBJECTS) == ["9:9: WR001", "36:13: WR001"]
    assert check(capsys, tmp_path, MODULE_OBJECTS, "--select", "WR101") == [
        "14:9: WR101",
        "22:9: WR101",
        "32:13: WR101",
    ]


HAND_WRITTEN_REPLAY = """import warp as wp


@wp.func
def bump(counter: wp.array[int], tids: wp.array[int], tid: int) -> int:
    slot = wp.atomic_add(counter, 0, 1)
    tids[tid] = slot
    return slot


@wp.func_replay(bump)
def bump_replay(counter: wp.array[int], tids: wp.array[int], tid: int) -> int:
    return tids[tid]


@wp.kernel
def emit(counter: wp.array[int], tids: wp.array[int], out: wp.array[float]):
    tid = wp.tid()
    out[bump(counter, tids, tid)] = 1.0
"""


def test_helper_with_a_hand_written_replay_is_not_a_hazard(capsys, tmp_path):
    assert check(capsys, tmp_path, HAND_WRITTEN_REPLAY) == []
    assert check(capsys, tmp_path, HAND_WRITTEN_REPLAY, "--select", "WR1") == ["6:12: WR102"]


TILE_ATOMICS = """import warp as wp


@wp.func
def added_before(b: wp.array2d[float], t: wp.tile[float, 2, 2]) -> wp.tile[float, 2, 2]:
    return wp.tile_atomic_add(b, t)


@wp.kernel
def used(a: wp.array2d[float], b: wp.array2d[float]):
    before = wp.tile_atomic_add(b, wp.tile_load(a, shape=(2, 2)))
    wp.tile_store(a, before)


@wp.kernel
def as_a_statement(a: wp.array2d[float], b: wp.array2d[float]):
    wp.tile_atomic_add(b, wp.tile_load(a, shape=(2, 2)))


@wp.kernel
def through_a_helper(a: wp.array2d[float], b: wp.array2d[float]):
    wp.tile_store(a, added_before(b, wp.tile_load(a, shape=(2, 2))))


@wp.kernel(enable_backward=False)
def without_backward(a: wp.array2d[float], b: wp.array2d[float]):
    wp.tile_store(a, wp.tile_atomic_add(b, wp.tile_load(a, shape=(2, 2))))
"""


def test_a_used_tile_atomic_return_is_wr007_and_informational_without_backward(capsys, tmp_path):
    """The fence refuses a use of a tile atomic's returned tile; --check reports every such use, with its fix."""
    assert check(capsys, tmp_path, TILE_ATOMICS, "--select", "ALL") == ["6:12: WR007", "11:14: WR007", "27:22: WR101"]
    _, out, _ = run_cli(capsys, "--check", tmp_path / "kernels.py")
    assert "kernel 'used' uses the tile returned by wp.tile_atomic_add(); " in out
    assert "helper 'added_before' uses the tile returned by wp.tile_atomic_add(); " in out
    assert out.splitlines()[0].endswith(
        "use the tile atomic as a statement, or load the tile before the atomic; "
        "if it needs no gradient, set enable_backward=False or add # noqa: WR007"
    )


DISCARDED_CONDITIONAL = """import warp as wp


@wp.kernel
def count_signs(x: wp.array[float], counts: wp.array[int]):
    tid = wp.tid()
    wp.atomic_add(counts, 0, 1) if x[tid] > 0.0 else wp.atomic_sub(counts, 0, 1)
    (wp.atomic_add(counts, 1, 1) if x[tid] > 1.0 else (wp.atomic_max(counts, 2, 3) if x[tid] < -1.0 else 0))
    counts[3] = wp.atomic_add(counts, 4, 1) if x[tid] > 0.0 else 0
"""


def test_conditional_of_atomics_as_a_statement_discards_their_values(capsys, tmp_path):
    assert check(capsys, tmp_path, DISCARDED_CONDITIONAL) == ["9:17: WR001"]  # only the assigned one


# --- precision: what is found ---------------------------------------------------------------------------------------


KERNEL_CONSTRUCTOR = """import warp as wp


def compact(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0


def quiet(count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = 1.0


def build():
    def local(count: wp.array[int], out: wp.array[float]):
        out[wp.atomic_add(count, 0, 1)] = 1.0

    return wp.Kernel(local, key="local")


compact_kernel = wp.Kernel(func=compact, key="compact")
quiet_kernel = wp.Kernel(quiet, options={"enable_backward": False})
"""


def test_kernels_built_with_the_kernel_constructor_are_found(capsys, tmp_path):
    assert check(capsys, tmp_path, KERNEL_CONSTRUCTOR) == ["5:9: WR001", "14:13: WR001"]
    assert check(capsys, tmp_path, KERNEL_CONSTRUCTOR, "--select", "WR101") == ["9:9: WR101"]


KERNEL_MAKERS = """import warp as wp

made = {}


def getkernel(func, suffix=""):
    if func.__name__ + suffix not in made:
        made[func.__name__ + suffix] = wp.Kernel(func=func, key=func.__name__ + suffix)
    return made[func.__name__ + suffix]


def cached(suffix, function):
    return getkernel(function, suffix)


def without_backward(f):
    return wp.kernel(enable_backward=False, module="unique")(f)


def test_compact():
    def compact(count: wp.array[int], out: wp.array[float]):
        out[wp.atomic_add(count, 0, 1)] = 1.0

    def through_two(count: wp.array[int], out: wp.array[float]):
        out[wp.atomic_sub(count, 0, 1)] = 1.0

    def quiet(count: wp.array[int], out: wp.array[float]):
        out[wp.atomic_max(count, 0, 1)] = 1.0

    def called(count: wp.array[int], out: wp.array[float]):
        out[wp.atomic_min(count, 0, 1)] = 1.0

    def not_a_kernel(count: wp.array[int], out: wp.array[float]):
        out[wp.atomic_exch(count, 0, 1)] = 1.0

    return (getkernel(compact, suffix="x"), cached("y", function=through_two), without_backward(quiet),
            wp.kernel(called, module="unique"), not_a_kernel)
"""


def test_kernels_made_by_functions_of_the_file_are_found(capsys, tmp_path):
    """A function handed to a function of the file that makes it a kernel (Warp's tests' ``getkernel``), also
    through another one and by keyword, and ``wp.kernel(f)`` / ``wp.kernel(...)(f)`` called, not decorating."""
    assert check(capsys, tmp_path, KERNEL_MAKERS) == ["22:13: WR001", "25:13: WR001", "31:13: WR001"]
    assert check(capsys, tmp_path, KERNEL_MAKERS, "--select", "WR101") == ["28:13: WR101"]


def test_a_helper_reaching_the_same_unknown_callee_twice_is_one_finding(capsys, tmp_path):
    source = """import warp as wp


def make(step):
    @wp.func
    def twice(x: float) -> float:
        return step(x) + step(2.0 * x)

    @wp.func
    def both(x: float) -> float:
        return twice(x) * twice(-x)

    @wp.kernel
    def apply(x: wp.array[float]):
        x[0] = both(x[0]) + step(x[1]) + step(x[2])

    return apply
"""
    # (and WR009: x[0] is read into a call and stored into, which Warp's backward replays against the stored value)
    assert check(capsys, tmp_path, source) == ["14:5: WR009", "15:16: WR005", "15:29: WR005", "15:42: WR005"]


FACTORIES = """import warp as wp


@wp.func
def write_slot(count: wp.array[int], out: wp.array[float], v: float):
    out[wp.atomic_add(count, 0, 1)] = v


@wp.func
def write_plain(count: wp.array[int], out: wp.array[float], v: float):
    out[0] = v


def make_writer():
    @wp.func
    def writer(count: wp.array[int], out: wp.array[float], v: float):
        out[wp.atomic_sub(count, 0, 1)] = v

    return writer


def make_closure_helper(dtype):
    @wp.func
    def take(count: wp.array[int]) -> int:
        return wp.atomic_add(count, 0, 1)

    @wp.kernel
    def closure_helper(x: wp.array(dtype=dtype), count: wp.array[int], out: wp.array[float]):
        out[take(count)] = float(x[0]) + float(dtype(1.0))

    return closure_helper


@wp.kernel
def static_helper(count: wp.array[int], out: wp.array[float]):
    wp.static(write_slot)(count, out, 1.0)


@wp.kernel
def static_plain(count: wp.array[int], out: wp.array[float]):
    wp.static(write_plain)(count, out, 1.0)


@wp.kernel
def static_factory_result(count: wp.array[int], out: wp.array[float]):
    wp.static(make_writer())(count, out, 1.0)


def make_alias():
    alias = write_slot

    @wp.kernel
    def through_alias(count: wp.array[int], out: wp.array[float]):
        alias(count, out, 1.0)

    return through_alias


def make_with_writer(writer, vec_type):
    @wp.kernel
    def parameter_writer(count: wp.array[int], out: wp.array[float]):
        v = vec_type(1.0)
        wp.static(writer)(count, out, v[0])
        writer(count, out, 2.0)

    return parameter_writer
"""


def test_calls_through_closures_and_static_are_followed(capsys, tmp_path):
    """WR003 through a helper defined in the factory, wp.static(helper), wp.static(helper_factory()) and a
    closure alias; WR005 where only running the factory would tell (a parameter), not for a type parameter."""
    assert check(capsys, tmp_path, FACTORIES) == [
        "6:9: WR002",
        "17:13: WR002",
        "25:16: WR002",
        "29:13: WR003",  # closure_helper -> take
        "36:5: WR003",  # wp.static(write_slot)
        "46:5: WR003",  # wp.static(make_writer()) -> writer
        "54:9: WR003",  # alias = write_slot
        # the factory's parameter writer: unknown
        "63:9: WR005",
        "64:9: WR005",
    ]
    _, out, _ = run_cli(capsys, "--check", tmp_path / "kernels.py", "--select", "WR005")
    assert (
        "kernel 'parameter_writer' calls function value 'writer', a parameter of 'make_with_writer', known "
        "only when it is called, which wp-rewrite cannot follow from the source" in out
    )


BRANCH_ALIASES = """import warp as wp

EXACT = True


@wp.func
def put_square(count: wp.array[int], out: wp.array[float], v: float):
    out[wp.atomic_add(count, 0, 1)] = v * v


@wp.func
def put_exp(count: wp.array[int], out: wp.array[float], v: float):
    out[wp.atomic_add(count, 0, 1)] = wp.exp(v)


@wp.func
def put_first(count: wp.array[int], out: wp.array[float], v: float):
    out[0] = v


if EXACT:
    put = put_square
else:
    put = put_exp
chosen = put_square if EXACT else put_exp
mixed = put_square if EXACT else put_first
same = put_exp if EXACT else put_exp
rebound = put_exp
rebound = put_square


@wp.kernel
def through_branches(count: wp.array[int], out: wp.array[float]):
    put(count, out, 1.0)


@wp.kernel
def through_a_condition(count: wp.array[int], out: wp.array[float]):
    chosen(count, out, 1.0)


@wp.kernel
def through_static(count: wp.array[int], out: wp.array[float]):
    wp.static(put_square if EXACT else put_exp)(count, out, 1.0)


@wp.kernel
def through_one_that_may_not_consume(count: wp.array[int], out: wp.array[float]):
    mixed(count, out, 1.0)


@wp.kernel
def through_one_helper_either_way(count: wp.array[int], out: wp.array[float]):
    same(count, out, 1.0)


@wp.kernel
def through_the_last_of_two(count: wp.array[int], out: wp.array[float]):
    rebound(count, out, 1.0)


def make(writer=None):
    if writer is None:
        writer = put_exp

    @wp.kernel
    def through_a_default(count: wp.array[int], out: wp.array[float]):
        writer(count, out, 1.0)

    return through_a_default
"""


def test_a_name_bound_on_branches_or_by_a_condition_is_known_only_at_run_time(capsys, tmp_path):
    """Which helper ``put`` is, when bound on both branches of an ``if`` (or by a conditional expression, also in
    ``wp.static``, or as a parameter's default replaced on a branch), only running the module tells, where the check
    once took the last binding in the text (``put_exp``), and the rewrite then cloned the helper that does not run,
    forward and gradient both wrong. Where each helper it may be uses an atomic's return, the kernel is a hazard
    whichever runs (WR003); where some may not, a possible one (WR005, naming them). One helper either way, and a
    name bound twice in a row, are followed."""
    assert check(capsys, tmp_path, BRANCH_ALIASES, "--select", "WR003,WR005") == [
        "34:5: WR003",  # put: put_square or put_exp, on the branches of if EXACT
        "39:5: WR003",  # chosen = put_square if EXACT else put_exp
        "44:5: WR003",  # wp.static(put_square if EXACT else put_exp)
        "49:5: WR005",  # mixed: put_square or put_first, which uses no atomic
        "54:5: WR003",  # same: put_exp either way
        "59:5: WR003",  # rebound: put_square, the last
        "68:9: WR005",  # writer: the parameter, or put_exp
    ]
    _, out, _ = run_cli(capsys, "--check", tmp_path / "kernels.py", "--select", "WR005")
    assert (
        "calls function value 'mixed', bound by a condition to 'put_first' or 'put_square', known only at run time"
        in out
    )
    assert (
        "calls function value 'writer', bound on different branches to 'put_exp' or another value, known only at run "
        "time" in out
    )


SOLVERS = """import warp as wp


class Slots(wp.types.vector(length=2, dtype=wp.int32)):
    @wp.func
    def claim(count: wp.array[int]) -> int:
        return wp.atomic_add(count, 0, 1)

    @wp.func
    def first(count: wp.array[int]) -> int:
        return count[0]


def make_solver():
    @wp.func
    def solve_core(count: wp.array[int]) -> int:
        return wp.atomic_sub(count, 0, 1)

    @wp.func
    def solve(count: wp.array[int]) -> int:
        return solve_core(count) + 1

    solve.core = solve_core
    return solve
"""
USES_SOLVERS = """import warp as wp
from solvers import Slots, make_solver


@wp.kernel
def claims(count: wp.array[int], out: wp.array[float]):
    out[Slots.claim(count)] = 1.0
    out[Slots.first(count)] = 2.0


def make():
    core = make_solver().core

    @wp.kernel
    def through_core(count: wp.array[int], out: wp.array[float]):
        out[core(count)] = 1.0
        out[wp.static(make_solver().core)(count)] = 2.0

    return through_core
"""


def test_class_methods_and_attributes_factories_set_are_followed(capsys, tmp_path):
    """``SomeVector.method(...)`` (a ``@wp.func`` in a class, imported or not) and ``make(...).core``, where the
    factory sets ``core`` on the helper it returns (Newton's GJK/MPR solvers): followed, not WR005."""
    (tmp_path / "solvers.py").write_text(SOLVERS)
    assert check(capsys, tmp_path, USES_SOLVERS) == ["7:9: WR003", "16:13: WR003", "17:13: WR003"]
    _, out, _ = run_cli(capsys, "--check", tmp_path / "kernels.py")
    assert "calls helper 'claim', which uses the value returned by wp.atomic_add()" in out
    assert "kernel 'through_core' calls helper 'solve_core', which uses the value returned by wp.atomic_sub()" in out
    assert check(capsys, tmp_path, SOLVERS + USES_SOLVERS.split("\n", 2)[2], name="together.py") == [
        "7:16: WR002",
        "17:16: WR002",
        "29:9: WR003",
        "38:13: WR003",
        "39:13: WR003",
    ]


HELPERS = """import warp as wp


@wp.func
def claim(count: wp.array[int]) -> int:
    return wp.atomic_add(count, 0, 1)
"""
USES_HELPERS = """import warp as wp
from {package}.helpers import claim


@wp.kernel
def uses(count: wp.array[int], out: wp.array[float]):
    out[claim(count)] = 1.0
"""


@pytest.mark.parametrize("layout", ["package", "namespace", "src"])
def test_check_from_outside_the_project_follows_imports_from_the_files_package_root(
    capsys, tmp_path, monkeypatch, layout
):
    """``from proj.sub.helpers import claim``, checked with the working directory elsewhere: the helper is found
    from the file's folders up (a package, a namespace package without __init__.py, a src layout)."""
    root = tmp_path / "project" / ("src" if layout == "src" else "")
    package = root / "proj" / "sub"
    package.mkdir(parents=True)
    for folder in (root / "proj", package):
        if layout != "namespace":
            (folder / "__init__.py").write_text("")
    (package / "helpers.py").write_text(HELPERS)
    (package / "kernels.py").write_text(USES_HELPERS.format(package="proj.sub"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    _, out, _ = run_cli(capsys, "--check", package / "kernels.py", "--select", "WR003")
    assert "WR003 kernel 'uses' calls helper 'claim'" in out


# --- WR004 ----------------------------------------------------------------------------------------------------------


def test_launch_of_a_rewritten_kernel_through_the_original_is_wr004(capsys, tmp_path):
    source = tmp_path / "sim.py"
    source.write_text(
        "import warp as wp\n\n\n@wp.kernel\ndef compact(count: wp.array[int], out: wp.array[float]):\n"
        "    out[wp.atomic_add(count, 0, 1)] = 1.0\n"
    )
    assert run_cli(capsys, source, "--in-place")[0] == 0
    rebound = "compact = compact_rewritten  # every name of compact now launches both phases\n"
    assert rebound in source.read_text()
    assert run_cli(capsys, "--check", tmp_path)[0] == 0  # what another file imports is the rewritten kernel
    source.write_text(source.read_text().replace(rebound, ""))  # as earlier versions wrote the block
    (tmp_path / "driver.py").write_text(
        "import warp as wp\nimport sim\nfrom sim import compact, launch_compact\n\n\ndef step(count, out):\n"
        "    wp.launch(compact, 1, inputs=[count, out])\n"
        "    wp.launch(kernel=sim.compact, dim=1, inputs=[count, out])\n"
        "    launch_compact(1, inputs=[count, out])\n"
    )
    with source.open("a") as file:
        file.write("\n\ndef again(count, out):\n    wp.launch(compact, 1, inputs=[count, out])\n")
    status, out, _ = run_cli(capsys, "--check", "--ignore", "WR006", tmp_path)
    lines = out.splitlines()
    assert status == 1 and [line.split(": ")[1].split()[0] for line in lines] == ["WR004"] * 3
    assert lines[0].startswith(
        f"{tmp_path / 'driver.py'}:7:5: WR004 wp.launch() launches kernel 'compact' itself, which wp-rewrite rewrote ("
    )
    assert lines[0].endswith("call launch_compact(...) instead")
    assert run_cli(capsys, source, "--in-place")[0] == 0  # rewriting again fixes the call added to its file
    assert run_cli(capsys, "--check", source) == (0, "", "All checks passed!\n")


def test_noqa_comments_are_read_only_where_a_finding_line_mentions_one(tmp_path):
    source = "x = 1  # noqa: WR001\ny = '# noqa'\nz = 3\n"
    module = StaticModule.parse(tmp_path / "m.py", "m.py", source)
    at = [Finding("WR001", "m", "m.py", tmp_path / "m.py", row, 1, row, 2) for row in (1, 2, 3)]
    assert noqa_of(module, at[2:]) == {}
    assert noqa_of(module, at[1:2]) == {1: frozenset({"WR001"})} == noqa_lines(source)  # the string is no comment
    assert [suppressed(f, noqa_of(module, at)) for f in at] == [True, False, False]


def test_check_imports_neither_warp_nor_numpy(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(FOUR_CODES)
    code = (
        "import sys\nfrom warp_rewrite.cli.main import main\n"
        f"main(['--check', {str(path)!r}, '-q', '--exit-zero'])\n"
        "print(sorted({'warp', 'numpy'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "arguments",
    [
        "(k, 1, inputs=[x])",
        "(sim . k,\n 1)",
        "(k)",
        "((k), 1)",  # parenthesized: parsed
        "(kernel=k, dim=1)",
        "(*launch_args)",
        "(None, 1)",
        "(make()(x), 1)",
        "(a.b.c, 1)",
    ],
)
def test_a_left_out_launch_names_the_kernel_its_full_parse_names(arguments):
    parsed = ast.parse("_" + arguments, mode="eval").body
    assert isinstance(parsed, ast.Call)
    read = _launch_call(arguments)
    assert read is not None
    expected, found = launched_kernel(parsed), launched_kernel(read)
    assert (found and ast.dump(found)) == (expected and ast.dump(expected))


@pytest.mark.parametrize(
    "text", ["", "x = 1", "x = 1\n", "a\r\nb\rc\n\nd", "x = 1\f\ny = 2\n", "s = 'a\v\x1cb\x85c\u2028'\r\n"]
)
def test_a_files_lines_are_split_where_pythons_tokenizer_splits_them(text):
    assert split_lines(text) == io.StringIO(text, newline="").readlines()


LOOPS = """import warp as wp


@wp.func
def window(x: wp.array(dtype=float), n: int) -> float:
    total = float(0.0)
    for k in range(n):
        total += x[k]
    return wp.sqrt(total)


@wp.kernel
def carries(x: wp.array(dtype=float), n: wp.array(dtype=int), out: wp.array(dtype=float)):
    i = wp.tid()
    acc = float(0.0)
    for j in range(n[i]):
        acc += x[j]
    for j in range(4):
        acc += x[j]
    out[i] = acc * acc + window(x, n[i])


@wp.kernel(enable_backward=False)
def without_backward(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    value = x[i]
    while value > 1.0:
        value = value * 0.5
    out[i] = value
"""


def test_a_loop_warp_replays_wrong_is_wr008_and_informational_without_backward(capsys, tmp_path):
    """Loops Warp does not unroll that carry a local, and helpers holding one; an unrolled loop is no hazard."""
    assert check(capsys, tmp_path, LOOPS, "--select", "ALL") == ["16:5: WR008", "20:26: WR008", "27:5: WR103"]
    _, out, _ = run_cli(capsys, "--check", tmp_path / "kernels.py")
    lines = out.splitlines()
    assert (
        "kernel 'carries' holds a loop Warp does not unroll that carries 'acc' from one trip into the next or "
        in lines[0]
    )
    assert "kernel 'carries' calls helper 'window', which holds a loop Warp does not unroll" in lines[1]


def test_a_loop_assigning_a_builtins_result_is_wr008_whatever_it_computes(capsys, tmp_path):
    """A sum Warp's backward gets right, but for the adjoint of ``wp.sqrt``, which reads its result after the loop has
    overwritten it in place (found by an outside trial)."""
    source = (
        "import warp as wp\n\n\n@wp.kernel\n"
        "def shifted(x: wp.array(dtype=float), n: wp.array(dtype=int), out: wp.array(dtype=float)):\n"
        "    i = wp.tid()\n    a = wp.sqrt(x[i])\n    for j in range(n[i]):\n        a = a + 1.0\n    out[i] = a\n"
    )
    assert check(capsys, tmp_path, source, "--select", "ALL") == ["8:5: WR008"]
    _, out, _ = run_cli(capsys, "--check", tmp_path / "kernels.py")
    assert "that assigns 'a', which holds a value a builtin returned before the loop" in out


def test_a_static_range_past_max_unroll_is_wr008_and_one_warp_unrolls_is_not(capsys, tmp_path):
    """Warp puts ``wp.static(17)``'s value in place before it decides: a loop, as ``range(17)`` is (``--check`` once
    took every loop holding a ``wp.static(...)`` for unrolled); a ``wp.static(...)`` reading the loop's variable makes
    Warp unroll it."""
    header = "import warp as wp\n\n\n@wp.kernel\ndef product(x: wp.array(dtype=float), y: wp.array(dtype=float)):\n"
    loop = "    acc = float(1.0)\n    for j in range({}):\n        acc = acc * x[{}]\n    y[0] = acc\n"
    assert check(capsys, tmp_path, header + loop.format("wp.static(17)", "j % 4")) == ["7:5: WR008"]
    assert check(capsys, tmp_path, header + loop.format("17", "wp.static(j % 4)")) == []


def test_a_range_of_module_level_constants_is_read_as_the_rewrite_reads_it(capsys, tmp_path):
    """``range(N)`` and ``range(wp.static(N + 1))`` with ``N = 6`` are unrolled (Warp reads the name's value, and so
    does ``--check``, through ``passes.constant_ranges``); with ``N = wp.constant(20)`` they are loops; a name bound in
    an enclosing function is none the command line reads: a loop, as the rewrite takes it."""
    signature = "def product(x: wp.array(dtype=float), y: wp.array(dtype=float)):\n"
    header = "import warp as wp\n\nN = {}\n\n\n@wp.kernel\n" + signature
    loop = "    acc = float(1.0)\n    for j in range({}):\n        acc = acc * x[j % 4]\n    y[0] = acc\n"
    for bound in ("N", "wp.static(N + 1)"):
        assert check(capsys, tmp_path, header.format("6") + loop.format(bound)) == []
        assert check(capsys, tmp_path, header.format("wp.constant(20)") + loop.format(bound)) == ["9:5: WR008"]
    factory = "import warp as wp\n\n\ndef make(N: int):\n    @wp.kernel\n    " + signature
    inner = textwrap.indent(loop.format("N"), "    ") + "\n    return product\n"
    assert check(capsys, tmp_path, factory + inner) == ["8:9: WR008"]


FUNCTION_VALUES = {
    "writers.py": """import warp as wp


@wp.func
def write(count: wp.array(dtype=int), out: wp.array(dtype=float), value: float):
    out[wp.atomic_add(count, 0, 1)] = value


@wp.func
def write_differentiable(count: wp.array(dtype=int), out: wp.array(dtype=float), value: float):
    out[wp.atomic_add(count, 0, 1)] = value


@wp.func
def write_kept(count: wp.array(dtype=int), out: wp.array(dtype=float), value: float):
    out[wp.atomic_add(count, 0, 1)] = value
""",
    "factories.py": """from typing import Any

import warp as wp


def make_export(writer: Any):
    module = f"export_{writer.__name__}"

    @wp.func
    def export(count: wp.array(dtype=int), out: wp.array(dtype=float), value: float):
        writer(count, out, value)

    @wp.kernel(enable_backward=False, module=module)
    def export_kernel(count: wp.array(dtype=int), out: wp.array(dtype=float)):
        export(count, out, 1.0)

    return export_kernel


def make_differentiable(writer: Any):
    @wp.kernel
    def scatter(count: wp.array(dtype=int), out: wp.array(dtype=float)):
        writer(count, out, 1.0)

    return scatter
""",
    "pipeline.py": """from factories import make_differentiable, make_export
from writers import write, write_differentiable, write_kept


class Pipeline:
    def __init__(self, writer=None, fast=False):
        if writer is None:
            writer = write if fast else write
        self.kernel = make_export(writer)

    @classmethod
    def default(cls, writer=write):
        return cls(writer=writer)


exported = make_export(write)
pipeline = Pipeline(writer=write)
differentiable = make_differentiable(write_differentiable)
REGISTRY = {"kept": write_kept}
""",
}


def test_a_helper_passed_as_a_value_only_to_kernels_without_a_backward_pass_is_informational(capsys, tmp_path):
    """Newton's contact writers: ``write`` reaches kernels only as a factory's parameter (directly, through a class
    constructor, a class method and locals), and every kernel those factories build has no backward pass: WR101,
    saying so. A helper one factory builds a differentiable kernel of, or that is stored where the check cannot
    follow it, stays WR002."""
    for name, text in FUNCTION_VALUES.items():
        (tmp_path / name).write_text(text)
    status, out, _ = run_cli(capsys, "--check", tmp_path, "--select", "WR002,WR101")
    assert status == 1
    assert [line.split(": ", 1)[1] for line in out.splitlines() if "writers.py" in line] == [
        "WR101 helper 'write' uses the value returned by wp.atomic_add(), but it is passed as a function value only to "
        "kernels built without a backward pass (make_export()): not a hazard, nothing to fix",
        "WR002 helper 'write_differentiable' uses the value returned by wp.atomic_add(); gradients through it are "
        "wrong in plain Warp: run wp-rewrite on the files of the kernels that call it, or launch them with "
        "wp_rewrite()",
        "WR002 helper 'write_kept' uses the value returned by wp.atomic_add(); gradients through it are wrong in plain "
        "Warp: run wp-rewrite on the files of the kernels that call it, or launch them with wp_rewrite()",
    ]


UPDATED_READS = """import warp as wp


@wp.func
def count_into(histogram: wp.array(dtype=int), b: int):
    histogram[b] += 1


@wp.kernel
def reads_its_sum(cells: wp.array(dtype=int), x: wp.array(dtype=float), sums: wp.array(dtype=float)):
    tid = wp.tid()
    wp.atomic_add(sums, cells[tid], x[tid])
    x[tid] = sums[cells[tid]] * 2.0


@wp.kernel
def through_helper(cells: wp.array(dtype=int), x: wp.array(dtype=float), histogram: wp.array(dtype=int)):
    tid = wp.tid()
    count_into(histogram, cells[tid])
    x[tid] = float(histogram[cells[tid]]) * x[tid]


@wp.kernel
def reads_what_it_stored(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    tid = wp.tid()
    out[tid] = x[tid]
    out[tid] = out[tid] * x[tid]


@wp.kernel
def adds_to_what_it_stored(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    tid = wp.tid()
    out[tid] = x[tid]
    out[tid] = out[tid] + x[tid] * 2.0


@wp.kernel
def updates_another(cells: wp.array(dtype=int), x: wp.array(dtype=float), sums: wp.array(dtype=float)):
    tid = wp.tid()
    wp.atomic_add(sums, cells[tid], x[tid])


@wp.kernel(enable_backward=False)
def without_backward(cells: wp.array(dtype=int), x: wp.array(dtype=float), sums: wp.array(dtype=float)):
    tid = wp.tid()
    wp.atomic_add(sums, cells[tid], x[tid])
    x[tid] = sums[cells[tid]]


@wp.kernel
def through_a_local(x: wp.array(dtype=float), sums: wp.array(dtype=float)):
    tid = wp.tid()
    total = sums
    total[0] += x[tid]
    x[tid] = total[0] * 2.0
"""


def test_a_kernel_reading_an_array_its_launch_updates_is_wr009(capsys, tmp_path):
    """On the kernel, naming the array, its helpers and a local bound to the array followed (Warp's own tests:
    ``values = holder.values``), and a plain store read back into a product; a plain store read back and only added
    to, an update of an array nothing reads, and a kernel without a backward pass are no such hazard."""
    found = check(capsys, tmp_path, UPDATED_READS, "--select", "ALL")
    assert found == ["10:1: WR009", "17:1: WR009", "24:1: WR009", "51:1: WR009"]
    _, out, _ = run_cli(capsys, "--check", tmp_path / "kernels.py")
    assert "kernel 'reads_its_sum' reads 'sums', which its launch also writes (an atomic or +=, or a store into" in out
    assert (
        "kernel 'through_helper' reads 'histogram' and 'x', which its launch also writes" in out
    )  # (x: into a product)
    assert "kernel 'reads_what_it_stored' reads 'out', which its launch also writes" in out
