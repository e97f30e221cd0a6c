"""Generated code laid out as ruff format (and black) lays it out, so that an emitted file the user formats with
ruff stays formatted: without ruff, which wp-rewrite does not depend on.

A generated block is written at column 0 (its functions printed by ``ast.unparse``, ``printing.unparse_keeping_text``,
on lines of any length), then indented as its kernel. ``laid_out`` fixes what ruff would change in it once indented:
each line longer than the configured line length that is one statement, a compound statement's header, a signature
or a decorator is split as ruff splits it (``statement_lines``) (generated functions repeat no docstring, whose
lines ruff would re-indent); ``quoted`` gives strings the configured quotes. The splitting
follows ruff's layout of the expressions the rewrite writes: calls and subscripts break inside their brackets, the
arguments on a line of their own where they fit, else one a line with a trailing comma (lists, tuples and dicts:
always one a line); a statement's expression that does not end (or begin) in brackets, or has more than one
operator of its loosest kind, is put in parentheses and broken before each of those operators; an assignment or a
``return`` takes the first of ruff's candidate layouts whose lines fit. Anything else (comprehensions, chains of
calls, ``**``), and a split whose tree differs from the line's, leaves the line as it was.
"""

from __future__ import annotations

import ast
import enum
import io
import itertools
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field

from warp_rewrite.printing import string_lines

INDENT = 4  # ruff's indent-width, which the generated code is printed with


class QuoteStyle(enum.Enum):
    """ruff format's ``quote-style``: the quotes strings get (``preserve``: those they have)."""

    DOUBLE = '"'
    SINGLE = "'"
    PRESERVE = ""


# The document a line is laid out from (Wadler's "prettier printer", as ruff's formatter builds it): text, line
# breaks that are a space (or nothing) where their group fits on the line, and groups that break as a whole.


@dataclass(frozen=True)
class Break:
    """A line break where the enclosing group breaks; else a space, or nothing if ``soft``."""

    soft: bool = False


@dataclass(frozen=True)
class IfBroken:
    """Text written only where the enclosing group breaks (a trailing comma, optional parentheses)."""

    text: str


@dataclass(frozen=True)
class Indented:
    """Its parts one indentation further in, after each line break."""

    parts: Doc


@dataclass(frozen=True)
class Group:
    """Printed on one line where that fits (up to the next possible line break after it), else broken (always,
    if ``broken``)."""

    parts: Doc
    broken: bool = False


Doc = str | Break | IfBroken | Indented | Group | list  # a list: its items one after the other


class _Mode(enum.Enum):
    FLAT = enum.auto()
    BROKEN = enum.auto()


@dataclass
class _Printer:
    width: int
    out: list[str] = field(default_factory=list)
    column: int = 0

    def print(self, doc: Doc, indent: int) -> str:
        self.column = indent
        stack: list[tuple[int, _Mode, Doc]] = [(indent, _Mode.BROKEN, doc)]
        while stack:
            at, mode, part = stack.pop()
            if isinstance(part, str):
                self._write(part)
            elif isinstance(part, list):
                stack += [(at, mode, item) for item in reversed(part)]
            elif isinstance(part, Indented):
                stack.append((at + INDENT, mode, part.parts))
            elif isinstance(part, Break):
                if mode is _Mode.BROKEN:
                    self.out.append("\n" + " " * at)
                    self.column = at
                elif not part.soft:
                    self._write(" ")
            elif isinstance(part, IfBroken):
                if mode is _Mode.BROKEN:
                    self._write(part.text)
            else:
                room = self.width - self.column
                flat = mode is _Mode.FLAT or (not part.broken and _fits((at, _Mode.FLAT, part.parts), stack, room))
                stack.append((at, _Mode.FLAT if flat else _Mode.BROKEN, part.parts))
        return "".join(self.out)

    def _write(self, text: str) -> None:
        self.out.append(text)
        self.column += len(text)


def _fits(item: tuple[int, _Mode, Doc], rest: list[tuple[int, _Mode, Doc]], room: int) -> bool:
    """Does ``item`` fit in ``room`` columns, with what follows it up to the first line break (in the modes of
    the groups it is in)?"""
    todo, following = [item], len(rest)
    while room >= 0:
        if not todo:
            if not following:
                return True
            following -= 1
            todo.append(rest[following])
            continue
        at, mode, part = todo.pop()
        if isinstance(part, str):
            room -= len(part)
        elif isinstance(part, list):
            todo += [(at, mode, inner) for inner in reversed(part)]
        elif isinstance(part, Indented):
            todo.append((at + INDENT, mode, part.parts))
        elif isinstance(part, Break):
            if mode is _Mode.BROKEN:
                return True
            room -= 0 if part.soft else 1
        elif isinstance(part, IfBroken):
            room -= len(part.text) if mode is _Mode.BROKEN else 0
        else:
            todo.append((at, _Mode.BROKEN if part.broken else mode, part.parts))
    return False


def bracketed(
    opening: str,
    items: list[Doc],
    closing: str,
    trailing_comma: bool = True,
    collection: bool = False,
    parameters: bool = False,
    single_comma: bool = False,
) -> Doc:
    """``f(a, b)``; broken: the items on a line of their own, else (always for a ``collection``: a list, a tuple, a
    dict) one a line, each with its comma (but a single argument, as ruff writes it; a single one of a definition's
    ``parameters`` has its comma where broken, and the single item of a tuple, ``single_comma``, always)."""
    if not items:
        return opening + closing
    joined: list[Doc] = []
    for number, item in enumerate(items):
        joined += [",", Break()] if number else []
        joined.append(item)
    if (parameters or single_comma) and len(items) == 1:
        comma = "," if single_comma else IfBroken(",")
        return Group([opening, Indented([Break(soft=True), items[0], comma]), Break(soft=True), closing])
    inner = [*joined, IfBroken(",")] if trailing_comma and len(items) > 1 else joined
    grouped = inner if collection else Group(inner)  # (a call's items stay on one line where they fit)
    return Group([opening, Indented([Break(soft=True), grouped]), Break(soft=True), closing])


def parenthesized_if_broken(doc: Doc) -> Doc:
    return Group([IfBroken("("), Indented([Break(soft=True), doc]), Break(soft=True), IfBroken(")")])


# How loosely each operator binds (higher: looser): ruff splits a chain of operators at its loosest.
_LOOSENESS = {ast.Or: 9, ast.And: 9, "compare": 8, ast.BitOr: 7, ast.BitXor: 6, ast.BitAnd: 5, ast.LShift: 4}
_LOOSENESS |= {ast.RShift: 4, ast.Add: 3, ast.Sub: 3, ast.Mult: 2, ast.Div: 2, ast.FloorDiv: 2, ast.Mod: 2}
_LOOSENESS |= {ast.MatMult: 2, ast.Pow: 1, ast.IfExp: 10}  # a conditional expression breaks before if and else
_SYMBOLS = {ast.Or: "or", ast.And: "and", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&", ast.LShift: "<<"}
_SYMBOLS |= {ast.RShift: ">>", ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//"}
_SYMBOLS |= {ast.Mod: "%", ast.MatMult: "@", ast.Pow: "**", ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<"}
_SYMBOLS |= {ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in"}
_SYMBOLS |= {ast.NotIn: "not in", ast.Not: "not ", ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}


class _Unsupported(Exception):
    """A construct this module does not lay out: the line stays as it was."""


@dataclass
class _Source:
    """One line's text, and the expressions in it: where their text is and whether it is in parentheses."""

    text: str
    unbroken: bool = False  # an expression ruff may break is written as it is (a comprehension, a literal, ...)

    def segment(self, node: ast.expr) -> str:
        found = ast.get_source_segment(self.text, node)
        if found is None or "\n" in found:
            raise _Unsupported
        self.unbroken |= not isinstance(node, ast.Name | ast.Constant)
        return found

    def parenthesized(self, node: ast.expr) -> bool:
        """Is the expression written in parentheses of its own (not those of a call around it)?"""
        before = self.text[: node.col_offset].rstrip()
        after = self.text[node.end_col_offset :].lstrip()
        return before.endswith("(") and after.startswith(")") and not _is_call_parenthesis(before)

    def doc(self, node: ast.expr, in_parentheses: bool) -> Doc:
        """The expression, its operators breakable where ``in_parentheses`` (ruff breaks them only there)."""
        if self.parenthesized(node):
            return bracketed("(", [self._unparenthesized(node, True)], ")", trailing_comma=False)
        return self._unparenthesized(node, in_parentheses)

    def _unparenthesized(self, node: ast.expr, in_parentheses: bool) -> Doc:
        if isinstance(node, ast.Call):
            arguments = [self.doc(argument, True) for argument in node.args]
            arguments += [self._keyword(keyword) for keyword in node.keywords]
            if any(isinstance(argument, ast.Starred | ast.GeneratorExp) for argument in node.args):
                raise _Unsupported  # (a starred one's order among keywords is not kept here)
            return [self.doc(node.func, in_parentheses), bracketed("(", arguments, ")")]
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, int | float):
                raise _Unsupported  # 1 .real
            if _calls_in_chain(node) > 1:
                raise _Unsupported  # ruff lays out a chain of calls one a line (its fluent style)
            return [self.doc(node.value, in_parentheses), f".{node.attr}"]
        if isinstance(node, ast.Subscript):
            index = node.slice
            if isinstance(index, ast.Tuple) and not self.parenthesized(index):
                items = [self.doc(item, True) for item in index.elts]
                return [self.doc(node.value, in_parentheses), bracketed("[", items, "]")]
            return [self.doc(node.value, in_parentheses), bracketed("[", [self.doc(index, True)], "]", False)]
        if isinstance(node, ast.BoolOp | ast.Compare | ast.BinOp | ast.IfExp):
            return self._chain(list(self._operations(node)), in_parentheses)
        if isinstance(node, ast.UnaryOp):
            return [_SYMBOLS[type(node.op)], self.doc(node.operand, in_parentheses)]
        if isinstance(node, ast.Dict):
            entries: list[Doc] = [
                [self.doc(key, True), ": ", self.doc(value, True)] if key is not None else ["**", self.doc(value, True)]
                for key, value in zip(node.keys, node.values, strict=True)
            ]
            return bracketed("{", entries, "}", collection=True)
        if isinstance(node, ast.Tuple) and len(node.elts) == 1 and self.text[node.col_offset] == "(":
            return bracketed("(", [self.doc(node.elts[0], True)], ")", single_comma=True)
        if isinstance(node, ast.List) or (isinstance(node, ast.Tuple) and len(node.elts) > 1):
            if isinstance(node, ast.Tuple) and not self.segment(node).startswith("("):
                raise _Unsupported
            opening, closing = ("[", "]") if isinstance(node, ast.List) else ("(", ")")
            return bracketed(opening, [self.doc(item, True) for item in node.elts], closing, collection=True)
        return self.segment(node)

    def _keyword(self, keyword: ast.keyword) -> Doc:
        return [f"{keyword.arg}=" if keyword.arg else "**", self.doc(keyword.value, True)]

    def _operations(self, node: ast.expr, root: bool = True) -> Iterator[ast.expr | tuple[str, int]]:
        """The operands and operators of a chain of operations (below the root, those written without
        parentheses), in order; an operator as (its text, how loosely it binds)."""
        if not root and (self.parenthesized(node) or isinstance(node, ast.IfExp)):
            yield node
        elif isinstance(node, ast.IfExp):
            yield from self._operations(node.body, False)
            yield "if", _LOOSENESS[ast.IfExp]
            yield from self._operations(node.test, False)
            yield "else", _LOOSENESS[ast.IfExp]
            yield from self._operations(node.orelse, False)
        elif isinstance(node, ast.BoolOp):
            for number, value in enumerate(node.values):
                if number:
                    yield _SYMBOLS[type(node.op)], _LOOSENESS[type(node.op)]
                yield from self._operations(value, False)
        elif isinstance(node, ast.Compare):
            yield from self._operations(node.left, False)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                yield _SYMBOLS[type(op)], _LOOSENESS["compare"]
                yield from self._operations(comparator, False)
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow):
                raise _Unsupported  # ruff hugs simple operands of ``**``
            yield from self._operations(node.left, False)
            yield _SYMBOLS[type(node.op)], _LOOSENESS[type(node.op)]
            yield from self._operations(node.right, False)
        else:
            yield node

    def _chain(self, items: list[ast.expr | tuple[str, int]], in_parentheses: bool) -> Doc:
        """Operands and operators, broken before each of the loosest operators (in parentheses only), each run of
        tighter ones a group of its own."""
        if len(items) == 1:
            only = items[0]
            assert isinstance(only, ast.expr)
            return self.doc(only, in_parentheses)
        loosest = max(item[1] for item in items if isinstance(item, tuple))
        runs: list[list[ast.expr | tuple[str, int]]] = [[]]
        operators: list[str] = []
        for item in items:
            if isinstance(item, tuple) and item[1] == loosest:
                operators.append(item[0])
                runs.append([])
            else:
                runs[-1].append(item)
        parts: list[Doc] = [self._chain(runs[0], in_parentheses)]
        for operator, run in zip(operators, runs[1:], strict=True):
            parts += [Break() if in_parentheses else " ", f"{operator} ", self._chain(run, in_parentheses)]
        return Group(parts) if in_parentheses else parts


def _calls_in_chain(node: ast.expr) -> int:
    """How many attributes of the chain ``a.b(x).c[i].d`` follow a call or a subscript."""
    count = 0
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        inner = node.func if isinstance(node, ast.Call) else node.value
        count += isinstance(node, ast.Attribute) and isinstance(inner, ast.Call | ast.Subscript)
        node = inner
    return count


def _is_call_parenthesis(before: str) -> bool:
    """Is the ``(`` that ``before`` ends with a call's (after a name, a closing bracket or a string)?"""
    ahead = before[:-1].rstrip()
    if not ahead:
        return False
    last = ahead[-1]
    keyword = re.search(r"\b(and|or|not|in|is|if|else|return|lambda|await|elif|while|assert|del)$", ahead)
    return (last.isalnum() or last in "_)]\"'") and keyword is None


@dataclass
class _Shape:
    """What ruff looks at to decide whether a statement's expression needs parentheses to break: its loosest
    operators, and whether it begins or ends in brackets it can break instead."""

    source: _Source
    loosest: int = 0
    count: int = 0
    any_brackets: bool = False
    first: ast.expr | None = None
    last: ast.expr | None = None

    def visit(self, node: ast.expr) -> None:
        self.last = node
        if self.source.parenthesized(node):
            self.any_brackets = True
        else:
            self._inside(node)
        if self.first is None:
            self.first = node

    def _operator(self, looseness: int, count: int = 1) -> None:
        if looseness > self.loosest:
            self.loosest, self.count = looseness, count
        elif looseness == self.loosest:
            self.count += count

    def _inside(self, node: ast.expr) -> None:
        if isinstance(node, ast.IfExp):
            self._operator(_LOOSENESS[ast.IfExp], 2)
            for part in (node.body, node.test, node.orelse):
                self.visit(part)
        elif isinstance(node, ast.BoolOp):
            self._operator(_LOOSENESS[type(node.op)], len(node.values) - 1)
            for value in node.values:
                self.visit(value)
        elif isinstance(node, ast.Compare):
            self._operator(_LOOSENESS["compare"], len(node.ops))
            for operand in [node.left, *node.comparators]:
                self.visit(operand)
        elif isinstance(node, ast.BinOp):
            self._operator(_LOOSENESS[type(node.op)])
            self.visit(node.left)
            self.visit(node.right)
        elif isinstance(node, ast.UnaryOp):
            self.visit(node.operand)
        elif isinstance(node, ast.Call | ast.Subscript):
            self.any_brackets = True
            self.visit(node.func if isinstance(node, ast.Call) else node.value)
            self.last = node
        elif isinstance(node, ast.Attribute):
            self.visit(node.value)
            self.last = node
        elif isinstance(node, ast.List | ast.Tuple | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
            raise _Unsupported  # (ruff breaks them in their brackets, which is not done here)
        elif self.first is None:
            self.first = _TOKEN

    def breaks_in_its_brackets(self) -> bool:
        """ruff's ``can_omit_optional_parentheses``: the expression breaks in its own brackets, without
        parentheses around it."""
        if not self.any_brackets or self.count > 1:
            return False
        if self.loosest == 0:
            return True
        return self._bracketed(self.last) or self._bracketed(self.first)

    def _bracketed(self, node: ast.expr | None) -> bool:
        if node is None or node is _TOKEN or isinstance(node, ast.Subscript):
            return False
        if self.source.parenthesized(node):
            return True
        if isinstance(node, ast.Call):
            return bool(node.args or node.keywords)
        return False


_TOKEN = ast.Name("")  # _Shape.first for an expression that begins with a name or a constant


class _Fit(enum.Enum):
    """Which lines of a candidate layout must fit for ruff to take it over the next."""

    FIRST = enum.auto()  # optional parentheses (``if`` and ``while``): the first line
    ALL = enum.auto()  # the last expression of an assignment or a ``return``: every line


@dataclass(frozen=True)
class _Candidates:
    """A statement's expression laid out in the ways ruff tries, in its order: the first whose lines fit is taken,
    else the last."""

    docs: list[Doc]
    fit: _Fit

    def around(self, before: Doc, after: Doc = "") -> _Candidates:
        """The candidates as parts of a statement: ``before`` and ``after`` them on its lines."""
        return _Candidates([[before, doc, after] for doc in self.docs], self.fit)


def _value_doc(source: _Source, value: ast.expr, fit: _Fit) -> _Candidates:
    """A statement's expression, as ruff writes it: broken in its own brackets (a call's, a subscript's) where the
    expression ends or begins in them and has a single operator of its loosest kind, else (or where that does not
    fit) in parentheses around it, which an assignment or a ``return`` also tries with the expression on one line."""
    if isinstance(value, ast.Tuple) and not source.parenthesized(value):
        raise _Unsupported  # (ruff puts parentheses around a tuple in some places, not in others)
    shape = _Shape(source)
    shape.visit(value)
    flat = _Printer(len(source.text) * 2).print(source.doc(value, False), 0)
    on_one_line = Group(["(", Indented([Break(soft=True), flat]), Break(soft=True), ")"], broken=True)
    if not shape.any_brackets and not isinstance(value, ast.BoolOp | ast.Compare | ast.BinOp | ast.IfExp):
        if fit is _Fit.FIRST:
            raise _Unsupported  # nothing to break
        return _Candidates([on_one_line, flat], fit)  # in parentheses only where that makes it fit
    in_brackets = source.doc(value, False) if shape.breaks_in_its_brackets() else None
    parenthesized = parenthesized_if_broken(source.doc(value, True))
    if fit is _Fit.ALL:
        tried = [in_brackets] if in_brackets is not None else []
        last = in_brackets if in_brackets is not None and not shape.loosest else parenthesized
        return _Candidates([*tried, on_one_line, parenthesized, last], fit)
    if in_brackets is not None and not shape.loosest:  # a call or a subscript: never in parentheses
        return _Candidates([in_brackets], fit)
    return _Candidates([in_brackets, parenthesized] if in_brackets is not None else [parenthesized], fit)


_HEADERS = re.compile(r"(if|elif|while) (.*):$")


def statement_lines(line: str, width: int) -> str | None:
    """The statement on ``line`` (its own indentation first, no line end) laid out in lines of ``width`` as ruff
    lays it out; None where this module cannot tell how, or the lines would not parse to the line's tree (the line
    is then left as it was)."""
    if not line.isascii():
        return None  # (the parser's columns are in bytes)
    indent = line[: len(line) - len(line.lstrip())]
    body = line.strip()
    header = _HEADERS.match(body)
    try:
        if header is not None:  # its expression, compared alone (an ``elif`` does not parse on its own)
            keyword, test = header.groups()
            source = _Source(test)
            candidates = _value_doc(source, _expression(test), _Fit.FIRST)
            parts: list[Doc | _Candidates] = [candidates.around(f"{keyword} ", ":")]
            compared = _Compared(len(keyword) + 1, -1, test, "eval")
        elif body.startswith("def ") and body.endswith(":"):
            source = _Source(body)
            parts = _signature(source)
            compared = _Compared(0, None, body, "exec", "\n    pass")
        elif body.startswith("@"):
            source = _Source(body[1:])
            parts = ["@", source.doc(_expression(body[1:]), False)]
            compared = _Compared(1, None, body[1:], "eval")
        else:
            source = _Source(body)
            parts = _simple_statement(source)
            compared = _Compared(0, None, body, "exec")
    except (_Unsupported, SyntaxError, ValueError):
        return None
    laid = _print(parts, width, len(indent))
    if source.unbroken and any(len(line) > width for line in laid.splitlines()):
        return None  # ruff might break what is written as it is here
    return indent + laid.lstrip() if compared.same(laid.strip()) else None


@dataclass(frozen=True)
class _Compared:
    """What of a statement's lines is parsed and compared with what text, to tell that they mean the same."""

    start: int
    end: int | None
    expected: str
    mode: str  # ast.parse's: "eval" or "exec"
    body: str = ""  # a compound statement's, to parse its header

    def same(self, laid: str) -> bool:
        try:
            tree = ast.parse(laid[self.start : self.end] + self.body, mode=self.mode)
            return ast.dump(tree) == ast.dump(ast.parse(self.expected + self.body, mode=self.mode))
        except SyntaxError:
            return False


def _print(parts: list[Doc | _Candidates], width: int, indent: int) -> str:
    """The statement's parts printed, its expression in the first of its candidate layouts that fits."""
    candidates = next((part for part in parts if isinstance(part, _Candidates)), None)
    if candidates is None:
        return _Printer(width).print(list(parts), indent)
    for number, doc in enumerate(candidates.docs):
        laid = _Printer(width).print([doc if part is candidates else part for part in parts], indent)
        lines = (" " * indent + laid).split("\n")
        if number == len(candidates.docs) - 1 or all(len(line) <= width for line in _checked(lines, candidates.fit)):
            return laid
    raise AssertionError("unreachable: the last candidate is taken")


def _checked(lines: list[str], fit: _Fit) -> list[str]:
    return lines[:1] if fit is _Fit.FIRST else lines


def _expression(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def _signature(source: _Source) -> list[Doc | _Candidates]:
    """``def f(a: int, b: float) -> int:`` with its parameters broken as a call's arguments are; only plain
    parameters, as the generated functions have."""
    (function,) = ast.parse(source.text + "\n    pass").body
    if not isinstance(function, ast.FunctionDef) or function.decorator_list:
        raise _Unsupported
    arguments = function.args
    if arguments.posonlyargs or arguments.vararg or arguments.kwonlyargs or arguments.kwarg or arguments.defaults:
        raise _Unsupported
    parameters: list[Doc] = [
        [f"{arg.arg}: ", source.doc(arg.annotation, True)] if arg.annotation else arg.arg for arg in arguments.args
    ]
    returns = f" -> {source.segment(function.returns)}" if function.returns else ""
    return [f"def {function.name}", bracketed("(", parameters, ")", parameters=True), f"{returns}:"]


_TARGETS = ast.Name | ast.Attribute | ast.Subscript | ast.Tuple  # assigned to, written as they are


def _simple_statement(source: _Source) -> list[Doc | _Candidates]:
    """``return x``, ``x = y``, ``x += y``, or an expression, with the expression laid out."""
    (statement,) = ast.parse(source.text).body
    if isinstance(statement, ast.Return) and statement.value is not None:
        return [_value_doc(source, statement.value, _Fit.ALL).around("return ")]
    if isinstance(statement, ast.Assign) and all(isinstance(t, _TARGETS) for t in statement.targets):
        targets = "".join(f"{source.segment(target)} = " for target in statement.targets)
        candidates = _value_doc(source, statement.value, _Fit.ALL).around(targets)
        (target, *others) = statement.targets
        if others or not isinstance(target, ast.Subscript):
            return [candidates]
        # Where no layout of the value fits, ruff breaks the brackets of the target, the value on one line.
        flat = _Printer(len(source.text) * 2).print(source.doc(statement.value, False), 0)
        target_broken = [source.doc(target, False), " = ", flat]
        return [_Candidates([*candidates.docs[:-1], target_broken, candidates.docs[-1]], candidates.fit)]
    if isinstance(statement, ast.AugAssign) and isinstance(statement.target, _TARGETS):
        operator = _SYMBOLS.get(type(statement.op))
        if operator is None:
            raise _Unsupported
        assigned = f"{source.segment(statement.target)} {operator}= "
        return [_value_doc(source, statement.value, _Fit.ALL).around(assigned)]
    if isinstance(statement, ast.Expr) and not isinstance(statement.value, ast.Tuple | ast.BinOp):
        return [source.doc(statement.value, False)]  # (ruff adds no parentheses to break it)
    raise _Unsupported


def quoted(text: str, style: QuoteStyle) -> str:
    """``text`` with each string in ``style``'s quotes where it contains no quote of either kind (so nothing is
    escaped or unescaped), as ruff writes strings; f-strings are left as they are on Python 3.12 and later, which
    splits them into tokens."""
    if style is QuoteStyle.PRESERVE:
        return text
    other = "'" if style is QuoteStyle.DOUBLE else '"'
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (line index, column, new token)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text
    for token in tokens:
        if token.type != tokenize.STRING or token.start[0] != token.end[0]:
            continue
        prefix = len(token.string) - len(token.string.lstrip("rRbBuUfF"))
        quote = token.string[prefix:][:3] if token.string[prefix:].startswith(other * 3) else token.string[prefix]
        inner = token.string[prefix + len(quote) : len(token.string) - len(quote)]
        if quote[0] != other or "'" in inner or '"' in inner or (len(quote) == 3 and style is QuoteStyle.SINGLE):
            continue  # (ruff writes docstrings in double quotes whatever the style: triple-quoted strings are kept)
        mine = style.value * len(quote)
        edits.append((token.start[0] - 1, token.start[1], token.string[:prefix] + mine + inner + mine))
    for line, column, new in edits:  # (each as long as the token it replaces)
        lines[line] = lines[line][:column] + new + lines[line][column + len(new) :]
    return "".join(lines)


_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr)
_MAGIC_TRAILING_COMMA = re.compile(r",\s*[)\]}]")


def _rejoined_statements(text: str, indent: str, width: int) -> dict[int, tuple[int, str]]:
    """The user's statements that span lines (kept as written, at another indentation now), where ruff would lay
    them out otherwise: on one line where that fits, else split again where a line is too long. By their first line
    (0-based): (their last line, their new text). A statement with a comment, a backslash, a string over lines or a
    magic trailing comma is left as it is, as is one whose new text would parse to another tree."""
    found: dict[int, tuple[int, str]] = {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return found
    lines = text.splitlines()
    inside = string_lines(text)
    for node in ast.walk(tree):
        if not isinstance(node, _SIMPLE) or node.end_lineno is None or node.end_lineno == node.lineno:
            continue
        first, last = node.lineno - 1, node.end_lineno - 1
        written = lines[first : last + 1]
        if any(
            "#" in line or line.endswith("\\") or number + 1 in inside for number, line in enumerate(written, first)
        ):
            continue
        joined = written[0].rstrip()
        for line in written[1:]:
            piece = line.strip()
            tight = joined.endswith(("(", "[", "{")) or piece.startswith((")", "]", "}", "."))
            joined += piece if tight else " " + piece
        if _MAGIC_TRAILING_COMMA.search(joined) or _concatenates_strings(joined):
            continue
        joined = _without_redundant_parentheses(joined)
        if not _same_tree(joined, node):
            continue
        too_long = any(len(indent) + len(line) > width for line in written)
        if len(indent) + len(joined) <= width:
            found[first] = (last, joined)
        elif too_long and (split := statement_lines(joined, width - len(indent))) is not None:
            found[first] = (last, split)
    return found


def _concatenates_strings(line: str) -> bool:
    """Does the line hold two string literals in a row (implicit concatenation, which ruff lays out its own way)?"""
    try:
        kinds = [token.type for token in tokenize.generate_tokens(io.StringIO(line.strip()).readline)]
    except (tokenize.TokenError, SyntaxError):
        return True
    return any(a == b == tokenize.STRING for a, b in itertools.pairwise(kinds))


def _same_tree(line: str, statement: ast.stmt) -> bool:
    try:
        (parsed,) = ast.parse(line.strip()).body
    except (SyntaxError, ValueError):
        return False
    return ast.dump(parsed) == ast.dump(statement)


def _without_redundant_parentheses(line: str) -> str:
    """A statement's line, the parentheses around an assigned or returned value dropped as ruff drops them (as it
    is, where it does not parse)."""
    try:
        (statement,) = ast.parse(line.strip()).body
    except (SyntaxError, ValueError):
        return line
    value = getattr(statement, "value", None)
    if isinstance(statement, ast.Expr) or not isinstance(value, ast.expr) or isinstance(value, ast.Tuple):
        return line
    offset = len(line) - len(line.lstrip())
    start, end = offset + value.col_offset, offset + (value.end_col_offset or 0)
    before, after = line[:start].rstrip(), line[end:].lstrip()
    if not (before.endswith("(") and after == ")"):
        return line
    unwrapped = before[:-1].rstrip() + " " + line[start:end]
    try:
        same = ast.dump(ast.parse(unwrapped.strip())) == ast.dump(ast.parse(line.strip()))
    except SyntaxError:
        return line
    return unwrapped if same else line


def laid_out(text: str, indent: str, width: int) -> str:
    """Generated functions (``text``, at column 0) as ruff would format them once indented by ``indent`` in lines
    of ``width``: long statements split, the user's statements over several lines laid out again
    (``_rejoined_statements``). Their strings are left to ``quoted``."""
    inside = string_lines(text)
    lines = text.splitlines(keepends=True)
    for first, (last, rejoined) in sorted(_rejoined_statements(text, indent, width).items(), reverse=True):
        lines[first : last + 1] = [rejoined + "\n", *([""] * (last - first))]
    for number, line in enumerate(lines):
        if not line:
            continue
        bare = line.rstrip("\r\n")
        if len(indent) + len(bare) > width and number + 1 not in inside and "#" not in bare:
            split = statement_lines(bare, width - len(indent))
            if split is not None:
                lines[number] = split + "\n"
    return "".join(lines)
