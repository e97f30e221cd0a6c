"""Standalone rewritten modules, built from source text alone: the engine behind ``wp-rewrite``.

The command line must not import or run the files it reads, so everything here works on their text and
AST: which names the module binds to Warp (from its import statements), which top-level functions are
kernels and ``@wp.func`` helpers, the dtype of each atomic's target (from its parameter's annotation), and the
helpers a kernel calls in other modules of the project (by following its imports to their files).

``emit_module`` inserts, right after each kernel that consumes an atomic's return, a block with the record
kernel, the replay kernel and ``launch_<kernel>``; every other character of the file is kept. Blocks are
fenced by marker comments, so a second run recognises them and changes nothing.
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from warp_rewrite import errors, exact, launch_template
from warp_rewrite.build import refusal_error
from warp_rewrite.errors import RewriteError
from warp_rewrite.passes.atomics import ATOMIC_OPS, AtomicCall, WarpNames, find_atomic_calls
from warp_rewrite.passes.layout import check_replay_twins, record_annotations, record_infos, site_gradient_sources
from warp_rewrite.passes.layout import plan_kernel as plan_with_names
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.plan import FunctionPlan, KernelPlan, Refusal
from warp_rewrite.passes.syntax import walk
from warp_rewrite.passes.two_phase import (
    RECORD,
    REPLAY,
    Names,
    compiled_room,
    helper_functions,
    launch_arity,
    phase_functions,
    reader_name,
    record_dtype,
    record_exact_name,
)
from warp_rewrite.printing import unparse_keeping_text

BEGIN = (
    "# ---- wp-rewrite: generated from kernel '{kernel}' above ({where}) ----\n"
    "# Do not edit. After changing the kernel, delete down to the end marker and run wp-rewrite again.\n"
)
END = "# ---- wp-rewrite: end of the code generated from kernel '{kernel}' ----\n"
_BEGIN_RE = re.compile(r"^# ---- wp-rewrite: generated from kernel '(\w+)'")
_END_RE = re.compile(r"^# ---- wp-rewrite: end of the code generated from kernel '(\w+)'")
_WIDTH = 120

_ARRAY_TYPES = frozenset(
    {"array", "array1d", "array2d", "array3d", "array4d", "indexedarray", "fabricarray", "indexedfabricarray"}
)
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
        """True for a function decorated ``@wp.<attr>`` or ``@wp.<attr>(...)``."""
        if not isinstance(node, ast.FunctionDef):
            return False
        return any(self.is_warp(d.func if isinstance(d, ast.Call) else d, attr) for d in node.decorator_list)


def _module_level(tree: ast.Module) -> Iterator[ast.stmt]:
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
    for node in _module_level(tree):
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
            for node in _module_level(self.tree)
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
class HelperHazard:
    """A helper, called from a kernel, that consumes an atomic's return (itself or through other helpers)."""

    call: ast.Call  # the call in the kernel
    helper: str  # the name the kernel calls
    consumer: str  # the function that consumes the return
    where: str  # path:line:col of the consumed atomic
    op: str


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

    def hazards(self, module: StaticModule, function: ast.FunctionDef) -> tuple[list[HelperHazard], list[Unfollowed]]:
        """Each call in ``function`` of a helper that consumes an atomic's return (at any depth), in source order,
        and the helper calls that could not be followed."""
        hazards, unfollowed = [], []
        for call in sorted((n for n in walk(function) if isinstance(n, ast.Call)), key=_position):
            found = self.resolve(module, call)
            if isinstance(found, Unfollowed):
                unfollowed.append(found)
            elif found is not None and (consumer := self._consumer(*found, set())):
                name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
                hazards.append(HelperHazard(call, name, *consumer))
        return hazards, unfollowed

    def _consumer(self, owner: StaticModule, helper: ast.FunctionDef, seen: set[int]) -> tuple[str, str, str] | None:
        """(name, where, op) of the first consumed atomic in ``helper`` or the helpers it calls, if any."""
        if id(helper) in seen:
            return None
        seen.add(id(helper))
        consumed = owner.consumed(helper)
        if consumed:
            return helper.name, owner.location(consumed[0].node), consumed[0].op
        for call in sorted((n for n in walk(helper) if isinstance(n, ast.Call)), key=_position):
            found = self.resolve(owner, call)
            if isinstance(found, tuple) and (result := self._consumer(*found, seen)):
                return result
        return None


def _position(node: ast.AST) -> tuple[int, int]:
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


# --- emission ---------------------------------------------------------------------------------------------


def _annotation(node: ast.expr | None) -> ast.expr | None:
    """An annotation as an expression, parsing string annotations (``from __future__ import annotations``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    return node


def _struct_field(module: StaticModule, annotation: ast.expr | None, name: str) -> ast.expr | None:
    """The annotation of field ``name`` of the ``@wp.struct`` class ``annotation`` names in this file."""
    if not isinstance(annotation, ast.Name):
        return None
    for node in _module_level(module.tree):
        if isinstance(node, ast.ClassDef) and node.name == annotation.id:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == name:
                    return _annotation(item.annotation)
    return None


def record_dtype_text(module: StaticModule, kernel: ast.FunctionDef, path: str) -> str | None:
    """Source text of the dtype of the array at argument ``path``, from the annotations; None if unknown."""
    root, *fields = path.split(".")
    annotation = next((_annotation(a.annotation) for a in kernel.args.args if a.arg == root), None)
    for name in fields:
        annotation = _struct_field(module, annotation, name)
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Attribute | ast.Name):
        array = annotation.value
        if any(module.warp.is_warp(array, kind) for kind in _ARRAY_TYPES):
            return ast.unparse(annotation.slice)
    if isinstance(annotation, ast.Call) and any(module.warp.is_warp(annotation.func, k) for k in _ARRAY_TYPES):
        dtype = next((k.value for k in annotation.keywords if k.arg == "dtype"), None)
        dtype = dtype or (annotation.args[0] if annotation.args else None)
        return ast.unparse(dtype) if dtype is not None else None
    return None


class _Verbatim(str):
    """A decorator argument that is not a literal: ``phase_functions`` prints its ``repr``, the source text."""

    def __repr__(self) -> str:
        return str(self)


def kernel_options(module: StaticModule, kernel: ast.FunctionDef) -> dict[str, object]:
    """The keyword arguments of the kernel's ``@wp.kernel(...)`` decorator."""
    for decorator in kernel.decorator_list:
        if isinstance(decorator, ast.Call) and module.warp.is_warp(decorator.func, "kernel"):
            options = {}
            for keyword in decorator.keywords:
                try:
                    options[keyword.arg] = ast.literal_eval(keyword.value)
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    options[keyword.arg] = _Verbatim(ast.unparse(keyword.value))
            return options
    return {}


@dataclass
class ModuleNames:
    """Module-level names the generated blocks share: chosen once per run, fresh in the module.

    ``imports`` are the lines the module lacks; ``emitted`` the shared definitions already written into an
    earlier block of this run (each block adds the helpers its kernel needs that are not there yet).
    """

    warp: str
    any: str
    numpy: str
    dataclass: str
    sys: str
    weakref: str
    support: dict[str, str]  # template name -> module name: record_returned, launch_recorded, RewriteError, ...
    record_exact: dict[tuple[str, int], str] = field(default_factory=dict)  # (op, indices) -> helper
    readers: dict[str, str] = field(default_factory=dict)  # record dtype text -> helper reading such records
    imports: list[str] = field(default_factory=list)
    emitted: set[str] = field(default_factory=set)


_HELPERS = ("record_returned", "record_if_room", "replay_returned", "exact_returned", "range_length")


def module_names(module: StaticModule, taken: set[str]) -> ModuleNames:
    """Name the shared helpers and launch support, and the imports the generated code needs."""
    namer = Namer(taken)
    imports = []
    warp = min(module.warp.modules) if module.warp.modules else None
    if warp is None:
        warp = namer.fresh("wp")
        imports.append(f"import warp as {warp}")
    any_name = module.warp.any_name
    if any_name is None:
        any_name = namer.fresh("Any")
        imports.append("from typing import Any" + (f" as {any_name}" if any_name != "Any" else ""))
    numpy = next((local for local, source in module.imported.items() if source == Imported(0, "numpy", None)), None)
    dataclass_ = next(
        (local for local, source in module.imported.items() if source == Imported(0, "dataclasses", "dataclass")), None
    )
    standard = {}  # the launch support's standard modules: the module's own import of them, or a new one
    for name in ("sys", "weakref"):
        local = next((local for local, source in module.imported.items() if source == Imported(0, name, None)), None)
        if local is None:
            local = namer.fresh(name)
            imports.append(f"import {name}" + (f" as {local}" if local != name else ""))
        standard[name] = local
    templates = [*_HELPERS, *(f.__name__ for f in launch_template.SUPPORT), "RewriteError"]
    support = {name: namer.fresh(name) for name in templates}
    return ModuleNames(warp, any_name, numpy or "", dataclass_ or "", standard["sys"], standard["weakref"], support,
                       imports=imports)  # fmt: skip


def _exact_runtime_names(shared: ModuleNames, namer: Namer) -> dict[str, str]:
    """Names for the module's copy of ``rewrite.exact`` (and the imports it needs), chosen on first use."""
    if not shared.numpy:
        shared.numpy = namer.fresh("np")
        shared.imports.append("import numpy" + (f" as {shared.numpy}" if shared.numpy != "numpy" else ""))
    if not shared.dataclass:
        shared.dataclass = namer.fresh("dataclass")
        line = "from dataclasses import dataclass"
        shared.imports.append(line + (f" as {shared.dataclass}" if shared.dataclass != "dataclass" else ""))
    for name in launch_template.module_globals(exact):
        if name not in shared.support:
            shared.support[name] = namer.fresh(name)
    return {
        **{name: shared.support[name] for name in launch_template.module_globals(exact)},
        "wp": shared.warp, "np": shared.numpy, "Any": shared.any, "dataclass": shared.dataclass,
        "RewriteError": shared.support["RewriteError"],
    }  # fmt: skip


def shared_code(shared: ModuleNames, with_exact: bool) -> str:
    """The imports, launch support and (when float returns are exact) the copy of ``rewrite.exact`` that every
    ``launch_<kernel>`` of the module uses: emitted once, in the first block."""
    renames = {"wp": shared.warp, "sys": shared.sys, "weakref": shared.weakref, **shared.support}
    error = launch_template.copy_module_code(errors, {"RewriteError": shared.support["RewriteError"]}).rstrip("\n")
    parts = [f"# Shared by every launch_<kernel> of this module: its error and the launch glue.\n{error}"]
    parts += [launch_template.render(f, renames).rstrip("\n") for f in launch_template.SUPPORT]
    if with_exact:
        kernels = f'{shared.warp}.kernel(module="unique")'  # own Warp modules: generic overloads compile alone
        copied = launch_template.copy_module_code(exact, _exact_runtime_names(shared, Namer(set())), kernels)
        parts.append(f"# Exact gradients through float atomic returns: a copy of rewrite/exact.py.\n{copied.rstrip()}")
    return "\n\n\n".join([*(["\n".join(shared.imports)] if shared.imports else []), *parts])


def _names(
    shared: ModuleNames,
    namer: Namer,
    exact_kinds: list[tuple[str, int]],
    arity: int,
    read_dtypes: set[str],
    loop_ids: tuple[str, ...],
) -> Names:
    """The names ``passes.two_phase`` needs: the shared ones, and kernel-local ones fresh in ``namer``."""
    for op, indices in exact_kinds:
        if (op, indices) not in shared.record_exact:
            shared.record_exact[op, indices] = namer.fresh(record_exact_name(op, indices))
    for dtype in read_dtypes - shared.readers.keys():  # the reader and its gradient, ``<reader>_adjoint``
        shared.readers[dtype] = namer.fresh_base(reader_name(dtype), ("", "_adjoint"))
    return Names(
        warp=shared.warp,
        any=shared.any,
        record_helper=shared.support["record_returned"],
        record_if_room=shared.support["record_if_room"],
        replay_helper=shared.support["replay_returned"],
        exact_returned=shared.support["exact_returned"],
        record_exact={kind: shared.record_exact[kind] for kind in exact_kinds},
        range_length=shared.support["range_length"],
        launch_shape=namer.fresh("launch_shape"),
        thread=namer.fresh("thread"),
        coordinate=namer.fresh("coordinate"),
        trip_capacity=namer.fresh_base("trip_capacity", loop_ids),
        trips_needed=namer.fresh("trips_needed"),
        coords=tuple(namer.fresh(f"coord{i}") for i in range(arity)),
        readers={dtype: shared.readers[dtype] for dtype in read_dtypes},
    )


_CONCRETE_DTYPE = re.compile(r"u?int(8|16|32|64)?|float(16|32|64)?|bool|(vec|mat)\d+[a-z]*|quat[a-z]*|transform[a-z]*")


def _read_dtypes(module: StaticModule, plan: KernelPlan, shape: Layout, warp: str) -> set[str]:
    """Dtypes of the records the replay reads back that are concrete Warp types (``float``, ``wp.vec3``, ...):
    only those can have a reader with an empty gradient (Warp refuses custom gradients for generic functions)."""
    found = set()
    for site in (s for s in plan.sites if not s.exact):  # exact returns are read by ``exact_returned``
        dtype = record_dtype(shape.annotations[site.records], warp)
        owner, _, name = dtype.rpartition(".")
        if _CONCRETE_DTYPE.fullmatch(name) and (owner in module.warp.modules or name in ("int", "float", "bool")):
            found.add(dtype)
    return found


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the module uses or binds (imports and classes included): generated names must avoid them."""
    names = Namer.for_tree(tree).taken
    names |= {n.name for n in walk(tree) if isinstance(n, ast.ClassDef)}
    for node in walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _refuse(module: StaticModule, kernel: ast.FunctionDef, node: ast.AST, problem: str, advice: str) -> RewriteError:
    return RewriteError(kernel.name, module.location(node), problem, advice)


@dataclass(eq=False)
class StaticUnit:
    """A kernel's or helper's definition as ``passes.plan`` sees it, read from its file (never imported)."""

    name: str
    tree: ast.FunctionDef
    owner: StaticModule

    def location(self, node: ast.AST) -> str:
        return self.owner.location(node)

    def warp_names(self) -> WarpNames:
        return self.owner.warp.names()

    @property
    def text(self) -> str:
        return self.owner.text


class _StaticHelpers:
    """``passes.plan``'s helper resolver: follows calls through the files of the project, one unit per helper."""

    def __init__(self, project: Project):
        self.project = project
        self.units: dict[int, StaticUnit] = {}

    def unit(self, owner: StaticModule, function: ast.FunctionDef) -> StaticUnit:
        if id(function) not in self.units:
            self.units[id(function)] = StaticUnit(function.name, function, owner)
        return self.units[id(function)]

    def __call__(self, unit: StaticUnit, call: ast.Call) -> StaticUnit | None:
        found = self.project.resolve(unit.owner, call)
        return self.unit(*found) if isinstance(found, tuple) else None


def plan_kernel(
    module: StaticModule, project: Project, kernel: ast.FunctionDef, taken: set[str], detach_returns: bool
) -> tuple[KernelPlan, StaticUnit, _StaticHelpers, Namer]:
    """The core rewrite's plan of ``kernel`` (as ``rewrite.build.generate`` makes it), names fresh in ``taken``.

    Float returns get exact gradients unless ``detach_returns``. Raises ``RewriteError`` with the API's message
    for a pattern the rewrite does not support.
    """
    helpers = _StaticHelpers(project)
    source = helpers.unit(module, kernel)
    params = [a.arg for a in kernel.args.args]
    is_int_path = lambda path: _is_int_dtype(module, record_dtype_text(module, kernel, path))  # noqa: E731
    try:
        plan, namer = plan_with_names(
            source, params, helpers, StaticUnit.warp_names, is_int_path, taken, detach_returns
        )
    except Refusal as refusal:
        raise refusal_error(source, refusal) from None
    for function in plan.root.walk():
        _check_portable(module, project, kernel, function)
    return plan, source, helpers, namer


def _check_portable(module: StaticModule, project: Project, kernel: ast.FunctionDef, function: FunctionPlan) -> None:
    """Refuse to copy a helper from another file whose code uses names the rewritten module lacks.

    A cloned helper is copied into the rewritten module, so each global name it uses must mean the same there:
    warp under the same name, a builtin, another clone, or a name the module imports from the helper's file.
    """
    unit = function.unit
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
        if id(node) in cloned or _same_binding(module, owner, project, node.id):
            continue
        raise RewriteError(
            kernel.name,
            owner.location(node),
            f"helper '{helper.name}' (in {owner.display}) must be copied into the rewritten module, but it uses "
            f"'{node.id}', which {module.display} does not import from there",
            f"Import '{node.id}' from that module in {module.display}, or define '{helper.name}' there",
        )


def _same_binding(module: StaticModule, owner: StaticModule, project: Project, name: str) -> bool:
    """True if ``name`` means in ``module`` what it means in ``owner`` (the file a helper comes from)."""
    if name in owner.warp.modules:
        return name in module.warp.modules
    if name in owner.warp.members:
        return owner.warp.members[name] == module.warp.members.get(name)
    source = module.imported.get(name)
    if source is None or source.name != name:
        return False
    path = project.module_file(module, source.level, source.module)
    return path is not None and path.resolve() == owner.path.resolve()


_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Layout:
    """What ``launch_<kernel>`` needs to know: the constants of ``rewrite.launch_template.launch_kernel``."""

    sites: tuple  # (target, op, where, gradient sources or None, exact records)
    records: tuple  # (name, kind, target or None, fixed dtype or "", loop ids, requires grad), in parameter order
    loops: tuple  # (id, constant trips or None, where, opaque, room compiled in or None)
    annotations: dict[str, str]  # record parameter -> its annotation's source text
    int_paths: frozenset[str]  # atomic targets known to hold integers (no adjoint)


def _ndim(module: StaticModule, kernel: ast.FunctionDef, path: str) -> int | None:
    """The number of dimensions of the array at ``path``, from its annotation; None if unknown."""
    root, *fields = path.split(".")
    annotation = next((_annotation(a.annotation) for a in kernel.args.args if a.arg == root), None)
    for name in fields:
        annotation = _struct_field(module, annotation, name)
    kind = annotation.value if isinstance(annotation, ast.Subscript) else getattr(annotation, "func", None)
    for ndim, name in enumerate(("array1d", "array2d", "array3d", "array4d"), start=1):
        if kind is not None and module.warp.is_warp(kind, name):
            return ndim
    if kind is not None and any(module.warp.is_warp(kind, name) for name in _ARRAY_TYPES):
        ndim = next((k.value for k in getattr(annotation, "keywords", []) if k.arg == "ndim"), None)
        return ndim.value if isinstance(ndim, ast.Constant) and isinstance(ndim.value, int) else 1
    return None


def layout(module: StaticModule, kernel: ast.FunctionDef, plan: KernelPlan, source: StaticUnit, helpers, warp: str,
           any_name: str) -> Layout:  # fmt: skip
    """The record parameters and launch constants of a plan, as ``rewrite.build.generate`` derives them."""
    params = [a.arg for a in kernel.args.args]
    paths = {s.target for s in plan.sites} | {p for f in plan.root.walk() for p in f.unconsumed.values() if p}
    int_paths = frozenset(p for p in paths if _is_int_dtype(module, record_dtype_text(module, kernel, p)))
    gradient_sources = site_gradient_sources(source, plan, params, source.warp_names(), helpers, int_paths)
    sites = []
    for site in plan.sites:
        sources = gradient_sources.get(id(site), frozenset())
        exact_records = (site.records, site.values, site.order, site.addresses, site.compares) if site.exact else ()
        sources = None if sources is None else tuple(sorted(sources))
        sites.append((site.target, site.op, site.location, sources, exact_records))
    records = record_infos(plan)
    annotations = record_annotations(
        records,
        lambda path: record_dtype_text(module, kernel, path),
        lambda path: _ndim(module, kernel, path),
        warp,
        any_name,
    )
    try:
        check_replay_twins(plan, annotations, int_paths, any_name)
    except Refusal as refusal:
        raise refusal_error(source, refusal) from None
    # The launch functions take max_records per launch: only constant ranges' rooms are compiled in.
    loops = tuple(
        (loop.id, loop.static_trips, loop.location, loop.opaque, compiled_room(loop, None)) for loop in plan.loops
    )
    ordered = tuple(
        (name, info.kind, info.target, info.dtype, info.loops, info.requires_grad)
        for name, info in ((name, records[name]) for name in plan.root.record_params())
    )
    return Layout(tuple(sites), ordered, loops, annotations, int_paths)


_INT_DTYPES = frozenset({"int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


def _is_int_dtype(module: StaticModule, text: str | None) -> bool:
    """Is a dtype's source text (``int``, ``wp.int32``, a bare ``int64`` from warp) an integer type?"""
    if text is None:
        return False
    expr = ast.parse(text, mode="eval").body
    if isinstance(expr, ast.Name):
        return expr.id == "int" or module.warp.members.get(expr.id) in _INT_DTYPES
    return any(module.warp.is_warp(expr, name) for name in _INT_DTYPES)


def _launch_docstring(kernel: str, record: str, replay: str, display: str, line: int) -> str:
    paragraphs = [
        f"Launch kernel ``{kernel}`` ({display}:{line}) like ``wp.launch``, with exact gradients on a tape.",
        "The arguments have ``wp.launch``'s meaning. Without an active tape (or with ``record_tape=False``) "
        f"nothing runs backward, so ``{kernel}`` itself runs. Otherwise ``{record}`` runs forward and stores the "
        f"values its atomics return, and the tape records ``{replay}``, whose adjoint reads them back. "
        "``max_records``: room per execution of a loop of unknown length (None: counted by a dry run).",
    ]
    return "\n\n".join(textwrap.fill(p, _WIDTH - 4, break_on_hyphens=False) for p in paragraphs)


def unparse_wrapped(function: ast.FunctionDef, untouched: dict[ast.stmt, str] | None = None) -> str:
    """A generated function's source, with its parameters one a line when the signature is too long.

    ``untouched``: statements left as they were, printed as the user wrote them (see ``rewrite.printing``).
    """
    text = unparse_keeping_text(function, untouched or {})
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("def "))
    if len(lines[at]) <= _WIDTH or function.args.vararg or function.args.kwonlyargs or function.args.kwarg:
        return text
    params = "".join(f"    {ast.unparse(arg)},\n" for arg in function.args.args)
    returns = f" -> {ast.unparse(function.returns)}" if function.returns else ""
    lines[at] = f"def {function.name}(\n{params}){returns}:"
    return "\n".join(lines)


@dataclass
class KernelCode:
    """One kernel's generated definitions, before they are laid out in its block."""

    kernel: ast.FunctionDef
    helpers: list[ast.FunctionDef]  # the @wp.func helpers its phases call
    phases: list[ast.FunctionDef]  # cloned helpers and the record kernel, then the same for the replay
    untouched: dict[ast.stmt, str]  # the phases' statements left as they were, with the text they come from
    launcher: str
    exact: bool


def kernel_code(
    module: StaticModule, project: Project, kernel: ast.FunctionDef, taken: set[str], shared: ModuleNames,
    max_records: int | None, detach_returns: bool,
) -> KernelCode | None:  # fmt: skip
    """The record and replay kernels and ``launch_<kernel>`` of one kernel (None: nothing to record, as when
    ``wp_rewrite`` leaves a kernel unchanged). Adds its module-level names to ``taken``."""
    plan, source, helpers, namer = plan_kernel(module, project, kernel, taken, detach_returns)
    if not plan.sites and not plan.loops:
        return None
    exact_kinds = sorted({(s.op, s.indices) for s in plan.sites if s.exact})
    shape = layout(module, kernel, plan, source, helpers, shared.warp, shared.any)
    read_dtypes = _read_dtypes(module, plan, shape, shared.warp)
    loop_ids = tuple(str(loop.id) for loop in plan.loops)
    names = _names(shared, namer, exact_kinds, launch_arity(kernel), read_dtypes, loop_ids)
    launch = namer.fresh(f"launch_{kernel.name}")
    options = kernel_options(module, kernel)
    record_options = {**options, "enable_backward": False}
    untouched = {}
    record_phase = phase_functions(plan, RECORD, names, shape.annotations, shape.int_paths, record_options, untouched)
    replay_phase = phase_functions(plan, REPLAY, names, shape.annotations, shape.int_paths, options, untouched)
    record, replay = record_phase[-1].name, replay_phase[-1].name
    exact_runtime = "None"
    if exact_kinds:
        _exact_runtime_names(shared, namer)
        exact_runtime = f"({shared.support['ExactSite']}, {shared.support['ExactBackward']})"
    prepared = namer.fresh(f"prepared_{kernel.name}")
    launcher = f"{prepared} = {{}}  # {launch}'s prepared CPU launches\n\n\n"
    launcher += launch_template.render(
        launch_template.launch_kernel,
        {"kernel": kernel.name, "record_kernel": record, "replay_kernel": replay, "launch_kernel": launch,
         "launch_recorded": shared.support["launch_recorded"], "EXACT_RUNTIME": exact_runtime,
         "prepared_launches": prepared},
        constants={"PARAMETERS": tuple(a.arg for a in kernel.args.args), "SITES": shape.sites,
                   "RECORDS": shape.records, "LOOPS": shape.loops, "MAX_RECORDS": max_records,
                   "LAUNCH_ARITY": len(names.coords)},
        docstring=_launch_docstring(kernel.name, record, replay, module.display, kernel.lineno),
    )  # fmt: skip
    taken |= namer.taken | {launch}
    code_helpers = helper_functions(names, plan.loops)
    phases = [*record_phase, *replay_phase]
    return KernelCode(kernel, code_helpers, phases, untouched, launcher, bool(exact_kinds))


def kernel_block(code: KernelCode, module: StaticModule, shared: ModuleNames, preamble: str) -> str:
    """One kernel's block, fenced by its begin and end markers: ``preamble`` (shared code, first block only),
    the helpers no earlier block defined, the phases and ``launch_<kernel>``."""
    helpers = [h for h in code.helpers if h.name not in shared.emitted]
    shared.emitted |= {h.name for h in helpers}
    parts = [
        *([preamble] if preamble else []),
        *(unparse_wrapped(function) for function in helpers),
        *(unparse_wrapped(function, code.untouched) for function in code.phases),
        code.launcher.rstrip("\n"),
    ]
    begin = BEGIN.format(kernel=code.kernel.name, where=f"{module.display}:{code.kernel.lineno}")
    return begin + "\n\n\n".join(parts) + "\n\n\n" + END.format(kernel=code.kernel.name)


@dataclass
class Emitted:
    """The rewritten module's text, and what the user should be told about it."""

    text: str
    rewritten: list[str]  # kernels that got generated phases
    warnings: list[str]


def kernels_to_rewrite(module: StaticModule, project: Project) -> tuple[list[ast.FunctionDef], list[str]]:
    """Kernels that consume an atomic's return and have no generated block yet; warnings about the others.

    Raises ``RewriteError`` for the first kernel whose pattern the rewrite cannot handle.
    """
    chosen, warnings = [], []
    for kernel in module.nested_kernels():
        if module.consumed(kernel) or project.hazards(module, kernel)[0]:
            raise _refuse(
                module, kernel, kernel, "only kernels defined directly in the module body can be rewritten to a file",
                "Define the kernel at module level, or rewrite it at run time with rewrite.wp_rewrite()",
            )  # fmt: skip
    for kernel in module.top_level("kernel").values():
        if module.rewritten(kernel.name):
            continue
        hazards, unfollowed = project.hazards(module, kernel)
        for miss in unfollowed:
            warnings.append(
                f"{module.location(miss.call)}: warning: kernel '{kernel.name}' calls '{miss.helper}' from "
                f"'{miss.module}', whose file wp-rewrite could not find; if it uses an atomic's returned value, "
                "its gradients stay wrong"
            )
        if module.consumed(kernel) or hazards:
            chosen.append(kernel)
    return chosen, warnings


def emit_module(
    path: Path,
    display: str,
    text: str,
    project: Project | None = None,
    max_records: int | None = None,
    detach_returns: bool = False,
) -> Emitted:
    """``text`` with each kernel's generated block inserted after it; raises ``ParseError``/``RewriteError``.

    ``max_records`` and ``detach_returns`` have the meaning of ``wp_rewrite``'s options.
    """
    project = project or Project()
    module = StaticModule.parse(path, display, text)
    project.modules.setdefault(path.resolve(), module)
    kernels, warnings = kernels_to_rewrite(module, project)  # also loads the files their helpers come from
    if not kernels:
        return Emitted(text, [], warnings)
    taken = set().union(*(_bound_names(m.tree) for m in project.modules.values() if m is not None))
    shared = module_names(module, taken)
    taken |= set(shared.support.values())
    codes = [kernel_code(module, project, k, taken, shared, max_records, detach_returns) for k in kernels]
    codes = [code for code in codes if code is not None]
    if not codes:
        return Emitted(text, [], warnings)
    preamble = shared_code(shared, with_exact=any(code.exact for code in codes))
    newline = "\r\n" if "\r\n" in text else "\n"  # the file's own line endings, for the inserted lines too
    lines = split_lines(text)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += newline
    blocks = [
        (code.kernel.end_lineno, kernel_block(code, module, shared, preamble if i == 0 else ""))
        for i, code in enumerate(codes)
    ]
    for end_line, block in reversed(blocks):
        lines[end_line:end_line] = [("\n\n" + block).replace("\n", newline)]
    return Emitted("".join(lines), [code.kernel.name for code in codes], warnings)


# --- static check -----------------------------------------------------------------------------------------

_WRONG = "gradients through it are wrong in plain Warp"
CODES = {
    "WR001": "kernel '{name}' uses the value returned by wp.atomic_{op}(); " + _WRONG,
    "WR002": "helper '{name}' uses the value returned by wp.atomic_{op}(); " + _WRONG,
    "WR003": "kernel '{name}' calls helper '{helper}', which uses the value returned by wp.atomic_{op}() ({where}); "
    + _WRONG,
}


@dataclass(frozen=True)
class Finding:
    location: str
    line: int
    col: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.code} {self.message}"


def check_module(module: StaticModule, project: Project) -> list[Finding]:
    """Every kernel and helper in the file that consumes an atomic's return, directly or through a helper.

    Kernels that already have a generated block are skipped: their ``launch_<kernel>`` handles them.
    """
    findings = []

    def add(code: str, node: ast.AST, **fields: str) -> None:
        findings.append(
            Finding(module.location(node), node.lineno, node.col_offset, code, CODES[code].format(**fields))
        )

    kernels = [k for k in module.top_level("kernel").values() if not module.rewritten(k.name)]
    kernels += module.nested_kernels()
    for kernel in kernels:
        for call in module.consumed(kernel):
            add("WR001", call.node, name=kernel.name, op=call.op)
        for hazard in project.hazards(module, kernel)[0]:
            where = f"at {hazard.where}"
            if hazard.consumer != hazard.helper:
                where = f"in helper '{hazard.consumer}' at {hazard.where}"
            add("WR003", hazard.call, name=kernel.name, helper=hazard.helper, op=hazard.op, where=where)
    helpers = [n for n in walk(module.tree) if module.warp.decorated(n, "func") and not module.generated(n)]
    for helper in helpers:
        for call in module.consumed(helper):
            add("WR002", call.node, name=helper.name, op=call.op)
    return sorted(findings, key=lambda f: (f.line, f.col, f.code))
