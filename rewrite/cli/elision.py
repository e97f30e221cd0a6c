"""Leaving out, before ``--check`` parses a file, the bodies of the functions it never reads.

Why: parsing is most of a ``--check`` run, and most of a codebase is host code (a simulator's builders, its
tests' bodies) that no check reads. What the checks read of a file is its module level, its kernels and helpers
(and every function that defines or makes one), its ``wp.launch`` calls, its changes of module options and the
``return`` statements of helper factories. So the body of a plain function is left out when its code (strings and
comments aside) has none of the words those need: ``.kernel``/``.Kernel``, ``.func`` (also ``func_replay``...),
``.options`` or ``set_module_options``. Its ``wp.launch(...)`` calls are kept as text (``ElidedBody.launches``):
WR004 parses the body only where one may launch a kernel wp-rewrite rewrote. What the words cannot tell is checked
on the tree (``StaticModule.parse_for_check``): no left-out function has a Warp decorator or is made a kernel, and
no left-out body names one of the file's names for a Warp member, a function that makes kernels or a plain
function made one. A factory's body is parsed when resolution asks for it (``StaticModule.full_body``).

The scanner reads lines, not tokens, and gives up (``None``: parse it all) on anything it cannot be sure of: tabs or
form feeds in indentation, ``\\r`` line endings, a null byte, an f-string it cannot read as Python 3.11 does (3.12
lets a field hold the string's own quote), code that Python's NFKC reading of identifiers changes (``wp.ｋernel``);
it keeps a body that does not close its brackets or has no code. The code in an f-string's fields stays in the
masked code (``f"{wp.launch(k, 1)}"`` is a launch). Each left-out body becomes one ``...`` line and blank lines, so
every line and column of what is kept stays where it was. A syntax error inside a left-out body is not seen: as in
the files ``--check`` does not parse at all, it is left to ruff's E999.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cached_property

# Strings and comments, which the scanner masks so that their brackets, quotes, ``def``s and words do not count.
_STRING_OR_COMMENT = re.compile(  # runs of plain characters taken at once (``++``): a fifth of the time
    r"#[^\n]*+"
    r"|'''(?:[^'\\]++|\\.|'(?!''))*+'''"
    r'|"""(?:[^"\\]++|\\.|"(?!""))*+"""'
    r"|'(?:[^'\\\n]++|\\.)*+'"
    r'|"(?:[^"\\\n]++|\\.)*+"',
    re.DOTALL,
)
_INSIDE_STRING = "\x00"  # starts each masked line that begins inside a multi-line string
_DEF = re.compile(r"def +(\w+)")  # a ``def`` where only spaces stand before it on its line (checked by ``elide``)
_GAP = r"[\s\\]*"  # what may stand between ``wp``, ``.`` and a name: spaces, newlines, line continuations
_MAKES_KERNEL = re.compile(r"\." + _GAP + r"[Kk]ernel\b")
_NAME = re.compile(r"[A-Za-z_]\w*")
_MADE_REACH = 400  # how far after ``.kernel``/``.Kernel`` the names it may make a kernel of are looked for
_TAB_OR_FEED_INDENT = re.compile(r"^ *[\t\f]", re.MULTILINE)
# The words that keep a body: what the checks look for outside kernels and helpers (module docstring).
_READ_WORDS = re.compile(r"\." + _GAP + r"(?:[Kk]ernel\b|func|options\b|set_module_options\b)")
_READ_HINTS = ("ernel", "func", "options")  # what every match of ``_READ_WORDS`` holds: found faster
# ``wp.launch(`` in a left-out body: only a launch of a kernel wp-rewrite rewrote (WR004) needs it, which
# ``lint.launches_of_rewritten_kernels`` asks of the call's text before it parses the body.
_LAUNCH = re.compile(r"\." + _GAP + r"launch\b(" + _GAP + r"\()?")
_IMPORT = re.compile(r"\bimport\b")
_BRACKET = re.compile(r"[()\[\]{}]")
_CODE = re.compile(r"\S")  # in masked code: a comment is gone, a string is ``_``
_PLACEHOLDER = "..."


@dataclass(frozen=True)
class ElidedBody:
    """The lines of one left-out body (1-based, inclusive) and the column of the ``def`` they belong to."""

    definition: int  # the line of ``def``
    first: int
    last: int
    indent: int  # the column of ``def``; the placeholder ``...`` sits one further in
    # The argument lists of the body's ``.launch(...)`` calls, strings and comments masked (``"(k, dim, [_])"``);
    # None where the scanner cannot list them all so (an ``import`` in the body, a ``.launch`` not called).
    launches: tuple[str, ...] | None = ()

    @property
    def placeholder_column(self) -> int:
        return self.indent + 1


@dataclass(frozen=True)
class Elision:
    """A file's text with the bodies left out (``text``), what was left out, and its code (strings and comments
    masked) for the checks on names made after the parse."""

    text: str
    bodies: tuple[ElidedBody, ...]
    code: str  # the file's text with strings and comments masked
    spans: tuple[tuple[int, int], ...]  # where in ``code`` each left-out body is

    def mentions(self, words: tuple[str, ...]) -> bool:
        """True if the file's code, strings and comments aside, has one of ``words`` (a word in a docstring does
        not count)."""
        return any(word in self.code for word in words)

    @cached_property
    def left_out_code(self) -> str:
        return "\n".join(self.code[start:stop] for start, stop in self.spans)

    def names_any(self, names: set[str]) -> bool:
        """True if some left-out body names one of ``names`` (as a whole word)."""
        found = [name for name in names if name in self.left_out_code]
        if not found:
            return False
        return re.search(r"\b(?:" + "|".join(map(re.escape, found)) + r")\b", self.left_out_code) is not None


class _Unsure(Exception):
    """Raised while masking where the scanner cannot be sure it reads the text as Python does."""


def _mask(match: re.Match[str]) -> str:
    found = match.group()
    if found[0] == "#":
        return ""
    start = match.start()
    prefix = match.string[max(0, start - 2) : start]
    letters = "" if not prefix[-1:].isalpha() else prefix if prefix[:1].isalpha() else prefix[-1]
    if "f" in letters.lower() and ("{" in found or "}" in found):  # an f-string (or a name ending in f: careful)
        return _with_fields(found, raw="r" in letters.lower())
    return "_" + ("\n" + _INSIDE_STRING) * found.count("\n")


# What the f-string reader stops at, by where it is: the literal text, a field's expression, its format spec.
_LITERAL_MARK = re.compile(r"[{}\\]")
_EXPRESSION_MARK = re.compile(r"[{}()\[\]\'\"!:]")
_SPEC_MARK = re.compile(r"[{}]")


def _with_fields(found: str, raw: bool) -> str:
    """The mask of the f-string ``found`` (its quotes included) that keeps the code of its replacement fields:
    ``_``, then each field's code in brackets (its strings masked) at the end of the line where the field ends, so
    that the words and calls in ``f"{wp.launch(k, 1)}"`` count as the code they are. Read as Python 3.11 reads it
    (``{{`` and ``}}`` outside fields, ``\\N{...}``, a format spec's nested fields); ``_Unsure`` where it cannot be
    (Python 3.12 lets a field hold the string's own quote)."""
    quote = _quote_at(found, 0)
    content = found[len(quote) : len(found) - len(quote)]
    pieces, done, index = ["_"], 0, 0
    while (mark := _LITERAL_MARK.search(content, index)) is not None:
        index = mark.start()
        pair = content[index : index + 2]
        if pair in ("{{", "}}"):
            index += 2
        elif pair[0] == "{":
            end, codes = _field(content, index + 1)
            field = _STRING_OR_COMMENT.sub(_mask, "\n".join(codes))  # (3.12 lets a field hold a comment)
            field = field.replace("\n" + _INSIDE_STRING, " ").replace("\n", " ")
            if "'" in field or '"' in field:
                raise _Unsure
            pieces += ["\n" + _INSIDE_STRING] * content.count("\n", done, end) + [f"({field})"]
            done = index = end
        elif pair[0] == "}":
            raise _Unsure  # a single ``}`` outside a field is a syntax error
        elif pair == "\\N" and not raw and content[index + 2 : index + 3] == "{":
            index = content.find("}", index) + 1  # ``\\N{EM DASH}``: a character, not a field
            if index == 0:
                raise _Unsure
        else:  # a backslash escapes the next character, but not a brace
            index += 2 if not raw and pair[1:] not in "{}" else 1
    pieces += ["\n" + _INSIDE_STRING] * content.count("\n", done)
    return "".join(pieces)


def _quote_at(text: str, index: int) -> str:
    """The quotes that open the string at ``text[index]``: three or one."""
    return text[index : index + 3] if text[index : index + 3] in ('"""', "'''") else text[index]


def _field(content: str, start: int) -> tuple[int, list[str]]:
    """The replacement field whose code starts at ``start`` (after its ``{``): where it ends (after its ``}``) and
    the code of its expression and of the fields in its format spec."""
    depth, index = 0, start
    while (mark := _EXPRESSION_MARK.search(content, index)) is not None:
        index, char = mark.start(), mark.group()
        if char in "'\"":  # a string in the expression: to its closing quote
            quote = _quote_at(content, index)
            close = content.find(quote, index + len(quote))
            if close < 0:
                raise _Unsure
            index = close + len(quote)
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}" and depth:
            depth -= 1
        elif char == "}":
            return index + 1, [content[start:index]]
        elif depth == 0 and (char == ":" or (char == "!" and content[index + 1 : index + 2] != "=")):
            codes = [content[start:index]]
            if char == "!":  # ``!r``: the conversion, then the spec or the end
                index += 2
                if content[index : index + 1] == "}":
                    return index + 1, codes
                if content[index : index + 1] != ":":
                    raise _Unsure
            return _spec(content, index + 1, codes)
        index += 1
    raise _Unsure


def _spec(content: str, index: int, codes: list[str]) -> tuple[int, list[str]]:
    """A field's format spec from ``index`` (``>{width}``): where the field ends, and ``codes`` with the code of the
    fields in the spec."""
    while (mark := _SPEC_MARK.search(content, index)) is not None:
        if mark.group() == "}":
            return mark.end(), codes
        index, nested = _field(content, mark.end())
        codes += nested
    raise _Unsure


def _balance(code: str, start: int = 0, stop: int | None = None) -> int:
    """How many more brackets ``code[start:stop]`` opens than it closes."""
    opened = code.count("(", start, stop) + code.count("[", start, stop) + code.count("{", start, stop)
    return opened - code.count(")", start, stop) - code.count("]", start, stop) - code.count("}", start, stop)


_ENDS: dict[int, re.Pattern[str]] = {}


def _end_of_body(indent: int) -> re.Pattern[str]:
    """A line of code at most ``indent`` columns in (with the newline before it): where a body that started deeper
    ends."""
    found = _ENDS.get(indent)
    if found is None:
        found = _ENDS[indent] = re.compile(rf"\n {{0,{indent}}}[^ \n{_INSIDE_STRING}]")
    return found


def elide(text: str) -> Elision | None:
    """``text`` with the bodies no check reads left out (maybe none); None where the scanner cannot be sure (parse
    it all)."""
    if "\r" in text or "\x00" in text:
        return None
    try:
        code = _STRING_OR_COMMENT.sub(_mask, text)
    except _Unsure:
        return None
    if ("\t" in code or "\f" in code) and _TAB_OR_FEED_INDENT.search(code):
        return None  # (tabs inside strings, XML or text a test compares, are masked: they do not count)
    if not code.isascii() and unicodedata.normalize("NFKC", code) != code:
        return None  # Python reads ``wp.ｋernel`` as ``wp.kernel``: the words would be missed
    made = _made_names(code)
    bodies: list[ElidedBody] = []
    spans: list[tuple[int, int]] = []
    skip_to = 0  # where in ``code`` the last body left out ends: the ``def``s before are inside it
    line = counted = 0  # the line (0-based) of the offset ``counted``
    for match in _DEF.finditer(code):
        start = match.start()
        if start < skip_to:
            continue
        line_start = code.rfind("\n", 0, start) + 1
        indent = start - line_start
        if indent and code.count(" ", line_start, start) != indent:
            continue  # ``undef x``, ``x; def f``
        if match.group(1) in made:  # ``wp.kernel(...)(solve)`` makes a kernel of ``solve``
            continue
        line += code.count("\n", counted, line_start)
        counted = line_start
        above = code[code.rfind("\n", 0, line_start - 1) + 1 : line_start - 1] if line_start else ""
        if above.lstrip(" ")[:1] in _DECORATOR_STARTS and _reads(_decorators(code, line_start)):
            continue  # ``@wp.kernel``, ``@wp.func``: a name of the file for them is checked on the tree
        body = _body(code, line_start, indent)
        if body is None:
            continue
        span, count = body
        if _reads(code, *span):
            continue
        first = line + code.count("\n", line_start, span[0])  # 0-based: the body's first line
        bodies.append(ElidedBody(line + 1, first + 1, first + count, indent, _launches(code, *span)))
        spans.append(span)
        skip_to = span[1]
    if not bodies:
        return Elision(text, (), code, ())
    kept = text.split("\n")
    for left in bodies:
        kept[left.first - 1] = " " * left.placeholder_column + _PLACEHOLDER
        kept[left.first : left.last] = [""] * (left.last - left.first)
    return Elision("\n".join(kept), tuple(bodies), code, tuple(spans))


def _reads(code: str, start: int = 0, stop: int | None = None) -> bool:
    """True if ``code[start:stop]`` has one of the words that keep a body."""
    stop = len(code) if stop is None else stop
    if all(code.find(hint, start, stop) < 0 for hint in _READ_HINTS):
        return False
    return _READ_WORDS.search(code, start, stop) is not None


def _launches(code: str, start: int, stop: int) -> tuple[str, ...] | None:
    """The argument lists of the ``.launch(...)`` calls in ``code[start:stop]``: ``ElidedBody.launches``."""
    if code.find("launch", start, stop) < 0:
        return ()
    if code.find("import", start, stop) >= 0 and _IMPORT.search(code, start, stop):
        return None
    found = []
    for match in _LAUNCH.finditer(code, start, stop):
        if match.group(1) is None:
            return None
        depth, opening = 0, match.end() - 1
        for bracket in _BRACKET.finditer(code, opening, stop):
            depth += 1 if bracket.group() in "([{" else -1
            if depth == 0:
                found.append(code[opening : bracket.end()])
                break
        else:
            return None
    return tuple(found)


def _made_names(code: str) -> set[str]:
    """The names in the code just after each ``.kernel``/``.Kernel``: the functions ``wp.Kernel(func=f)`` or
    ``wp.kernel(...)(f)`` may make kernels of, whose bodies are kept. (A call spread further, or a maker of the
    file's, is found by the tree check.)"""
    found: set[str] = set()
    for match in _MAKES_KERNEL.finditer(code):
        found.update(_NAME.findall(code, match.end(), match.end() + _MADE_REACH))
    return found


_DECORATOR_STARTS = ("@", ")", "]", "}", _INSIDE_STRING)  # a line above a ``def`` that may be its decorators


def _decorators(code: str, start: int) -> str:
    """The code above the ``def`` whose line begins at ``start`` that can be its decorators: going up, lines that
    start with ``@``, lines inside the brackets of one, and blank lines. (Read too much, a body is only kept; too
    little, the tree check finds the decorator.)"""
    first, depth = start, 0  # where the topmost line read begins
    while first > 0:
        above_start = code.rfind("\n", 0, first - 1) + 1
        above = code[above_start : first - 1]
        text = above.lstrip(" ")
        balance = _balance(above)
        if text and not (depth < 0 or depth + balance < 0 or text[0] in "@" + _INSIDE_STRING):
            break
        depth += balance
        first = above_start
    return code[first:start]


def _body(code: str, start: int, indent: int) -> tuple[tuple[int, int], int] | None:
    """Where the body of the ``def`` whose line begins at ``start`` is in ``code`` (from the start of its first line
    to that of the line after its last, or the end) and how many lines it counts; None for a body on the ``def``'s
    own line or anything the scanner is unsure of."""
    depth, line_start = 0, start
    for _ in range(100):
        line_end = code.find("\n", line_start)
        if line_end < 0:
            return None  # no line after the header
        text = code[line_start:line_end].rstrip()
        depth += _balance(text)
        if depth < 0:
            return None
        if depth == 0 and text.endswith(":"):
            break
        if depth == 0 and not text.endswith("\\"):
            return None  # ``def f(): return x``
        line_start = line_end + 1
    else:
        return None
    first = line_end + 1
    found = _end_of_body(indent).search(code, first - 1)
    if found is None:  # to the end, counted as ``code.split("\\n")`` counts (the empty line after a last newline too)
        stop, count = len(code), code.count("\n", first) + 1
    else:
        stop = found.start() + 1
        count = code.count("\n", first, stop)
    if count == 0 or _CODE.search(code, first, stop) is None:
        return None  # no code in the body (a comment, a blank line): the placeholder would hide the syntax error
    if _balance(code, first, stop) != 0 or _continued(code, first, stop):
        return None
    return (first, stop), count


def _continued(code: str, start: int, stop: int) -> bool:
    """True if ``code[start:stop]`` ends with a line continuation (``\\`` before trailing blanks)."""
    while stop > start and code[stop - 1].isspace():
        stop -= 1
    return stop > start and code[stop - 1] == "\\"
