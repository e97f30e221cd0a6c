"""Runs generated kernels: the original forward against the rewritten one, tape gradients against finite
differences of the original forward (``tests/support/harness.py``), or a ``RewriteError``.

Kernels are written in batches, one Python file per batch imported with ``importlib``, so that Warp compiles
one module per batch (plus one generated module for the rewritten kernels): compiling a module costs seconds,
running a kernel on the CPU milliseconds. With ``cli``, each batch's file also goes through the command line
(``wp-rewrite FILE -o OUT``), compiled with the rest: both front ends must give each kernel one verdict, rewritten
with the same forward results and gradients, or refused with the same message (``Outcome.divergence``).
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import importlib.util
import io
import itertools
import re
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import warp as wp

from tests.fuzz.generator import COMPONENTS, ArraySpec, KernelCase, generate_kernel, module_source
from tests.fuzz.structures import StructureArgument, structure_id
from tests.support import harness
from tests.support.emitted import import_file
from tests.support.harness import Case, assert_same_forward, finite_difference_gradients, tape_gradients
from warp_rewrite import RewriteError, RewriteWarning, wp_rewrite
from warp_rewrite.cli.main import _command_line_spelling, main
from warp_rewrite.runtime.errors import left_to_warp

RTOL = 1e-5
ATOL = 1e-6  # losses sum many outputs: float64 finite differences carry ~1e-8 of rounding noise

OPTIMIZATION_LEVEL = 0  # -O0 builds a batch's modules ~3x faster than Warp's CPU default -O2; same semantics
REFERENCE_OPTIONS = {"enable_backward": False, "optimization_level": OPTIMIZATION_LEVEL}

PASSED, FAILED, REFUSED = "passed", "failed", "refused"
# Uses no atomic's return, and a loop the rewrite cannot replay right: left as plain Warp, with a RewriteWarning
LEFT = "left as plain Warp"
OWN_FAULT = "a bug in warp-rewrite"  # what a RewriteError says where the rewrite, not the kernel, is at fault
UNCHANGED = "unchanged"  # uses no atomic's return: the rewrite leaves it to plain Warp (a form's kernel alone)


@dataclass
class Outcome:
    """How one kernel fared: passed, failed (``detail`` says how) or refused (``detail``: the RewriteError)."""

    case: KernelCase
    status: str
    detail: str = ""
    divergence: str | None = None  # how the command line's verdict differs from the API's (``Batch(cli=True)``)

    def report(self) -> str:
        """What failed, and the kernel, so that the failure can be reproduced and minimized by hand."""
        return f"{self.case.name} (seed {self.case.seed}, index {self.case.index}): {self.detail}\n{self.case.source}"


@dataclass
class Summary:
    """Every outcome of a run, and the summary line the long mode prints."""

    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    def line(self) -> str:
        passed, failed, refused, left = (self.count(status) for status in (PASSED, FAILED, REFUSED, LEFT))
        return f"fuzz: {passed} passed, {failed} failed ({refused} refused, {left} {LEFT})"


def make_array(spec: ArraySpec, module: ModuleType) -> wp.array | wp.indexedarray:
    """A fresh CPU array for one argument, from its initial values, laid out as the spec says: a plain array,
    every other element of a base array twice its length, an indexed array over the even ones of such, or zeros of
    a struct the module defines."""
    if spec.layout == "structs":
        return wp.zeros(spec.shape, dtype=getattr(module, spec.dtype), requires_grad=spec.requires_grad, device="cpu")
    dtype = getattr(wp, spec.dtype)
    shape = (*spec.shape, *COMPONENTS.get(spec.dtype, ()))
    numpy_dtype = {"int32": np.int32, "vec3i": np.int32, "int64": np.int64}.get(spec.dtype, np.float64)
    values = np.zeros(shape, dtype=numpy_dtype)
    if spec.values is not None:
        values = np.asarray(spec.values, dtype=numpy_dtype).reshape(shape)
    if spec.layout == "plain":
        return wp.array(values, dtype=dtype, requires_grad=spec.requires_grad, device="cpu")
    base_values = np.zeros((2 * shape[0], *shape[1:]), dtype=numpy_dtype)
    base_values[::2] = values
    base = wp.array(base_values, dtype=dtype, requires_grad=spec.requires_grad, device="cpu")
    if spec.layout == "strided":
        return base[::2]
    even = wp.array(np.arange(0, 2 * shape[0], 2, dtype=np.int32), dtype=wp.int32, device="cpu")
    return wp.indexedarray(base, [even])


def make_arguments(case: KernelCase, module: ModuleType) -> list:
    """Fresh arguments for one launch: the arrays, then the struct arguments; an alias is the array it names, a
    spatial structure the batch's (``tests/fuzz/structures.py``)."""
    arrays = {}
    for spec in case.arrays:
        if isinstance(spec, StructureArgument):
            arrays[spec.name] = structure_id(spec.name, module)
            continue
        arrays[spec.name] = arrays[spec.alias_of] if spec.alias_of else make_array(spec, module)
    structs = []
    for struct in case.structs:
        instance = getattr(module, struct.class_name)()
        for spec in struct.fields:
            setattr(instance, spec.name, arrays[spec.name])
        structs.append(instance)
    return [*(arrays[spec.name] for spec in case.arguments), *structs]


def harness_case(case: KernelCase, kernel: wp.Kernel, reference: ModuleType, max_records: int | None) -> Case:
    """The harness's view of a generated case: fresh arguments, loss outputs, arrays to differentiate. The ground
    truth runs the kernel of the same name in ``reference`` (``Batch``); arrays of structs reach the loss through the
    case's projections, launched after the kernel into arrays of their own (after the kernel's arguments)."""
    module = sys.modules[kernel.func.__module__]
    arity = len(case.arguments) + len(case.structs)
    names = [spec.name for spec in case.arguments]

    def make() -> list:
        outputs = [wp.zeros(p.size, dtype=wp.float64, requires_grad=True, device="cpu") for p in case.projections]
        return [*make_arguments(case, module), *outputs]

    def program(args: list, launcher: harness.Launcher) -> None:
        if launcher is harness.launch_original:
            launcher(getattr(reference, case.name), case.dim, args[:arity])
        else:
            launcher(kernel, case.dim, args[:arity])
        for k, projection in enumerate(case.projections):
            source, out = args[names.index(projection.source)], args[arity + k]
            wp.launch(getattr(reference, projection.kernel), projection.size, inputs=[source, out], device="cpu")

    projected = list(range(arity, arity + len(case.projections)))
    return Case(
        kernel,
        case.dim,
        make,
        [i for i, spec in enumerate(case.arguments) if spec.loss] + projected,
        [i for i, spec in enumerate(case.arguments) if spec.wrt],
        program=program,
        max_records=max_records,
    )


_loaded = itertools.count()


def sharing_structs(text: str, primary: str) -> str:
    """A batch's module text (or the command line's copy of it) whose structs are those of the module ``primary``
    (``import primary`` added): arguments made for one module's kernels are then the other's too."""
    text = re.sub(r"@wp\.struct\nclass (\w+):\n(?:    [^\n]*\n)+", rf"\1 = {primary}.\1\n", text)
    return text.replace("import warp as wp\n", f"import warp as wp\nimport {primary}\n", 1)


def load_batch(cases: list[KernelCase], directory: Path, primary: ModuleType | None = None) -> ModuleType:
    """Write the batch's kernels into one file and import it: its kernels form one Warp module. With ``primary``
    (the batch imported before), a copy for the ground truth: built without backward code, at -O0 (about 5x faster
    to build), with the primary's structs (arguments made for one copy's kernels are then the other's too)."""
    name = f"fuzz_batch_{cases[0].seed}_{cases[0].index}_{next(_loaded)}"
    path = directory / f"{name}.py"
    text = module_source(cases)
    if primary is not None:
        text = sharing_structs(text, primary.__name__)
        header = f"import warp as wp\n\nwp.set_module_options({REFERENCE_OPTIONS})\n"
        text = text.replace("import warp as wp\n", header, 1)
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Warp resolves a kernel's module by its Python module's name
    spec.loader.exec_module(module)
    return module


def richardson(coarse: np.ndarray, fine: np.ndarray) -> np.ndarray:
    """Central differences at steps h and h/10 extrapolated to step 0: their error is ~h^2, so the truncation
    term cancels in fine + (fine - coarse) / 99 (curvature alone is no failure)."""
    return fine + (fine - coarse) / 99


def agrees(tape: np.ndarray, coarse: np.ndarray, fine: np.ndarray) -> np.ndarray:
    """Which tape gradient elements the finite differences at steps h (``coarse``) and h/10 (``fine``) accept
    (``compare_gradients`` says why each rule)."""
    close = np.isclose(tape, coarse, rtol=RTOL, atol=ATOL)
    close |= np.isclose(tape, fine, rtol=RTOL, atol=ATOL)
    extrapolated = richardson(coarse, fine)
    close |= np.isclose(tape, extrapolated, rtol=RTOL, atol=ATOL)
    close |= np.abs(tape - extrapolated) <= np.abs(fine - coarse) / 99  # within the fine step's own error
    return close | (np.abs(tape - coarse) <= np.abs(coarse - fine))


def compare_gradients(case: Case) -> str | None:
    """None when the tape gradients match finite differences of the original forward; else what differs.

    Where they differ, the finite differences are taken again with a 10x smaller step, and an element
    matching either, or their Richardson extrapolation (``richardson``), or nearer that extrapolation than its
    correction (the finer difference's own error: seed 7008, kernel 2409), is accepted: chained float returns in
    loops can make the loss steep enough (third derivatives ~1e12) that the truncation error of the 1e-6 step
    exceeds the tolerance. So is an element closer to the first difference than the two differences are to each
    other: they cannot tell it from the truth then (large outputs, ~1e4, carry rounding noise of ~1e-6 into a
    1e-6 step's difference; ``Case.loss_difference`` keeps the loss's own sum out of it). Last, an element matching
    the differences at a 10x larger step: where rounding noise, not curvature, parts the first two.
    """
    actual = tape_gradients(case)
    expected = finite_difference_gradients(case)
    mismatched = [i for i in case.wrt if not np.allclose(actual[i], expected[i], rtol=RTOL, atol=ATOL)]
    if not mismatched:
        return None
    finer = finite_difference_gradients(case, harness.EPSILON / 10)
    wider: dict[int, np.ndarray] = {}
    for i in mismatched:
        accepted = agrees(actual[i], expected[i], finer[i])
        if not accepted.all():
            # Rounding noise grows as the step shrinks: where it, not curvature, parts the two, a 10x larger step
            # is the truer one (seed 7009, kernel 684: the tape within 1e-7 of a 1e-4 step, 2e-5 of a 1e-6 one).
            wider = wider or finite_difference_gradients(case, harness.EPSILON * 10)
            accepted |= np.isclose(actual[i], wider[i], rtol=RTOL, atol=ATOL)
        if not accepted.all():
            return (
                f"gradient of argument {i}:\n  tape   {actual[i].tolist()}\n  finite {expected[i].tolist()}\n"
                f"  finite with a 10x smaller step {finer[i].tolist()}\n"
                f"  finite with a 10x larger step {wider[i].tolist()}"
            )
    return None


def check_case(case: KernelCase, kernel: wp.Kernel, reference: ModuleType, max_records: int | None) -> Outcome:
    """Forward equality and gradients of one rewritten kernel; a ``RewriteError`` at launch is a refusal, but for
    one that says the rewrite is at fault (a device check of the exact backward that failed: once the only sign of
    gradients read twice, where the fuzzer counted it as a refusal)."""
    checked = harness_case(case, kernel, reference, max_records)
    if wp_rewrite(kernel, max_records=max_records).pair is None:
        # The rewrite found no hazard: plain Warp's gradients must be right (a kernel reading an array its launch
        # updates once passed here unchecked). Not a fence form's kernel alone: it may hold one of Warp's own limits
        # (a thread-local array, a tile), which Warp differentiates as it does, crashing at worst.
        problem = compare_gradients(checked) if case.form is None else None
        if problem:
            return Outcome(case, FAILED, f"left unchanged, with plain Warp's gradients wrong: {problem}")
        return Outcome(case, UNCHANGED)
    try:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always", RewriteWarning)
            assert_same_forward(checked)
            # Warp's Tape.backward cannot take an indexed array's gradient (it has none): those kernels end here.
            indexed = any(spec.layout == "indexed" for spec in case.arrays)
            problem = None if indexed else compare_gradients(checked)
        left = _left(warned)
        if left is not None:  # a launch the rewrite refused, run as plain Warp
            return Outcome(case, LEFT, left)
    except RewriteError as error:
        return Outcome(case, FAILED if OWN_FAULT in str(error) else REFUSED, str(error))
    except Exception as error:
        return Outcome(case, FAILED, f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=4)}")
    return Outcome(case, FAILED, problem) if problem else Outcome(case, PASSED)


class VerdictKind(enum.Enum):
    REWRITTEN = "rewritten"
    UNCHANGED = "unchanged"  # needs no rewrite: launched as it is
    REFUSED = "refused"  # a RewriteError when rewriting
    LEFT = "left as plain Warp"  # a RewriteWarning when rewriting


def _left(warned: list[warnings.WarningMessage]) -> str | None:
    """What the first ``RewriteWarning`` among ``warned`` says, from the kernel's name on (not where it is: the
    command line names its own copy)."""
    said = next((str(w.message) for w in warned if issubclass(w.category, RewriteWarning)), None)
    return None if said is None else said[said.index("kernel '") :]


@dataclass
class Verdict:
    """What one front end made of a kernel, and, rewritten, what one launch of it on a tape gave: the arrays after
    its forward and the gradients of the loss, or the ``RewriteError`` it raised."""

    kind: VerdictKind
    refusal: str = ""  # the RewriteError's message, as the command line prints it
    forward: dict[str, np.ndarray] = field(default_factory=dict)
    gradients: dict[int, np.ndarray] = field(default_factory=dict)

    def differences(self, other: Verdict) -> list[str]:
        if (self.kind, self.refusal) != (other.kind, other.refusal):
            return [f"{self.kind.value} {self.refusal}".strip(), f"{other.kind.value} {other.refusal}".strip()]
        named = [("forward", self.forward, other.forward), ("gradient", self.gradients, other.gradients)]
        return [
            f"{what} of {key}: {mine[key].tolist()} != {theirs[key].tolist()}"
            for what, mine, theirs in named
            for key in mine
            if not np.array_equal(mine[key], theirs[key])
        ]


def launched(case: KernelCase, checked: Case, rewritten) -> Verdict:
    """A launch of ``rewritten`` (either front end's ``RewrittenKernel``) on fresh arguments on a tape, and its
    backward (where Warp's tape can take it: not through an indexed array). A refusal there is told by what it
    says, not where: an emitted module's launch names the lines of the emitted file."""
    runtime = importlib.import_module(type(rewritten).__module__.rpartition(".")[0])  # the package or a copy
    args = checked.make_args()
    tape = wp.Tape()

    def launch_rewritten(_kernel: wp.Kernel, dim: Any, inputs: list) -> None:
        wp.launch(rewritten, dim, inputs=inputs, device="cpu")

    try:
        with tape, warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always", RewriteWarning)
            checked.run(args, launch_rewritten)  # the kernel, then the projections of its arrays of structs
        left = _left(warned)
        if left is not None:  # a launch the rewrite refused, run as plain Warp
            return Verdict(VerdictKind.LEFT, _command_line_spelling(left))
        if not any(spec.layout == "indexed" for spec in case.arrays):
            weights = {args[i]: wp.array(checked.weight(i, args[i]), dtype=args[i].dtype) for i in checked.loss_outputs}
            tape.backward(grads=weights)
    except runtime.RewriteError as error:
        said = f"kernel '{error.kernel}': {error.problem}. {error.advice}"
        return Verdict(VerdictKind.REWRITTEN, _command_line_spelling(said))
    gradients = {i: args[i].grad.numpy().copy() for i in checked.wrt if args[i].grad is not None}
    return Verdict(VerdictKind.REWRITTEN, forward=harness.arrays_of(args), gradients=gradients)


@dataclass
class CommandLineCopy:
    """A batch's file rewritten by the command line (``wp-rewrite FILE -o OUT``), imported, and what it printed of
    each kernel it refused."""

    module: ModuleType
    refusals: dict[str, str]  # kernel -> the message
    left: dict[str, str]  # kernel -> what its warning says, from the kernel's name on

    @classmethod
    def of(cls, path: Path, max_records: int | None) -> CommandLineCopy:
        out = path.with_name(f"{path.stem}_cli.py")
        printed = io.StringIO()
        room = ["--max-records", str(max_records)] if max_records is not None else []
        with contextlib.redirect_stderr(printed):
            main([str(path), "-o", str(out), "-q", *room])
        refusals, left = {}, {}
        for line in printed.getvalue().splitlines():
            found = re.match(r".*?: kernel '(fz_\d+_\d+)': ", line)
            if found is not None and ": warning: " not in line:
                refusals[found[1]] = line
            found = re.match(r".*?: warning: (kernel '(fz_\d+_\d+)' is left as plain Warp.*)", line)
            if found is not None:
                left[found[2]] = found[1]
        out.write_text(sharing_structs(out.read_text(), path.stem))  # (the batch's module is imported as its stem)
        module = import_file(out, out.stem)
        for value in vars(module).values():  # the originals only run forward here, as the reference
            if hasattr(value, "launches_rewritten"):
                value.kernel.options["enable_backward"] = False
        return cls(module, refusals, left)

    def verdict(self, case: KernelCase, checked: Case) -> Verdict:
        if case.name in self.refusals:
            return Verdict(VerdictKind.REFUSED, self.refusals[case.name])
        if case.name in self.left:
            return Verdict(VerdictKind.LEFT, self.left[case.name])
        rewritten = getattr(self.module, case.name)
        if not hasattr(rewritten, "launches_rewritten"):
            return Verdict(VerdictKind.UNCHANGED)
        return launched(case, checked, rewritten)


def api_verdict(case: KernelCase, checked: Case, max_records: int | None) -> Verdict:
    try:
        rewritten = wp_rewrite(checked.kernel, max_records=max_records)
    except RewriteError as error:
        return Verdict(VerdictKind.REFUSED, _command_line_spelling(str(error)))
    if rewritten.left is not None:  # (said by a RewriteWarning when first rewritten)
        return Verdict(VerdictKind.LEFT, _command_line_spelling(left_to_warp(rewritten.left)))
    if rewritten.pair is None:
        return Verdict(VerdictKind.UNCHANGED)
    return launched(case, checked, rewritten)


def compile_cheaply(modules: set) -> None:
    """Compile the batch's rewritten modules at -O0 (the same semantics)."""
    for module in modules:
        module.options["optimization_level"] = OPTIMIZATION_LEVEL


def _culprits(error: Exception, cases: list[KernelCase]) -> list[KernelCase]:
    """The cases a module's compile error names (its message quotes the failing function)."""
    named = set(re.findall(r"fz_\d+_\d+", str(error)))
    return [case for case in cases if case.name in named]


def _rewrite_all(
    cases: list[KernelCase], module: ModuleType, max_records: int | None
) -> tuple[dict[str, Outcome], set]:
    """Rewrite every kernel (refusals are outcomes); returns the outcomes so far and the modules to compile."""
    outcomes: dict[str, Outcome] = {}
    modules = set()
    for case in cases:
        try:
            result = wp_rewrite(getattr(module, case.name), max_records=max_records)
            if result.record_kernel is not None:
                modules.add(result.record_kernel.module)
            if result.left is not None:
                outcomes[case.name] = Outcome(case, LEFT, left_to_warp(result.left))
        except RewriteError as error:
            outcomes[case.name] = Outcome(case, REFUSED, str(error))
        except Exception as error:
            outcomes[case.name] = Outcome(case, FAILED, f"wp_rewrite raised {type(error).__name__}: {error}")
    return outcomes, modules


class Batch:
    """Kernels written into one file and rewritten together, so each of their modules compiles once.

    The file is imported twice: the kernels of one copy are rewritten (with the options a user's module has, which a
    variant generated at a launch copies, ``RewrittenKernel.detached``), and never built themselves; the other copy
    (``reference``) is built forward only, for the ground truth. The rewritten kernels of a batch share one generated
    module, so one kernel whose generated code does not compile breaks them all: such a kernel fails, and the batch
    is built again without it.
    """

    def __init__(self, cases: list[KernelCase], directory: Path, max_records: int | None, cli: bool = False):
        self.cases = cases
        self.directory = directory
        self.max_records = max_records
        self.cli = cli  # also through the command line, whose verdict must be the API's (``Outcome.divergence``)
        self.broken: dict[str, Outcome] = {}
        self.prepare([*cases])

    def prepare(self, remaining: list[KernelCase]) -> None:
        self.remaining = remaining
        if not remaining:
            self.outcomes, self.modules, self.copy = {}, set(), None
            return
        self.module = load_batch(remaining, self.directory)
        self.reference = load_batch(remaining, self.directory, primary=self.module)
        self.outcomes, self.modules = _rewrite_all(remaining, self.module, self.max_records)
        self.copy = CommandLineCopy.of(Path(self.module.__file__), self.max_records) if self.cli else None
        if self.copy is not None:
            self.modules.add(wp.get_module(self.copy.module.__name__))
        compile_cheaply(self.modules)
        self.modules.add(getattr(self.reference, remaining[0].name).module)

    def compile(self) -> None:
        """Load both modules; while one does not compile, fail the kernels its error names and rebuild."""
        while self.remaining:
            try:
                wp.force_load(device="cpu", modules=sorted(self.modules, key=lambda m: m.name), max_workers=2)
                return
            except Exception as error:
                culprits = _culprits(error, self.remaining) or self.remaining
                for case in culprits:
                    problem = f"a module does not compile: {type(error).__name__}: {error}"
                    self.broken[case.name] = Outcome(case, FAILED, problem)
                self.prepare([case for case in self.remaining if case.name not in self.broken])

    def check(self) -> list[Outcome]:
        self.compile()
        for case in self.remaining:
            if case.name not in self.outcomes:
                kernel = getattr(self.module, case.name)
                self.outcomes[case.name] = check_case(case, kernel, self.reference, self.max_records)
            if self.copy is not None:
                checked = harness_case(case, getattr(self.module, case.name), self.reference, self.max_records)
                api, cli = api_verdict(case, checked, self.max_records), self.copy.verdict(case, checked)
                self.outcomes[case.name].divergence = "\n".join(api.differences(cli)) or None
        results = {**self.outcomes, **self.broken}
        return [results[case.name] for case in self.cases]


def precompile(batches: list[Batch]) -> None:
    """Compile the modules of several batches at once: two compiler threads keep both CPU cores busy.

    A module that does not compile is left to ``Batch.compile``, which finds the kernel responsible.
    """
    modules = sorted({m for batch in batches for m in batch.modules}, key=lambda m: m.name)
    with contextlib.suppress(Exception):
        wp.force_load(device="cpu", modules=modules, max_workers=2)


def run(
    seed: int,
    count: int,
    batch_size: int = 50,
    start: int = 0,
    progress: Callable[[Summary, list[Outcome]], None] | None = None,
    wave: int = 4,
    max_records: int | None = None,
    cli: bool = False,
) -> Summary:
    """Generate and check kernels ``start .. start+count-1`` of the stream ``seed`` (``check_cases``)."""
    cases = [generate_kernel(seed, i) for i in range(start, start + count)]
    return check_cases(cases, batch_size, progress, wave, max_records, cli)


def check_cases(
    cases: list[KernelCase],
    batch_size: int = 50,
    progress: Callable[[Summary, list[Outcome]], None] | None = None,
    wave: int = 4,
    max_records: int | None = None,
    cli: bool = False,
) -> Summary:
    """Check generated kernels, ``batch_size`` to a file; batches are prepared ``wave`` at a time, their modules
    compiled together, then checked one by one. ``max_records``: wp_rewrite's option for every kernel (None: each
    launch counts its loops' trips). ``cli``: each file also through the command line, whose verdict on each
    kernel must be the API's (``Outcome.divergence``)."""
    summary = Summary()
    batches_of_cases = [cases[first : first + batch_size] for first in range(0, len(cases), batch_size)]
    with tempfile.TemporaryDirectory(prefix="wp-fuzz-") as directory:
        for w in range(0, len(batches_of_cases), wave):
            batches = [Batch(batch, Path(directory), max_records, cli) for batch in batches_of_cases[w : w + wave]]
            precompile(batches)
            for batch in batches:
                outcomes = batch.check()
                summary.outcomes.extend(outcomes)
                if progress is not None:
                    progress(summary, outcomes)
    return summary
