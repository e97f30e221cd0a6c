"""``wp-rewrite --check``: every use of an atomic's returned value in a codebase, found without importing it.

The codes, as ruff's conventions go (``--select``/``--ignore`` take codes and prefixes, ``# noqa: WR001``):

    WR001  a kernel uses the value returned by a Warp atomic;
    WR002  a ``@wp.func`` helper does;
    WR003  a kernel calls a helper that does (in this file, through its imports, a factory's closure, a class or
           ``wp.static(...)``), at any depth;
    WR004  ``wp.launch`` launches a kernel that ``wp-rewrite`` rewrote through the original, not its rewritten
           launch (a block of a version that did not bind the kernel's name to the rewritten kernel);
    WR005  a kernel calls a helper the check cannot follow (a factory's parameter, ``wp.static`` of a value known
           only at run time, a module whose file is not found): a possible hazard, informational unless selected
           by name (``--select WR005``, ``--extend-select WR005``);
    WR006  a block ``wp-rewrite`` generated is stale: its kernel, a helper it calls or its options changed since
           (the begin marker's fingerprint differs);
    WR007  a kernel or helper uses the tile a tile atomic returns (``wp.tile_atomic_add``), which the rewrite does
           not support;
    WR008  a kernel holds (itself or in a helper it calls) a loop Warp does not unroll and whose backward it replays
           wrong: a local carried out of it or from trip to trip, a ``while``, a ``break``/``continue``
           (``passes.loop_hazards``);
    WR009  a kernel reads (itself or in a helper it calls) an array its launch updates with an atomic or ``+=``, or
           an element it then stores into, where the value read is used other than linearly: Warp's backward
           replays the read against the launch's final memory (``passes.fence.Fence.reads_written``);
    WR101  (informational, off by default) a consumed return (WR001-WR003, WR007) in a kernel without a backward pass
           (``enable_backward=False``, its own or its Warp module's), in a helper of a module without one, in a
           helper only such kernels or rewritten ones call, or in one passed as a function value only to factories
           of such kernels (``warp_rewrite.cli.function_values``): not a hazard;
    WR102  (informational, off by default) a helper that consumes an atomic's return and has a hand-written
           ``@wp.func_replay``: Warp's backward calls the replay, so it is not a hazard;
    WR103  (informational, off by default) WR008 in a kernel without a backward pass: not a hazard.
    E999   a file that does not parse (always reported).
"""

from __future__ import annotations

import ast
import enum
import importlib.resources
import io
import keyword
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from warp_rewrite.cli.elision import ElidedBody
from warp_rewrite.cli.function_values import only_to_kernels_without_backward
from warp_rewrite.cli.hazards import HazardFinder, HelperLoop, Unknown, launched_kernel
from warp_rewrite.cli.project import SEARCHED, Project, Unfollowed
from warp_rewrite.cli.scopes import Scope
from warp_rewrite.cli.source_file import ParseError, Region
from warp_rewrite.cli.staleness import stale
from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.passes.atomics import TILE_ATOMIC_RETURN
from warp_rewrite.passes.loop_hazards import LoopHazard
from warp_rewrite.passes.syntax import called_name, walk

_WRONG = "gradients through it are wrong in plain Warp"
_REWRITE = "run wp-rewrite on this file, or launch wp_rewrite({name}) (enable_backward=False if it needs no gradient)"
_INFORMATIONAL = "not a hazard, nothing to fix"
CODES = {
    "WR001": "kernel '{name}' uses the value returned by wp.atomic_{op}(); " + _WRONG + ": " + _REWRITE,
    "WR002": "helper '{name}' uses the value returned by wp.atomic_{op}(); " + _WRONG + ": run wp-rewrite on the files "
    "of the kernels that call it, or launch them with wp_rewrite()",
    "WR003": "kernel '{name}' calls helper '{helper}', which uses the value returned by wp.atomic_{op}() ({where}); "
    + _WRONG
    + ": "
    + _REWRITE,
    "WR004": "wp.launch() launches kernel '{name}' itself, which wp-rewrite rewrote ({where}): its gradients are "
    "wrong in plain Warp; call {launch}(...) instead",
    "WR005": "kernel '{name}' calls {callee} '{helper}'{through}, {reason}, which wp-rewrite cannot follow from the "
    "source: if it uses an atomic's returned value, " + _WRONG + "; launch wp_rewrite({name}), which sees it at run "
    "time, or add # noqa: WR005 if it does not",
    "WR006": "the block wp-rewrite generated for kernel '{name}' (line {line}) is stale: the kernel, a helper it calls "
    "or the options changed since, so its rewritten launch would run the old code and importing the module raises "
    "RewriteError; re-run wp-rewrite on this file to regenerate the block",
    "WR007": "{kind} '{name}' uses the tile returned by wp.{builtin}(); "
    + _WRONG
    + ", and wp-rewrite does not support "
    "it yet: " + TILE_ATOMIC_RETURN + "; if it needs no gradient, set enable_backward=False or add # noqa: WR007",
    "WR008": "kernel '{name}' {holds} a loop Warp does not unroll that {why}: "
    + _WRONG
    + " (Warp's documented limitation of such loops): "
    + _REWRITE,
    "WR009": "kernel '{name}' reads {arrays}, which its launch also writes (an atomic or +=, or a store into the "
    "element read, after it, where the value read is used other than linearly): Warp's backward replays the read "
    "against what the whole launch left there, so " + _WRONG + ": " + _REWRITE,
    "WR101": "{kind} '{name}' uses the value returned by wp.{builtin}(){through}, but {why}: " + _INFORMATIONAL,
    "WR102": "helper '{name}' uses the value returned by wp.atomic_{op}() and has a hand-written @wp.func_replay: "
    + _INFORMATIONAL,
    "WR103": "kernel '{name}' {holds} a loop Warp does not unroll that {why}, but {disabled}: " + _INFORMATIONAL,
    "E999": "SyntaxError: {message}",
}
ERRORS = ("WR0", "E999")  # what "Found N errors" counts and what makes the exit status 1; WR1xx are informational
# Possible hazards: reported by default but informational, unless a selector names them (``--select WR005``).
UNLESS_NAMED = ("WR005",)
DEFAULT_SELECT = ("WR0",)
# Each code's page (docs/rules/CODE.md), installed with the package: there is no hosted site to link to.
RULE_PAGES = importlib.resources.files("warp_rewrite.rules")


def rule_url(code: str) -> str:
    """The ``file://`` URL of the page of ``code`` shipped with the installed package, which a browser opens."""
    return Path(str(RULE_PAGES / f"{code}.md")).as_uri()


@dataclass(frozen=True)
class Finding:
    """One diagnostic, with ruff's fields: 1-based rows and columns (in characters), end exclusive."""

    code: str
    message: str
    display: str  # the path as the user gave it
    path: Path
    row: int
    column: int
    end_row: int
    end_column: int

    def __str__(self) -> str:
        return f"{self.display}:{self.row}:{self.column}: {self.code} {self.message}"


def _finding(module: StaticModule, code: str, node: ast.expr | ast.stmt, **fields: str) -> Finding:
    # ast.parse sets every end position; typeshed allows None for nodes built by hand.
    end_row = node.end_lineno if node.end_lineno is not None else node.lineno
    end_column = node.end_col_offset if node.end_col_offset is not None else node.col_offset
    return Finding(
        code,
        CODES[code].format(**fields),
        module.display,
        module.path,
        node.lineno,
        module.column(node.lineno, node.col_offset),
        end_row,
        module.column(end_row, end_column),
    )


def syntax_error(error: ParseError, path: Path) -> Finding:
    return Finding(
        "E999",
        CODES["E999"].format(message=error.message),
        error.display,
        path,
        error.line,
        error.column,
        error.line,
        error.column,
    )


def _loop_findings(
    module: StaticModule,
    kernel: ast.FunctionDef,
    hazards: list[LoopHazard],
    through_helpers: list[HelperLoop],
    disabled: str | None,
) -> list[Finding]:
    """WR008 (or WR103 where Warp builds no backward) for each loop of the kernel Warp's backward replays wrong, and
    for each call of a helper that holds one."""
    code, extra = ("WR103", {"disabled": disabled}) if disabled else ("WR008", {})
    findings = []
    for hazard in hazards:
        findings.append(_finding(module, code, hazard.loop, name=kernel.name, holds="holds", why=hazard.why(), **extra))
    for loop in through_helpers:
        holder = "" if loop.holder == loop.helper else f" (through '{loop.holder}')"
        holds = f"calls helper '{loop.helper}'{holder}, which holds"
        why = f"its backward replays wrong ({loop.where})"
        findings.append(_finding(module, code, loop.call, name=kernel.name, holds=holds, why=why, **extra))
    return findings


def _unknown_fields(unknown: Unknown) -> dict[str, str]:
    miss = unknown.miss
    through = f" (through helper '{unknown.via}')" if unknown.via else ""
    fields = {"helper": miss.helper, "through": through, "callee": miss.callee.value}
    if isinstance(miss, Unfollowed):
        return fields | {"reason": f"imported from '{miss.module}', whose file was not found ({SEARCHED})"}
    return fields | {"reason": miss.reason}


class Caller(enum.Enum):
    """What a kernel that calls a helper is, for the helper's findings."""

    BACKWARD = enum.auto()  # a kernel with a backward pass, not rewritten: the helper is a hazard there
    NO_BACKWARD = enum.auto()
    REWRITTEN = enum.auto()  # with a block wp-rewrite generated, whose launch runs the helper's clones


# Why a helper is no hazard (WR101) where only such kernels call it.
_CALLED_ONLY_BY = {
    frozenset({Caller.NO_BACKWARD}): "only kernels without a backward pass call it",
    frozenset({Caller.REWRITTEN}): "only kernels wp-rewrite rewrote call it",
    frozenset({Caller.NO_BACKWARD, Caller.REWRITTEN}): "only kernels without a backward pass or that wp-rewrite "
    "rewrote call it",
}


class Checker:
    """The findings of a set of files: kernels first, for every file (which also tells which kernels call each
    helper), then helpers."""

    def __init__(self, project: Project):
        self.project = project
        self.finder = HazardFinder(project)
        self._callers: dict[int, set[Caller]] = {}  # helper -> what the kernels calling it are

    def kernels(self, module: StaticModule) -> list[Finding]:
        """WR001, WR003, WR004, WR005, WR006 and WR101 of the file's kernels and launches.

        Kernels that already have a generated block are only checked for staleness (WR006): their
        ``launch_<kernel>`` handles the rest.
        """
        findings = []
        for kernel in module.kernels():
            region = module.region_of(kernel)
            if region is not None:
                if stale(module, kernel, region, self.finder, region.options):
                    findings.append(_finding(module, "WR006", kernel, name=kernel.name, line=str(region.first)))
                for helper in self.finder.kernel_calls(module, kernel).reached:
                    self._callers.setdefault(helper, set()).add(Caller.REWRITTEN)
                continue
            calls = self.finder.kernel_calls(module, kernel)
            disabled = module.backward_disabled(kernel)
            for helper in calls.reached:
                self._callers.setdefault(helper, set()).add(Caller.NO_BACKWARD if disabled else Caller.BACKWARD)
            for call in module.consumed(kernel):
                if disabled:
                    findings.append(
                        _finding(
                            module,
                            "WR101",
                            call.node,
                            kind="kernel",
                            name=kernel.name,
                            builtin=f"atomic_{call.op}",
                            through="",
                            why=disabled,
                        )
                    )
                else:
                    findings.append(_finding(module, "WR001", call.node, name=kernel.name, op=call.op))
            findings += _tile_findings(module, kernel, "kernel", disabled)
            hazards = self.finder.loop_hazards(module, kernel)
            findings += _loop_findings(module, kernel, hazards, calls.loops, disabled)
            # The kernel's hazard where it has no other (with one, it is rewritten, and the read recorded, anyway)
            others = module.consumed(kernel) or hazards or calls.loops or calls.hazards
            if not disabled and not others and (written := self.finder.reads_written(module, kernel)):
                arrays = " and ".join(f"'{path}'" for path in sorted(written))
                findings.append(_finding(module, "WR009", kernel, name=kernel.name, arrays=arrays))
            for hazard in calls.hazards:
                where = f"at {hazard.where}"
                if hazard.consumer != hazard.helper:
                    where = f"in helper '{hazard.consumer}' at {hazard.where}"
                if disabled:
                    findings.append(
                        _finding(
                            module,
                            "WR101",
                            hazard.call,
                            kind="kernel",
                            name=kernel.name,
                            builtin=f"atomic_{hazard.op}",
                            through=f" through helper '{hazard.helper}'",
                            why=disabled,
                        )
                    )
                else:
                    findings.append(
                        _finding(
                            module,
                            "WR003",
                            hazard.call,
                            name=kernel.name,
                            helper=hazard.helper,
                            op=hazard.op,
                            where=where,
                        )
                    )
            if not disabled:
                for unknown in calls.unknown:
                    findings.append(
                        _finding(module, "WR005", unknown.call, name=kernel.name, **_unknown_fields(unknown))
                    )
        return findings + launches_of_rewritten_kernels(module, self.project)

    def helpers(self, module: StaticModule) -> list[Finding]:
        """WR002, WR101 and WR102 of the file's helpers, once ``kernels`` has seen every file: a helper that
        only kernels without a backward pass call is no hazard (one no kernel calls is, wherever it is used)."""
        findings = []
        for helper in module.all_helpers():
            callers = self._callers.get(id(helper), set())
            consumed = module.consumed(helper)
            why = _CALLED_ONLY_BY.get(frozenset(callers)) if callers else module.module_backward_disabled()
            if not callers and not why and consumed and not module.has_replay(helper):
                why = only_to_kernels_without_backward(self.project, module, helper)
            for call in consumed:
                if module.has_replay(helper):
                    findings.append(_finding(module, "WR102", call.node, name=helper.name, op=call.op))
                elif why:
                    builtin = f"atomic_{call.op}"
                    findings.append(
                        _finding(
                            module,
                            "WR101",
                            call.node,
                            kind="helper",
                            name=helper.name,
                            builtin=builtin,
                            through="",
                            why=why,
                        )
                    )
                else:
                    findings.append(_finding(module, "WR002", call.node, name=helper.name, op=call.op))
            if not module.has_replay(helper):
                findings += _tile_findings(module, helper, "helper", why)
        return findings


def _tile_findings(module: StaticModule, function: ast.FunctionDef, kind: str, why: str | None) -> list[Finding]:
    """WR007 for each tile atomic whose returned tile ``function`` uses; WR101 instead where ``why`` says Warp
    builds no backward that runs it."""
    findings = []
    for call in module.consumed_tiles(function):
        fields = {"kind": kind, "name": function.name, "builtin": called_name(call) or ""}
        if why:
            findings.append(_finding(module, "WR101", call, **fields, through="", why=why))
        else:
            findings.append(_finding(module, "WR007", call, **fields))
    return findings


def sort_key(finding: Finding) -> tuple[int, int, str]:
    return finding.row, finding.column, finding.code


def launches_of_rewritten_kernels(module: StaticModule, project: Project) -> list[Finding]:
    """WR004: ``wp.launch(k, ...)`` where ``k`` (in this file or imported) has a block generated by wp-rewrite.

    The launches in a body ``--check`` left out (``ElidedBody.launches``) are first read from their text, in the
    scopes around the body: a name they launch resolves there to what it resolves to in the body, or the body
    binds it (not to a kernel: an import there makes the text unusable). Only where one may launch a rewritten
    kernel is the body parsed and its launches checked as those of the tree."""
    for body, definition in module.elided_definitions():
        if body.launches != () and _may_launch_rewritten(module, project, body, definition):
            module.full_body(definition)
    restored = [node for definition in module.restored for statement in definition.body for node in walk(statement)]
    calls = module.calls + [node for node in restored if isinstance(node, ast.Call)]
    return [found for call in calls if (found := _wr004(module, project, call))]


def _wr004(module: StaticModule, project: Project, call: ast.Call) -> Finding | None:
    if not module.warp.is_warp(call.func, "launch") or module.generated(call):
        return None
    found = _launched_rewritten(module, project, call, module.scopes(call))
    if found is None:
        return None
    owner, kernel, launch, region = found
    where = f"{owner.display}:{region.first}"
    return _finding(module, "WR004", call, name=kernel.name, where=where, launch=launch)


def _launched_rewritten(
    module: StaticModule, project: Project, call: ast.Call, scopes: list[Scope]
) -> tuple[StaticModule, ast.FunctionDef, str, Region] | None:
    """The kernel ``call`` launches, its launch and block, where a block of a version that did not rebind the
    kernel's name holds it (a rebound name launches the rewritten kernel)."""
    argument = launched_kernel(call)
    found = project.kernel_named(module, argument, scopes) if argument is not None else None
    if found is None:
        return None
    owner, kernel = found
    launch, region = owner.launch_name(kernel), owner.region_of(kernel)
    if launch is None or region is None or owner.rebinds(kernel):
        return None
    return owner, kernel, launch, region


def _may_launch_rewritten(
    module: StaticModule, project: Project, body: ElidedBody, definition: ast.FunctionDef
) -> bool:
    """True unless each launch of the left-out ``body`` (read from its text) launches no kernel of a block."""
    if body.launches is None:
        return True
    scopes = [definition, *module.scopes(definition)]
    for arguments in body.launches:
        call = _launch_call(arguments)
        if call is None or _launched_rewritten(module, project, call, scopes) is not None:
            return True
    return False


# ``(k, ...`` and ``(sim.k, ...``: the kernel argument of most launches, and all that WR004 reads of them.
_NAMED_KERNEL = re.compile(r"\(\s*([A-Za-z_][A-Za-z0-9_]*)(?:\s*\.\s*([A-Za-z_][A-Za-z0-9_]*))?\s*[,)]")


def _launch_call(arguments: str) -> ast.Call | None:
    """A call of the argument list ``arguments`` (``ElidedBody.launches``); None where it does not parse. Where the
    kernel argument is a plain name or attribute, only it is read: ``launched_kernel`` reads no more of a call
    whose first argument is positional, and the rest of the list (the inputs) is most of what a parse would read."""
    named = _NAMED_KERNEL.match(arguments)
    if named is not None and not any(keyword.iskeyword(name) for name in named.groups() if name):
        kernel: ast.expr = ast.Name(named[1], ast.Load())
        if named[2] is not None:
            kernel = ast.Attribute(kernel, named[2], ast.Load())
        return ast.Call(ast.Name("_", ast.Load()), [kernel], [])
    try:
        call = ast.parse("_" + arguments, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):  # a masked string across lines holds a null byte
        return None
    return call if isinstance(call, ast.Call) else None


# --- which findings are shown: --select/--ignore and noqa ----------------------------------------------------------


class SelectorError(ValueError):
    """A ``--select``/``--ignore`` entry that is neither a code, a prefix of one, nor ``ALL``."""


@dataclass(frozen=True)
class Selection:
    """Which codes are shown, as ruff decides it: the most specific matching prefix wins, ``--ignore`` on a tie,
    and over the default selection (``--ignore WR`` hides everything); ``E999`` always."""

    select: tuple[str, ...] = ()  # given by the user
    ignore: tuple[str, ...] = ()
    default: tuple[str, ...] = DEFAULT_SELECT  # where nothing is selected explicitly

    def __post_init__(self):
        for selector in (*self.select, *self.ignore):
            if selector != "ALL" and not any(code.startswith(selector) for code in CODES if code != "E999"):
                raise SelectorError(f"unknown rule selector '{selector}' (codes: {', '.join(CODES)})")

    @staticmethod
    def _specificity(selectors: tuple[str, ...], code: str) -> int:
        matches = [0 if s == "ALL" else len(s) for s in selectors if s == "ALL" or code.startswith(s)]
        return max(matches, default=-1)

    def is_error(self, code: str) -> bool:
        """True for the codes that are hazards (or a file that does not parse), not informational findings: also
        ``UNLESS_NAMED``'s where a selector names them (the code or a prefix longer than the default's)."""
        if code in UNLESS_NAMED:
            default = max(map(len, DEFAULT_SELECT))
            return any(code.startswith(s) and len(s) > default for s in self.select if s != "ALL")
        return code.startswith(ERRORS)

    def __contains__(self, code: str) -> bool:
        if code == "E999":
            return True
        selected = self._specificity(self.select, code)
        if selected < 0 and any(code.startswith(s) for s in self.default):
            selected = 0
        return selected > self._specificity(self.ignore, code)


_NOQA = re.compile(r"#\s*noqa(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


def noqa_lines(text: str) -> dict[int, frozenset[str] | None]:
    """The lines with a ``# noqa`` comment: the codes it names, or None for a bare ``# noqa`` (every code)."""
    lines = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and (match := _NOQA.search(token.string)):
                codes = match.group("codes")
                lines[token.start[0]] = frozenset(re.split(r"[,\s]+", codes.upper())) if codes else None
    except (tokenize.TokenError, SyntaxError):
        pass  # a file that does not tokenize does not parse either: it has only its E999
    return lines


def noqa_of(module: StaticModule, findings: list[Finding]) -> dict[int, frozenset[str] | None]:
    """``noqa_lines`` of the file where the line of one of ``findings`` mentions ``noqa``, else none: tokenizing a
    file is slow, and a comment on any other line silences nothing of these."""
    if not findings:
        return {}  # ``lines`` is not split for a file with nothing to silence
    lines = module.lines
    if any(0 < f.row <= len(lines) and "noqa" in lines[f.row - 1].lower() for f in findings):
        return noqa_lines(module.text)
    return {}


def suppressed(finding: Finding, noqa: dict[int, frozenset[str] | None]) -> bool:
    if finding.code == "E999" or finding.row not in noqa:
        return False
    codes = noqa[finding.row]
    return codes is None or finding.code in codes
