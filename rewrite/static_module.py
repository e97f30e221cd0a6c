"""A Python file as the command line sees it: parsed, never imported or run.

Which names the module binds to Warp (from its import statements), its kernels and helpers (also those defined
inside functions, the factories), the blocks an earlier ``wp-rewrite`` run generated in it, and the files of the
user's project that helpers are followed into (``Project``), with what a call inside a kernel refers to.
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import sys
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from warp_rewrite.passes.atomics import ATOMIC_OPS, AtomicCall, WarpNames, find_atomic_calls
from warp_rewrite.passes.syntax import parent_map, walk

_BEGIN_RE = re.compile(r"^[ \t]*# ---- wp-rewrite: generated from kernel '(\w+)'")
_END_RE = re.compile(r"^[ \t]*# ---- wp-rewrite: end of the code generated from kernel '(\w+)'")
_NOT_FOLLOWED = frozenset({"warp", "numpy", "typing", "math"})
_BUILTINS = frozenset(dir(builtins))
Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda


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
        ops = {f"atomic_{op}": op for op in ATOMIC_OPS}
        bare = tuple((local, ops[attr]) for local, attr in self.members.items() if attr in ops)
        return WarpNames(self.modules or frozenset({"wp"}), bare)

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
        return next((d for d in node.decorator_list if self.is_warp(d.func if isinstance(d, ast.Call) else d, attr)),
                    None)  # fmt: skip


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


def _imported_names(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, Imported]]:
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
    modules, members, any_name, imported = set(), {}, None, {}
    for node in module_level(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for local, source in _imported_names(node):
            if source.module == "warp" and source.level == 0 and source.name is None:
                modules.add(local)
            elif source.module == "warp" and source.level == 0:
                members[local] = source.name
            elif source.module == "typing" and source.name in (None, "Any") and any_name is None:
                any_name = f"{local}.Any" if source.name is None else local
            else:
                imported[local] = source
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


def _literal_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _disables_backward(options: ast.expr | None) -> bool:
    """True for a dict display ``{"enable_backward": False, ...}``."""
    if not isinstance(options, ast.Dict):
        return False
    return any(
        isinstance(key, ast.Constant) and key.value == "enable_backward" and _literal_false(value)
        for key, value in zip(options.keys, options.values, strict=True)
    )


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
    encoding: str = "utf-8"

    @classmethod
    def parse(cls, path: Path, display: str, text: str, encoding: str = "utf-8") -> StaticModule:
        try:
            tree = ast.parse(text, filename=display)
        except SyntaxError as error:
            raise ParseError(display, error.lineno or 1, error.offset or 1, error.msg) from None
        except ValueError as error:  # source with a null byte
            raise ParseError(display, 1, 1, str(error)) from None
        warp, imported = read_imports(tree)
        return cls(path, display, text, tree, warp, imported, generated_regions(text), encoding)

    @cached_property
    def lines(self) -> list[str]:
        return split_lines(self.text)

    def column(self, line: int, offset: int) -> int:
        """The 1-based column, in characters, of the AST's ``offset`` (UTF-8 bytes) on ``line``."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return offset + 1 if text.isascii() else len(text.encode()[:offset].decode(errors="replace")) + 1

    def location(self, node: ast.AST) -> str:
        """``path:line:col`` with a 1-based column, as editors and linters print it."""
        return f"{self.display}:{node.lineno}:{self.column(node.lineno, node.col_offset)}"

    def generated(self, node: ast.AST) -> bool:
        return any(r.first <= node.lineno <= r.last for r in self.regions)

    # --- scopes ----------------------------------------------------------------------------------------------

    @cached_property
    def nodes(self) -> list[ast.AST]:
        """Every node of the file (``walk``'s order), listed once for all the questions asked of it."""
        return walk(self.tree)

    @cached_property
    def _parents(self) -> dict[ast.AST, ast.AST]:
        return parent_map(self.nodes)

    def scopes(self, node: ast.AST) -> list[Scope]:
        """The functions and classes around ``node``, innermost first (``node`` itself not included)."""
        found, current = [], self._parents.get(node)
        while current is not None:
            if isinstance(current, Scope):
                found.append(current)
            current = self._parents.get(current)
        return found

    # --- kernels and helpers -----------------------------------------------------------------------------------

    @cached_property
    def _constructed(self) -> dict[int, ast.Call]:
        """Plain functions turned into kernels by ``wp.Kernel(func)`` / ``wp.Kernel(func=...)`` (Warp's tests do
        that), by id of their definition: the constructor call."""
        found = {}
        for call in self.nodes:
            if not (isinstance(call, ast.Call) and self.warp.is_warp(call.func, "Kernel")):
                continue
            func = next((k.value for k in call.keywords if k.arg == "func"), call.args[0] if call.args else None)
            if isinstance(func, ast.Name):
                definition = self.binding(func.id, self.scopes(call))
                if isinstance(definition, ast.FunctionDef):
                    found[id(definition)] = call
        return found

    def kernels(self) -> list[ast.FunctionDef]:
        """Every kernel the user wrote in the file, at any depth, in source order: ``@wp.kernel`` functions and
        functions passed to ``wp.Kernel(...)``."""
        kernels = [
            node
            for node in self.nodes
            if isinstance(node, ast.FunctionDef)
            and (self.warp.decorated(node, "kernel") or id(node) in self._constructed)
            and not self.generated(node)
        ]
        return sorted(kernels, key=position)

    def constructed(self, kernel: ast.FunctionDef) -> bool:
        """True for a function made a kernel by ``wp.Kernel(func)`` rather than by ``@wp.kernel``."""
        return id(kernel) in self._constructed

    def helpers(self) -> dict[str, ast.FunctionDef]:
        """``@wp.func`` helpers defined when the module is imported (also under a top-level ``if``)."""
        return {
            node.name: node
            for node in module_level(self.tree)
            if self.warp.decorated(node, "func") and not self.generated(node)
        }

    def all_helpers(self) -> list[ast.FunctionDef]:
        """Every ``@wp.func`` the user wrote in the file, at any depth."""
        return [n for n in self.nodes if self.warp.decorated(n, "func") and not self.generated(n)]

    @cached_property
    def _replayed(self) -> set[int]:
        """Helpers with a hand-written ``@wp.func_replay(helper)`` twin, by id of their definition."""
        found = set()
        for node in self.nodes:
            decorator = self.warp.decorator(node, "func_replay")
            if isinstance(decorator, ast.Call) and decorator.args and isinstance(decorator.args[0], ast.Name):
                helper = self.binding(decorator.args[0].id, self.scopes(node))
                if isinstance(helper, ast.FunctionDef):
                    found.add(id(helper))
        return found

    def has_replay(self, helper: ast.FunctionDef) -> bool:
        """True if the file gives ``helper`` a ``@wp.func_replay``: Warp's backward then calls that instead, so
        the atomics inside do not run again and their returns are what the replay makes them."""
        return id(helper) in self._replayed

    @cached_property
    def module_options(self) -> dict:
        """What ``wp.set_module_options({...})`` calls at module level set, where their dict is a literal."""
        options = {}
        for node in module_level(self.tree):
            value = node.value if isinstance(node, ast.Expr) else None
            if isinstance(value, ast.Call) and self.warp.is_warp(value.func, "set_module_options") and value.args:
                try:
                    literal = ast.literal_eval(value.args[0])
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    continue
                options.update(literal if isinstance(literal, dict) else {})
        return options

    @cached_property
    def _module_backward_off(self) -> str | None:
        """Why no kernel of the file has a backward pass unless it asks for one itself:
        ``wp.set_module_options({"enable_backward": False})`` or ``wp.config.enable_backward = False`` at module
        level."""
        for node in module_level(self.tree):
            value = node.value if isinstance(node, ast.Expr) else None
            is_options = isinstance(value, ast.Call) and self.warp.is_warp(value.func, "set_module_options")
            if is_options and value.args and _disables_backward(value.args[0]):
                return "its module is set up with enable_backward=False"
            if isinstance(node, ast.Assign) and _literal_false(node.value):
                for target in node.targets:
                    if (isinstance(target, ast.Attribute) and target.attr == "enable_backward"
                            and self.warp.is_warp(target.value, "config")):  # fmt: skip
                        return "the module sets wp.config.enable_backward = False"
        return None

    def module_backward_disabled(self) -> str | None:
        return self._module_backward_off

    def backward_disabled(self, kernel: ast.FunctionDef) -> str | None:
        """Why the kernel has no backward pass (its own option or its module's), or None if it has one."""
        options = self.kernel_keywords(kernel)
        if "enable_backward" in options:
            return "it is built with enable_backward=False" if _literal_false(options["enable_backward"]) else None
        if _disables_backward(options.get("module_options")):
            return "its module_options disable the backward pass"
        return self._module_backward_off

    def kernel_keywords(self, kernel: ast.FunctionDef) -> dict[str | None, ast.expr]:
        """The keyword arguments of ``@wp.kernel(...)`` (or of the ``wp.Kernel(...)`` call, whose ``options=``
        dict is read as keywords), unevaluated; ``**options`` under the key None."""
        decorator = self.warp.decorator(kernel, "kernel")
        call = decorator if isinstance(decorator, ast.Call) else self._constructed.get(id(kernel))
        keywords = {k.arg: k.value for k in call.keywords} if call is not None else {}
        options = keywords.get("options") if call is not None and call is not decorator else None
        if isinstance(options, ast.Dict):
            for key, value in zip(options.keys, options.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    keywords[key.value] = value
        return keywords

    def consumed(self, function: ast.FunctionDef) -> list[AtomicCall]:
        return [c for c in find_atomic_calls(function, self.warp.names()) if c.consumed]

    # --- generated blocks ------------------------------------------------------------------------------------

    def region_of(self, kernel: ast.FunctionDef) -> Region | None:
        """The block an earlier run generated for this kernel: the next one after it, with only blank lines and
        comments in between."""
        for region in self.regions:
            if region.first <= kernel.end_lineno:
                continue
            between = self.lines[kernel.end_lineno : region.first - 1]
            if region.kernel == kernel.name and all(not line.strip() or line.lstrip().startswith("#")
                                                    for line in between):  # fmt: skip
                return region
            return None
        return None

    def rewritten(self, kernel: ast.FunctionDef) -> bool:
        """True if an earlier run already generated this kernel's phases into the file."""
        return self.region_of(kernel) is not None

    @cached_property
    def _region_assignments(self) -> dict[Region, list[ast.Assign]]:
        found = {region: [] for region in self.regions}
        for node in self.nodes:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                region = next((r for r in self.regions if r.first <= node.lineno <= r.last), None)
                if region is not None:
                    found[region].append(node)
        return found

    def launch_name(self, kernel: ast.FunctionDef) -> str | None:
        """What an earlier run made the kernel's launch: ``launch_k`` (``launch_k = k_rewritten.launch``) at
        module level, ``k.launch`` in a function (where ``k = k_rewritten`` hands on the rewritten kernel)."""
        region = self.region_of(kernel)
        for node in self._region_assignments.get(region, []):
            target = node.targets[0].id
            if target == kernel.name:
                return f"{kernel.name}.launch"
            if isinstance(node.value, ast.Attribute) and node.value.attr == "launch":
                return target
        return None

    # --- names -----------------------------------------------------------------------------------------------

    def binding(self, name: str, scopes: list[Scope]) -> ast.AST | Imported | None:
        """What ``name`` is bound to where ``scopes`` (innermost first) surround the code: a definition, an
        ``Imported``, an ``ast.arg`` (a parameter), the value assigned to it, or None if nothing in the file binds
        it. The last binding of a scope wins: Warp reads closures and globals when it builds the kernel, after
        the function ran."""
        for scope in [s for s in scopes if not isinstance(s, ast.ClassDef)] + [self.tree]:
            found = _scope_binding(scope, name, self.generated)
            if found is not None:
                return found
        return None


def _scope_binding(scope: ast.AST, name: str, generated: Callable[[ast.AST], bool]) -> ast.AST | Imported | None:
    """The last binding of ``name`` directly in ``scope`` (not inside the functions it defines), not counting the
    statements of ``generated`` blocks."""
    found = None
    if not isinstance(scope, ast.Module):
        arguments = scope.args
        for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]:
            if arg is not None and arg.arg == name:
                found = arg
    pending = list(scope.body) if isinstance(scope.body, list) else []
    while pending:
        node = pending.pop(0)
        if generated(node):
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found = node if node.name == name else found
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found = next((source for local, source in _imported_names(node) if local == name), found)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = node.value
        elif isinstance(node, ast.AnnAssign) and _stores(node.target, name):
            found = node.value if node.value is not None else node
        elif any(_stores(target, name) for target in _targets(node)):
            found = node
        if isinstance(node, ast.stmt) and not isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            pending.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)
    return found


def _targets(node: ast.AST) -> list[ast.expr]:
    """What a statement other than an assignment binds: a loop's target, ``with ... as``, ``x += 1``."""
    if isinstance(node, ast.For | ast.AsyncFor | ast.AugAssign):
        return [node.target]
    if isinstance(node, ast.With | ast.AsyncWith):
        return [item.optional_vars for item in node.items if item.optional_vars is not None]
    return []


def _stores(target: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in walk(target))


def _own_returns(function: ast.FunctionDef) -> Iterator[ast.Return]:
    """The ``return`` statements of ``function`` itself, not of the functions it defines."""
    pending = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            yield node
        elif isinstance(node, ast.stmt) and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            pending.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)


@dataclass(frozen=True)
class Unfollowed:
    """A helper a kernel calls that could not be found: it may hide an atomic's consumed return."""

    call: ast.Call
    helper: str
    module: str


@dataclass(frozen=True)
class Unresolved:
    """A call whose callee is only known when the code runs (a factory's parameter, ``wp.static(expr)``): it
    may hide an atomic's consumed return."""

    call: ast.Call
    helper: str  # the callee as written
    reason: str  # what it is, for messages: "a parameter of 'make_kernel'"


Resolved = tuple["StaticModule", ast.FunctionDef] | Unfollowed | Unresolved | None


def _looks_like_a_type(name: str) -> bool:
    """``dtype``, ``vec_type``, ``scalar_t``, ``Struct``: names that by convention hold types."""
    return name[0].isupper() or name.endswith(("type", "_t"))


def _used_as_type(scope: ast.AST, name: str) -> bool:
    """True if ``name`` looks like a type or appears as one in ``scope``: in an annotation (also a string one), as
    a ``dtype=`` argument or a subscript. Its calls are then conversions (``dtype(0.0)``), not helpers."""
    if _looks_like_a_type(name):
        return True
    for node in walk(scope):
        annotations = []
        if isinstance(node, ast.arg) and node.annotation is not None:
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef) and node.returns is not None:
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        elif isinstance(node, ast.keyword) and node.arg == "dtype":
            annotations.append(node.value)
        elif isinstance(node, ast.Subscript):
            annotations.append(node.slice)
        for annotation in annotations:
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                try:
                    annotation = ast.parse(annotation.value, mode="eval")
                except SyntaxError:
                    continue
            if any(isinstance(n, ast.Name) and n.id == name for n in walk(annotation)):
                return True
    return False


@dataclass
class Project:
    """The files of the user's project that helpers are followed into, each parsed once."""

    modules: dict[Path, StaticModule | None] = field(default_factory=dict)
    _files: dict[tuple[Path, int, str], Path | None] = field(default_factory=dict)

    def load(self, path: Path) -> StaticModule | None:
        path = path.resolve()
        if path not in self.modules:
            try:
                source = SourceFile.read(path)
                self.modules[path] = StaticModule.parse(path, display_path(path), source.text, source.encoding)
            except (OSError, UnicodeDecodeError, SyntaxError, ParseError):
                self.modules[path] = None
        return self.modules[path]

    def module_file(self, origin: StaticModule, level: int, dotted: str) -> Path | None:
        """The file a (possibly relative) import of ``origin`` refers to, searched without importing.

        An absolute import is looked up from the file's folder up through every folder above it (the first
        that has the import's top-level package or module wins), then from the working directory: the roots
        Python would have on its path when the project runs, wherever ``wp-rewrite`` runs from.
        """
        key = (origin.path, level, dotted)
        if key not in self._files:
            self._files[key] = self._find_module_file(origin.path.resolve(), level, dotted)
        return self._files[key]

    @staticmethod
    def _find_module_file(origin: Path, level: int, dotted: str) -> Path | None:
        parts = [p for p in dotted.split(".") if p]
        if level == 0 and (not parts or parts[0] in _NOT_FOLLOWED or parts[0] in sys.stdlib_module_names):
            return None
        if level:
            roots = [origin.parents[level - 1]] if level <= len(origin.parents) else []
        else:
            roots = [*origin.parents, Path.cwd()]
        for root in roots:
            base = root.joinpath(*parts)
            for candidate in (base.with_suffix(".py") if parts else None, base / "__init__.py"):
                if candidate is not None and candidate.is_file():
                    return candidate
        return None

    def resolve(self, module: StaticModule, call: ast.Call, depth: int = 0) -> Resolved:
        """The ``@wp.func`` a call (in ``module``'s tree) refers to; ``Unfollowed`` if it is imported from a file
        not found, ``Unresolved`` if only running the code would tell; None for anything else (Warp's builtins,
        structs, constructors)."""
        func = call.func
        if isinstance(func, ast.Call) and module.warp.is_warp(func.func, "static") and len(func.args) == 1:
            return self._callable(module, func.args[0], call, module.scopes(call), depth, static=True)
        return self._callable(module, func, call, module.scopes(call), depth, static=False)

    def _callable(
        self, module: StaticModule, expr: ast.expr, call: ast.Call, scopes: list[Scope], depth: int, static: bool
    ) -> Resolved:
        """What ``expr``, called in ``scopes``, refers to (``static``: inside ``wp.static(...)``)."""
        if depth > 20 or module.warp.is_warp_expr(expr):
            return None
        if isinstance(expr, ast.Name):
            return self._name(module, expr.id, call, scopes[1:], depth)  # scopes[0]: the kernel or helper itself
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            bound = module.binding(expr.value.id, scopes[1:])
            if isinstance(bound, Imported):  # ``helpers.bump(...)`` after ``import pkg.helpers as helpers``
                return self._in_module(module, bound, expr.attr, call, depth)
            if bound is not None and not isinstance(bound, ast.ClassDef) and static:
                return Unresolved(call, ast.unparse(expr), f"an attribute of '{expr.value.id}', known only at run time")
            return None
        if isinstance(expr, ast.Call) and static:
            found = self._returned_helper(module, expr, call, scopes, depth)
            return found or Unresolved(call, ast.unparse(expr), "a helper returned by a call, known only at run time")
        if static:
            return Unresolved(call, ast.unparse(expr), "an expression evaluated when Warp builds the kernel")
        return None

    def _name(self, module: StaticModule, name: str, call: ast.Call, scopes: list[Scope], depth: int) -> Resolved:
        bound = module.binding(name, scopes)
        if isinstance(bound, Imported):
            return self._imported(module, bound, name, call, depth)
        if isinstance(bound, ast.FunctionDef):
            return (module, bound) if module.warp.decorated(bound, "func") else None
        if isinstance(bound, ast.arg):
            owner = next(s for s in scopes if not isinstance(s, ast.ClassDef) and bound in walk(s.args))
            if _used_as_type(owner, name):
                return None
            return Unresolved(call, name, f"a parameter of '{owner.name}', known only when it is called")
        if isinstance(bound, ast.Name):  # an alias: ``writer = write_contact``
            return self._name(module, bound.id, call, module.scopes(bound), depth + 1)
        if bound is None or isinstance(bound, ast.ClassDef | ast.Constant) or module.warp.is_warp_expr(bound):
            return None
        in_function = _scope_binding(module.tree, name, module.generated) is not bound
        if isinstance(bound, ast.Call):
            builtin = isinstance(bound.func, ast.Name) and bound.func.id in _BUILTINS
            if builtin or module.warp.is_warp_expr(bound.func):
                return None  # a Warp type or constant (wp.types.vector(...), wp.constant(...)), a conversion
            found = self._returned_helper(module, bound, call, module.scopes(bound), depth)
            if found is not None or not in_function:
                return found
            return Unresolved(call, name, f"the result of {ast.unparse(bound.func)}(...), known only at run time")
        return Unresolved(call, name, "a value known only at run time") if in_function else None

    def _returned_helper(
        self, module: StaticModule, expr: ast.Call, call: ast.Call, scopes: list[Scope], depth: int
    ) -> tuple[StaticModule, ast.FunctionDef] | None:
        """The helper a function call returns, where that function (a helper factory) is in the project and each
        of its ``return`` statements names the same ``@wp.func``."""
        factory = self._function(module, expr.func, scopes)
        if factory is None:
            return None
        owner, definition = factory
        returned = [
            self._name(owner, node.value.id, call, [definition, *owner.scopes(definition)], depth + 1)
            if isinstance(node.value, ast.Name) else None
            for node in _own_returns(definition)
        ]  # fmt: skip
        helpers = {id(found[1]): found for found in returned if isinstance(found, tuple)}
        return next(iter(helpers.values())) if returned and len(helpers) == 1 and len(returned) == sum(
            isinstance(found, tuple) for found in returned) else None  # fmt: skip

    def _function(self, module: StaticModule, expr: ast.expr, scopes: list[Scope]):
        """The plain function (module, definition) ``expr`` names, following imports; None if not found."""
        if isinstance(expr, ast.Name):
            bound = module.binding(expr.id, scopes)
            if isinstance(bound, Imported) and bound.name is not None:
                path = self.module_file(module, bound.level, bound.module)
                target = self.load(path) if path is not None else None
                found = target.binding(bound.name, []) if target is not None else None
                return (target, found) if isinstance(found, ast.FunctionDef) else None
            return (module, bound) if isinstance(bound, ast.FunctionDef) else None
        return None

    def kernel_named(
        self, module: StaticModule, expr: ast.expr, scopes: list[Scope], depth: int = 0
    ) -> tuple[StaticModule, ast.FunctionDef] | None:
        """The kernel ``expr`` names (``k``, ``sim.k``) where ``scopes`` surround it, in this file or one it
        imports; None if it names none the project defines."""
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            bound = module.binding(expr.value.id, scopes)
            if not isinstance(bound, Imported):
                return None
            path = self.module_file(module, bound.level, ".".join(p for p in (bound.module, bound.name) if p))
            target = self.load(path) if path is not None else None
            return self.kernel_named(target, ast.Name(expr.attr), [], depth + 1) if target else None
        if not isinstance(expr, ast.Name) or depth > 20:
            return None
        bound = module.binding(expr.id, scopes)
        if isinstance(bound, Imported) and bound.name is not None:
            path = self.module_file(module, bound.level, bound.module)
            target = self.load(path) if path is not None else None
            return self.kernel_named(target, ast.Name(bound.name), [], depth + 1) if target else None
        if isinstance(bound, ast.FunctionDef) and (module.warp.decorated(bound, "kernel") or module.constructed(bound)):
            return module, bound
        return None

    def _imported(self, module: StaticModule, source: Imported, name: str, call: ast.Call, depth: int) -> Resolved:
        if source.name is None or (source.level == 0 and _is_standard(source.module)):
            return None
        path = self.module_file(module, source.level, source.module)
        if path is None:  # ``from . import helpers``: a module, not a name in one
            if self.module_file(module, source.level, f"{source.module}.{source.name}") is not None:
                return None
            return Unfollowed(call, name, "." * source.level + source.module)
        target = self.load(path)
        return self._name(target, source.name, call, [], depth + 1) if target else None

    def _in_module(self, module: StaticModule, source: Imported, attr: str, call: ast.Call, depth: int) -> Resolved:
        dotted = ".".join(p for p in (source.module, source.name) if p)
        if source.level == 0 and _is_standard(dotted):
            return None
        path = self.module_file(module, source.level, dotted)
        if path is None:
            return Unfollowed(call, attr, "." * source.level + dotted)
        target = self.load(path)
        return self._name(target, attr, call, [], depth + 1) if target else None


def position(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset


def _is_standard(dotted: str) -> bool:
    """Modules whose functions are never user helpers (Warp's own, numpy, the standard library)."""
    top = dotted.split(".")[0]
    return top in _NOT_FOLLOWED or top in sys.stdlib_module_names


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, as messages print file names."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
