"""A Python file as the command line reads it: its text and encoding, its tree, the names it binds to Warp (from its
import statements) and the blocks an earlier ``wp-rewrite`` run generated in it. Parsed, never imported or run."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from warp_rewrite.cli.elision import ElidedBody
from warp_rewrite.cli.markers import has_markers, read_begin, read_end
from warp_rewrite.passes.atomics import WarpNames
from warp_rewrite.passes.syntax import Located, walk


class ParseError(Exception):
    """A file that is not valid Python. ``str()`` is ``path:line:col: E999 SyntaxError: message``."""

    def __init__(self, display: str, line: int, column: int, message: str):
        super().__init__(f"{display}:{line}:{column}: E999 SyntaxError: {message}")
        self.display, self.line, self.column, self.message = display, line, column, message


@dataclass(frozen=True)
class SourceFile:
    """A file's text and the encoding it is written in (PEP 263: a coding cookie, else UTF-8)."""

    text: str
    encoding: str

    @classmethod
    def read(cls, path: Path) -> SourceFile:
        """Raises ``OSError``, ``UnicodeDecodeError`` and ``SyntaxError`` (an unknown coding cookie)."""
        raw = path.read_bytes()
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return cls(raw.decode(encoding), encoding)  # bytes.decode keeps the line endings as they are

    def encode(self, text: str) -> bytes:
        """``text`` in this file's encoding (``utf-8-sig`` puts the byte order mark back)."""
        return text.encode(self.encoding)


@dataclass(frozen=True)
class Imported:
    """What ``import``/``from ... import`` bound a local name to: a module, or a name in a module."""

    level: int  # leading dots of a relative import
    module: str  # dotted module path (may be empty for ``from . import x``)
    name: str | None  # the imported name; None when the local name is the module itself


@dataclass(frozen=True)
class WarpImports:
    """How a module spells Warp and ``typing.Any``, read from its import statements."""

    modules: frozenset[str]  # names bound to the warp module: {"wp"}
    members: dict[str, str]  # local name -> warp attribute, from ``from warp import atomic_add as add``
    any_name: str | None  # how the module can write typing.Any ("Any", "typing.Any"), if at all

    def names(self) -> WarpNames:
        return WarpNames(self.modules or frozenset({"wp"}), tuple(self.members.items()))

    def is_warp(self, expr: ast.expr, attr: str) -> bool:
        """True for ``wp.<attr>`` (any alias) and for a bare name imported as ``from warp import <attr>``."""
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            return expr.value.id in self.modules and expr.attr == attr
        return isinstance(expr, ast.Name) and self.members.get(expr.id) == attr

    def is_warp_expr(self, expr: ast.expr) -> bool:
        """True for anything reached from the warp module (``wp.types.vector``), which is never a user helper."""
        while isinstance(expr, ast.Attribute):
            expr = expr.value
        return isinstance(expr, ast.Name) and (expr.id in self.modules or expr.id in self.members)

    def decorated(self, node: ast.AST, attr: str) -> bool:
        """True for a function or class decorated ``@wp.<attr>`` or ``@wp.<attr>(...)``."""
        return self.decorator(node, attr) is not None

    def decorator(self, node: ast.AST, attr: str) -> ast.expr | None:
        if not isinstance(node, ast.FunctionDef | ast.ClassDef):
            return None
        return next(
            (d for d in node.decorator_list if self.is_warp(d.func if isinstance(d, ast.Call) else d, attr)), None
        )


def module_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Statements run at import time: the module body and the bodies of its top-level if/try blocks."""
    pending = list(tree.body)
    while pending:
        node = pending.pop(0)
        yield node
        if isinstance(node, ast.If | ast.Try):
            pending.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)


def imported_names(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, Imported]]:
    """(local name, what it is bound to) for each name an import statement binds."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            local = alias.asname or alias.name.split(".")[0]
            yield local, Imported(0, alias.name if alias.asname else local, None)
    else:
        for alias in node.names:
            yield alias.asname or alias.name, Imported(node.level, node.module or "", alias.name)


def read_imports(tree: ast.Module) -> tuple[WarpImports, dict[str, Imported]]:
    """The module's Warp names, and every other name its imports bind (for following helpers)."""
    modules: set[str] = set()
    members: dict[str, str] = {}
    any_name: str | None = None
    imported: dict[str, Imported] = {}
    for node in module_level(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for local, source in imported_names(node):
            if source.module == "warp" and source.level == 0 and source.name is None:
                modules.add(local)
            elif source.module == "warp" and source.level == 0 and source.name is not None:
                members[local] = source.name
            elif source.module == "typing" and source.name in (None, "Any") and any_name is None:
                any_name = f"{local}.Any" if source.name is None else local
            else:
                imported[local] = source
    aliases = _decorator_aliases(tree, WarpImports(frozenset(modules), members, any_name))
    return WarpImports(frozenset(modules), members | aliases, any_name), imported


_ALIASED_DECORATORS = ("func", "kernel")


def _decorator_aliases(tree: ast.Module, warp: WarpImports) -> dict[str, str]:
    """Module-level names bound once to one of Warp's decorators, configured or chosen by a condition:
    ``func_out_of_line = wp.func(inline=False) if new_warp else wp.func`` (Newton's ``support_map``). A function
    decorated with the name is Warp's, as if decorated with the decorator itself."""

    def decorator(value: ast.expr) -> str | None:
        if isinstance(value, ast.IfExp):
            chosen = {decorator(value.body), decorator(value.orelse)}
            return chosen.pop() if len(chosen) == 1 else None
        called = value.func if isinstance(value, ast.Call) else value
        return next((attr for attr in _ALIASED_DECORATORS if warp.is_warp(called, attr)), None)

    bound: dict[str, list[ast.expr]] = {}
    for node in module_level(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(node.value)
    return {
        name: attr for name, (value, *others) in bound.items() if not others and (attr := decorator(value)) is not None
    }


@dataclass(frozen=True)
class Region:
    """A block of code an earlier run generated: lines ``first``..``last`` (1-based, inclusive)."""

    kernel: str
    first: int
    last: int
    fingerprint: str | None = None  # what the begin marker says it was made from (None: an older version's)
    options: str = ""  # the command-line flags it was generated with


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_OTHER_LINE_BREAK = re.compile("[\v\f\x1c\x1d\x1e\x85\u2028\u2029]")  # where ``str.splitlines`` splits too


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where Python's tokenizer splits them (not at form feeds, unlike
    ``str.splitlines``), so that index ``n - 1`` is the AST's line ``n``."""
    if _OTHER_LINE_BREAK.search(text) is None:
        return text.splitlines(keepends=True)  # the same lines, ten times as fast
    return _LINE.findall(text)


def generated_regions(text: str) -> list[Region]:
    """The blocks earlier runs generated, found by their begin and end marker comments."""
    if not has_markers(text):
        return []
    regions, open_at = [], None
    for number, line in enumerate(split_lines(text), start=1):
        if open_at is None and (begin := read_begin(line)) is not None:
            open_at = (begin, number)
        elif open_at is not None and read_end(line) == open_at[0].kernel:
            begin, first = open_at
            regions.append(Region(begin.kernel, first, number, begin.fingerprint, begin.options))
            open_at = None
    return regions


_PICKED = (ast.FunctionDef, ast.ClassDef, ast.Call, ast.Assign)  # what ``definitions``, ``calls``, ``assignments`` list
_Parsed = TypeVar("_Parsed", bound="SourceModule")  # what ``parse`` makes: the class it is called on


@dataclass
class SourceModule:
    """One Python file, parsed but never imported: its text, tree, imports, and the blocks an earlier run generated."""

    path: Path
    display: str  # the path as messages print it
    text: str
    tree: ast.Module
    warp: WarpImports
    imported: dict[str, Imported]
    regions: list[Region]
    encoding: str = "utf-8"
    # The bodies ``--check`` left out of the tree (``warp_rewrite.cli.elision``), by the line of their ``def``.
    elided: dict[int, ElidedBody] = field(default_factory=dict)

    @classmethod
    def parse(cls: type[_Parsed], path: Path, display: str, text: str, encoding: str = "utf-8") -> _Parsed:
        try:
            tree = ast.parse(text, filename=display)
        except SyntaxError as error:
            raise ParseError(display, error.lineno or 1, error.offset or 1, error.msg) from None
        except ValueError as error:  # source with a null byte
            raise ParseError(display, 1, 1, str(error)) from None
        except RecursionError as error:  # an expression nested deeper than Python's parser builds trees
            raise ParseError(display, 1, 1, f"too deeply nested to build its syntax tree ({error})") from None
        warp, imported = read_imports(tree)
        return cls(path, display, text, tree, warp, imported, generated_regions(text), encoding)

    @cached_property
    def lines(self) -> list[str]:
        return split_lines(self.text)

    def column(self, line: int, offset: int) -> int:
        """The 1-based column, in characters, of the AST's ``offset`` (UTF-8 bytes) on ``line``."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return offset + 1 if text.isascii() else len(text.encode()[:offset].decode(errors="replace")) + 1

    def location(self, node: Located) -> str:
        """``path:line:col`` with a 1-based column, as editors and linters print it."""
        return f"{self.display}:{node.lineno}:{self.column(node.lineno, node.col_offset)}"

    def generated(self, node: Located) -> bool:
        return any(r.first <= node.lineno <= r.last for r in self.regions)

    # --- scopes ----------------------------------------------------------------------------------------------

    @cached_property
    def nodes(self) -> list[ast.AST]:
        """Every node of the file, listed once for all the questions asked of it: ``walk``'s order, but the nodes
        inside each Warp-decorated function come last, as ``function_nodes`` lists them (each node walked once)."""
        nodes = walk(self.tree, self._warp_decorated)
        apart = [node for node in nodes if type(node) is ast.FunctionDef and self._warp_decorated(node)]
        for function in apart:
            nodes += self.function_nodes(function)[1:]
        return nodes

    def _warp_decorated(self, function: ast.FunctionDef) -> bool:
        return any(self.warp.is_warp_expr(d.func if isinstance(d, ast.Call) else d) for d in function.decorator_list)

    def function_nodes(self, function: ast.FunctionDef) -> list[ast.AST]:
        """``walk(function)``, listed once a run: a kernel's or helper's nodes are read by several checks."""
        found = self._function_nodes.get(function)
        if found is None:
            found = self._function_nodes[function] = walk(function)
        return found

    @cached_property
    def _function_nodes(self) -> dict[ast.FunctionDef, list[ast.AST]]:
        return {}  # by the definition itself, which the dictionary keeps alive: an id could be reused

    @cached_property
    def _picked(self) -> list[ast.AST]:
        """All of ``definitions``, ``calls`` and ``assignments``, picked out of every node in one pass (a file has
        millions)."""
        return [node for node in self.nodes if isinstance(node, _PICKED)]

    @cached_property
    def definitions(self) -> list[ast.FunctionDef | ast.ClassDef]:
        """The file's functions and classes, at any depth (``nodes``' order): what decorators can make kernels and
        helpers of, asked about far more often than there are definitions."""
        return [node for node in self._picked if isinstance(node, ast.FunctionDef | ast.ClassDef)]

    @cached_property
    def calls(self) -> list[ast.Call]:
        """The file's calls (``nodes``' order)."""
        return [node for node in self._picked if isinstance(node, ast.Call)]

    @cached_property
    def assignments(self) -> list[ast.Assign]:
        """The file's ``=`` statements (``nodes``' order)."""
        return [node for node in self._picked if isinstance(node, ast.Assign)]


def position(node: Located) -> tuple[int, int]:
    return node.lineno, node.col_offset


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, as messages print file names."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def import_path(path: Path) -> str:
    """How a generated location names a file other than the module's own: its path from the folder its top-level
    package is in (``newton/_src/geometry/hashtable.py``), as its import names it (a folder without ``__init__.py``
    between packages is a namespace package: ``newton/_src``); for a module outside a package, its name. The same
    wherever wp-rewrite runs from and wherever the project lies."""
    real = path.resolve()
    top, outside = real.parent, 0
    for folder in real.parents:
        if (folder / "__init__.py").is_file():
            top, outside = folder.parent, 0
        else:
            outside += 1
            if outside == 2:
                break
    return real.relative_to(top).as_posix()
