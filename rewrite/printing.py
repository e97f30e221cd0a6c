"""Printing generated functions, with the user's own text for every statement the rewrite left as it was.

``ast.unparse`` costs about 2.5 us a node, a third of a rewrite's time, and most statements of a rewritten
kernel are the user's code, unchanged. Those are printed from the kernel's source instead, re-indented,
which also keeps the user's spelling (and comments inside a statement) in the generated code. The rest is
printed by ``ast.unparse`` (not astor: it follows the running Python's grammar, so every construct the
kernel's own Python version parsed prints back, with no third-party dependency to keep in step).
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from typing import Any

# Python's unparser, which ``ast.unparse`` runs (not exported: no stub names it)
_PythonUnparser: Any = vars(ast)["_Unparser"]
_Precedence: Any = vars(ast)["_Precedence"]


class _Unparser(_PythonUnparser):
    """``ast.unparse``, but an ``and`` inside an ``or`` in parentheses, as the user wrote them: Python's unparser
    drops them, and ruff's RUF021 asks for them; and an ``else`` holding only an ``if`` printed from the user's text
    written ``elif`` (``_ELIF``), as Python's unparser writes one it prints itself (ruff's PLR5501)."""

    def visit_If(self, node: ast.If) -> None:
        kept = node.orelse[0] if len(node.orelse) == 1 else None
        if not (isinstance(kept, ast.Expr) and isinstance(kept.value, ast.Name) and kept.value.id.startswith(_ELIF)):
            super().visit_If(node)
            return
        self.fill("if ")
        self.traverse(node.test)
        with self.block():
            self.traverse(node.body)
        self.fill(kept.value.id)  # (the kept ``if``'s text, after ``el``, at this ``if``'s indentation)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        operator, own = (" or ", _Precedence.OR) if isinstance(node.op, ast.Or) else (" and ", _Precedence.AND)
        with self.require_parens(own, node):
            for index, value in enumerate(node.values):
                if index:
                    self.write(operator)
                self.set_precedence(_Precedence.NOT, value)  # above both: a nested and/or is parenthesized
                self.traverse(value)


_PLACEHOLDER = "__wp_rewrite_kept_"
_ELIF = f"el{_PLACEHOLDER}"  # a kept ``if``, alone in an ``else``: printed as ``elif``
_PLACEHOLDER_LINE = re.compile(rf"^( *)(el)?{_PLACEHOLDER}(\d+)$", re.MULTILINE)


def unparse_keeping_text(
    definition: ast.FunctionDef, originals: dict[ast.stmt, str], comments_above: bool = False
) -> str:
    """``ast.unparse(definition)``, but the statements of ``originals`` spelled as in the text they map to.

    ``originals``: the statements of the user's functions, each with the source its positions refer to. The
    passes never change a tree they read, so a statement of ``definition`` that is one of these was left as it
    was (``passes.two_phase.PhaseWriter``). ``comments_above``: each such statement with the comment lines right
    above it there (a statement printed out of a compound one printed anew keeps the comments it had in it).
    """
    kept: list[str] = []
    swapped: list[tuple[list[ast.stmt], int, ast.stmt]] = []
    pending: list[tuple[list[ast.stmt], bool]] = [(definition.body, False)]
    while pending:
        body, in_else = pending.pop()
        for index, statement in enumerate(body):
            text = originals.get(statement)
            spelled = _source_of(statement, _lines(text)) if text is not None else None
            if spelled is not None and text is not None:
                spelled = (_comments_above(statement, _lines(text)) if comments_above else "") + spelled
                elif_ = in_else and len(body) == 1 and isinstance(statement, ast.If) and spelled.startswith("if")
                name = f"{_ELIF if elif_ else _PLACEHOLDER}{len(kept)}"
                body[index] = ast.Expr(ast.Name(name, ast.Load()))
                swapped.append((body, index, statement))
                kept.append(spelled)
            else:
                pending += [(statement.body, False)] if hasattr(statement, "body") else []
                pending += [(statement.orelse, isinstance(statement, ast.If))] if hasattr(statement, "orelse") else []
    try:
        printed = _Unparser().visit(definition)
    finally:
        for body, index, statement in swapped:
            body[index] = statement
    return _PLACEHOLDER_LINE.sub(
        lambda line: _indented((line.group(2) or "") + kept[int(line.group(3))], line.group(1)), printed
    )


_LINE_END = re.compile(r"\r\n|\r|\n")


@functools.lru_cache(maxsize=64)
def _lines(text: str) -> tuple[str, ...]:
    """A source's lines, split once for all the functions printed from it (the CLI's is a whole file), at the line
    ends Python's parser counts: not ``str.splitlines``, which also splits at a form feed and other separators and
    would then print statements from the wrong line."""
    return tuple(_LINE_END.split(text))


def _source_of(statement: ast.stmt, source_lines: tuple[str, ...]) -> str | None:
    """The statement's text, later lines without its own indentation; None where that is not safe.

    Left to ``ast.unparse``: an ``elif`` (its text starts with the keyword, so it cannot stand alone), and a
    statement over several lines with a triple-quoted string or a backslash at a line's end (re-indenting would
    change a string that goes on in the next line) or with a tab (re-indenting would mix tabs and spaces).
    """
    lines = source_lines[statement.lineno - 1 : statement.end_lineno]
    column, end_column = statement.col_offset, statement.end_col_offset  # in UTF-8 bytes, as the parser counts
    if len(lines) == 1:
        segment = [_bytes_slice(lines[0], column, end_column)]
    else:
        segment = [_bytes_slice(lines[0], column, None), *lines[1:-1], _bytes_slice(lines[-1], 0, end_column)]
    if segment[0].startswith("elif"):
        return None
    if len(segment) > 1 and any(_unsafe_to_indent(line) for line in segment):
        return None
    own_indent = " " * column
    return "\n".join([segment[0], *(line.removeprefix(own_indent) for line in segment[1:])])


def _comments_above(statement: ast.stmt, source_lines: tuple[str, ...]) -> str:
    """The comment lines right above the statement, each ending with a line end, without their indentation."""
    first = statement.lineno - 1
    while first > 0 and source_lines[first - 1].lstrip().startswith("#"):
        first -= 1
    return "".join(line.lstrip() + "\n" for line in source_lines[first : statement.lineno - 1])


def _unsafe_to_indent(line: str) -> bool:
    return '"""' in line or "'''" in line or "\t" in line or line.endswith("\\")


def _bytes_slice(line: str, start: int, end: int | None) -> str:
    if line.isascii():
        return line[start:end]
    return line.encode()[start:end].decode()


def _indented(source: str, indent: str) -> str:
    """``source`` indented by ``indent``, its blank lines left empty (as formatters keep them: ruff's W293)."""
    return "\n".join(indent + line if line.strip() else "" for line in source.split("\n"))


WIDTH = 120  # the longest line of generated code


def unparse_wrapped(function: ast.FunctionDef, originals: dict[ast.stmt, str]) -> str:
    """``unparse_keeping_text``, with the parameters one a line when the signature would be too long."""
    text = unparse_keeping_text(function, originals)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("def "))
    if len(lines[at]) <= WIDTH or function.args.vararg or function.args.kwonlyargs or function.args.kwarg:
        return text
    params = "".join(f"    {ast.unparse(arg)},\n" for arg in function.args.args)
    returns = f" -> {ast.unparse(function.returns)}" if function.returns else ""
    lines[at] = f"def {function.name}(\n{params}){returns}:"
    return "\n".join(lines)


_FSTRING_START, _FSTRING_END = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)


def string_lines(text: str) -> set[int]:
    """The lines (1-based) that go on a string begun on an earlier line: their text is the string's."""
    inside: set[int] = set()
    opened: list[int] = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == _FSTRING_START:  # Python 3.12 and later split f-strings into tokens
            opened.append(token.start[0])
        elif token.type == _FSTRING_END:
            inside.update(range(opened.pop() + 1, token.end[0] + 1))
        elif token.type == tokenize.STRING:
            inside.update(range(token.start[0] + 1, token.end[0] + 1))
    return inside
