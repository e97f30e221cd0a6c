"""The command line's front end: a kernel and its helpers read from source files, never imported.

Types come from annotations, resolved to the Warp types Warp itself would make of them (``wp.array(dtype=float)``
becomes Warp's array of ``wp.float32``), so that the passes see what the API's front end shows them.
"""

from __future__ import annotations

import ast
import builtins
import typing
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import warp as wp

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.atomics import WarpNames
from warp_rewrite.passes.plan import FunctionPlan
from warp_rewrite.passes.syntax import walk
from warp_rewrite.passes.two_phase import ModuleNames
from warp_rewrite.runtime import RewriteError
from warp_rewrite.static_module import Project, StaticModule, module_level

_ARRAYS = ("array", "array1d", "array2d", "array3d", "array4d", "indexedarray", "fabricarray", "indexedfabricarray")


@dataclass(eq=False)
class StaticUnit:
    """A kernel's or helper's definition as the passes see it, read from its file."""

    name: str
    tree: ast.FunctionDef
    owner: StaticModule

    def location(self, node: ast.AST) -> str:
        return self.owner.location(node)

    @property
    def text(self) -> str:
        return self.owner.text


@dataclass(frozen=True)
class StaticStruct:
    """A ``@wp.struct`` class read from its file. Its ``vars`` are its fields by name, each with its ``type``, as
    Warp's own struct types have them (``passes.dtypes.field_type`` reads both)."""

    owner: StaticModule
    node: ast.ClassDef

    @property
    def vars(self) -> dict[str, SimpleNamespace]:
        return {
            item.target.id: SimpleNamespace(type=resolve_annotation(self.owner, item.annotation))
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


def resolve_annotation(module: StaticModule, node: ast.expr | None) -> Any:
    """The Warp type an annotation denotes, as Warp would read it: ``typing.Any`` for a generic one, None for one
    that cannot be told without running the module."""
    node = _parsed(node)
    if isinstance(node, ast.Subscript):  # wp.array[wp.float32]
        return _array(module, node.value, node.slice, None)
    if isinstance(node, ast.Call):  # wp.array(dtype=wp.float32, ndim=2), wp.array2d(float)
        keywords = {k.arg: k.value for k in node.keywords}
        dtype = keywords.get("dtype", node.args[0] if node.args else None)
        ndim = keywords.get("ndim")
        return _array(module, node.func, dtype, ndim.value if isinstance(ndim, ast.Constant) else None)
    if isinstance(node, ast.Name):
        if node.id in ("int", "float", "bool"):
            return dtypes.normalized(getattr(builtins, node.id))
        if node.id == module.warp.any_name:
            return typing.Any
        if node.id in module.warp.members:
            return getattr(wp, module.warp.members[node.id], None)
        struct = next((n for n in module_level(module.tree) if isinstance(n, ast.ClassDef) and n.name == node.id), None)
        return StaticStruct(module, struct) if struct is not None and module.warp.decorated(struct, "struct") else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id in module.warp.modules:
            return getattr(wp, node.attr, None)
        if f"{node.value.id}.{node.attr}" == module.warp.any_name:
            return typing.Any
    return None


def _array(module: StaticModule, kind: ast.expr, dtype: ast.expr | None, ndim: int | None) -> Any:
    """The Warp array type ``kind(dtype=dtype, ndim=ndim)`` (generic where the dtype cannot be told)."""
    name = next((a for a in _ARRAYS if module.warp.is_warp(kind, a)), None)
    if name is None:
        return None
    element = resolve_annotation(module, dtype)
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


def kernel_options(module: StaticModule, kernel: ast.FunctionDef) -> dict[str, object]:
    """The keyword arguments of the kernel's ``@wp.kernel(...)`` decorator (``**expr`` under the key "**expr")."""
    for decorator in kernel.decorator_list:
        if isinstance(decorator, ast.Call) and module.warp.is_warp(decorator.func, "kernel"):
            options = {}
            for keyword in decorator.keywords:
                if keyword.arg is None:  # @wp.kernel(**options): passed on as it is
                    options[f"**{ast.unparse(keyword.value)}"] = None
                    continue
                try:
                    options[keyword.arg] = ast.literal_eval(keyword.value)
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    options[keyword.arg] = _Verbatim(ast.unparse(keyword.value))
            return options
    return {}


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
        chosen = [options.get("max_unroll"), module_options.get("max_unroll") if isinstance(module_options, dict)
                  else None, self.source.module_options.get("max_unroll"), wp.config.max_unroll]  # fmt: skip
        self.max_unroll = next(value for value in chosen if isinstance(value, int))

    def unit(self, owner: StaticModule, function: ast.FunctionDef) -> StaticUnit:
        if id(function) not in self.units:
            self.units[id(function)] = StaticUnit(function.name, function, owner)
        return self.units[id(function)]

    def warp_names(self, unit: StaticUnit) -> WarpNames:
        return unit.owner.warp.names()

    def resolve_helper(self, unit: StaticUnit, call: ast.Call) -> StaticUnit | None:
        found = self.project.resolve(unit.owner, call)
        return self.unit(*found) if isinstance(found, tuple) else None

    def is_builtin(self, unit: StaticUnit, call: ast.Call) -> bool:
        owner, func = unit.owner, call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in owner.warp.modules:
            return func.attr != "static"  # wp.static(...) itself is a builtin; what it returns is not known here
        if not isinstance(func, ast.Name):
            return False
        if func.id in owner.warp.members:
            return True
        if isinstance(resolve_annotation(owner, func), StaticStruct):
            return True
        return hasattr(builtins, func.id) and func.id not in owner.imported and func.id not in owner.helpers()

    def local_types(self, unit: StaticUnit) -> dict[str, Any]:
        return {}  # not known without running the module: the passes infer ints from the source

    def return_type(self, unit: StaticUnit) -> Any:
        return resolve_annotation(unit.owner, unit.tree.returns)

    def parameter_types(self, unit: StaticUnit) -> dict[str, Any]:
        return {a.arg: resolve_annotation(unit.owner, a.annotation) for a in unit.tree.args.args}

    def array(self, path: str) -> dtypes.ArrayInfo | None:
        root, *fields = path.split(".")
        annotation = self.parameter_types(self.kernel).get(root)
        for name in fields:
            annotation = dtypes.field_type(annotation, name)
        return dtypes.array_info(annotation)

    def check_portable(self, function: FunctionPlan) -> None:
        """Refuse to copy a helper from another file whose code uses names the rewritten module lacks.

        A cloned helper is copied into the rewritten module, so each global name it uses must mean the same there:
        warp under the same name, a builtin, another clone, or a name the module imports from the helper's file.
        """
        module, unit = self.source, function.unit
        owner, helper = unit.owner, unit.tree
        if owner is module:
            return
        local = {a.arg for a in helper.args.args} | {
            n.id for n in walk(helper) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        cloned = {id(call.func) for call in function.clones}
        for node in walk(helper):
            if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load) or node.id in local | _BUILTINS:
                continue
            if id(node) in cloned or self._same_binding(owner, node.id):
                continue
            raise RewriteError(
                self.definition.name,
                owner.location(node),
                f"helper '{helper.name}' (in {owner.display}) must be copied into the rewritten module, but it uses "
                f"'{node.id}', which {module.display} does not import from there",
                f"Import '{node.id}' from that module in {module.display}, or define '{helper.name}' there",
            )

    def _same_binding(self, owner: StaticModule, name: str) -> bool:
        """True if ``name`` means in the kernel's module what it means in ``owner`` (the file a helper comes from)."""
        module = self.source
        if name in owner.warp.modules:
            return name in module.warp.modules
        if name in owner.warp.members:
            return owner.warp.members[name] == module.warp.members.get(name)
        imported = module.imported.get(name)
        if imported is None or imported.name != name:
            return False
        path = self.project.module_file(module, imported.level, imported.module)
        return path is not None and path.resolve() == owner.path.resolve()


_BUILTINS = frozenset(dir(builtins))
