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
_REWRITE = "KernelRewrite"  # the runtime's class that a constructed kernel's block binds (warp_rewrite.runtime)
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


ModuleKey = tuple[str, ...] | tuple[str, int]  # which Warp module: see StaticModule._module_key
FILE_MODULE: ModuleKey = ("file",)  # the file's own (the default of kernels defined in it)


@dataclass(frozen=True)
class Maker:
    """A function of the file that makes a kernel of the function it is given as ``parameter``."""

    function: ast.FunctionDef
    parameter: str
    made: Construction  # the call inside it that makes the kernel (of ``parameter``)

    @property
    def options(self) -> ast.Call:
        """The Warp call (``wp.Kernel(func=...)``) whose keywords are the kernel's options."""
        return self.made.options


@dataclass(frozen=True)
class Construction:
    """A call that makes a kernel of a function: ``wp.Kernel(func=f)``, ``wp.kernel(f)``, ``wp.kernel(...)(f)``, or
    one of the file's ``Maker``s (``getkernel(f)``)."""

    site: ast.Call  # the whole call, which gives the kernel
    function: ast.expr  # the argument that is the function
    options: ast.Call  # the Warp call whose keywords are the kernel's options (``site``, or one inside ``maker``)
    maker: Maker | None = None


def _argument(call: ast.Call, function: ast.FunctionDef, parameter: str) -> ast.expr | None:
    """What ``call`` passes to ``function``'s ``parameter``, by position or keyword; None if it cannot tell."""
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    index = positional.index(parameter) if parameter in positional else None
    return _argument_at(call, index, parameter)


def _argument_at(call: ast.Call, index: int | None, keyword: str) -> ast.expr | None:
    """The argument at position ``index`` or given as ``keyword``; None if there is none or a ``*args`` comes
    first."""
    if index is not None and index < len(call.args):
        before = call.args[: index + 1]
        return None if any(isinstance(a, ast.Starred) for a in before) else call.args[index]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _is_options(expr: ast.expr) -> bool:
    """``m.options`` for a name or call ``m``."""
    return isinstance(expr, ast.Attribute) and expr.attr == "options" and isinstance(expr.value, ast.Name | ast.Call)


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

    def _made_kernel(self, call: ast.Call, makers: dict[int, Maker]) -> Construction | None:
        """What ``call`` is if it makes a kernel of a function: ``wp.Kernel(f)``, ``wp.Kernel(func=f)``,
        ``wp.kernel(f, ...)``, ``wp.kernel(...)(f)`` or a call of one of ``makers``, the file's functions that hand a
        parameter on to one of those."""
        if self.warp.is_warp(call.func, "Kernel"):
            func = next((k.value for k in call.keywords if k.arg == "func"), call.args[0] if call.args else None)
            return Construction(call, func, call) if func is not None else None
        if self.warp.is_warp(call.func, "kernel"):  # ``@wp.kernel(...)`` decorators have no positional argument
            return Construction(call, call.args[0], call) if call.args else None
        if isinstance(call.func, ast.Call) and self.warp.is_warp(call.func.func, "kernel") and call.args:
            return Construction(call, call.args[0], call.func)
        if isinstance(call.func, ast.Name) and call.func.id in {maker.function.name for maker in makers.values()}:
            function = self.binding(call.func.id, self.scopes(call))
            maker = makers.get(id(function))
            argument = _argument(call, maker.function, maker.parameter) if maker is not None else None
            return Construction(call, argument, maker.options, maker) if argument is not None else None
        return None

    @cached_property
    def _makers(self) -> dict[int, Maker]:
        """The file's functions that make a kernel of a function they are given (Warp's tests:
        ``def getkernel(func): return wp.Kernel(func=func)``), also through one another, by id of their
        definition."""
        makers: dict[int, Maker] = {}
        calls = [node for node in self.nodes if isinstance(node, ast.Call)]
        while True:
            found = {}
            for call in calls:
                made = self._made_kernel(call, makers)
                if made is None or not isinstance(made.function, ast.Name):
                    continue
                scopes = self.scopes(call)
                parameter = self.binding(made.function.id, scopes)
                if isinstance(parameter, ast.arg):
                    owner = next(s for s in scopes if not isinstance(s, ast.ClassDef) and parameter in walk(s.args))
                    if isinstance(owner, ast.FunctionDef) and id(owner) not in makers:
                        found.setdefault(id(owner), Maker(owner, parameter.arg, made))
            if not found:
                return makers
            makers |= found

    @cached_property
    def _constructed(self) -> dict[int, list[Construction]]:
        """Plain functions made kernels by a call (``wp.Kernel(func)``, as Warp's tests do, or a maker of the
        file), by id of their definition: the calls that do, in source order (none in generated blocks)."""
        found = {}
        for call in self.nodes:
            made = self._made_kernel(call, self._makers) if isinstance(call, ast.Call) else None
            if made is not None and isinstance(made.function, ast.Name) and not self.generated(call):
                definition = self.binding(made.function.id, self.scopes(call))
                if isinstance(definition, ast.FunctionDef):
                    found.setdefault(id(definition), []).append(made)
        return {key: sorted(made, key=lambda c: position(c.site)) for key, made in found.items()}

    def constructions(self, kernel: ast.FunctionDef) -> list[Construction]:
        """The calls that make a kernel of the plain function ``kernel``, in source order (none for a
        ``@wp.kernel``)."""
        return self._constructed.get(id(kernel), []) if self.constructed(kernel) else []

    def other_uses(self, kernel: ast.FunctionDef) -> list[ast.Name]:
        """Where the plain function ``kernel`` is named other than as what a construction makes a kernel of (or
        the object of an attribute, ``f.__name__``): a kernel made of it through there is not found."""
        handed = {id(made.function) for made in self.constructions(kernel)}
        return [
            node
            for node in self.nodes
            if isinstance(node, ast.Name) and node.id == kernel.name and isinstance(node.ctx, ast.Load)
            and id(node) not in handed and not isinstance(self._parents.get(node), ast.Attribute)
            and not self.generated(node) and self.binding(node.id, self.scopes(node)) is kernel
        ]  # fmt: skip

    def returns_kernel(self, maker: Maker, depth: int = 0) -> bool:
        """True if every ``return`` of the maker gives the kernel it makes: the making call itself, a name or
        subscript it was assigned to (``cache[key] = wp.Kernel(...)`` ... ``return cache[key]``), or the call of
        another maker that does."""
        made = maker.made
        holders = {
            ast.unparse(target)
            for node in _own_statements(maker.function)
            if isinstance(node, ast.Assign) and node.value is made.site
            for target in node.targets
        }
        returns = list(_own_returns(maker.function))
        if not returns or depth > 20:
            return False
        inner_returns = made.maker is None or self.returns_kernel(made.maker, depth + 1)
        return inner_returns and all(
            r.value is not None and (r.value is made.site or ast.unparse(r.value) in holders) for r in returns
        )

    def kernels(self) -> list[ast.FunctionDef]:
        """Every kernel the user wrote in the file, at any depth, in source order: ``@wp.kernel`` functions and
        functions passed to ``wp.Kernel(...)``."""
        kernels = [
            node
            for node in self.nodes
            if isinstance(node, ast.FunctionDef) and self.is_kernel(node) and not self.generated(node)
        ]
        return sorted(kernels, key=position)

    def is_kernel(self, definition: ast.FunctionDef) -> bool:
        return self.warp.decorated(definition, "kernel") or id(definition) in self._constructed

    def constructed(self, kernel: ast.FunctionDef) -> bool:
        """True for a function made a kernel by ``wp.Kernel(func)`` rather than by ``@wp.kernel``."""
        return id(kernel) in self._constructed and not self.warp.decorated(kernel, "kernel")

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

    # --- which kernels have a backward pass ------------------------------------------------------------------

    def module_of(self, kernel: ast.FunctionDef, depth: int = 0) -> ModuleKey | None:
        """The Warp module the kernel joins (``@wp.kernel(module=...)``, ``wp.Kernel(module=...)``): the file's
        own by default, one of its own for ``module="unique"``; None where the source does not tell."""
        keywords = self.kernel_keywords(kernel)
        module = keywords.get("module")
        if module is None or (isinstance(module, ast.Constant) and module.value is None):
            return FILE_MODULE
        if isinstance(module, ast.Constant) and module.value == "unique":
            return ("unique", id(kernel))
        call = self._options_call(kernel)
        return self._module_key(module, [s for s in self.scopes(call) if s is not kernel], depth + 1)

    def _module_key(self, expr: ast.expr, scopes: list[Scope], depth: int = 0) -> ModuleKey | None:
        """Which Warp module ``expr`` names: ``__name__`` or ``wp.get_module(__name__)`` the file's own, another
        name's, the module object a ``wp.get_module(...)``/``wp.Module(...)`` call made (through the variables
        holding it), a kernel's ``k.module``; None for anything else."""
        if depth > 20:
            return None
        if isinstance(expr, ast.Name) and expr.id == "__name__":
            return FILE_MODULE
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str) and expr.value != "unique":
            return ("named", expr.value)
        if isinstance(expr, ast.Name):
            bound = self.binding(expr.id, scopes)
            if isinstance(bound, ast.expr):
                return self._module_key(bound, self.scopes(bound), depth + 1)
            return None
        if isinstance(expr, ast.Call) and self.warp.is_warp(expr.func, "get_module") and len(expr.args) == 1:
            name = expr.args[0]
            if isinstance(name, ast.Name) and name.id == "__name__":
                return FILE_MODULE
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                return ("named", name.value)
            return ("object", id(expr))
        if isinstance(expr, ast.Call) and self.warp.is_warp(expr.func, "Module"):
            return ("object", id(expr))
        if isinstance(expr, ast.Attribute) and expr.attr == "module" and isinstance(expr.value, ast.Name):
            kernel = self.binding(expr.value.id, scopes)
            if isinstance(kernel, ast.FunctionDef) and self.is_kernel(kernel):
                return self.module_of(kernel, depth + 1)
        return None

    def _disabling(self, node: ast.AST) -> ModuleKey | None:
        """The module a statement sets up without a backward pass: ``wp.set_module_options({"enable_backward":
        False}, module=m)`` (the file's own without ``module``, at module level only: in a function it may never
        run), ``m.options.update({...})`` or ``m.options.update(enable_backward=False)``, ``m.options[
        "enable_backward"] = False``."""
        if isinstance(node, ast.Call) and self.warp.is_warp(node.func, "set_module_options"):
            if not _disables_backward(_argument_at(node, 0, "options")):
                return None
            module = _argument_at(node, 1, "module")
            if module is None:
                return None if self.scopes(node) else FILE_MODULE
            return self._module_key(module, self.scopes(node))
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Attribute) and func.attr == "update" and _is_options(func.value):
            keyword = next((k.value for k in node.keywords if k.arg == "enable_backward"), None)
            if _literal_false(keyword) or (len(node.args) == 1 and _disables_backward(node.args[0])):
                return self._options_owner(node, func.value.value)
        if isinstance(node, ast.Assign) and _literal_false(node.value):
            for target in node.targets:
                is_backward = isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                if is_backward and target.slice.value == "enable_backward" and _is_options(target.value):
                    return self._options_owner(node, target.value.value)
        return None

    def _options_owner(self, statement: ast.AST, expr: ast.expr) -> ModuleKey | None:
        """The module whose ``.options`` ``statement`` changes; the file's own only at module level."""
        scopes = self.scopes(statement)
        key = self._module_key(expr, scopes)
        return None if key == FILE_MODULE and scopes else key

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
    def _backward_off(self) -> dict[ModuleKey, str]:
        """The Warp modules the file sets up without a backward pass, and why."""
        found = {}
        for node in self.nodes:
            if isinstance(node, ast.Call | ast.Assign) and not self.generated(node):
                key = self._disabling(node)
                if key is not None:
                    found.setdefault(key, "its module is set up with enable_backward=False")
        return found

    @cached_property
    def _config_backward_off(self) -> str | None:
        """``wp.config.enable_backward = False`` at module level: modules made from then on have no backward pass."""
        for node in module_level(self.tree):
            if isinstance(node, ast.Assign) and _literal_false(node.value):
                for target in node.targets:
                    if (isinstance(target, ast.Attribute) and target.attr == "enable_backward"
                            and self.warp.is_warp(target.value, "config")):  # fmt: skip
                        return "the module sets wp.config.enable_backward = False"
        return None

    def module_backward_disabled(self) -> str | None:
        """Why the file's own Warp module has no backward pass, or None if it has one."""
        return self._backward_off.get(FILE_MODULE) or self._config_backward_off

    def backward_disabled(self, kernel: ast.FunctionDef) -> str | None:
        """Why the kernel has no backward pass (its own option or its module's), or None if it has one."""
        options = self.kernel_keywords(kernel)
        if "enable_backward" in options:
            return "it is built with enable_backward=False" if _literal_false(options["enable_backward"]) else None
        if _disables_backward(options.get("module_options")):
            return "its module_options disable the backward pass"
        module = self.module_of(kernel)
        return (self._backward_off.get(module) if module is not None else None) or self._config_backward_off

    def _options_call(self, kernel: ast.FunctionDef) -> ast.Call | None:
        """The call whose keywords are the kernel's options: its ``@wp.kernel(...)`` decorator, or the Warp call
        that makes it a kernel."""
        decorator = self.warp.decorator(kernel, "kernel")
        if isinstance(decorator, ast.Call):
            return decorator
        constructions = self.constructions(kernel) if decorator is None else []
        return constructions[0].options if constructions else None

    def kernel_keywords(self, kernel: ast.FunctionDef) -> dict[str | None, ast.expr]:
        """The keyword arguments of ``@wp.kernel(...)`` (or of the ``wp.Kernel(...)`` call, whose ``options=``
        dict is read as keywords), unevaluated; ``**options`` under the key None."""
        call = self._options_call(kernel)
        keywords = {k.arg: k.value for k in call.keywords} if call is not None else {}
        if call is not None and self.warp.is_warp(call.func, "Kernel"):
            module = _argument_at(call, 2, "module")
            keywords |= {"module": module} if module is not None else {}
            options = _argument_at(call, 3, "options")
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

    def rewrite_name(self, kernel: ast.FunctionDef) -> str | None:
        """What an earlier run named the ``KernelRewrite`` of a plain function made a kernel of (``rewrite_k =
        runtime.KernelRewrite(...)``), which the calls making the kernel are wrapped in."""
        for node in self._region_assignments.get(self.region_of(kernel), []):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == _REWRITE:
                return node.targets[0].id
        return None

    def wrapper(self, construction: Construction) -> str | None:
        """The name of the call the construction is the only argument of (``rewrite_k(wp.Kernel(func=k))``)."""
        parent = self._parents.get(construction.site)
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.args == [construction.site]:
            return parent.func.id if not parent.keywords else None
        return None

    # --- names -----------------------------------------------------------------------------------------------

    @cached_property
    def postponed_annotations(self) -> bool:
        """True under ``from __future__ import annotations``: the file's annotations are strings, evaluated later."""
        return any(
            isinstance(node, ast.ImportFrom) and node.module == "__future__" and alias.name == "annotations"
            for node in self.tree.body
            for alias in getattr(node, "names", [])
        )

    def bound_around(self, name: str, node: ast.AST) -> bool:
        """True if a function around ``node`` binds ``name``: code there sees it as a closure variable."""
        functions = [scope for scope in self.scopes(node) if not isinstance(scope, ast.ClassDef)]
        return any(_scope_binding(scope, name, self.generated) is not None for scope in functions)

    def binding(self, name: str, scopes: list[Scope]) -> ast.AST | Imported | None:
        """What ``name`` is bound to where ``scopes`` (innermost first) surround the code: a definition, an
        ``Imported``, an ``ast.arg`` (a parameter), the value assigned to it, or None if nothing in the file binds
        it. The last binding of a scope wins: Warp reads closures and globals when it builds the kernel, after
        the function ran."""
        found = self._lookup(name, scopes)
        return found[1] if found is not None else None

    def binding_scope(self, name: str, scopes: list[Scope]) -> Scope | ast.Module | None:
        """The function (or the module) whose binding of ``name`` ``binding`` finds."""
        found = self._lookup(name, scopes)
        return found[0] if found is not None else None

    def _lookup(self, name: str, scopes: list[Scope]) -> tuple[Scope | ast.Module, ast.AST | Imported] | None:
        for scope in [s for s in scopes if not isinstance(s, ast.ClassDef)] + [self.tree]:
            found = _scope_binding(scope, name, self.generated)
            if found is not None:
                return scope, found
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


def _own_statements(function: ast.FunctionDef) -> Iterator[ast.stmt]:
    """The statements of ``function`` itself, at any depth, not those of the functions and classes it defines."""
    pending = list(function.body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            pending.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)


def _own_returns(function: ast.FunctionDef) -> Iterator[ast.Return]:
    """The ``return`` statements of ``function`` itself, not of the functions it defines."""
    return (node for node in _own_statements(function) if isinstance(node, ast.Return))


def _class_member(module: StaticModule, cls: ast.ClassDef, attr: str) -> tuple[StaticModule, ast.FunctionDef] | None:
    """The ``@wp.func`` method ``attr`` of a class (Newton's vector types: ``YieldParamVec.from_values(...)``)."""
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == attr and module.warp.decorated(node, "func"):
            return module, node
    return None


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
            if isinstance(bound, ast.ClassDef):
                return _class_member(module, bound, expr.attr)
            if bound is not None and not isinstance(bound, ast.ClassDef) and static:
                return Unresolved(call, ast.unparse(expr), f"an attribute of '{expr.value.id}', known only at run time")
            return None
        if isinstance(expr, ast.Call) and static:
            found = self._returned_helper(module, expr, call, scopes, depth)
            return found or Unresolved(call, ast.unparse(expr), "a helper returned by a call, known only at run time")
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Call) and static:
            found = self._returned_attribute(module, expr.value, expr.attr, call, scopes, depth)
            return found or Unresolved(call, ast.unparse(expr), "an attribute of a value returned by a call, known "
                                       "only at run time")  # fmt: skip
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
        if isinstance(bound, ast.Attribute) and isinstance(bound.value, ast.Call):  # ``solve = make(...).core``
            found = self._returned_attribute(module, bound.value, bound.attr, call, module.scopes(bound), depth)
            if found is not None:
                return found
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

    def _returned_attribute(
        self, module: StaticModule, expr: ast.Call, attr: str, call: ast.Call, scopes: list[Scope], depth: int
    ) -> tuple[StaticModule, ast.FunctionDef] | None:
        """The helper ``factory(...).attr`` names, where the factory (in the project) sets that attribute on what
        it returns: ``solve.core = solve_core; return solve``."""
        factory = self._function(module, expr.func, scopes)
        if factory is None:
            return None
        owner, definition = factory
        returned = {node.value.id for node in _own_returns(definition) if isinstance(node.value, ast.Name)}
        for node in _own_statements(definition):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)):
                continue
            for target in node.targets:
                if (isinstance(target, ast.Attribute) and target.attr == attr and isinstance(target.value, ast.Name)
                        and target.value.id in returned):  # fmt: skip
                    found = self._name(owner, node.value.id, call, [definition, *owner.scopes(definition)], depth + 1)
                    return found if isinstance(found, tuple) else None
        return None

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
        if isinstance(bound, ast.FunctionDef) and module.is_kernel(bound):
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
        if depth > 20 or (source.level == 0 and _is_standard(dotted)):
            return None
        path = self.module_file(module, source.level, dotted)
        if path is None and source.name is not None:  # ``from pkg.mod import SomeVector``: a name, not a module
            owner = self.module_file(module, source.level, source.module)
            target = self.load(owner) if owner is not None else None
            found = target.binding(source.name, []) if target is not None else None
            if isinstance(found, ast.ClassDef):
                return _class_member(target, found, attr)
            if isinstance(found, Imported):
                return self._in_module(target, found, attr, call, depth + 1)
            if found is not None:
                return None  # another object of that module: its attributes are not followed, as in this file
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
