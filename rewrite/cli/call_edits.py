# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""Text edits of a file the command line rewrites: its ``wp.launch`` calls of rewritten kernels become calls of their
rewritten launch, calls that make kernels of plain functions are wrapped, and the edits are applied in the file's
own line endings. Offsets come from the AST's positions (UTF-8 byte columns)."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

import warp as wp

from warp_rewrite import runtime
from warp_rewrite.cli.hazards import launched_kernel
from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.passes.syntax import end_column, end_line


def _launch_signature() -> tuple[int, frozenset[str] | None]:
    """What a rewritten launch takes where ``wp.launch`` takes it: how many of ``wp.launch``'s positional
    arguments after the kernel (the common prefix of both signatures), and which keywords (None: any)."""
    ours = list(inspect.signature(runtime.RewrittenKernel.launch).parameters.values())[1:]
    warps = list(inspect.signature(wp.launch).parameters)[1:]
    positional = 0
    while positional < min(len(ours), len(warps)) and ours[positional].name == warps[positional]:
        positional += 1
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in ours):
        return positional, None
    return positional, frozenset(p.name for p in ours)


_LAUNCH_POSITIONAL, _LAUNCH_KEYWORDS = _launch_signature()
_ADJOINT_POSITION = list(inspect.signature(wp.launch).parameters).index("adjoint") - 1  # after the kernel


@dataclass(frozen=True)
class Edit:
    """Replace the text between two character offsets of the input (an insertion where they are equal)."""

    start: int
    end: int
    text: str


class Offsets:
    """Character offsets into a text, from the AST's (line, UTF-8 byte column) positions."""

    def __init__(self, module: StaticModule):
        self.module = module
        self.starts = [0]
        for line in module.lines:
            self.starts.append(self.starts[-1] + len(line))

    def __call__(self, line: int, column: int) -> int:
        return self.starts[line - 1] + self.module.column(line, column) - 1

    def line_start(self, line: int) -> int:
        """The offset of line ``line`` (1-based), or the end of the text after its last line."""
        return self.starts[min(line, len(self.starts)) - 1]


def launch_edits(
    module: StaticModule, launches: dict[int, str], offsets: Offsets
) -> tuple[list[tuple[Edit, Edit]], list[tuple[ast.Call, str]]]:
    """``wp.launch(k, ...)`` and ``wp.launch(kernel=k, ...)`` of the kernels in ``launches`` (by id of their
    definition: the launch's name) turned into ``launch_k(...)``: two edits a call, the callee's and the kernel
    argument's; and the calls that cannot be, with why."""
    edits: list[tuple[Edit, Edit]] = []
    kept_calls: list[tuple[ast.Call, str]] = []
    for call in module.nodes:
        if not (isinstance(call, ast.Call) and module.warp.is_warp(call.func, "launch")) or module.generated(call):
            continue
        argument = launched_kernel(call)
        if not isinstance(argument, ast.Name):
            continue
        kernel = module.binding(argument.id, module.scopes(call))
        launch = launches.get(id(kernel))
        if launch is None:
            continue
        kept = _kept_launch(call, argument, launch)
        if kept is not None:
            kept_calls.append((call, f"this wp.launch of kernel '{argument.id}' {kept}"))
            continue
        func = call.func
        callee = Edit(offsets(func.lineno, func.col_offset), offsets(end_line(func), end_column(func)), launch)
        edits.append((callee, _remove_argument(call, argument, offsets)))
    return edits, kept_calls


def _kept_launch(call: ast.Call, argument: ast.Name, launch: str) -> str | None:
    """Why the ``wp.launch`` call of a rewritten kernel cannot become a call of its ``launch`` (and what it does left
    as written), or None if it can."""
    positional = [a for a in call.args if a is not argument]
    keywords = [k for k in call.keywords if k.value is not argument]
    adjoint = next((k.value for k in keywords if k.arg == "adjoint"), None)
    if adjoint is None and len(positional) > _ADJOINT_POSITION:
        adjoint = positional[_ADJOINT_POSITION]
    if adjoint is not None and not (isinstance(adjoint, ast.Constant) and adjoint.value is False):
        return (
            f"is an adjoint launch ({ast.unparse(adjoint)} for adjoint), which the rewritten kernel cannot take: "
            f"it is left as written, and as '{argument.id}' is the rewritten kernel it raises when it runs (its "
            f"backward runs from the tape); launch {argument.id}.kernel for the original's adjoint"
        )
    unpacked = [f"*{ast.unparse(a.value)}" for a in positional if isinstance(a, ast.Starred)]
    unpacked += [f"**{ast.unparse(k.value)}" for k in keywords if k.arg is None]
    if unpacked:
        return (
            f"passes {', '.join(unpacked)}, which wp-rewrite cannot match to {launch}'s parameters: it is left as "
            f"written, and wp.launch hands the rewritten kernel what they hold when it runs"
        )
    unknown = (
        sorted({k.arg for k in keywords if k.arg is not None} - _LAUNCH_KEYWORDS)
        if _LAUNCH_KEYWORDS is not None
        else []
    )
    if unknown or len(positional) > _LAUNCH_POSITIONAL:
        what = ", ".join(unknown) or f"more than {_LAUNCH_POSITIONAL} arguments after the kernel by position"
        return f"passes {what}, which {launch} does not take (nor does wp.launch): it is left as written"
    return None


def construction_edits(module: StaticModule, wrappers: dict[int, str], offsets: Offsets) -> list[tuple[Edit, Edit]]:
    """Each call that makes a kernel of a plain function in ``wrappers`` (by id of its definition: the name of its
    ``KernelRewrite``) wrapped in a call of that, unless it is already: two edits a call."""
    edits = []
    for kernel in module.kernels():
        wrapper = wrappers.get(id(kernel))
        for made in module.constructions(kernel) if wrapper is not None else []:
            if module.wrapper(made) != wrapper:
                site = made.site
                start, end = offsets(site.lineno, site.col_offset), offsets(end_line(site), end_column(site))
                edits.append((Edit(start, start, f"{wrapper}("), Edit(end, end, ")")))
    return edits


def _remove_argument(call: ast.Call, argument: ast.expr, offsets: Offsets) -> Edit:
    """Take the kernel argument out of the call, with the comma after it (or, last, the one before it)."""
    items: list[ast.expr | ast.keyword] = sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))
    node = next(n for n in items if n is argument or getattr(n, "value", None) is argument)
    at = items.index(node)
    if at + 1 < len(items):
        following = items[at + 1]
        return Edit(offsets(node.lineno, node.col_offset), offsets(following.lineno, following.col_offset), "")
    previous = items[at - 1]
    return Edit(offsets(end_line(previous), end_column(previous)), offsets(end_line(node), end_column(node)), "")


def apply_edits(text: str, edits: list[Edit]) -> str:
    """``text`` with the edits made, in the file's own line endings; insertions at one place in their order."""
    newline = "\r\n" if "\r\n" in text else "\n"
    for _, edit in sorted(enumerate(edits), key=lambda item: (item[1].start, item[1].end, item[0]), reverse=True):
        text = text[: edit.start] + edit.text.replace("\n", newline) + text[edit.end :]
    return text
