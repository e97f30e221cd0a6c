"""A Python file as the command line sees it: parsed, never imported or run.

Which names the module binds to Warp (from its import statements), its top-level functions, the blocks an earlier
``wp-rewrite`` run generated in it, and the files of the user's project that helpers are followed into.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from warp_rewrite.passes.atomics import ATOMIC_OPS, AtomicCall, WarpNames, find_atomic_calls
from warp_rewrite.passes.syntax import walk

_BEGIN_RE = re.compile(r"^# ---- wp-rewrite: generated from kernel '(\w+)'")
_END_RE = re.compile(r"^# ---- wp-rewrite: end of the code generated from kernel '(\w+)'")
_NOT_FOLLOWED = frozenset({"warp", "numpy", "typing", "math"})


class ParseError(Exception):
    """A file that is not valid Python. ``str()`` is ``path:line: message``."""


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
        ops = {f"atomic_{op}": op for op in ATOMIC_OPS}
        bare = tuple((local, ops[attr]) for local, attr in self.members.items() if attr in ops)
        return WarpNames(self.modules or frozenset({"wp"}), bare)

    def is_warp(self, expr: ast.expr, attr: str) -> bool:
        """True for ``wp.<attr>`` (any alias) and for a bare name imported as ``from warp import <attr>``."""
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            return expr.value.id in self.modules and expr.attr == attr
        return isinstance(expr, ast.Name) and self.members.get(expr.id) == attr

    def decorated(self, node: ast.AST, attr: str) -> bool:
        """True for a function or class decorated ``@wp.<attr>`` or ``@wp.<attr>(...)``."""
        if not isinstance(node, ast.FunctionDef | ast.ClassDef):
            return False
        return any(self.is_warp(d.func if isinstance(d, ast.Call) else d, attr) for d in node.decorator_list)


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


def read_imports(tree: ast.Module) -> tuple[WarpImports, dict[str, Imported]]:
    """The module's Warp names, and every other name its imports bind (for following helpers)."""
    modules, members, any_name, imported = set(), {}, None, {}
    for node in module_level(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                target = alias.name if alias.asname else local
                if target == "warp":
                    modules.add(local)
                elif target == "typing" and any_name is None:
                    any_name = f"{local}.Any"
                else:
                    imported[local] = Imported(0, target, None)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                local = alias.asname or alias.name
                if node.level == 0 and node.module == "warp":
                    members[local] = alias.name
                elif node.level == 0 and node.module == "typing" and alias.name == "Any":
                    any_name = local
                else:
                    imported[local] = Imported(node.level, node.module or "", alias.name)
    return WarpImports(frozenset(modules), members, any_name), imported


@dataclass(frozen=True)
class Region:
    """A block of code an earlier run generated: lines ``first``..``last`` (1-based, inclusive)."""

    kernel: str
    first: int
    last: int


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where Python's tokenizer splits them (not at form feeds, unlike
    ``str.splitlines``), so that index ``n - 1`` is the AST's line ``n``."""
    return _LINE.findall(text)


def generated_regions(text: str) -> list[Region]:
    """The blocks earlier runs generated, found by their begin and end marker comments."""
    regions, open_at = [], None
    for number, line in enumerate(split_lines(text), start=1):
        if (begin := _BEGIN_RE.match(line)) and open_at is None:
            open_at = (begin.group(1), number)
        elif (end := _END_RE.match(line)) and open_at is not None and end.group(1) == open_at[0]:
            regions.append(Region(open_at[0], open_at[1], number))
            open_at = None
    return regions


@dataclass
class StaticModule:
    """One Python file, parsed but never imported."""

    path: Path
    display: str  # the path as messages print it
    text: str
    tree: ast.Module
    warp: WarpImports
    imported: dict[str, Imported]
    regions: list[Region]

    @classmethod
    def parse(cls, path: Path, display: str, text: str) -> StaticModule:
        try:
            tree = ast.parse(text, filename=display)
        except SyntaxError as error:
            raise ParseError(f"{display}:{error.lineno or 1}: {error.msg}") from None
        except ValueError as error:  # source with a null byte
            raise ParseError(f"{display}:1: {error}") from None
        warp, imported = read_imports(tree)
        return cls(path, display, text, tree, warp, imported, generated_regions(text))

    def location(self, node: ast.AST) -> str:
        """``path:line:col`` with a 1-based column, as editors and linters print it."""
        return f"{self.display}:{node.lineno}:{node.col_offset + 1}"

    def generated(self, node: ast.AST) -> bool:
        return any(r.first <= node.lineno <= r.last for r in self.regions)

    def rewritten(self, kernel: str) -> bool:
        """True if an earlier run already generated this kernel's phases into the file."""
        return any(r.kernel == kernel for r in self.regions)

    def top_level(self, attr: str) -> dict[str, ast.FunctionDef]:
        """``@wp.<attr>`` functions written by the user (not generated) directly in the module body, by name.

        Only these can get a generated block: code inserted after them stays at module level.
        """
        return {
            node.name: node for node in self.tree.body if self.warp.decorated(node, attr) and not self.generated(node)
        }

    def helpers(self) -> dict[str, ast.FunctionDef]:
        """``@wp.func`` helpers defined when the module is imported (also under a top-level ``if``)."""
        return {
            node.name: node
            for node in module_level(self.tree)
            if self.warp.decorated(node, "func") and not self.generated(node)
        }

    def nested_kernels(self) -> list[ast.FunctionDef]:
        """Kernels not directly in the module body: they can be checked but not rewritten to a file."""
        top = set(map(id, self.top_level("kernel").values()))
        return [
            node
            for node in walk(self.tree)
            if self.warp.decorated(node, "kernel") and id(node) not in top and not self.generated(node)
        ]

    def consumed(self, function: ast.FunctionDef) -> list[AtomicCall]:
        return [c for c in find_atomic_calls(function, self.warp.names()) if c.consumed]


@dataclass(frozen=True)
class Unfollowed:
    """A helper a kernel calls that could not be found: it may hide an atomic's consumed return."""

    call: ast.Call
    helper: str
    module: str


@dataclass
class Project:
    """The files of the user's project that helpers are followed into, each parsed once."""

    modules: dict[Path, StaticModule | None] = field(default_factory=dict)

    def load(self, path: Path) -> StaticModule | None:
        path = path.resolve()
        if path not in self.modules:
            try:
                self.modules[path] = StaticModule.parse(path, display_path(path), path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ParseError):
                self.modules[path] = None
        return self.modules[path]

    def module_file(self, origin: StaticModule, level: int, dotted: str) -> Path | None:
        """The file a (possibly relative) import of ``origin`` refers to, searched without importing."""
        parts = [p for p in dotted.split(".") if p]
        if level == 0 and (not parts or parts[0] in _NOT_FOLLOWED):
            return None
        if level:
            roots = [origin.path.resolve().parents[level - 1]] if level <= len(origin.path.resolve().parents) else []
        else:
            roots = [origin.path.resolve().parent]
            package = origin.path.resolve().parent
            while (package / "__init__.py").exists():
                package = package.parent
                roots.append(package)
            roots.append(Path.cwd())
        for root in roots:
            base = root.joinpath(*parts)
            for candidate in (base.with_suffix(".py") if parts else None, base / "__init__.py"):
                if candidate is not None and candidate.is_file():
                    return candidate
        return None

    def resolve(
        self, module: StaticModule, call: ast.Call, depth: int = 0
    ) -> tuple[StaticModule, ast.FunctionDef] | Unfollowed | None:
        """The ``@wp.func`` a call refers to, ``Unfollowed`` if it is imported from a file not found, else None."""
        func = call.func
        if isinstance(func, ast.Name):
            return self._lookup(module, func.id, call, depth)
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            return None
        source = module.imported.get(func.value.id)  # ``helpers.bump(...)`` after ``import pkg.helpers as helpers``
        if source is None:
            return None
        dotted = ".".join(p for p in (source.module, source.name) if p)
        if source.level == 0 and _is_standard(dotted):
            return None
        path = self.module_file(module, source.level, dotted)
        if path is None:
            return Unfollowed(call, func.attr, "." * source.level + dotted)
        target = self.load(path)
        return self._lookup(target, func.attr, call, depth + 1) if target else None

    def _lookup(
        self, module: StaticModule, name: str, call: ast.Call, depth: int
    ) -> tuple[StaticModule, ast.FunctionDef] | Unfollowed | None:
        helper = module.helpers().get(name)
        if helper is not None:
            return module, helper
        source = module.imported.get(name)
        if source is None or source.name is None or depth > 20:
            return None
        if source.level == 0 and _is_standard(source.module):
            return None
        path = self.module_file(module, source.level, source.module)
        if path is None:
            return Unfollowed(call, name, "." * source.level + source.module)
        target = self.load(path)
        return self._lookup(target, source.name, call, depth + 1) if target else None


def position(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset


def _is_standard(dotted: str) -> bool:
    """Modules whose functions are never user helpers (Warp's own, numpy, the standard ones kernels use)."""
    return dotted.split(".")[0] in _NOT_FOLLOWED


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, as messages print file names."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
