"""Newton's own tests on the tree ``wp-rewrite newton --in-place`` writes, against the same tests on the original.

Issue 34 asks that the rewritten Newton tree pass the same Newton tests as the original: the suite's other checks
import, compile and differentiate the rewritten kernels, but only Newton's tests say whether its simulators, collision
pipeline and examples still behave as Newton expects once every rewritten kernel launches in two phases.

    PYTHONPATH=. .venv/bin/python -m tests.realcode.newton_suite [--modules test_remesh,test_raycast:raycast_mesh]

copies the installed ``newton`` into ``ORIG/newton`` and ``REWRITTEN/newton`` (a temporary folder), rewrites the
second with the command line, runs the chosen test modules of each copy in subprocesses on the CPU (``PYTHONPATH``
the copy's parent; each worker checks ``newton.__file__``) and compares each test's outcome. Exit status 1 where an
outcome differs (or a module could not run). Not collected by pytest (no ``test_`` prefix): a run takes many minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

THIS_FILE = Path(__file__).resolve()
SUMMARY = re.compile(r"^wp-rewrite: \d+ files? rewritten.*$", re.MULTILINE)
OUTCOMES = ("pass", "fail", "error", "skip", "xfail", "xpass")

# Test modules that exercise a rewritten library file without naming it (they go through Newton's public API), kept
# by hand: what the docstrings and imports of newton/tests say each one runs. Keys are paths under newton/.
HAND_KEPT: dict[str, tuple[str, ...]] = {
    "_src/geometry/kernels.py": ("test_collision_pipeline", "test_collision_cloth", "test_differentiable_contacts"),
    "_src/geometry/soft_contacts_sdf.py": ("test_collision_pipeline",),
    "_src/geometry/soft_contacts_heightfield.py": ("test_heightfield",),
    "_src/geometry/raycast.py": ("test_raycast",),
    "_src/geometry/remesh.py": ("test_remesh",),
    "_src/geometry/edge_redundancy.py": ("test_edge_redundancy",),
    "_src/solvers/xpbd/kernels.py": ("test_solver_xpbd",),
    "_src/solvers/xpbd/restitution_kernels.py": ("test_solver_xpbd",),
    "_src/solvers/semi_implicit/kernels_contact.py": ("test_cloth",),
    "_src/solvers/featherstone/kernels.py": ("test_jacobian_mass_matrix",),
    "_src/sim/articulation.py": ("test_eval_fk", "test_jacobian_mass_matrix"),
    "_src/sim/ik/ik_common.py": ("test_ik",),
    "_src/solvers/mujoco/kernels.py": ("test_mujoco_solver",),
    "_src/solvers/tendon_kernels.py": ("test_tendon_capstan",),
    "_src/solvers/style3d/cloth.py": ("test_solver_style3d",),
}

# Candidates left out of the default set, which is what a 2-core machine runs in about 25 minutes a tree (CPU only,
# warm kernel cache: docs/realcode.md has the times). ``--modules`` runs them.
UNTIMED = "not timed here: the 24 modules of the default set take the run to its budget"
LEFT_OUT_BY_DEFAULT: dict[str, str] = {
    "test_collision_pipeline": "7,800 lines, the pipeline for every pair of shape types: " + UNTIMED,
    "test_solver_vbd": "9,100 lines of cloth and rigid solves: " + UNTIMED,
    "test_mujoco_solver": "15,300 lines; MuJoCo Warp, its solver, is not installed by the realcode extra: " + UNTIMED,
    "test_coupled_solver": "its MuJoCo parts need MuJoCo Warp, not installed by the realcode extra: " + UNTIMED,
    "test_examples:example_mpm_pinch_carry": "registered for CUDA devices only",
    "test_examples:example_robot_asroballet": "registered for CUDA devices only",
    "test_examples:robot_playback": "a helper of the surface gripper example, registered for CUDA devices only",
    "test_examples:surface_gripper": "registered for CUDA devices only",
    **dict.fromkeys(
        (
            "test_deformable_rigid_regressions",
            "test_sensor_frame_transform",
            "test_sensor_imu",
            "test_ik_lbfgs",
            "test_implicit_mpm_coupling_weights",
            "test_rigid_contact",
        ),
        "names a rewritten module; " + UNTIMED,
    ),
}
DEFAULT_MAX_MODULES = 24


@dataclass(frozen=True)
class Selection:
    """A test module, ``newton.tests.test_x``, and optionally a substring the test ids must hold (``module:part``)."""

    module: str
    part: str = ""

    @classmethod
    def parse(cls, text: str) -> Selection:
        name, _, part = text.partition(":")
        name = name.removesuffix(".py").replace("/", ".")
        return cls(name if name.startswith("newton.") else f"newton.tests.{name}", part)

    def __str__(self) -> str:
        short = self.module.removeprefix("newton.tests.")
        return f"{short}:{self.part}" if self.part else short


@dataclass
class RewriteRun:
    """What ``wp-rewrite newton --in-place`` said and changed."""

    status: int
    summary: str
    stderr: str
    changed: list[str]  # paths under newton/, .py files whose bytes differ
    seconds: float


@dataclass
class ModuleRun:
    """One test module's outcomes in one tree: test id -> outcome, and the first lines of each failure."""

    selection: Selection
    outcomes: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    problem: str = ""  # the worker crashed, timed out, or imported another newton
    seconds: float = 0.0

    def count(self, *outcomes: str) -> int:
        return sum(1 for outcome in self.outcomes.values() if outcome in outcomes)


# ---- the worker: runs in the subprocess, with the tree's parent on PYTHONPATH --------------------------------------


def _describe(err: Any) -> str:
    """A failure's traceback, as unittest prints it."""
    return "".join(traceback.format_exception(*err))


class RecordingResult(unittest.TestResult):
    """Each test's outcome by id; a failed subtest fails its test (as unittest's summary counts it)."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: dict[str, str] = {}
        self.details: dict[str, str] = {}

    def _set(self, test: unittest.TestCase, outcome: str, detail: str = "") -> None:
        test_id = test.id()
        if self.outcomes.get(test_id) in ("fail", "error") and outcome == "pass":
            return  # a subtest already failed
        self.outcomes[test_id] = outcome
        if detail:
            self.details[test_id] = detail[-2000:]

    def addSuccess(self, test: unittest.TestCase) -> None:
        super().addSuccess(test)
        self._set(test, "pass")

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:
        super().addFailure(test, err)
        self._set(test, "fail", _describe(err))

    def addError(self, test: unittest.TestCase, err: Any) -> None:
        super().addError(test, err)
        self._set(test, "error", _describe(err))

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        super().addSkip(test, reason)
        self._set(test, "skip", reason)

    def addExpectedFailure(self, test: unittest.TestCase, err: Any) -> None:
        super().addExpectedFailure(test, err)
        self._set(test, "xfail")

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        super().addUnexpectedSuccess(test)
        self._set(test, "xpass")

    def addSubTest(self, test: unittest.TestCase, subtest: unittest.TestCase, err: Any) -> None:
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._set(test, "fail" if failed else "error", _describe(err))


def _tests_of(suite: unittest.TestSuite | unittest.TestCase, part: str) -> unittest.TestSuite:
    """The tests of ``suite`` whose id holds ``part``, in a suite keeping their classes' fixtures."""
    if isinstance(suite, unittest.TestCase):
        return unittest.TestSuite([suite] if part in suite.id() else [])
    return unittest.TestSuite(sub for sub in (_tests_of(t, part) for t in suite) if sub.countTestCases())


def worker(selection_text: str, tree_parent: str, out: str) -> None:
    """Run one module's tests, in this process, and write its outcomes as JSON to ``out``."""
    import newton  # the copy on PYTHONPATH

    found = str(Path(newton.__file__).resolve())
    result = RecordingResult()
    report: dict[str, Any] = {"newton": found}
    if not found.startswith(str(Path(tree_parent).resolve()) + os.sep):
        report["problem"] = f"imported newton from {found}, not from {tree_parent}"
    else:
        selection = Selection.parse(selection_text)
        try:
            suite = unittest.defaultTestLoader.loadTestsFromName(selection.module)
        except Exception:  # the module does not import: one error, in place of its tests
            result.outcomes[f"{selection.module} (import)"] = "error"
            result.details[f"{selection.module} (import)"] = traceback.format_exc()[-2000:]
        else:
            _tests_of(suite, selection.part).run(result)
    report |= {"outcomes": result.outcomes, "details": result.details}
    Path(out).write_text(json.dumps(report, indent=1))


# ---- the driver ----------------------------------------------------------------------------------------------------


def installed_newton() -> Path:
    """The installed package's folder, found without importing it (importing Newton initializes Warp)."""
    import importlib.util

    spec = importlib.util.find_spec("newton")
    if spec is None or spec.origin is None:
        sys.exit("newton is not installed: make realcode installs it")
    return Path(spec.origin).parent


def copy_tree(source: Path, parent: Path) -> Path:
    parent.mkdir(parents=True)
    return Path(shutil.copytree(source, parent / "newton", ignore=shutil.ignore_patterns("__pycache__")))


def rewrite_in_place(tree_parent: Path, original: Path) -> RewriteRun:
    """``wp-rewrite newton --in-place`` run from the tree's parent (so it names files ``newton/...``)."""
    start = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "warp_rewrite", "newton", "--in-place"],
        cwd=tree_parent,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if run.returncode not in (0, 1):  # 1: some kernel refused, the others rewritten
        sys.exit(f"wp-rewrite failed with status {run.returncode}:\n{run.stderr[-4000:]}")
    summary = SUMMARY.search(run.stderr)
    tree = tree_parent / "newton"
    changed = sorted(
        str(path.relative_to(tree))
        for path in tree.rglob("*.py")
        if "wp_rewrite_runtime" not in path.parts
        and (original / path.relative_to(tree)).read_bytes() != path.read_bytes()
    )
    return RewriteRun(run.returncode, summary[0] if summary else "(no summary line)", run.stderr, changed, seconds)


def test_modules(tree: Path) -> dict[str, str]:
    """Newton's test modules in ``tree`` (``newton/tests/**/test_*.py``): dotted name -> source."""
    return {
        ".".join(path.relative_to(tree.parent).with_suffix("").parts): path.read_text(encoding="utf-8")
        for path in sorted((tree / "tests").rglob("test_*.py"))
    }


def candidates(tree: Path, changed: list[str]) -> list[Selection]:
    """The test modules that are rewritten themselves or import a rewritten helper of the tests, then those whose
    source names a rewritten library module (``geometry.raycast``: its last two dotted parts, as imports spell it)
    and the hand-kept ones (``HAND_KEPT``), in that order."""
    sources = test_modules(tree)
    chosen: list[Selection] = []

    def add(selection: Selection) -> None:
        if selection not in chosen and (selection.module in sources or selection.module.startswith("newton.tests.")):
            chosen.append(selection)

    for path in changed:
        dotted = "newton." + path.removesuffix(".py").replace("/", ".")
        if dotted in sources:
            add(Selection(dotted))
        elif path.startswith("tests/"):  # a helper of the tests (steel/_compliance_reference.py)
            stem = Path(path).stem
            for module, source in sources.items():
                if re.search(rf"\b{re.escape(stem)}\b", source):
                    add(Selection(module))
    for path in changed:
        if path.startswith("examples/"):  # test_examples runs each example in a subprocess, named by its file
            add(Selection("newton.tests.test_examples", Path(path).stem))
            continue
        if path.startswith("tests/"):
            continue
        key = ".".join(Path(path).with_suffix("").parts[-2:])
        for module, source in sources.items():
            if re.search(rf"\b{re.escape(key)}\b", source):
                add(Selection(module))
        for text in HAND_KEPT.get(path, ()):
            add(Selection.parse(text))
    return chosen


def default_set(found: list[Selection], limit: int) -> list[Selection]:
    return [s for s in found if str(s) not in LEFT_OUT_BY_DEFAULT][:limit]


def run_module(selection: Selection, tree_parent: Path, scratch: Path, timeout: float) -> ModuleRun:
    """One module's tests in a subprocess: CPU only, ``newton`` from ``tree_parent``."""
    out = scratch / f"{selection}.json".replace(":", "-")
    log = scratch / f"{selection}.log".replace(":", "-")
    env = dict(os.environ, PYTHONPATH=str(tree_parent), CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, str(THIS_FILE), "--worker", str(selection), str(tree_parent), str(out)]
    run = ModuleRun(selection)
    start = time.perf_counter()
    try:
        with log.open("w") as output:
            done = subprocess.run(
                command, cwd=scratch, env=env, stdout=output, stderr=subprocess.STDOUT, timeout=timeout, check=False
            )
        if not out.exists():
            run.problem = f"the worker exited with status {done.returncode} and no report (see {log})"
    except subprocess.TimeoutExpired:
        run.problem = f"timed out after {timeout:.0f} s (see {log})"
    run.seconds = time.perf_counter() - start
    if out.exists():
        report = json.loads(out.read_text())
        run.outcomes, run.details = report["outcomes"], report["details"]
        run.problem = report.get("problem", run.problem)
    return run


def differences(original: ModuleRun, rewritten: ModuleRun) -> list[str]:
    lines = [
        f"{tree}: {run.problem}" for tree, run in (("original", original), ("rewritten", rewritten)) if run.problem
    ]
    absent = Counter[str]()
    for test_id in sorted(original.outcomes.keys() | rewritten.outcomes.keys()):
        before, after = original.outcomes.get(test_id, "absent"), rewritten.outcomes.get(test_id, "absent")
        if "absent" in (before, after) and not _stands_for_module(test_id):
            absent[f"{before} -> {after}"] += 1  # the module did not import in one tree: said once, below
        elif before != after:
            detail = rewritten.details.get(test_id) or original.details.get(test_id, "")
            last = detail.strip().splitlines()[-1] if detail.strip() else ""
            lines.append(f"{test_id}: {before} -> {after}" + (f" ({last})" if last else ""))
    return lines + [f"{count} tests {change}" for change, count in sorted(absent.items())]


def _stands_for_module(test_id: str) -> bool:
    """The error unittest (``_FailedTest``) or the worker (``(import)``) reports for a module that does not import."""
    return test_id.endswith(" (import)") or test_id.startswith("unittest.loader._FailedTest.")


def table(pairs: list[tuple[ModuleRun, ModuleRun]]) -> str:
    header = ("test module", "tests", "passed", "failed", "skipped", "seconds")
    rows = [header]
    for original, rewritten in pairs:
        rows.append(
            (
                str(original.selection),
                f"{len(original.outcomes)}/{len(rewritten.outcomes)}",
                f"{original.count('pass', 'xfail')}/{rewritten.count('pass', 'xfail')}",
                f"{original.count('fail', 'error', 'xpass')}/{rewritten.count('fail', 'error', 'xpass')}",
                f"{original.count('skip')}/{rewritten.count('skip')}",
                f"{original.seconds:.0f}/{rewritten.seconds:.0f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines) + "\n(original/rewritten; passed counts expected failures, failed counts errors)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modules", help="comma separated test modules (test_remesh, kamino.test_x, test_examples:drone)"
    )
    parser.add_argument("--max-modules", type=int, default=DEFAULT_MAX_MODULES, help="cap of the default set")
    parser.add_argument("--list", action="store_true", help="rewrite, print the candidates and the default set, stop")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds a module may take in one tree")
    parser.add_argument("--keep", help="work in this folder (kept) instead of a temporary one")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    source = installed_newton()
    with tempfile.TemporaryDirectory(prefix="newton-suite-") as temporary:
        work = Path(args.keep or temporary)
        work.mkdir(parents=True, exist_ok=True)
        original = copy_tree(source, work / "ORIG")
        rewritten = copy_tree(source, work / "REWRITTEN")
        rewrite = rewrite_in_place(rewritten.parent, original)
        print(f"{rewrite.summary} ({rewrite.seconds:.0f} s, status {rewrite.status})")
        print(f"files changed ({len(rewrite.changed)}): " + ", ".join(rewrite.changed))

        found = candidates(rewritten, rewrite.changed)
        chosen = (
            [Selection.parse(text) for text in args.modules.split(",") if text]
            if args.modules
            else default_set(found, args.max_modules)
        )
        print("candidates: " + ", ".join(map(str, found)))
        print("running: " + ", ".join(map(str, chosen)))
        for selection in [s for s in found if s not in chosen and not args.modules]:
            print(f"  left out: {selection}: {LEFT_OUT_BY_DEFAULT.get(str(selection), 'beyond --max-modules')}")
        if args.list:
            return 0

        pairs: list[tuple[ModuleRun, ModuleRun]] = []
        seconds = {"original": 0.0, "rewritten": 0.0}
        for selection in chosen:
            runs = []
            for name, tree in (("original", original), ("rewritten", rewritten)):
                scratch = work / "runs" / name
                scratch.mkdir(parents=True, exist_ok=True)
                run = run_module(selection, tree.parent, scratch, args.timeout)
                seconds[name] += run.seconds
                runs.append(run)
                print(
                    f"  {selection} ({name}): {len(run.outcomes)} tests, {run.seconds:.0f} s {run.problem}", flush=True
                )
            pairs.append((runs[0], runs[1]))

        print()
        print(table(pairs))
        print(f"time: original {seconds['original']:.0f} s, rewritten {seconds['rewritten']:.0f} s, ", end="")
        print(f"all {time.perf_counter() - started:.0f} s")
        differing = [(a.selection, differences(a, b)) for a, b in pairs]
        if not any(lines for _, lines in differing):
            print(f"newton tests: {len(pairs)} modules, same outcome on every test")
            return 0
        for selection, lines in differing:
            for line in lines:
                print(f"DIFFERS {selection}: {line}")
        return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(*sys.argv[2:5])
    else:
        sys.exit(main())
