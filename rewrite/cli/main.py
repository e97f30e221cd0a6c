"""The ``wp-rewrite`` command line (also ``python -m warp_rewrite``).

    wp-rewrite FILE.py [-o OUT.py | --in-place | --diff] [--max-records N] [--detach-returns]
    wp-rewrite PATH... (--in-place | --diff | -o DIR) [--max-records N] [--detach-returns]
    wp-rewrite --check PATH... [--select CODES] [--ignore CODES] [--output-format concise|json|github] [--exit-zero]

Rewrite mode writes FILE.py unchanged, plus, right after each kernel ``k`` that uses a value an atomic returns, a
block with the kernels ``k_record`` and ``k_replay`` (and clones of the helpers they call), ``k_rewritten`` (the
``RewrittenKernel`` of the API) and ``launch_k = k_rewritten.launch``, which takes ``wp.launch``'s arguments (and
``max_records=``) and behaves on a tape as the API does; the block ends with ``k = k_rewritten``, so every name of
the kernel launches both phases, and the file's ``wp.launch(k, ...)`` calls become ``launch_k(...)``. A kernel made
inside a function gets its block there. The blocks call warp-rewrite's runtime, which the output imports from the
folder ``wp_rewrite_runtime/`` of its package's root folder (beside it, for a script): ``-o`` and ``--in-place``
write (or update) that folder, a copy of the package ``warp_rewrite/runtime/`` (warp, numpy and the standard library
its only imports), so the output runs without this project installed. Without ``-o`` the module goes to stdout;
``--diff`` prints a unified diff instead (with the runtime folder). ``--in-place``, ``--diff`` and ``-o DIR`` also
take several files and folders (``-o DIR``: the whole tree, as ``cp -r`` copies it, with its Python files
rewritten), with progress on a terminal and a summary line. Kernels the rewrite refuses are reported and left as
they are; the others are rewritten. Running it on its own output changes nothing, but for blocks whose kernel,
helpers or options changed since (their marker's fingerprint differs): those are generated again, as a deleted
block is. Nothing is written before every file is done (``warp_rewrite.cli.writes``): an interrupted or failed run
leaves every file as it was.

Check mode reports, without importing or running anything, every use of an atomic's returned value, with the
codes of ``warp_rewrite.cli.lint`` (``WR001``-``WR007`` by default, ``WR005`` informational unless selected by name,
``WR101``/``WR102`` informational), ruff's way: ``# noqa`` and ``# noqa: WR001`` on the reported line,
``--select``/``--ignore``/``--extend-select`` with codes or prefixes (``WR00``, ``ALL``), ``--exclude`` and
``--extend-exclude``, the ``[tool.wp-rewrite]`` table of ``pyproject.toml`` (``warp_rewrite.cli.settings``), three
output formats, a summary line on stderr.

Exit status: 0 success / no finding (or ``--exit-zero``); 1 findings, including ``E999`` for a file that does not
parse (``--check``), or a kernel the rewrite refuses (rewrite mode: the file is still written, with the others
rewritten); 2 usage errors, missing or unreadable paths, a file to rewrite that does not parse, a failed write;
130 and 143 when interrupted by SIGINT or SIGTERM; 141 when stdout is closed early (``wp-rewrite --diff FILE | head``).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import enum
import gc
import json
import os
import shutil
import signal
import sys
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from warp_rewrite.cli.finding_formats import github_line, json_finding
from warp_rewrite.cli.lint import (
    DEFAULT_SELECT,
    Checker,
    Finding,
    Selection,
    SelectorError,
    noqa_of,
    sort_key,
    suppressed,
    syntax_error,
)
from warp_rewrite.cli.project import Project
from warp_rewrite.cli.settings import TABLE, Exclusion, Settings, SettingsError
from warp_rewrite.cli.source_file import ParseError, SourceFile
from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.cli.tree_walk import excluded, walk_python_files
from warp_rewrite.cli.writes import Writes, runtime_diff
from warp_rewrite.passes.naming import RUNTIME_FOLDER

if TYPE_CHECKING:  # the rewrite mode's modules import Warp (about a second): --check never loads them
    from warp_rewrite.cli.emit import Emitted

OK, FINDINGS, USAGE, BROKEN_PIPE = 0, 1, 2, 141
FORMATS = ("concise", "json", "github")


class UserError(Exception):
    """A problem with what the user asked for: printed as one line, exit status 2, no traceback."""


# --- options -------------------------------------------------------------------------------------------------------


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _selectors(text: str) -> list[str]:
    return [part.strip().upper() for part in text.split(",") if part.strip()]


def _patterns(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


class _Version(argparse.Action):
    """``--version``, which reads the runtime's version only when asked: the runtime imports Warp."""

    def __call__(self, parser, namespace, values, option_string=None):
        from warp_rewrite import runtime

        print(f"wp-rewrite {runtime.__version__}")  # on stdout, as argparse's own version action prints it
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wp-rewrite",
        description="Make Warp kernels that use atomics' returned values differentiable, as a standalone module; "
        "with --check, find them in a codebase.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or folders (stdout takes one file)")
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    parser.add_argument("-q", "--quiet", action="store_true", help="print no summary line")
    parser.add_argument(
        "--exclude",
        type=_patterns,
        metavar="PATTERNS",
        help="files and folders to leave out of folders, comma separated globs, as ruff's (replaces the default: "
        "tool and environment folders such as .venv, dist, site-packages)",
    )
    parser.add_argument(
        "--extend-exclude", type=_patterns, metavar="PATTERNS", help="files and folders to leave out besides those"
    )
    parser.add_argument(
        "--force-exclude", action="store_true", help="leave out what the exclusions match also among the paths named"
    )
    parser.add_argument("--isolated", action="store_true", help=f"ignore the [tool.{TABLE}] table of pyproject.toml")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--check",
        action="store_true",
        help="report uses of atomic returns and stale generated blocks (WR001-WR007); write nothing",
    )
    mode.add_argument(
        "--diff",
        action="store_true",
        help="print a unified diff instead of the rewritten file (with the runtime folder, as new files)",
    )
    rewrite = parser.add_argument_group("rewriting a file")
    target = rewrite.add_mutually_exclusive_group()
    target.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="write the rewritten module to the file OUT.py, or the "
        "rewritten tree into the folder OUT/ (several paths, a folder, or an existing folder OUT/)",
    )
    target.add_argument("--in-place", action="store_true", help="rewrite FILE.py itself")
    rewrite.add_argument(
        "--max-records",
        type=_positive,
        metavar="N",
        help="records per execution of a loop of unknown length "
        "(default: counted by a dry run at each launch); launch_<kernel>(max_records=...) overrides it",
    )
    rewrite.add_argument(
        "--detach-returns",
        action="store_true",
        help="record float returns as constants instead of giving them exact gradients (as wp_rewrite's option)",
    )
    check = parser.add_argument_group("--check")
    check.add_argument(
        "--select",
        type=_selectors,
        metavar="CODES",
        help="codes or prefixes to report, comma separated (default: WR0, i.e. WR001-WR007; ALL: every code)",
    )
    check.add_argument("--extend-select", type=_selectors, metavar="CODES", help="codes to report besides those")
    check.add_argument("--ignore", type=_selectors, metavar="CODES", help="codes or prefixes not to report")
    check.add_argument(
        "--output-format",
        choices=FORMATS,
        help="concise (default): path:line:col: CODE message; json: as ruff's; github: workflow annotations",
    )
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    return parser


_CHECK_ONLY = ("select", "extend_select", "ignore", "output_format", "exit_zero")
_REWRITE_ONLY = {
    "output": "-o",
    "in_place": "--in-place",
    "max_records": "--max-records",
    "detach_returns": "--detach-returns",
    "diff": "--diff",
}


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The options, with the project's settings under them (``args.settings``, ``args.exclusion``), or
    ``SystemExit`` (status 2, usage printed) for options that contradict each other or settings that cannot be
    read."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        args.settings = Settings() if args.isolated else Settings.find()
    except SettingsError as error:
        parser.error(str(error))
    args.exclusion = args.settings.exclusion(args.exclude, args.extend_exclude)
    args.force_exclude = args.force_exclude or args.settings.force_exclude
    given = [flag for name, flag in _REWRITE_ONLY.items() if getattr(args, name)]
    if args.check and given:
        parser.error(f"--check writes nothing and rewrites nothing: it cannot be combined with {', '.join(given)}")
    if not args.check:
        misplaced = [f"--{name.replace('_', '-')}" for name in _CHECK_ONLY if getattr(args, name)]
        if misplaced:
            parser.error(f"{', '.join(misplaced)} only go with --check")
        if len(args.paths) != 1 and not (args.in_place or args.diff or args.output):
            parser.error("several paths are rewritten with --in-place, --diff or -o DIR (stdout takes one file)")
        if args.diff and (args.output or args.in_place):
            parser.error("--diff prints to stdout: it cannot be combined with -o or --in-place")
        return args
    table = args.settings.lists
    # --select replaces the table's select and extend-select; its ignore stays, and the options add to them
    select = tuple(args.select) if args.select is not None else tuple(map(str.upper, table.get("select", ())))
    extend = () if args.select is not None else tuple(map(str.upper, table.get("extend-select", ())))
    extend += tuple(args.extend_select or ())
    ignore = tuple(map(str.upper, table.get("ignore", ()))) + tuple(args.ignore or ())
    try:
        args.selection = Selection(select + extend, ignore, () if select else DEFAULT_SELECT)
    except SelectorError as error:
        parser.error(f"{error}{f' (in {args.settings.source})' if args.settings.source else ''}")
    output_format = args.output_format or args.settings.output_format
    if output_format is not None and output_format not in FORMATS:
        parser.error(f"{args.settings.source}: output-format: '{output_format}' is not one of {', '.join(FORMATS)}")
    args.output_format = output_format
    return args


# --- files -----------------------------------------------------------------------------------------------------


def _read(path: Path, display: str) -> SourceFile:
    if not path.exists():
        raise UserError(f"{display}: no such file or directory")
    try:
        return SourceFile.read(path)
    except (OSError, UnicodeDecodeError, SyntaxError) as error:  # SyntaxError: an unknown PEP 263 encoding
        raise UserError(f"{display}: cannot read: {error}") from None


def _python_files(paths: list[str], exclusion: Exclusion, force: bool) -> Iterator[tuple[Path, str]]:
    """Every ``.py`` file named or under a named folder, sorted; in folders, skipping what ``tree_walk`` skips and what
    ``exclusion`` leaves out (also the files named, with ``force``: ruff's ``--force-exclude``)."""
    for name in paths:
        path = Path(name)
        if not path.exists():
            raise UserError(f"{name}: no such file or directory")
        if force and excluded(path, exclusion):
            continue
        if path.is_file():
            yield path, name
            continue
        found = False
        for file in sorted(walk_python_files(path, exclusion)):
            if file.is_symlink() and not file.exists():  # dangling, or a loop of links
                print(f"wp-rewrite: warning: {file}: a symbolic link to no file, skipped", file=sys.stderr)
            elif file.name != f"{RUNTIME_FOLDER}.py":  # an earlier version's single-file copy
                found = True
                yield file, str(file)
        if not found:
            print(f"wp-rewrite: warning: {name}: no Python files", file=sys.stderr)


# --- --check ---------------------------------------------------------------------------------------------------


# A file can hold a finding only if its code names a kernel (``@wp.kernel``, ``wp.Kernel(...)``), a launch or an
# atomic, or it has a generated block's markers: --check does not parse the other files it finds in folders (parsing
# is most of a run's time; a word only in a docstring or comment does not count), so their syntax errors are left to
# ruff's E999. A file named on the command line is always parsed.
_RELEVANT = ("kernel", "Kernel", "launch", "atomic_")


def _names_relevant(text: str) -> bool:
    """True if ``text`` may name a word of ``_RELEVANT``, also as Python reads identifiers (``wp.ｋernel`` is
    ``wp.kernel``: NFKC)."""
    if any(word in text for word in _RELEVANT):
        return True
    return not text.isascii() and any(word in unicodedata.normalize("NFKC", text) for word in _RELEVANT)


def run_check(args: argparse.Namespace, held: list[object] | None = None) -> int:
    """Print every selected finding not silenced by ``noqa``; 1 if any, 2 if a file could not be read.

    Every file is read first and its kernels checked, then its helpers: whether a helper is a hazard depends on
    the kernels that call it, wherever they are. Each file is parsed once (``Project.load``), also where it is
    another's helper; the garbage collector is paused meanwhile, as syntax trees make millions of objects and no
    cycles (it would otherwise take most of the run). ``held``: where the run's project (its syntax trees) is put
    for the caller to free, or not (``command``).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _check(args, held)
    finally:
        if held:
            gc.freeze()  # else the first collection after enabling it walks every held tree (a tenth of a run)
        if collecting:
            gc.enable()


def _check(args: argparse.Namespace, held: list[object] | None) -> int:
    project, status, unreadable = Project(for_check=True), OK, 0
    if held is not None:
        held.append(project)
    checker, output_format = Checker(project), args.output_format or "concise"
    files: list[tuple[StaticModule | None, list[Finding]]] = []
    paths = list(_python_files(args.paths, args.exclusion, args.force_exclude))
    if not paths and args.force_exclude and all(excluded(Path(name), args.exclusion) for name in args.paths):
        print("wp-rewrite: warning: every path named is excluded (--force-exclude): nothing to check", file=sys.stderr)
        return OK  # as ruff: a pre-commit hook handed only excluded files passes
    if not paths:
        raise UserError(f"no Python files in {', '.join(args.paths)}: nothing to check")
    sources: list[tuple[Path, Path, str, SourceFile, tuple[str, ...]]] = []  # (path, resolved, display, source, needs)
    named = {project.real(Path(name)) for name in args.paths}
    for path, display in paths:
        try:
            source = _read(path, display)
        except UserError as error:
            print(f"wp-rewrite: error: {error}", file=sys.stderr)
            status, unreadable = USAGE, unreadable + 1
            continue
        resolved = project.real(path)
        project.displays.setdefault(resolved, display)
        if resolved in named:
            sources.append((path, resolved, display, source, ()))
        elif _names_relevant(source.text):
            sources.append((path, resolved, display, source, _RELEVANT))
    for path, resolved, display, source, needs in sources:
        module = project.modules.get(resolved)
        if module is None:
            try:
                module = StaticModule.parse_for_check(path, display, source.text, source.encoding, needs)
            except ParseError as error:
                files.append((None, [syntax_error(error, path)]))
                continue
            if module is None:
                continue  # the words are only in its strings and comments
            project.modules[resolved] = module
        files.append((module, checker.kernels(module)))
    shown = []
    for read, found in files:
        if read is not None:
            found = sorted((f for f in found + checker.helpers(read) if f.code in args.selection), key=sort_key)
            noqa = noqa_of(read, found)
            found = [f for f in found if not suppressed(f, noqa)]
        for finding in found:
            if output_format == "concise":
                print(finding)
            elif output_format == "github":
                print(github_line(finding))
        shown += found
    if output_format == "json":
        print(json.dumps([json_finding(f) for f in shown], indent=2))
    errors = sum(args.selection.is_error(f.code) for f in shown)
    if not args.quiet:
        print(_check_summary(errors, len(shown) - errors, unreadable), file=sys.stderr)
    if status == USAGE:
        return USAGE
    return FINDINGS if errors and not args.exit_zero else OK


def _check_summary(errors: int, informational: int, unreadable: int) -> str:
    """The line ``--check`` ends with: the hazards found (informational findings counted apart) and the files it
    could not read, if any; "All checks passed!" only where every file was read and none has a hazard."""
    parts = [f"Found {_plural(errors, 'error')}" if errors or unreadable else "All checks passed!"]
    if informational:
        parts.append(
            f"{_plural(informational, 'informational finding')} printed (not "
            f"{'a hazard' if informational == 1 else 'hazards'})"
        )
    if unreadable:
        parts.append(f"{_plural(unreadable, 'file')} could not be read (see above)")
    text = parts[0] if len(parts) == 1 else f"{parts[0].rstrip('!.')}; {'; '.join(parts[1:])}"
    return text if text.endswith(("!", ".")) else text + "."


# --- rewriting -------------------------------------------------------------------------------------------------


def _same_file(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


def _summary(display: str, emitted: Emitted, written: Path | None) -> str:
    """The one line that says what the run did."""
    done = []
    fresh = [name for name in emitted.rewritten if name not in emitted.regenerated]
    again = [name for name in emitted.rewritten if name in emitted.regenerated]
    if fresh:
        done.append(f"rewrote {_plural(len(fresh), 'kernel')} ({', '.join(fresh)})")
    if again:
        done.append(
            f"regenerated {_plural(len(again), 'stale block')} ({', '.join(again)}: the kernel, a helper or "
            "the options changed since)"
        )
    if emitted.launches:
        done.append(
            f"{_plural(emitted.launches, 'wp.launch call')} now {'call' if emitted.launches != 1 else 'calls'}"
            " the rewritten launch"
        )
    if emitted.constructions:
        done.append(
            f"{_plural(emitted.constructions, 'call')} making a kernel now "
            f"give{'s' * (emitted.constructions == 1)} the rewritten one"
        )
    if emitted.refusals:
        done.append(f"{_plural(len(emitted.refusals), 'kernel')} refused (see above)")
    if emitted.left:
        done.append(f"{_plural(len(emitted.left), 'kernel')} left as plain Warp (see above)")
    if not done and emitted.already:
        done.append(f"already rewritten ({', '.join(emitted.already)}): nothing to change")
    elif not done:
        done.append("no kernel to rewrite (none with a backward pass uses an atomic's returned value)")
    where = f" -> {written}" if written is not None else ""
    return f"{display}{where}: " + "; ".join(done)


def _reason(error: OSError) -> str:
    """Why a write failed, without the name of the temporary file it went through."""
    return error.strerror or str(error)


def _command_line_spelling(message: str) -> str:
    """A refusal as the command line says it: its options by their flags (``--detach-returns``), not as the API's
    keyword arguments (``detach_returns=True``), which the pipeline's messages name."""
    return message.replace("detach_returns=True", _REWRITE_ONLY["detach_returns"])


def package_root(folder: Path, top: Path | None = None) -> Path:
    """The folder whose runtime copy the modules of ``folder`` share: the topmost package folder above it (each on
    the way has an ``__init__.py``), below ``top`` if given (the folder a tree is written from: its own
    ``__init__.py`` is not written), or ``folder`` itself where it is no package (a folder of scripts)."""
    root = folder.absolute()
    while (root / "__init__.py").is_file() and (root.parent / "__init__.py").is_file():
        if root.parent == root or top in (root, root.parent):
            break
        root = root.parent
    return root


def _above(folder: Path, root: Path) -> int:
    """How many folders ``root`` is above ``folder``."""
    return len(folder.absolute().relative_to(root).parts)


@dataclass(frozen=True)
class Target:
    """Where the rewrite of one file goes."""

    source: Path
    display: str
    output: Path | None  # None: stdout, or the diff
    runtime_up: int  # how many folders above the output the runtime copy goes that the module is to import
    copy_if_unparsed: bool = False  # into a tree written with -o: a file that does not parse is copied as it is


@dataclass(frozen=True)
class Tree:
    """What a run over several files does: the files rewritten, and with ``-o DIR`` the rest of the tree, as ``cp
    -r`` copies it (data files, ``py.typed``, licences, empty folders)."""

    targets: list[Target]
    copies: list[tuple[Path, Path]] = field(default_factory=list)  # (source, target)
    folders: list[Path] = field(default_factory=list)  # folders of the output that must exist


class Outcome(enum.Enum):
    """What became of one file of a tree, as the summary line counts it."""

    REWRITTEN = "rewritten"
    UNCHANGED = "unchanged"
    REFUSED = "refused"  # a kernel refused, or the file could not be read or parsed (see its message)


class Progress:
    """Where a tree rewrite on a terminal is: one line at the bottom of stderr, ``[done/total] file``, rewritten in
    place and cleared before anything else is printed (``say``)."""

    def __init__(self, total: int, shown: bool):
        self.total, self.shown, self._on_screen = total, shown, False

    def at(self, done: int, display: str) -> None:
        if not self.shown:
            return
        line = f"[{done}/{self.total}] {display}"
        width = shutil.get_terminal_size().columns - 1
        if len(line) > width > 5:
            line = line[: width - 3] + "..."
        sys.stderr.write(f"\r\x1b[K{line}")
        sys.stderr.flush()
        self._on_screen = True

    def say(self, message: str) -> None:
        if self._on_screen:
            sys.stderr.write("\r\x1b[K")
            self._on_screen = False
        print(message, file=sys.stderr)


def run_rewrite(args: argparse.Namespace) -> int:
    """Rewrite one file (to stdout, ``-o``, ``--in-place`` or ``--diff``) or every ``.py`` file named or under a
    folder named (with ``--in-place``, ``--diff``, or ``-o DIR``, which gets the same tree), each as a run on it
    alone would, with one runtime copy per package (in its root folder) or folder of scripts; the worst status of
    the files. Nothing is written before every file is done (``Writes``): an interrupted run leaves every file as
    it was."""
    with Writes() as writes:
        try:
            status = _rewrite_paths(args, writes)
            writes.commit()  # a signal held off meanwhile is raised at its end, everything written
        except (KeyboardInterrupt, Interrupted) as interruption:
            signum = interruption.signum if isinstance(interruption, Interrupted) else signal.SIGINT
            what = "after every file was written" if writes.committed else "nothing was written"
            raise Interrupted(signum, what) from None
    return status


def _rewrite_paths(args: argparse.Namespace, writes: Writes) -> int:
    single = len(args.paths) == 1 and not Path(args.paths[0]).is_dir()
    if single and not (args.output and Path(args.output).is_dir()):
        source = Path(args.paths[0])
        output = Path(args.output) if args.output else (source if args.in_place else None)
        folder = (output or source).parent
        target = Target(source, args.paths[0], output, _above(folder, package_root(folder)))
        return _rewrite_file(args, target, writes, set(), Progress(1, False))[0]
    if not (args.in_place or args.diff or args.output):
        raise UserError(
            f"{args.paths[0]}: a folder is rewritten with --in-place, --diff or -o DIR (stdout takes one file)"
        )
    tree = _tree(args, writes)
    progress = Progress(len(tree.targets), sys.stderr.isatty() and not args.quiet)
    status, outcomes, diffed = OK, {outcome: 0 for outcome in Outcome}, set[Path]()
    for done, target in enumerate(tree.targets):
        progress.at(done, target.display)
        try:
            file_status, outcome = _rewrite_file(args, target, writes, diffed, progress, in_tree=True)
        except UserError as error:
            progress.say(f"wp-rewrite: error: {error}")
            file_status, outcome = USAGE, Outcome.REFUSED
        status = max(status, file_status)
        outcomes[outcome] += 1
    for source, copy in tree.copies:
        try:
            writes.copy(source, copy)
        except OSError as error:
            progress.say(f"wp-rewrite: error: {copy}: cannot copy {source}: {_reason(error)}")
            status = USAGE
    if not args.quiet:
        counts = [f"{_plural(outcomes[Outcome.REWRITTEN], 'file')} rewritten"]
        counts += [f"{outcomes[outcome]} {outcome.value}" for outcome in (Outcome.UNCHANGED, Outcome.REFUSED)]
        counts.append(f"{len(tree.copies)} copied")
        ending = " (see above)" if outcomes[Outcome.REFUSED] else ""
        progress.say(f"wp-rewrite: {', '.join(counts)}{ending}")
    return status


def _tree(args: argparse.Namespace, writes: Writes) -> Tree:
    """Every file of a tree run, and where it goes. With ``-o DIR``, each file keeps its path relative to the
    folder that holds every path named (a folder named keeps its name, as ``cp -r`` has it), every Python file is
    written (copied where there is nothing to rewrite), every other file copied, and the package roots are those of
    the files inside that folder; a single file named goes into DIR with its runtime copy, and nothing else."""
    base, out = Path(), None  # base: only with out
    if args.output and not args.in_place:
        out = Path(args.output)
        base = Path(os.path.commonpath([Path(name).absolute().parent for name in args.paths]))
        if out.exists() and not out.is_dir():
            raise UserError(f"-o {out}: not a folder: several files or a folder are written into a folder (-o DIR)")
        if not out.exists() and out.suffix == ".py":
            raise UserError(f"-o {out}: names a file: several files or a folder are written into a folder (-o DIR)")
        if out.absolute() == base:
            raise UserError(f"-o {out}: this is the folder of the input; use --in-place (without -o) to rewrite it")
        if not out.parent.is_dir():
            raise UserError(f"-o {out}: cannot write: there is no folder {out.parent}")
        writes.folder(out)
    inside_out = (lambda path: False) if out is None else (lambda path: path.absolute().is_relative_to(out.absolute()))
    files = [
        (path, display)
        for path, display in _python_files(args.paths, args.exclusion, args.force_exclude)
        if not inside_out(path)
    ]
    if not files:
        raise UserError(f"no Python files in {', '.join(args.paths)}: nothing to rewrite")
    tree = Tree([])
    for path, display in files:
        if out is None:
            up = _above(path.parent, package_root(path.parent))
            tree.targets.append(Target(path, display, path if args.in_place else None, up))
        else:
            relative = path.absolute().relative_to(base)
            writes.folder((out / relative).parent)
            up = _above(path.parent, package_root(path.parent, top=base))
            tree.targets.append(Target(path, display, out / relative, up, copy_if_unparsed=True))
    if out is not None:
        rewritten = {path.absolute() for path, _ in files}
        for name in args.paths:
            if Path(name).is_dir():
                _copied(Path(name), base, out, rewritten, tree, writes)
    return tree


def _copied(folder: Path, base: Path, out: Path, rewritten: set[Path], tree: Tree, writes: Writes) -> None:
    """The files and folders below ``folder`` that ``cp -r`` copies and the rewrite does not write, into ``tree``:
    all but the Python files rewritten, caches, runtime copies (the run writes its own where its modules need one)
    and the output itself; symbolic links as links."""
    for at, folders, files in os.walk(folder):
        here = Path(at)
        kept = []
        for name in folders:
            path = here / name
            if name in ("__pycache__", RUNTIME_FOLDER) or path.absolute().is_relative_to(out.absolute()):
                continue
            if path.is_symlink():
                tree.copies.append((path, out / path.absolute().relative_to(base)))
            else:
                kept.append(name)
                writes.folder(out / path.absolute().relative_to(base))
        folders[:] = kept
        for name in files:
            path = here / name
            if path.absolute() not in rewritten and name != f"{RUNTIME_FOLDER}.py":
                tree.copies.append((path, out / path.absolute().relative_to(base)))


def _rewrite_file(
    args: argparse.Namespace,
    target: Target,
    writes: Writes,
    diffed: set[Path],
    progress: Progress,
    in_tree: bool = False,
) -> tuple[int, Outcome]:
    """Rewrite the file ``target.source``, its writes staged in ``writes``; ``diffed``: the folders whose runtime
    copy this run has put in its diff already; ``in_tree``: one of many files, which gets a summary line only if it
    has kernels to rewrite."""
    source_path, display, output = target.source, target.display, target.output
    if output is not None and not args.in_place and _same_file(output, source_path):
        raise UserError(f"{output}: this is the input file; use --in-place (without -o) to overwrite it")
    if output is not None and output.exists() and not output.resolve().is_file():
        raise UserError(f"{output}: not a regular file; wp-rewrite writes the rewritten module only into one")
    source = _read(source_path, display)
    # Through a symbolic link, the file it points to is written, and Python finds the runtime beside that one.
    folder = (output.resolve() if output is not None and output.is_symlink() else output or source_path).parent
    from warp_rewrite.cli.emit import emit_module

    try:
        emitted = emit_module(
            source_path,
            display,
            source.text,
            max_records=args.max_records,
            detach_returns=args.detach_returns,
            folder=folder,
            name=(output or source_path).name,
            runtime_up=target.runtime_up,
        )
    except ParseError as error:
        progress.say(str(error))
        if target.copy_if_unparsed and output is not None:
            _stage(writes, output, source_path.read_bytes())
        return USAGE, Outcome.REFUSED
    refused = [_command_line_spelling(str(refusal)) for refusal in emitted.refusals]
    from warp_rewrite.runtime.errors import left_to_warp  # (here: --check imports no Warp)

    left = [f"{kernel.location}: warning: {_command_line_spelling(left_to_warp(kernel))}" for kernel in emitted.left]
    for message in [*refused, *left, *emitted.warnings]:
        progress.say(message)
    home = _up(folder.absolute(), emitted.runtime_up)  # where the runtime copy the module imports is
    if args.diff:
        diff = difflib.unified_diff(
            source.text.splitlines(keepends=True), emitted.text.splitlines(keepends=True), display, display
        )
        sys.stdout.writelines(diff)
        if emitted.has_blocks and home.resolve() not in diffed:
            diffed.add(home.resolve())
            sys.stdout.writelines(runtime_diff(home if Path(display).is_absolute() else Path(os.path.relpath(home))))
    elif output is None:
        sys.stdout.write(emitted.text)
    else:
        try:
            data = source.encode(emitted.text)
        except UnicodeEncodeError as error:
            raise UserError(f"{output}: cannot write the rewritten module in {source.encoding}: {error}") from None
        if not folder.is_dir():
            raise UserError(f"{output}: cannot write: there is no folder {output.parent}")
        if emitted.has_blocks:
            try:
                writes.runtime(home)
            except OSError as error:
                raise UserError(f"{home / RUNTIME_FOLDER}: cannot write the runtime: {_reason(error)}") from None
        if emitted.text != source.text or output != source_path:
            _stage(writes, output, data)
    if not args.quiet:
        if emitted.has_blocks and output is None and not args.diff:
            progress.say(
                f"note: the rewritten module imports {RUNTIME_FOLDER}/; -o or --in-place write it where it looks"
            )
        if not in_tree or emitted.has_blocks or emitted.refusals or emitted.left or emitted.regenerated:
            progress.say(_summary(display, emitted, output if output != source_path else None))
    if emitted.refusals:
        return FINDINGS, Outcome.REFUSED
    return OK, Outcome.REWRITTEN if emitted.text != source.text else Outcome.UNCHANGED


def _up(folder: Path, levels: int) -> Path:
    for _ in range(levels):
        folder = folder.parent
    return folder


def _stage(writes: Writes, path: Path, data: bytes) -> None:
    try:
        writes.file(path, data)
    except OSError as error:
        raise UserError(f"{path}: cannot write: {_reason(error)}") from None


class Interrupted(BaseException):
    """SIGTERM, raised where the run is, as Python raises ``KeyboardInterrupt`` for SIGINT: so that the run's
    writes are taken back (``Writes``) before it ends; ``what``: what the run had written by then."""

    def __init__(self, signum: int, what: str = "nothing was written"):
        super().__init__(signum, what)
        self.signum, self.what = signum, what


def _terminated(signum: int, frame: object) -> NoReturn:
    raise Interrupted(signum)


def command() -> NoReturn:
    """The ``wp-rewrite`` command (and ``python -m warp_rewrite``): ``main``'s status as the exit status. After
    ``--check`` the process ends at once, without freeing the syntax trees of every file one by one first (a
    tenth of a run on a large tree); the rewrite mode exits as usual (Warp's exit handlers run)."""
    held: list[object] = []
    status = main(held=held)
    if not held:
        sys.exit(status)
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)


def main(argv: list[str] | None = None, held: list[object] | None = None) -> int:
    """Entry point of ``wp-rewrite``; returns the exit status. ``held``: see ``run_check``. SIGTERM ends a run as
    SIGINT does (``Interrupted``), with nothing written."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if in_main_thread else None
    try:
        try:
            args = parse_arguments(argv)
        except SystemExit as exit_:  # argparse has printed the usage error (or --help, --version)
            return exit_.code if isinstance(exit_.code, int) else USAGE
        status = run_check(args, held) if args.check else run_rewrite(args)
        sys.stdout.flush()  # a closed pipe shows here rather than at exit
        return status
    except UserError as error:
        print(f"wp-rewrite: error: {error}", file=sys.stderr)
        return USAGE
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE
    except (KeyboardInterrupt, Interrupted) as interruption:
        if not isinstance(interruption, Interrupted):
            interruption = Interrupted(signal.SIGINT, "")  # --check, which writes nothing
        print(f"\nwp-rewrite: interrupted{': ' * bool(interruption.what)}{interruption.what}", file=sys.stderr)
        return 128 + interruption.signum
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
