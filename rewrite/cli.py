"""The ``wp-rewrite`` command line (also ``python -m warp_rewrite``).

    wp-rewrite FILE.py [-o OUT.py | --in-place | --diff] [--max-records N] [--detach-returns]
    wp-rewrite --check PATH...

Rewrite mode writes FILE.py unchanged, plus, right after each kernel ``k`` that uses a value an atomic returns,
a block with the kernels ``k_record`` and ``k_replay`` (and clones of the helpers they call), ``k_rewritten``
(the ``RewrittenKernel`` of the API) and ``launch_k = k_rewritten.launch``, which takes ``wp.launch``'s
arguments (and ``max_records=``) and behaves on a tape as the API does. The blocks call warp-rewrite's runtime,
which the output imports from ``wp_rewrite_runtime.py`` beside it: ``-o`` and ``--in-place`` write that file (a
copy of ``warp_rewrite/runtime.py``, warp, numpy and the standard library its only imports), so the output runs
without this project installed. Without ``-o`` the module goes to stdout; ``--diff`` prints a unified diff
instead. Running it on its own output changes nothing: generated blocks are fenced by marker comments and
kernels that have one are skipped.

Check mode reports, without importing or running anything, every use of an atomic's returned value:

    WR001  a kernel uses the value returned by a Warp atomic directly;
    WR002  a ``@wp.func`` helper uses the value returned by a Warp atomic;
    WR003  a kernel calls a helper (in this file or followed through its imports) that does, at any depth.

Kernels that already have generated code from an earlier run are not reported.

Exit status: 0 success / no finding; 1 findings (``--check``) or a kernel the rewrite cannot handle (nothing is
written; the message is the API's ``RewriteError``); 2 usage errors, missing or unreadable paths and files that
do not parse.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterator
from pathlib import Path

from warp_rewrite.emit import RUNTIME_FILE, emit_module, write_runtime
from warp_rewrite.lint import check_module
from warp_rewrite.runtime import RewriteError
from warp_rewrite.static_module import ParseError, Project, StaticModule

OK, FINDINGS, USAGE = 0, 1, 2


class UserError(Exception):
    """A problem with what the user asked for: printed as one line, exit status 2, no traceback."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wp-rewrite",
        description="Make Warp kernels that use atomics' returned values differentiable, as a standalone module.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="FILE.py to rewrite; with --check, files or folders")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="report uses of atomic returns (WR001-WR003); write nothing")
    mode.add_argument("--diff", action="store_true", help="print a unified diff instead of the rewritten file")
    parser.add_argument("-o", "--output", metavar="OUT.py", help="write the rewritten module here (default: stdout)")
    parser.add_argument("--in-place", action="store_true", help="rewrite FILE.py itself")
    parser.add_argument(
        "--max-records", type=int, metavar="N", help="records per execution of a loop of unknown length (default: "
        "counted by a dry run at each launch); launch_<kernel>(max_records=...) overrides it",
    )  # fmt: skip
    parser.add_argument(
        "--detach-returns", action="store_true",
        help="record float returns as constants instead of giving them exact gradients (as wp_rewrite's option)",
    )  # fmt: skip
    return parser


def _read(path: Path, display: str) -> str:
    if not path.exists():
        raise UserError(f"{display}: no such file or directory")
    if path.is_dir():
        raise UserError(f"{display}: is a directory (only --check takes directories)")
    try:
        with path.open(encoding="utf-8", newline="") as file:  # newline="": keep the file's line endings as they are
            return file.read()
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{display}: cannot read: {error}") from None


def _python_files(paths: list[str]) -> Iterator[tuple[Path, str]]:
    """Every ``.py`` file named or under a named folder (skipping hidden folders and caches), sorted."""
    for name in paths:
        path = Path(name)
        if not path.exists():
            raise UserError(f"{name}: no such file or directory")
        if path.is_file():
            yield path, name
            continue
        for file in sorted(path.rglob("*.py")):
            relative = file.relative_to(path).parts
            if not any(part.startswith(".") or part == "__pycache__" for part in relative[:-1]):
                yield file, str(file)


def run_check(paths: list[str]) -> int:
    """Print every finding as ``path:line:col: CODE message``; 1 if any, 2 if a file could not be read."""
    project, status = Project(), OK
    for path, display in list(_python_files(paths)):
        try:
            module = StaticModule.parse(path, display, _read(path, display))
        except (ParseError, UserError) as error:
            print(error, file=sys.stderr)
            status = USAGE
            continue
        project.modules.setdefault(path.resolve(), module)
        for finding in check_module(module, project):
            print(finding)
            status = max(status, FINDINGS)
    return status


def _same_file(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))


def run_rewrite(args: argparse.Namespace) -> int:
    if len(args.paths) != 1:
        raise UserError("rewrite one FILE.py at a time (several paths are only for --check)")
    display = args.paths[0]
    source = Path(display)
    output = Path(args.output) if args.output else (source if args.in_place else None)
    if output is not None and args.diff:
        raise UserError("--diff prints to stdout; it cannot be combined with -o or --in-place")
    if output is not None and _same_file(output, source) and not args.in_place:
        raise UserError(f"{args.output}: this is the input file; pass --in-place to overwrite it")
    text = _read(source, display)
    try:
        emitted = emit_module(source, display, text, max_records=args.max_records, detach_returns=args.detach_returns)
    except RewriteError as error:
        print(error, file=sys.stderr)
        return FINDINGS
    for warning in emitted.warnings:
        print(warning, file=sys.stderr)
    if args.diff:
        diff = difflib.unified_diff(
            text.splitlines(keepends=True), emitted.text.splitlines(keepends=True), display, display
        )
        sys.stdout.writelines(diff)
    elif output is None:
        sys.stdout.write(emitted.text)
    else:
        try:
            with output.open("w", encoding="utf-8", newline="") as file:
                file.write(emitted.text)
            if emitted.rewritten:
                write_runtime(output.parent)
        except OSError as error:
            raise UserError(f"{output}: cannot write: {error}") from None
    if not emitted.rewritten and output is not None:
        print(f"{display}: no kernel to rewrite (none uses an atomic's returned value)", file=sys.stderr)
    elif emitted.rewritten and output is None and not args.diff:
        print(f"note: the rewritten module imports {RUNTIME_FILE}; -o or --in-place write it beside the module",
              file=sys.stderr)  # fmt: skip
    return OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``wp-rewrite``; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # argparse has printed the usage error (or --help)
        return exit_.code if isinstance(exit_.code, int) else USAGE
    try:
        if args.check:
            if args.output or args.in_place:
                raise UserError("--check writes nothing; it cannot be combined with -o or --in-place")
            return run_check(args.paths)
        return run_rewrite(args)
    except ParseError as error:
        print(error, file=sys.stderr)
        return USAGE
    except UserError as error:
        print(f"wp-rewrite: error: {error}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        return 130
