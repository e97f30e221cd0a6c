"""The command line's front end: a kernel and its helpers read from source files, never imported.

Types come from annotations, resolved to the Warp types Warp itself would make of them (``wp.array(dtype=float)``
becomes Warp's array of ``wp.float32``), so that the passes see what the API's front end shows them.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import os
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import warp as wp

from warp_rewrite.cli.module_ints import int_constant, module_int
from warp_rewrite.cli.project import Project
from warp_rewrite.cli.scopes import PYTHON_BUILTINS
from warp_rewrite.cli.source_file import Imported, module_level
from warp_rewrite.cli.static_module import Construction, StaticModule
from warp_rewrite.passes import dtypes, overloads
from warp_rewrite.passes.atomics import WarpNames
from warp_rewrite.passes.int_types import IntLocals
from warp_rewrite.passes.plan_types import Unit
from warp_rewrite.passes.syntax import Located, function_locals, walk
from warp_rewrite.passes.two_phase import ModuleNames
from warp_rewrite.runtime import RewriteError

_ARRAYS = ("array", "array1d", "array2d", "array3d", "array4d", "indexedarray", "fabricarray", "indexedfabricarray")


@dataclass(eq=False)
class StaticUnit:
    """A kernel's or helper's definition as the passes see it, read from its file."""

    name: str
    tree: ast.FunctionDef
    owner: StaticModule

    def location(self, node: Located) -> str:
        return self.owner.location(node)

    @property
    def text(self) -> str:
        return self.owner.text


@dataclass(frozen=True)
class StaticStruct:
    """A ``@wp.struct`` class read from its file. Its ``vars`` are its fields by name, each with its ``type``, as
    Warp's own struct types have them (``passes.dtypes.field_type`` reads both). A type, compared and hashed by its
    class's definition alone, as Warp's struct types are (the passes keep sets of types)."""

    project: Project = field(compare=False)
    owner: StaticModule = field(compare=False)
    node: ast.ClassDef

    @property
    def vars(self) -> dict[str, SimpleNamespace]:
        return {
            item.target.id: SimpleNamespace(type=resolve_annotation(self.project, self.owner, item.annotation))
            for item in self.node.body
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
        }


def _parsed(node: ast.expr | None) -> ast.expr | None:
    """An annotation as an expression, parsing string annotations (``from __future__ import annotations``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    return node


def resolve_annotation(project: Project, module: StaticModule, node: ast.expr | None) -> Any:
    """The Warp type an annotation denotes, as Warp would read it: ``typing.Any`` for a generic one, None for one
    that cannot be told without running the module. Names the module imports are followed into the files of the
    project (``project``), as helpers are."""
    node = _parsed(node)
    if isinstance(node, ast.Call) and _constructor(module, node.func):  # wp.types.matrix(shape=(6, 1), dtype=...)
        return _value_type(project, module, node)
    if isinstance(node, ast.Subscript | ast.Call):  # wp.array[wp.float32], wp.array(dtype=float, ndim=2)
        kind, dtype, ndim = _array_parts(node)
        return _array(project, module, kind, dtype, ndim)
    if isinstance(node, ast.Name):
        if node.id in ("int", "float", "bool"):
            return dtypes.normalized(getattr(builtins, node.id))
        if node.id == module.warp.any_name:
            return typing.Any
        if node.id in module.warp.members:
            return getattr(wp, module.warp.members[node.id], None)
        return _module_type(project, module, [node.id])
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id in module.warp.modules:
            return getattr(wp, node.attr, None)
        if f"{node.value.id}.{node.attr}" == module.warp.any_name:
            return typing.Any
    dotted = _dotted(node)
    return _module_type(project, module, dotted) if dotted and len(dotted) > 1 else None


def _array_parts(node: ast.Subscript | ast.Call) -> tuple[ast.expr, ast.expr | None, int | None]:
    """An array annotation's kind, dtype expression and literal ndim: ``wp.array[wp.float32]``,
    ``wp.array(dtype=wp.float32, ndim=2)``, ``wp.array2d(float)``."""
    if isinstance(node, ast.Subscript):
        return node.value, node.slice, None
    keywords = {k.arg: k.value for k in node.keywords}
    ndim = keywords.get("ndim")
    literal = ndim.value if isinstance(ndim, ast.Constant) and isinstance(ndim.value, int) else None
    return node.func, keywords.get("dtype", node.args[0] if node.args else None), literal


def is_generic_annotation(project: Project, module: StaticModule, node: ast.expr | None) -> bool:
    """Does Warp read the annotation as generic? An array of a struct does not, though ``resolve_annotation``
    gives it the dtype Any (a Warp array type cannot hold the command line's struct types)."""
    if not dtypes.is_generic(resolve_annotation(project, module, node)):
        return False
    node = _parsed(node)
    if isinstance(node, ast.Subscript | ast.Call):
        _, dtype, _ = _array_parts(node)
        return not isinstance(resolve_annotation(project, module, dtype), StaticStruct)
    return True


def _dotted(node: ast.expr | None) -> list[str] | None:
    """``["types_", "Particles"]`` for ``types_.Particles``; None for anything but names and attributes of them."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return [node.id, *parts] if isinstance(node, ast.Name) else None


def _module_type(project: Project, module: StaticModule, dotted: list[str], depth: int = 0) -> Any:
    """The type a module-level name of the file stands for (``dotted``: the name, or a name the file imports and
    attributes of it): a ``@wp.struct`` class, or a value type made by one of Warp's type constructors
    (``mat61 = wp.types.matrix(shape=(6, 1), dtype=wp.float32)``), in this file or one of the project's that it
    imports it from, or another name for one of Warp's types (``F = wp.float64``); None for anything else."""
    name, *rest = dotted
    for node in module_level(module.tree) if not rest else ():
        if isinstance(node, ast.ClassDef) and node.name == name:
            return StaticStruct(project, module, node) if module.warp.decorated(node, "struct") else None
        if not isinstance(node, ast.Assign) or not any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            continue
        if isinstance(node.value, ast.Call) and _constructor(module, node.value.func):
            return _value_type(project, module, node.value)
        if isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name) and depth < 20:
            named = resolve_annotation(project, module, node.value)  # F = wp.float64
            return named if dtypes.is_value_type(named) else None
    source = module.imported.get(name) or project.star_import(module, name)
    return None if source is None or depth > 20 else _imported_type(project, module, source, rest, depth + 1)


def _imported_type(project: Project, module: StaticModule, source: Imported, rest: list[str], depth: int) -> Any:
    """The type ``rest`` names in what ``source`` (an import of ``module``) binds: ``from .types_ import Particles``
    (``rest`` empty), ``from . import types_`` or ``import pkg.types_ as types_`` (``rest``: ``["Particles"]``)."""
    if source.name is not None:  # a name in a module, or a module in a package (``from . import types_``)
        path = project.module_file(module, source.level, source.module)
        target = project.load(path) if path is not None else None
        found = _module_type(project, target, [source.name, *rest], depth) if target is not None else None
        if found is not None or not rest:
            return found
    if not rest:
        return None
    package = ".".join(part for part in (source.module, source.name, *rest[:-1]) if part)
    path = project.module_file(module, source.level, package)
    target = project.load(path) if path is not None else None
    return _module_type(project, target, rest[-1:], depth) if target is not None else None


_CONSTRUCTORS = {
    "vector": ("length", "dtype"),
    "matrix": ("shape", "dtype"),
    "quaternion": ("dtype",),
    "transformation": ("dtype",),
}


def _constructor(module: StaticModule, func: ast.expr) -> str | None:
    """``matrix`` for ``wp.types.matrix`` (any alias of warp): the name of one of Warp's type constructors."""
    if isinstance(func, ast.Attribute) and func.attr in _CONSTRUCTORS and isinstance(func.value, ast.Attribute):
        return func.attr if func.value.attr == "types" and module.warp.is_warp_expr(func.value) else None
    return None


def _value_type(project: Project, module: StaticModule, call: ast.Call) -> Any:
    """The type a call of one of Warp's type constructors makes, where its arguments are literals and Warp's scalar
    types; None where they are not (a factory's parameter)."""
    name = _constructor(module, call.func)
    if name is None:  # (the callers ask only of constructors' calls)
        return None
    arguments = dict(zip(_CONSTRUCTORS[name], call.args, strict=False))
    arguments.update({keyword.arg: keyword.value for keyword in call.keywords if keyword.arg})
    if set(arguments) != set(_CONSTRUCTORS[name]):
        return None
    values = {}
    for parameter, value in arguments.items():
        if parameter == "dtype":
            values[parameter] = resolve_annotation(project, module, value)
            if not dtypes.is_scalar(values[parameter]):
                return None
        else:
            folded = int_constant(project, module, value)
            if folded is None:
                return None
            values[parameter] = folded
    try:
        return getattr(wp.types, name)(**values)
    except (TypeError, ValueError):
        return None


def _array(project: Project, module: StaticModule, kind: ast.expr, dtype: ast.expr | None, ndim: int | None) -> Any:
    """The Warp array type ``kind(dtype=dtype, ndim=ndim)`` (generic where the dtype cannot be told)."""
    name = next((a for a in _ARRAYS if module.warp.is_warp(kind, a)), None)
    if name is None:
        return None
    element = resolve_annotation(project, module, dtype)
    if element is None or isinstance(element, StaticStruct) or dtypes.is_array(element):
        element = typing.Any
    array_type = getattr(wp, name)
    if ndim and name in ("array", "indexedarray"):
        return array_type(dtype=element, ndim=ndim)
    return array_type(dtype=element)


class _Verbatim(str):
    """A decorator argument that is not a literal: generated decorators print its ``repr``, the source text."""

    def __repr__(self) -> str:
        return str(self)


_OWN_KEY = frozenset({"key", "name"})  # the kernel's own key (wp.Kernel's, wp.kernel's): generated kernels have theirs
_KERNEL_ARGUMENTS = list(inspect.signature(wp.Kernel).parameters)  # func, key, module, options, ...
_DECORATOR_OPTIONS = frozenset(inspect.signature(wp.kernel).parameters) - {"f"}


def _keyword_options(keywords: list[ast.keyword]) -> dict[str, object]:
    """Keyword arguments as the generated decorators pass them on: literals, else ``_Verbatim`` source text;
    ``**expr`` under the key "**expr"; not the kernel's own key."""
    options: dict[str, object] = {}
    for keyword in keywords:
        if keyword.arg in _OWN_KEY:
            continue
        if keyword.arg is None:  # @wp.kernel(**options): passed on as it is
            options[f"**{ast.unparse(keyword.value)}"] = None
            continue
        try:
            options[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            options[keyword.arg] = _Verbatim(ast.unparse(keyword.value))
    return options


def kernel_options(module: StaticModule, kernel: ast.FunctionDef) -> dict[str, object]:
    """The options of the kernel, as ``@wp.kernel(...)`` takes them: its decorator's keyword arguments
    (``**expr`` under the key "**expr"), or those of the first call that makes a kernel of it."""
    decorator = module.warp.decorator(kernel, "kernel")
    if isinstance(decorator, ast.Call):
        return _keyword_options(decorator.keywords)
    constructions = module.constructions(kernel) if decorator is None else []
    return construction_options(module, constructions[0]) if constructions else {}


def construction_options(module: StaticModule, construction: Construction) -> dict[str, object]:
    """The options of the kernel a call makes, as ``@wp.kernel(...)`` takes them: ``wp.kernel``'s keywords, or
    ``wp.Kernel``'s ``module`` and the entries of its ``options`` dict. What a decorator could not say as it is
    said there (a ``wp.Kernel`` option ``wp.kernel`` does not take, its ``code_transformers`` or ``source``) is
    ``_Verbatim``, as are values not written as literals."""
    call = construction.options
    if not module.warp.is_warp(call.func, "Kernel"):
        return _keyword_options(call.keywords)
    given = dict(zip(_KERNEL_ARGUMENTS, call.args, strict=False)) | {k.arg: k.value for k in call.keywords}
    if None in given:
        return {f"**{ast.unparse(given[None])}": None}
    entries = given.pop("options", None)
    options = _keyword_options([ast.keyword(name, value) for name, value in given.items() if name != "func"])
    for name in ("code_transformers", "source"):
        if name in options:
            options[name] = _Verbatim(ast.unparse(given[name]))
    if options.get("module", _Verbatim("")) is None:
        del options["module"]
    if isinstance(entries, ast.Dict) and all(
        isinstance(k, ast.Constant) and isinstance(k.value, str) for k in entries.keys
    ):
        pairs = zip(entries.keys, entries.values, strict=True)
        entry_keywords = [  # (every key is a string)
            ast.keyword(k.value, v) for k, v in pairs if isinstance(k, ast.Constant) and isinstance(k.value, str)
        ]
        for name, value in _keyword_options(entry_keywords).items():
            options[name] = value if name in _DECORATOR_OPTIONS else _Verbatim(repr(value))
    elif entries is not None and not (isinstance(entries, ast.Constant) and entries.value is None):
        options["options"] = _Verbatim(ast.unparse(entries))
    return options


def construction_problem(module: StaticModule, construction: Construction) -> str | None:
    """Why the generated kernels cannot be given the options of the kernel ``construction`` makes: the
    first one only known when it runs, or that a decorator cannot say; None if there is none."""
    for name, value in construction_options(module, construction).items():
        if name.startswith("**"):
            return f"options given as {name}, known only at run time"
        if isinstance(value, _Verbatim):
            return f"its {name}={value}, which wp-rewrite cannot give the generated kernels"
    return None


@dataclass
class StaticFrontend:
    """``warp_rewrite.pipeline.Frontend`` for a kernel in a file; the kernels of one file share ``module`` and
    ``taken`` (the names of the file and of the code generated into it so far)."""

    source: StaticModule
    project: Project
    definition: ast.FunctionDef
    module: ModuleNames
    taken: set[str]
    units: dict[int, StaticUnit] = field(default_factory=dict)

    def __post_init__(self):
        self.kernel = self.unit(self.source, self.definition)
        options = kernel_options(self.source, self.definition)
        # The generated kernels join the kernel's own Warp module: its file's, or the one its decorator asks for.
        self.placement = {key: options.pop(key) for key in ("module", "module_options") if key in options}
        self.options = options
        module_options = self.placement.get("module_options")
        chosen = [
            options.get("max_unroll"),
            module_options.get("max_unroll") if isinstance(module_options, dict) else None,
            self.source.module_options.get("max_unroll"),
            wp.config.max_unroll,
        ]
        self.max_unroll = next(value for value in chosen if isinstance(value, int))
        self.backward = self.source.backward_disabled(self.definition) is None

    def unit(self, owner: StaticModule, function: ast.FunctionDef) -> StaticUnit:
        if id(function) not in self.units:
            self.units[id(function)] = StaticUnit(function.name, function, owner)
        return self.units[id(function)]

    def warp_names(self, unit: StaticUnit) -> WarpNames:
        return unit.owner.warp.names()

    def resolve_helper(self, unit: StaticUnit, call: ast.Call) -> StaticUnit | None:
        found = self.project.resolve(unit.owner, call)
        if not isinstance(found, tuple):
            return None
        owner, helper = found
        kept, defined = self._overloads(unit, call, owner, helper)
        if len(kept) != 1:  # (the cast: a StaticUnit's text is a property, which the protocol's variable is not)
            candidates = [cast(Unit, self.unit(owner, node)) for node in kept]
            raise overloads.Ambiguous(cast(Unit, unit), call, helper.name, candidates, defined)
        return self.unit(owner, kept[0])

    def _overloads(
        self, unit: StaticUnit, call: ast.Call, owner: StaticModule, helper: ast.FunctionDef
    ) -> tuple[list[ast.FunctionDef], int]:
        """The definitions the call may run, where the helper's file defines several of its name at module level
        (Warp overloads them by signature; ``passes.overloads``), and how many there are."""
        defined = [
            node
            for node in module_level(owner.tree)
            if isinstance(node, ast.FunctionDef) and node.name == helper.name and owner.warp.decorated(node, "func")
        ]
        if len(defined) < 2 or helper not in defined:
            return [helper], 1
        caller = {**IntLocals(unit.tree, self.parameter_types(unit)).locals, **self.parameter_types(unit)}
        project = self.project
        parameters = lambda node: [(a.arg, resolve_annotation(project, owner, a.annotation)) for a in node.args.args]  # noqa: E731
        kept = overloads.candidates(call, [overloads.Overload(node, parameters(node)) for node in defined], caller.get)
        return kept, len(defined)

    def is_builtin(self, unit: StaticUnit, call: ast.Call) -> bool:
        owner, func = unit.owner, call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in owner.warp.modules:
            return func.attr != "static"  # wp.static(...) itself is a builtin; what it returns is not known here
        if not isinstance(func, ast.Name):
            return False
        if func.id in owner.warp.members:
            return True
        if isinstance(resolve_annotation(self.project, owner, func), StaticStruct):
            return True
        return hasattr(builtins, func.id) and func.id not in owner.imported and func.id not in owner.helpers()

    def named_type(self, unit: StaticUnit, expr: ast.expr) -> Any:
        named = resolve_annotation(self.project, unit.owner, expr)
        return None if named is typing.Any else named

    def local_types(self, unit: StaticUnit) -> dict[str, Any]:
        return {}  # not known without running the module: the passes infer ints from the source

    def return_type(self, unit: StaticUnit) -> Any:
        return resolve_annotation(self.project, unit.owner, unit.tree.returns)

    def parameter_types(self, unit: StaticUnit) -> dict[str, Any]:
        return {a.arg: resolve_annotation(self.project, unit.owner, a.annotation) for a in unit.tree.args.args}

    def element_struct(self, unit: StaticUnit, name: str) -> Any:
        # an array of a struct reads as one of Any (``resolve_annotation``): its dtype's annotation tells the struct
        annotation = next((_parsed(a.annotation) for a in unit.tree.args.args if a.arg == name), None)
        if not isinstance(annotation, ast.Subscript | ast.Call):
            return None
        _, dtype, _ = _array_parts(annotation)
        struct = resolve_annotation(self.project, unit.owner, dtype)
        return struct if isinstance(struct, StaticStruct) else None

    def is_generic(self, unit: StaticUnit) -> bool:
        return any(is_generic_annotation(self.project, unit.owner, a.annotation) for a in unit.tree.args.args)

    def has_custom_gradient(self, unit: StaticUnit) -> bool:
        return unit.owner.has_gradient(unit.tree)

    def array(self, path: str) -> dtypes.ArrayInfo | None:
        root, *fields = path.split(".")
        annotation = self.parameter_types(self.kernel).get(root)
        for name in fields:
            annotation = dtypes.field_type(annotation, name)
        return dtypes.array_info(annotation)

    def int_constant(self, unit: StaticUnit, name: str) -> int | None:
        return module_int(self.project, unit.owner, unit.tree, name)

    def closure_variable(self, name: str) -> bool:
        return self.source.postponed_annotations and self.source.bound_around(name, self.definition)

    def helper_imports(self, unit: StaticUnit, clones: Iterable[ast.Call]) -> list[HelperImport]:
        """What the rewritten module must import for a helper from another file to be copied into it; raises
        ``RewriteError`` where it cannot.

        A cloned helper is copied into the rewritten module, so each global name it uses must mean the same there:
        warp under the same name, a builtin, another clone, a name the module imports from the helper's file, or
        else one the module does not bind at all, which it then imports from the helper's file (``_hashtable_hash``
        beside ``hashtable_find_or_insert``), spelled as its own import of that file. A helper of the kernel's own
        file must not use a name only a function around it binds (``_check_visible``).
        """
        module = self.source
        owner, helper = unit.owner, unit.tree
        if helper is self.definition:
            return []
        local = function_locals(helper)
        cloned = {id(call.func) for call in clones}
        decorating = {id(n) for decorator in helper.decorator_list for n in walk(decorator)}  # the copy is @wp.func
        imports = []
        for node in walk(helper):
            if (
                not isinstance(node, ast.Name)
                or not isinstance(node.ctx, ast.Load)
                or node.id in local | PYTHON_BUILTINS
            ):
                continue
            name = node.id
            if id(node) in cloned | decorating:
                continue
            self._check_visible(owner, helper, node)
            if owner is module:
                continue
            if self._same_binding(owner, name):
                continue
            spelled = self._import_of(owner)
            problem, advice = None, None
            if name in owner.warp.modules or name in owner.warp.members:
                problem = f"'{name}', its file's name for Warp, which {module.display} does not use"
                advice = f"Import Warp as '{name}' in {module.display}"
            elif module.binding(name, module.scopes(self.definition)) is not None:
                problem = f"'{name}', which {module.display} binds to something else"
                advice = "Give one of the two another name"
            elif spelled is None:
                problem = f"'{name}', which {module.display} does not import, nor anything else from that file"
                advice = f"Import '{name}' from that module in {module.display}"
            if problem is not None:
                raise RewriteError(
                    self.definition.name,
                    owner.location(node),
                    f"helper '{helper.name}' (in {owner.display}) must be copied into the rewritten module, but it "
                    f"uses {problem}",
                    f"{advice}, or define '{helper.name}' in {module.display}",
                )
            assert spelled is not None  # (else a problem above)
            imports.append(HelperImport(*spelled, name))
        return imports

    def _import_of(self, owner: StaticModule) -> tuple[ast.stmt | None, str] | None:
        """The module's first import (at module level) of something from ``owner``'s file, and how ``from ... import``
        spells that file there (``.hashtable``, ``pkg.hashtable``). Where it imports nothing from that file itself
        (the helper came through a package's ``__init__``, which re-exports it), None and a spelling of the file that
        finds it from the module (``_spelling``). None if there is neither."""
        module, path = self.source, owner.path.resolve()
        for node in module_level(module.tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                spellings = [(node.level, base)] + [(node.level, f"{base}.{a.name}".lstrip(".")) for a in node.names]
            elif isinstance(node, ast.Import):
                spellings = [(0, alias.name) for alias in node.names]
            else:
                continue
            for level, dotted in spellings:
                found = self.project.module_file(module, level, dotted) if level or dotted else None
                if found is not None and found.resolve() == path:
                    return node, "." * level + dotted
        spelled = self._spelling(path)
        return (None, spelled) if spelled is not None else None

    def _spelling(self, path: Path) -> str | None:
        """How ``from ... import`` in the module spells the file ``path``: by its dotted name from the topmost package
        above it (``pkg.helpers``, namespace packages on the way included), or, where both are in one package and the
        module spells its imports so, relatively (``.helpers``, ``..helpers``, ``.`` for the package's
        ``__init__``); only a spelling that finds that file from the module, as the import would."""
        module = self.source
        here = module.path.resolve().parent
        named = path.parent if path.name == "__init__.py" else path.with_suffix("")  # the module's own path
        packages = [folder for folder in named.parents if (folder / "__init__.py").is_file()]  # namespace ones between
        root = packages[-1].parent if packages else named.parent
        candidates = [(0, ".".join(named.relative_to(root).parts))]
        common = Path(os.path.commonpath([here, named.parent]))
        if (common / "__init__.py").is_file() and (here / "__init__.py").is_file():
            level = len(here.relative_to(common).parts) + 1
            relative = (level, ".".join(named.relative_to(common).parts))
            # as the module spells its own imports: relatively if it has a relative import, else absolutely
            spells_relatively = any(isinstance(n, ast.ImportFrom) and n.level for n in module_level(module.tree))
            candidates.insert(0 if spells_relatively else 1, relative)
        for level, dotted in candidates:
            found = self.project.module_file(module, level, dotted) if level or dotted else None
            if found is not None and found.resolve() == path:
                return "." * level + dotted
        return None

    def _check_visible(self, owner: StaticModule, helper: ast.FunctionDef, node: ast.Name) -> None:
        """Refuse a helper (of ``owner``'s file) whose copy, put beside the kernel, would not see a name it uses: one
        bound in a function around the helper (a factory's closure) that is not also around the kernel. (From another
        file, no import can bring such a name: Newton's ``create_prepare_convex_pair(external_aabb, speculative)``.)"""
        scope = owner.binding_scope(node.id, owner.scopes(helper))
        if scope is None or isinstance(scope, ast.Module):
            return
        if owner is self.source and scope in owner.scopes(self.definition):
            return
        function = "<lambda>" if isinstance(scope, ast.Lambda) else scope.name
        raise RewriteError(
            self.definition.name,
            owner.location(node),
            f"helper '{helper.name}' must be copied beside the rewritten kernel, but it uses '{node.id}', a name "
            f"of '{function}' around the helper, which the kernel cannot see",
            f"Pass '{node.id}' to the helper as an argument, or rewrite the kernel at run time with wp_rewrite()",
        )

    def _same_binding(self, owner: StaticModule, name: str) -> bool:
        """True if ``name`` means in the kernel's module what it means in ``owner`` (the file a helper comes from)."""
        module = self.source
        if name in owner.warp.modules:
            return name in module.warp.modules
        if name in owner.warp.members:
            return owner.warp.members[name] == module.warp.members.get(name)
        imported = module.imported.get(name) or self.project.star_import(module, name)
        if imported is None:
            return False
        if imported.level == 0 and imported == owner.imported.get(name):
            return True  # the same absolute import in both files
        here = self._defined_at(module, name)
        return here is not None and here == self._defined_at(owner, name)

    def _defined_at(self, module: StaticModule, name: str, depth: int = 0) -> tuple[Path, str] | None:
        """Where the object ``name`` means at ``module``'s top level is defined, following imports from file to file
        (``from .contact_data import ContactData`` and ``from pkg.contact_data import ContactData`` lead to the same
        class): (file, name there); None where the trail leaves the project's files or is not a name in a file."""
        imported = module.imported.get(name)
        if imported is None and module.binding(name, []) is None:
            imported = self.project.star_import(module, name)
        if imported is None:
            return (module.path.resolve(), name) if module.binding(name, []) is not None else None
        if imported.name is None or depth > 20:
            return None
        path = self.project.module_file(module, imported.level, imported.module)
        target = self.project.load(path) if path is not None else None
        if target is None:
            return None
        return self._defined_at(target, imported.name, depth + 1)


@dataclass(frozen=True)
class HelperImport:
    """A name a helper copied into the rewritten module uses, imported from the helper's file: ``from <source>
    import <name>``, placed after ``after``, the module's own import from that file (or, where there is none, where
    isort puts it)."""

    after: ast.stmt | None  # None: the module imports nothing from that file; a new import goes where isort puts it
    source: str  # the file as the module's import spells it: ".hashtable"
    name: str
