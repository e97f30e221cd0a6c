"""The ``launch_<kernel>`` function of a standalone rewritten module, written as a real Python function.

A module emitted by ``wp-rewrite FILE.py -o OUT.py`` must run without this project installed, so the launch
glue of ``rewrite/launching.py`` (the very code the API runs) is emitted into it as source text. ``render``
copies ``launch_kernel`` below and substitutes its placeholders *by source span* rather than unparsing it, so
the emitted function keeps this file's layout and comments: it reads like code written by hand.

``launch_kernel`` becomes each kernel's ``launch_<kernel>``: placeholders ``kernel``, ``record_kernel``,
``replay_kernel``, ``launch_kernel`` (generated names) and the upper-case constants, read from the kernel's
source. The functions of ``SUPPORT`` are emitted once per module (their names are placeholders too, renamed to
names fresh in the module); ``wp`` becomes the module's name for warp, ``RewriteError`` the module's copy of
``rewrite.errors.RewriteError``.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable
from types import ModuleType
from typing import Any

from warp_rewrite import launching
from warp_rewrite.launching import launch_recorded

# Placeholders (see the module docstring). They exist so that the templates below are valid, lint-clean Python.
kernel = record_kernel = replay_kernel = None
prepared_launches: dict = {}  # the module-level dict where the kernel's CPU launches keep their PreparedLaunch
PARAMETERS: tuple[str, ...] = ()  # the kernel's parameter names, in order
# per recorded atomic: (target path, op, "file:line:col", gradient source paths or None: any, exact records)
SITES: tuple = ()
# per record parameter, in order: (name, kind, target path or None, fixed dtype or "", ids of loops around, grad)
RECORDS: tuple = ()
# per loop around a recorded atomic: (id, constant trip count or None, "file:line:col", opaque: the replay skips it,
# room per execution compiled into the kernels or None: passed by the launch)
LOOPS: tuple = ()
MAX_RECORDS = None  # records per execution of a loop whose trip count is not a constant; None: counted by a dry run
EXACT_RUNTIME = None  # (ExactSite, ExactBackward) of the module's copy of rewrite.exact, for exact float returns
LAUNCH_ARITY = 1  # how many indices the kernel unpacks wp.tid() into: the most launch dimensions it can take


def launch_kernel(
    dim, inputs=(), outputs=(), device=None, stream=None, record_tape=True, block_dim=None, max_blocks=0,
    max_records=MAX_RECORDS,
):  # fmt: skip
    """Replaced by ``render``."""
    launch_recorded(
        kernel, record_kernel, replay_kernel,
        dim, inputs, outputs, device, stream, record_tape, block_dim, max_blocks, max_records,
        parameters=PARAMETERS,
        sites=SITES,
        records=RECORDS,
        loops=LOOPS,
        exact_runtime=EXACT_RUNTIME,
        launch_arity=LAUNCH_ARITY,
        launches=prepared_launches,
    )  # fmt: skip


# The code of rewrite/launching.py (functions and PreparedLaunch), emitted once per module, after the first kernel.
SUPPORT = tuple(
    getattr(launching, name)
    for name in ("argument_arrays", "argument_at", "is_float_dtype", "requires_grad_path", "scratch_copy",
                 "is_stand_in", "phase_arguments", "replay_arguments", "held_elsewhere", "signature", "check_trips",
                 "PreparedLaunch", "remember", "launch_recorded")
)  # fmt: skip


def _offsets(text: str) -> list[int]:
    """Character offset of the start of each line (index 0 unused: ast lines are 1-based)."""
    starts, total = [0], 0
    for line in text.splitlines(keepends=True):
        starts.append(total)
        total += len(line)
    return starts


def _literal(value: Any, indent: str) -> str:
    """``repr`` of a tuple constant, one item a line when it would make a long line."""
    text = repr(value)
    if len(text) <= 80 or not isinstance(value, tuple) or not value:
        return text
    items = "".join(f"{indent}    {item!r},\n" for item in value)
    return f"(\n{items}{indent})"


def _defined_name_span(node: ast.FunctionDef | ast.ClassDef, starts: list[int], text: str) -> tuple[int, int]:
    """Where the name of a ``def`` or ``class`` statement is in ``text``."""
    keyword = "class" if isinstance(node, ast.ClassDef) else "def"
    found = re.compile(rf"\b{keyword}\s+({re.escape(node.name)})\b").search(text, starts[node.lineno] + node.col_offset)
    return found.span(1)


def render(
    template: Callable, names: dict[str, str], constants: dict[str, Any] | None = None, docstring: str | None = None
) -> str:
    """The template's source with placeholders renamed (``names``) or replaced by constants' reprs.

    ``docstring`` replaces the template's own. A local of the template that a new name would capture (a kernel
    called ``records``) is renamed too.
    """
    constants = constants or {}
    text = textwrap.dedent(inspect.getsource(template))
    definition = ast.parse(text).body[0]
    starts = _offsets(text)
    locals_ = {n.id for n in ast.walk(definition) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    locals_ |= {n.name for n in ast.walk(definition) if isinstance(n, ast.FunctionDef) and n is not definition}
    renames = dict(names)
    for name in sorted(locals_ & set(names.values())):
        renames[name] = f"{name}_"
    edits = []
    for node in ast.walk(definition):
        if isinstance(node, ast.Name) and (node.id in renames or node.id in constants):
            start = starts[node.lineno] + node.col_offset
            line = text[starts[node.lineno] : text.index("\n", starts[node.lineno])]
            indent = line[: len(line) - len(line.lstrip())]
            new = renames[node.id] if node.id in renames else _literal(constants[node.id], indent)
            edits.append((start, start + len(node.id), new))
        elif isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in renames:
            edits.append((*_defined_name_span(node, starts, text), renames[node.name]))
    if docstring is not None:
        edits.append(_docstring_edit(definition, starts, docstring))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _docstring_edit(definition: ast.FunctionDef, starts: list[int], docstring: str) -> tuple[int, int, str]:
    doc = definition.body[0]
    indent = " " * doc.col_offset
    lines = [f"{indent}{line}" if line else "" for line in docstring.strip().splitlines()]
    closing = f"\n{indent}" if len(lines) > 1 else ""
    quoted = '"""' + "\n".join(lines).lstrip() + closing + '"""'
    return starts[doc.lineno] + doc.col_offset, starts[doc.end_lineno] + doc.end_col_offset, quoted


class _Spans(ast.NodeVisitor):
    """Source spans to rewrite when a module's code is copied into another module (see ``copy_module_code``)."""

    def __init__(self, text: str, renames: dict[str, str], kernel_decorator: str | None):
        self.starts = _offsets(text)
        self.text = text
        self.renames = renames
        self.kernel_decorator = kernel_decorator
        self.shadowed: list[set[str]] = [set()]
        self.edits: list[tuple[int, int, str]] = []

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.starts[node.lineno] + node.col_offset,
            self.starts[node.end_lineno] + node.end_col_offset,
        )

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.renames and node.id not in self.shadowed[-1]:
            self.edits.append((*self.span(node), self.renames[node.id]))

    def _visit_definition(self, node: ast.FunctionDef | ast.ClassDef, scope: set[str]) -> None:
        if len(self.shadowed) == 1 and node.name in self.renames:
            self.edits.append((*_defined_name_span(node, self.starts, self.text), self.renames[node.name]))
        for decorator in node.decorator_list:
            if self.kernel_decorator and ast.unparse(decorator) == "wp.kernel":
                self.edits.append((*self.span(decorator), self.kernel_decorator))
            else:
                self.visit(decorator)
        outer = [n for n in ast.iter_child_nodes(node) if n not in node.decorator_list and n not in node.body]
        for child in outer:  # arguments, annotations, defaults, bases: evaluated in the enclosing scope
            self.visit(child)
        self.shadowed.append(self.shadowed[-1] | scope)
        for statement in node.body:
            self.visit(statement)
        self.shadowed.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        arguments = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        self._visit_definition(node, stored | arguments)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_definition(node, set())


def copy_module_code(module: ModuleType, renames: dict[str, str], kernel_decorator: str | None = None) -> str:
    """A module's code to paste into another module: without its docstring and imports, names renamed.

    ``renames`` maps the module's global names (and the names it imports, such as ``wp``) to the names they get
    in the receiving module; a function's own locals of the same name are left alone. ``kernel_decorator``
    replaces each bare ``@wp.kernel`` (e.g. to give the copied kernels Warp modules of their own).
    """
    text = inspect.getsource(module)
    tree = ast.parse(text)
    spans = _Spans(text, renames, kernel_decorator)
    starts = spans.starts
    for statement in tree.body:
        is_docstring = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        if is_docstring or isinstance(statement, ast.Import | ast.ImportFrom):
            spans.edits.append((starts[statement.lineno], starts[statement.end_lineno + 1], ""))
        else:
            spans.visit(statement)
    for start, end, new in sorted(spans.edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text.strip("\n") + "\n"


def module_globals(module: ModuleType) -> list[str]:
    """The names a module's code defines at top level (functions, classes, assigned names), in order."""
    names = []
    for statement in ast.parse(inspect.getsource(module)).body:
        if isinstance(statement, ast.FunctionDef | ast.ClassDef):
            names.append(statement.name)
        elif isinstance(statement, ast.Assign | ast.AnnAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names
