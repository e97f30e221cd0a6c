"""The files of the user's project that the command line follows helpers into, and what a call inside a kernel
refers to: a helper in this file or another, or something the rewrite could not follow (``Unfollowed``,
``Unresolved``)."""

from __future__ import annotations

import ast
import enum
import importlib.machinery
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from warp_rewrite.cli.scopes import PYTHON_BUILTINS, Scope, own_returns, own_statements
from warp_rewrite.cli.source_file import Imported, ParseError, SourceFile, display_path
from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.passes.syntax import walk

_NOT_FOLLOWED = frozenset({"warp", "numpy", "typing", "math"})
# Where ``Project.module_file`` looks, as the messages about a file not found say it.
SEARCHED = "searched the file's folder and those above it, the working directory and the interpreter's sys.path"


def _class_member(module: StaticModule, cls: ast.ClassDef, attr: str) -> tuple[StaticModule, ast.FunctionDef] | None:
    """The ``@wp.func`` method ``attr`` of a class (Newton's vector types: ``YieldParamVec.from_values(...)``)."""
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == attr and module.warp.decorated(node, "func"):
            return module, node
    return None


class Callee(enum.Enum):
    """What a call that could not be followed calls, as messages name it."""

    HELPER = "helper"
    STRUCT = "struct constructor"  # a name spelled as a type (``ContactData(...)``) imported from a file not found
    VALUE = "function value"  # known only at run time: a factory's parameter, a ``wp.static`` expression


@dataclass(frozen=True)
class Unfollowed:
    """A helper a kernel calls that could not be found: it may hide an atomic's consumed return."""

    call: ast.Call
    helper: str
    module: str

    @property
    def callee(self) -> Callee:
        return Callee.STRUCT if _looks_like_a_type(self.helper) else Callee.HELPER


@dataclass(frozen=True)
class Unresolved:
    """A call whose callee is only known when the code runs (a factory's parameter, ``wp.static(expr)``): it
    may hide an atomic's consumed return."""

    call: ast.Call
    helper: str  # the callee as written
    reason: str  # what it is, for messages: "a parameter of 'make_kernel'"
    # the helpers it may be, where it is one of them whichever way the code runs (``put = put_fast if FAST else
    # put_exact``); else none
    candidates: tuple[tuple[StaticModule, ast.FunctionDef], ...] = ()

    @property
    def callee(self) -> Callee:
        return Callee.VALUE


Resolved = tuple["StaticModule", ast.FunctionDef] | Unfollowed | Unresolved | None


def callee_expression(module: StaticModule, call: ast.Call) -> tuple[ast.expr, bool]:
    """What a call calls, and whether through ``wp.static``: ``f`` of ``f(...)`` and of ``wp.static(f)(...)``."""
    func = call.func
    if isinstance(func, ast.Call) and module.warp.is_warp(func.func, "static") and len(func.args) == 1:
        return func.args[0], True
    return func, False


def _same(one: Resolved, other: Resolved) -> bool:
    """Do two resolutions name the same thing: the same helper (or both none, or both the same kind of call the
    rewrite cannot follow)?"""
    if isinstance(one, tuple) and isinstance(other, tuple):
        return one[1] is other[1]
    return type(one) is type(other) and not isinstance(one, Unresolved | Unfollowed)


def _looks_like_a_type(name: str) -> bool:
    """``dtype``, ``vec_type``, ``scalar_t``, ``Struct``: names that by convention hold types."""
    return name[0].isupper() or name.endswith(("type", "_t"))


def _used_as_type(scope: ast.AST, name: str) -> bool:
    """True if ``name`` looks like a type or appears as one in ``scope``: in an annotation (also a string one), as
    a ``dtype=`` argument or a subscript. Its calls are then conversions (``dtype(0.0)``), not helpers."""
    if _looks_like_a_type(name):
        return True
    for node in walk(scope):
        annotations: list[ast.AST] = []
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


def installed_file(parts: list[str]) -> Path | None:
    """The source file of module ``parts`` (a package's ``__init__.py``) as the running interpreter would find it on
    ``sys.path`` (site-packages, ``PYTHONPATH``, ``.pth`` files) or through an import hook on ``sys.meta_path`` (an
    editable install), asked package by package of the finders, so that nothing is imported: a package's
    ``__init__`` does not run. None where it is not Python source."""
    search: list[str] | None = None  # None: sys.path, for the top-level package
    spec = None
    for depth in range(len(parts)):
        name = ".".join(parts[: depth + 1])
        spec = next((found for finder in sys.meta_path if (found := _spec(finder, name, search)) is not None), None)
        if spec is None:
            return None
        if depth < len(parts) - 1:
            if spec.submodule_search_locations is None:
                return None  # a module where a package was needed
            search = list(spec.submodule_search_locations)
    origin = getattr(spec, "origin", None)
    return Path(origin) if origin and origin.endswith(".py") and Path(origin).is_file() else None


def _spec(finder: object, name: str, search: list[str] | None) -> importlib.machinery.ModuleSpec | None:
    find_spec = getattr(finder, "find_spec", None)
    if find_spec is None:
        return None
    try:
        return find_spec(name, search)
    except KeyError:  # a namespace package below a parent not imported: its _NamespacePath asks sys.modules
        return _namespace_spec(name, search)
    except (ImportError, ValueError, OSError):
        return None


def _namespace_spec(name: str, search: list[str] | None) -> importlib.machinery.ModuleSpec | None:
    """The spec of a namespace package (a folder without ``__init__.py``) inside the folders ``search``, made
    without the finder's ``_NamespacePath``, which needs the parent package imported."""
    last = name.rpartition(".")[2]
    folders = [str(Path(entry) / last) for entry in search or () if (Path(entry) / last).is_dir()]
    if not folders:
        return None
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = folders
    return spec


@dataclass
class Project:
    """The files of the user's project that helpers are followed into, each parsed once."""

    modules: dict[Path, StaticModule | None] = field(default_factory=dict)
    # How messages name the files the command line was given (resolved path -> its spelling there), so that a file
    # first loaded as another's helper is named as the command line names it.
    displays: dict[Path, str] = field(default_factory=dict)
    _files: dict[tuple[Path, int, str], Path | None] = field(default_factory=dict)
    for_check: bool = False  # parse files without the bodies no check reads (``StaticModule.parse_for_check``)
    _resolved: dict[Path, Path] = field(default_factory=dict)  # ``real``

    def load(self, path: Path) -> StaticModule | None:
        """The file parsed (once a run), or None where it cannot be read or parsed."""
        path = self.real(path)
        if path not in self.modules:
            try:
                source = SourceFile.read(path)
                display = self.displays.get(path) or display_path(path)
                parse = StaticModule.parse_for_check if self.for_check else StaticModule.parse
                self.modules[path] = parse(path, display, source.text, source.encoding)
            except (OSError, UnicodeDecodeError, SyntaxError, ParseError):
                self.modules[path] = None
        return self.modules[path]

    def module_file(self, origin: StaticModule, level: int, dotted: str) -> Path | None:
        """The file a (possibly relative) import of ``origin`` refers to, searched without importing.

        An absolute import is looked up from the file's folder up through every folder above it (the first
        that has the import's top-level package or module wins), then from the working directory: the roots
        Python would have on its path when the project runs, wherever ``wp-rewrite`` runs from; then where the
        running interpreter finds installed packages (``installed_file``).
        """
        real = self.real(origin.path)
        key = (real.parent, level, dotted)  # the search reads only the folders above the file
        if key not in self._files:
            self._files[key] = self._find_module_file(real, level, dotted)
        return self._files[key]

    def real(self, path: Path) -> Path:
        """``path.resolve()``, asked of the file system once a run: a folder's resolved path is kept, so that a file
        in it costs one ``lstat`` (is it a link?) instead of one per folder above it."""
        real = self._resolved.get(path)
        if real is None:
            parent = path.parent
            if parent == path or ".." in path.parts:
                real = path.resolve()
            else:
                real = self.real(parent) / path.name
                if real.is_symlink():
                    real = real.resolve()
            self._resolved[path] = real
        return real

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
        return installed_file(parts) if level == 0 else None

    def binding(self, module: StaticModule, name: str, scopes: list[Scope]) -> ast.AST | Imported | None:
        """``module.binding``; where the file binds ``name`` nowhere, what one of its star imports binds it to
        (``star_import``)."""
        found = module.binding(name, scopes)
        return found if found is not None else self.star_import(module, name)

    def star_import(self, module: StaticModule, name: str, depth: int = 0) -> Imported | None:
        """Where ``name``, which ``module`` binds nowhere itself, comes from through its ``from ... import *``
        statements: as an import of that name from the last of them whose file exports it (``StaticModule.exports``:
        it binds it, itself or through its own star imports); failing that, from the last whose file was not found,
        which following it reports (``Unfollowed``). None where no star import can bind it."""
        if depth > 20 or name in PYTHON_BUILTINS:
            return None
        unfound = None
        for node in reversed(module.star_imports):
            source = Imported(node.level, node.module or "", name)
            if node.level == 0 and _is_standard(source.module):
                continue
            path = self.module_file(module, node.level, source.module)
            target = self.load(path) if path is not None else None
            if target is None:
                unfound = unfound or source
            elif target.exports(name) and (
                target.binding(name, []) is not None or self.star_import(target, name, depth + 1) is not None
            ):
                return source
        return unfound

    def resolve(self, module: StaticModule, call: ast.Call, scopes: list[Scope] | None = None) -> Resolved:
        """The ``@wp.func`` a call (in ``module``'s tree) refers to; ``Unfollowed`` if it is imported from a file
        not found, ``Unresolved`` if only running the code would tell; None for anything else (Warp's builtins,
        structs, constructors). ``scopes``: ``module.scopes(call)``, where the caller knows them."""
        scopes = module.scopes(call) if scopes is None else scopes
        return self._callable(module, *callee_expression(module, call), call, scopes, 0)

    def _callable(
        self, module: StaticModule, expr: ast.expr, static: bool, call: ast.Call, scopes: list[Scope], depth: int
    ) -> Resolved:
        """What ``expr``, called in ``scopes``, refers to (``static``: inside ``wp.static(...)``)."""
        if depth > 20 or module.warp.is_warp_expr(expr):
            return None
        if isinstance(expr, ast.Name):
            return self._name(module, expr.id, call, scopes[1:], depth)  # scopes[0]: the kernel or helper itself
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            bound = self.binding(module, expr.value.id, scopes[1:])
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
            return found or Unresolved(
                call, ast.unparse(expr), "an attribute of a value returned by a call, known only at run time"
            )
        if static and isinstance(expr, ast.IfExp):  # ``wp.static(put_fast if FAST else put_exact)``
            branches = [expr.body, expr.orelse]
            how = "chosen by a condition"
            return self._one_of(module, ast.unparse(expr), branches, call, scopes, depth, how, "from")
        if static:
            return Unresolved(call, ast.unparse(expr), "an expression evaluated when Warp builds the kernel")
        return None

    def _name(self, module: StaticModule, name: str, call: ast.Call, scopes: list[Scope], depth: int) -> Resolved:
        scope = module.binding_scope(name, scopes)
        alternatives = module.alternatives(scope, name) if scope is not None else []
        if alternatives:  # ``if FAST: put = put_fast`` / ``else: put = put_exact``
            return self._one_of(module, name, alternatives, call, scopes, depth, "bound on different branches")
        return self._bound(module, name, self.binding(module, name, scopes), call, scopes, depth)

    def _one_of(
        self,
        module: StaticModule,
        name: str,
        bindings: Sequence[ast.AST | Imported],
        call: ast.Call,
        scopes: list[Scope],
        depth: int,
        how: str,
        preposition: str = "to",
    ) -> Resolved:
        """What ``name`` refers to where it may be any of ``bindings`` (which one, only running the code tells): what
        they all refer to, where that is one thing; else ``Unresolved``, naming the helpers (``how``, then
        ``preposition``: "bound by a condition to 'f' or 'g'")."""
        found = [self._bound(module, name, binding, call, scopes, depth + 1) for binding in bindings]
        if all(_same(one, found[0]) for one in found[1:]):
            return found[0]
        candidates = tuple(one for one in found if isinstance(one, tuple))
        helpers = sorted({repr(helper.name) for _, helper in candidates})
        every = len(candidates) == len(found)
        helpers += ["another value"] if helpers and not every else []
        named = f" {preposition} {' or '.join(helpers)}" if helpers else ""
        return Unresolved(call, name, f"{how}{named}, known only at run time", candidates if every else ())

    def _bound(
        self,
        module: StaticModule,
        name: str,
        bound: ast.AST | Imported | None,
        call: ast.Call,
        scopes: list[Scope],
        depth: int,
    ) -> Resolved:
        """What ``name``, bound to ``bound``, refers to."""
        if isinstance(bound, Imported):
            return self._imported(module, bound, name, call, depth)
        if isinstance(bound, ast.FunctionDef):
            if module.warp.decorated(bound, "func"):
                return module, bound
            if bound.decorator_list:  # Newton's @fem.cache.dynamic_func(suffix=key) makes a @wp.func
                decorator = ast.unparse(bound.decorator_list[0])
                return Unresolved(call, name, f"made a Warp function by its decorator @{decorator} at run time")
            return None
        if isinstance(bound, ast.arg):
            owner = next(s for s in scopes if not isinstance(s, ast.ClassDef) and bound in walk(s.args))
            if _used_as_type(owner, name):
                return None
            function = "<lambda>" if isinstance(owner, ast.Lambda) else owner.name
            return Unresolved(call, name, f"a parameter of '{function}', known only when it is called")
        if isinstance(bound, ast.Name):  # an alias: ``writer = write_contact``
            return self._name(module, bound.id, call, module.scopes(bound), depth + 1)
        if isinstance(bound, ast.IfExp):  # ``put = put_fast if FAST else put_exact``
            return self._one_of(module, name, [bound.body, bound.orelse], call, scopes, depth, "bound by a condition")
        if bound is None or isinstance(bound, ast.ClassDef | ast.Constant):
            return None
        if isinstance(bound, ast.expr) and module.warp.is_warp_expr(bound):
            return None
        in_function = module.scope_binding(module.tree, name) is not bound
        if isinstance(bound, ast.Call):
            builtin = isinstance(bound.func, ast.Name) and bound.func.id in PYTHON_BUILTINS
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
    ) -> Resolved:
        """The helper a function call returns, where that function (a helper factory) is in the project and each
        of its ``return`` statements names the same ``@wp.func``; ``Unresolved`` where one names a function only
        running the code would tell."""
        factory = self.function_named(module, expr.func, scopes)
        if factory is None:
            return None
        owner, definition = factory
        returned = [
            self._name(owner, node.value.id, call, [definition, *owner.scopes(definition)], depth + 1)
            if isinstance(node.value, ast.Name)
            else None
            for node in own_returns(definition)
        ]
        helpers = {id(found[1]): found for found in returned if isinstance(found, tuple)}
        unresolved = next((found for found in returned if isinstance(found, Unresolved)), None)
        if unresolved is not None:
            return unresolved
        return (
            next(iter(helpers.values()))
            if returned and len(helpers) == 1 and len(returned) == sum(isinstance(found, tuple) for found in returned)
            else None
        )

    def _returned_attribute(
        self, module: StaticModule, expr: ast.Call, attr: str, call: ast.Call, scopes: list[Scope], depth: int
    ) -> tuple[StaticModule, ast.FunctionDef] | None:
        """The helper ``factory(...).attr`` names, where the factory (in the project) sets that attribute on what
        it returns: ``solve.core = solve_core; return solve``."""
        factory = self.function_named(module, expr.func, scopes)
        if factory is None:
            return None
        owner, definition = factory
        returned = {node.value.id for node in own_returns(definition) if isinstance(node.value, ast.Name)}
        for node in own_statements(definition):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)):
                continue
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == attr
                    and isinstance(target.value, ast.Name)
                    and target.value.id in returned
                ):
                    found = self._name(owner, node.value.id, call, [definition, *owner.scopes(definition)], depth + 1)
                    return found if isinstance(found, tuple) else None
        return None

    def function_named(self, module: StaticModule, expr: ast.expr, scopes: list[Scope]):
        """The plain function (module, definition) ``expr`` names, following imports; None if not found."""
        found = self.definition_named(module, expr, scopes)
        return found if found is not None and isinstance(found[1], ast.FunctionDef) else None

    def definition_named(
        self, module: StaticModule, expr: ast.expr, scopes: list[Scope]
    ) -> tuple[StaticModule, ast.FunctionDef | ast.ClassDef] | None:
        """The function or class (module, definition) the name ``expr`` names, following imports; None if not found.
        A function's body is parsed where ``--check`` left it out."""
        if not isinstance(expr, ast.Name):
            return None
        owner: StaticModule | None = module
        bound = self.binding(module, expr.id, scopes)
        for _ in range(20):  # through re-exports: ``from ._src.geometry.narrow_phase import NarrowPhase``
            if not (isinstance(bound, Imported) and bound.name is not None and owner is not None):
                break
            path = self.module_file(owner, bound.level, bound.module)
            owner = self.load(path) if path is not None else None
            bound = self.binding(owner, bound.name, []) if owner is not None else None
        if owner is None or not isinstance(bound, ast.FunctionDef | ast.ClassDef):
            return None
        return owner, owner.full_body(bound) if isinstance(bound, ast.FunctionDef) else bound

    def kernel_named(
        self, module: StaticModule, expr: ast.expr, scopes: list[Scope], depth: int = 0
    ) -> tuple[StaticModule, ast.FunctionDef] | None:
        """The kernel ``expr`` names (``k``, ``sim.k``) where ``scopes`` surround it, in this file or one it
        imports; None if it names none the project defines."""
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            bound = self.binding(module, expr.value.id, scopes)
            if not isinstance(bound, Imported):
                return None
            path = self.module_file(module, bound.level, ".".join(p for p in (bound.module, bound.name) if p))
            target = self.load(path) if path is not None else None
            return self.kernel_named(target, ast.Name(expr.attr), [], depth + 1) if target else None
        if not isinstance(expr, ast.Name) or depth > 20:
            return None
        bound = self.binding(module, expr.id, scopes)
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
            found = self.binding(target, source.name, []) if target is not None else None
            if target is not None and isinstance(found, ast.ClassDef):
                return _class_member(target, found, attr)
            if target is not None and isinstance(found, Imported):
                return self._in_module(target, found, attr, call, depth + 1)
            if found is not None:
                return None  # another object of that module: its attributes are not followed, as in this file
        if path is None:
            return Unfollowed(call, attr, "." * source.level + dotted)
        target = self.load(path)
        return self._name(target, attr, call, [], depth + 1) if target else None


def _is_standard(dotted: str) -> bool:
    """Modules whose functions are never user helpers (Warp's own, numpy, the standard library)."""
    top = dotted.split(".")[0]
    return top in _NOT_FOLLOWED or top in sys.stdlib_module_names
