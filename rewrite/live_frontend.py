"""The API's front end: a kernel and its helpers as the live Warp objects ``@wp.kernel`` and ``@wp.func`` made.

Warp knows each argument's type and each helper a call refers to; the source comes from the objects (through
``inspect``, as Warp reads it). The generated source is compiled back into Warp kernels here too.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import itertools
import linecache
import warnings
from dataclasses import dataclass
from typing import Any

import warp as wp
from warp._src.codegen import Adjoint, Struct, Var, get_closure_vars
from warp._src.context import Function, Module, ModuleBuilder

from warp_rewrite import runtime
from warp_rewrite.passes import dtypes, overloads
from warp_rewrite.passes.atomics import WarpNames
from warp_rewrite.passes.builtins import is_known, warp_builtin
from warp_rewrite.passes.naming import RUNTIME_NAME, Namer
from warp_rewrite.passes.refusals import Refusal
from warp_rewrite.passes.syntax import Located, walk
from warp_rewrite.passes.two_phase import ModuleNames
from warp_rewrite.runtime import RewriteError
from warp_rewrite.runtime.abi import RuntimeNames


def _symbol_types(adjoint: Adjoint) -> dict[str, Any]:
    """Warp's types of a built function's locals; a local bound to a function (a function value handed to a helper,
    as Warp's deterministic counter tests do) is no value and has none."""
    return {name: var.type for name, var in getattr(adjoint, "symbols", {}).items() if isinstance(var, Var)}


@dataclass
class FunctionSource:
    """A kernel's or ``@wp.func``'s parsed definition, with what is needed to point back into its file."""

    name: str
    text: str  # the dedented source, decorators included
    tree: ast.FunctionDef
    namespace: dict[str, Any]
    filename: str
    first_line: int  # line in ``filename`` of the source's first line (decorators included)
    indent: int  # columns that dedenting removed
    obj: wp.Kernel | Function

    @classmethod
    def of(cls, obj: wp.Kernel | Function) -> FunctionSource:
        adj = obj.adj
        namespace = {**adj.func.__globals__, **get_closure_vars(adj.func)}
        first_line = max(adj.fun_lineno, 1)
        original = linecache.getline(adj.filename, first_line)
        indent = len(original) - len(original.lstrip()) if original.strip() else 0
        tree = next(node for node in ast.parse(adj.source).body if isinstance(node, ast.FunctionDef))
        source = cls(adj.fun_name, adj.source, tree, namespace, adj.filename, first_line, indent, obj)
        source.namespace.update(source.annotation_names())
        return source

    def annotation_names(self) -> dict[str, Any]:
        """What the names in the parameters' annotations meant where the function was defined.

        Python evaluates annotations in the enclosing scope, so a factory's parameter used only there
        (``def make(dtype): @wp.kernel def k(a: wp.array(dtype=dtype))``) is no closure variable of the function,
        and a global of that name would mean something else. Warp's types of the parameters tell the values back,
        for the annotations people write: ``T``, ``wp.array(dtype=T, ndim=N)`` and ``wp.array[T]``.
        """
        body_names = {n.id for statement in self.tree.body for n in walk(statement) if isinstance(n, ast.Name)}
        found = {}
        for arg, var in zip(self.tree.args.args, self.obj.adj.args, strict=False):
            for name, value in _names_in_annotation(arg.annotation, var.type):
                meant = self.namespace.get(name, getattr(builtins, name, None))
                if meant is value or dtypes.normalized(meant) is value:  # ``wp.array[float]`` holds wp.float32s
                    continue
                if name in body_names:
                    raise RewriteError(
                        self.name,
                        self.location(arg),
                        f"'{name}' means one thing in its parameters' annotations and another in its body",
                        f"Rename the factory's parameter '{name}', or the global it hides",
                    )
                found[name] = value
        return found

    def location(self, node: Located) -> str:
        """``file:line:col`` (1-based, as editors and ruff print them) of a node of ``tree``."""
        return f"{self.filename}:{self.first_line + node.lineno - 1}:{self.indent + node.col_offset + 1}"

    @functools.cached_property
    def warp_names(self) -> WarpNames:
        """How this namespace spells Warp's module and the builtins it binds to bare names."""
        modules = frozenset(name for name, value in self.namespace.items() if value is wp)
        bare = tuple(
            (name, value.key)
            for name, value in self.namespace.items()
            if isinstance(value, Function) and value.is_builtin() and not name.startswith("__")
        )
        return WarpNames(modules or frozenset({"wp"}), bare)

    def resolve(self, expr: ast.expr) -> Any:
        """The object a ``name``, ``module.attr`` or ``wp.static(expr)`` expression denotes in this namespace (a
        Python builtin's name, where the namespace does not bind it, denotes the builtin), or None."""
        if isinstance(expr, ast.Name):
            return self.namespace.get(expr.id, getattr(builtins, expr.id, None))
        if isinstance(expr, ast.Attribute):
            owner = self.resolve(expr.value)
            return getattr(owner, expr.attr, None) if owner is not None else None
        if isinstance(expr, ast.Call) and self.resolve(expr.func) is wp.static and len(expr.args) == 1:
            # Warp evaluates wp.static(...) when it builds the kernel, in the kernel's namespace: so does this.
            try:
                return eval(compile(ast.Expression(expr.args[0]), "<wp.static>", "eval"), dict(self.namespace))
            except Exception:
                return None
        return None


def read_source(
    obj: wp.Kernel | Function, unit: FunctionSource | None = None, node: ast.Call | None = None
) -> FunctionSource:
    """``FunctionSource.of(obj)``; a kernel whose source cannot be read is refused (a helper, where it is called), and
    so is one whose ``wp.static`` expressions name something redefined since (``redefined_static``)."""
    try:
        source = FunctionSource.of(obj)
    except (OSError, TypeError, SyntaxError, StopIteration) as error:
        if unit is not None and node is not None:
            problem = f"the source of helper '{obj.key}' cannot be read ({error})"
            raise Refusal(unit, node, problem, "Define the helper with @wp.func in a .py file") from None
        where = f"{getattr(obj.adj, 'filename', '<unknown>')}:{getattr(obj.adj, 'fun_lineno', 0)}:1"
        raise RewriteError(
            obj.key, where, f"its source cannot be read ({error})", "Define the kernel with @wp.kernel in a .py file"
        ) from None
    static = redefined_static(source)
    if static is not None:
        problem = (
            f"wp.static({ast.unparse(static.args[0])}) names another object now than when '{source.name}' was "
            "defined (it was redefined since, as when a notebook cell runs again): Warp keeps the one of then, which "
            "the generated code cannot name"
        )
        advice = f"Run the cell that defines '{source.name}' again (define it again), so that it takes the current one"
        if unit is not None and node is not None:
            raise Refusal(unit, node, f"helper '{obj.key}': {problem}", advice)
        raise RewriteError(obj.key, source.location(static), problem, advice)
    return source


def redefined_static(source: FunctionSource) -> ast.Call | None:
    """A ``wp.static(name)`` or ``wp.static(module.name)`` of the function whose name Warp looked up when the function
    was defined and that means another object now. Warp keeps what it found then; the generated code, which Warp
    evaluates when it is made, would take what the name means now. (A ``wp.static`` of anything else, a factory's
    call, makes a new object each time: that it differs tells nothing.)"""
    resolved = getattr(source.obj.adj, "resolved_static_expressions", {})
    for node in walk(source.tree):
        if not (isinstance(node, ast.Call) and len(node.args) == 1 and source.resolve(node.func) is wp.static):
            continue
        expr = node.args[0]
        then = resolved.get(ast.unparse(expr), resolved.get(ast.get_source_segment(source.text, expr) or "", None))
        named = expr
        while isinstance(named, ast.Attribute):
            named = named.value
        now = source.resolve(expr) if isinstance(named, ast.Name) else None
        if then is not None and now is not None and now is not then:
            return node
    return None


class _TypeProbe(ModuleBuilder):
    """What an adjoint needs of a module builder to work out its types, without building (or compiling) the module."""

    def __init__(self, module: Module, options: dict[str, Any]):  # not ModuleBuilder's: it builds all
        self.target, self.module, self.options = None, module, options
        self.functions, self.structs, self.native_types, self.deferred_functions = {}, {}, {}, []
        self.fatbins, self.ltoirs, self.ltoirs_decl, self.shared_memory_bytes = {}, {}, {}, {}


def _names_in_annotation(annotation: ast.expr | None, value: Any) -> list[tuple[str, Any]]:
    """The names of ``annotation`` (a parameter's), with the values that make it evaluate to ``value`` (Warp's
    type of the parameter), for the forms ``T``, ``wp.array(dtype=T, ndim=N)`` and ``wp.array[T]``."""
    if isinstance(annotation, ast.Name):
        return [(annotation.id, value)]
    if not dtypes.is_array(value):
        return []
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Name):
        return [(annotation.slice.id, value.dtype)]
    if isinstance(annotation, ast.Call):
        named = {keyword.arg: keyword.value for keyword in annotation.keywords}
        dtype, ndim = named.get("dtype", annotation.args[0] if annotation.args else None), named.get("ndim")
        found = [(dtype.id, value.dtype)] if isinstance(dtype, ast.Name) else []
        return found + ([(ndim.id, value.ndim)] if isinstance(ndim, ast.Name) else [])
    return []


class LiveFrontend:
    """``warp_rewrite.pipeline.Frontend`` for a ``wp.Kernel``; ``taken``: names already defined where the generated
    kernels go (the rewritten kernels of one user module share a Warp module)."""

    def __init__(self, kernel: wp.Kernel, taken: set[str]):
        self.warp_kernel = kernel
        self.kernel = read_source(kernel)
        self.options = dict(kernel.options)
        options = kernel.module.options | kernel.options
        self.max_unroll = options.get("max_unroll", wp.config.max_unroll)
        self.backward = options.get("enable_backward", wp.config.enable_backward) is not False
        self.placement: dict[
            str, Any
        ] = {}  # the generated kernels join a Warp module the API chooses (warp_rewrite.api)
        self.taken = set(taken) | set(self.kernel.namespace)
        warp = min(self.kernel.warp_names.modules)
        self.module = ModuleNames(warp, RuntimeNames.spelled(Namer(self.taken).fresh(RUNTIME_NAME)))
        self.bound = dict(self.kernel.namespace)  # see namespace()
        self._helpers: dict[int, FunctionSource] = {}

    def warp_names(self, unit: FunctionSource) -> WarpNames:
        return unit.warp_names

    def resolve_helper(self, unit: FunctionSource, call: ast.Call) -> FunctionSource | None:
        func = unit.resolve(call.func)
        if not isinstance(func, Function) or func.is_builtin() or getattr(func, "adj", None) is None:
            return None
        if func.native_snippet is not None:
            return None  # @wp.func_native: its body is C++, which the passes cannot read (an opaque call)
        kept = self._overloads(unit, call, func)
        if len(kept) != 1:
            defined = len(self._definitions(func))
            raise overloads.Ambiguous(unit, call, func.key, [self._source(f, unit, call) for f in kept], defined)
        return self._source(kept[0], unit, call)

    def _source(self, func: Function, unit: FunctionSource, call: ast.Call) -> FunctionSource:
        if id(func) not in self._helpers:
            self._helpers[id(func)] = self._fit(read_source(func, unit, call))
        return self._helpers[id(func)]

    def _overloads(self, unit: FunctionSource, call: ast.Call, func: Function) -> list[Function]:
        """The definitions of ``func`` the call may run, where ``func`` has several (one name, several signatures):
        the object a name binds is the first one's (``passes.overloads``). One definition (a generic one too, whose
        instantiations, ``generic_parent`` set, Warp keeps beside it) is ``func`` itself."""
        defined = self._definitions(func)
        if len(defined) < 2:
            return [func]
        known_types = {**self.local_types(unit), **self.parameter_types(unit)}
        choices = [overloads.Overload(f, [(a.label, dtypes.normalized(a.type)) for a in f.adj.args]) for f in defined]
        return overloads.candidates(call, choices, known_types.get)

    @staticmethod
    def _definitions(func: Function) -> list[Function]:
        return [
            overload
            for overload in [*func.user_templates.values(), *func.user_overloads.values()]
            if getattr(overload, "generic_parent", None) is None
        ]

    def is_builtin(self, unit: FunctionSource, call: ast.Call) -> bool:
        callee = unit.resolve(call.func)
        if isinstance(callee, Function):
            return callee.is_builtin()
        name = warp_builtin(call, unit.warp_names)
        if name is not None and (is_known(name) or callee is None):
            # wp.mesh_query_point, wp.zeros, wp.address_of: Warp's code generator finds them itself (a name it lacks
            # is one the rewrite's table of builtins lacks too, and is refused with that)
            return True
        python_builtin = getattr(builtins, getattr(callee, "__name__", ""), None) is callee
        return python_builtin or isinstance(callee, type | Struct)

    def local_types(self, unit: FunctionSource) -> dict[str, Any]:
        if unit is self.kernel:
            return self._kernel_locals
        adj = unit.obj.adj  # built for the kernel's (see _kernel_locals), unless generic
        return {name: kind for name, kind in _symbol_types(adj).items() if not dtypes.is_generic(kind)}

    @functools.cached_property
    def built_adjoint(self) -> Adjoint | None:
        """A copy of the kernel's adjoint built as Warp builds it (not the kernel's own, which stays as it was),
        which also builds the helpers it calls: its locals' types, and which array arguments Warp saw written
        (``is_write``). None where that fails (a generic kernel)."""
        kernel = self.warp_kernel
        adjoint = Adjoint(kernel.func, transformers=kernel.adj.transformers)
        # verify_autograd_array_access: Warp then marks the arguments it sees read and written
        options = kernel.module.options | kernel.options | {"output_arch": None, "verify_autograd_array_access": True}
        try:
            with warnings.catch_warnings():  # (what the option makes Warp warn about is the probe's, not the user's)
                warnings.simplefilter("ignore")
                adjoint.build(_TypeProbe(kernel.module, options))
        except Exception:
            return None
        return adjoint

    @functools.cached_property
    def _kernel_locals(self) -> dict[str, Any]:
        """Warp's types of the kernel's locals (``built_adjoint``); empty where it could not be built."""
        adjoint = self.built_adjoint
        return {} if adjoint is None else _symbol_types(adjoint)

    def named_type(self, unit: FunctionSource, expr: ast.expr) -> Any:
        named = dtypes.normalized(unit.resolve(expr))
        return named if dtypes.is_value_type(named) or isinstance(named, Struct) else None

    def return_type(self, unit: FunctionSource) -> Any:
        # Warp's reading of the annotation: evaluated where it was written (a string under ``from __future__ import
        # annotations``, as Newton writes them)
        return dtypes.normalized(unit.obj.adj.arg_types.get("return"))

    def element_struct(self, unit: FunctionSource, name: str) -> Any:
        array = dtypes.array_info(self.parameter_types(unit).get(name))
        return array.dtype if array is not None and isinstance(array.dtype, Struct) else None

    def parameter_types(self, unit: FunctionSource) -> dict[str, Any]:
        return {arg.label: dtypes.normalized(arg.type) for arg in unit.obj.adj.args}

    def is_generic(self, unit: FunctionSource) -> bool:
        return any(dtypes.is_generic(arg.type) for arg in unit.obj.adj.args)

    def has_custom_gradient(self, unit: FunctionSource) -> bool:
        return isinstance(unit.obj, Function) and unit.obj.custom_grad_func is not None

    def array(self, path: str) -> dtypes.ArrayInfo | None:
        root, *fields = path.split(".")
        arg_type = self.warp_kernel.adj.arg_types.get(root)
        for name in fields:
            arg_type = dtypes.field_type(arg_type, name)
        return dtypes.array_info(arg_type)

    def closure_variable(self, name: str) -> bool:
        return False  # the generated code runs in the kernel's namespace, closure variables included (namespace())

    def int_constant(self, unit: FunctionSource, name: str) -> int | None:
        value = unit.namespace.get(name)  # (closure variables first, then globals, as Warp reads them)
        return value if type(value) is int else None

    def namespace(self) -> dict[str, Any]:
        """What the generated code refers to: the kernel's namespace, the runtime, and what cloned helpers from other
        modules use (under a fresh name where the kernel's module means something else by it)."""
        return {**self.bound, self.module.runtime.alias: runtime}

    def _fit(self, helper: FunctionSource) -> FunctionSource:
        """``helper`` with each global name it uses that means something else in the generated code renamed, and
        its names added to what the generated code binds (``namespace``). Two modules may, say, each define a
        ``@wp.struct`` of the same name: a clone of a helper from the other module must keep its own."""
        local = {a.arg for a in helper.tree.args.args} | {
            n.id for n in walk(helper.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        used = sorted({n.id for n in walk(helper.tree) if isinstance(n, ast.Name)} - local)
        namer = Namer(self.taken | set(self.bound))
        renames = {}
        for name in (name for name in used if name in helper.namespace):
            if name in self.bound and self.bound[name] is not helper.namespace[name]:
                renames[name] = namer.fresh(name)
        if renames:
            helper = _renamed(helper, renames)
        self.bound.update(
            {name: helper.namespace[name] for name in {renames.get(n, n) for n in used} if name in helper.namespace}
        )
        return helper


def _renamed(source: FunctionSource, renames: dict[str, str]) -> FunctionSource:
    """The function with some of its names renamed in its text (and so in its tree), bound to what they meant."""
    lines = source.text.splitlines(keepends=True)
    names = [n for n in walk(source.tree) if isinstance(n, ast.Name) and n.id in renames]
    for node in sorted(names, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        line = lines[node.lineno - 1].encode()
        edited = line[: node.col_offset] + renames[node.id].encode() + line[node.end_col_offset :]
        lines[node.lineno - 1] = edited.decode()
    text = "".join(lines)
    tree = next(node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef))
    namespace = {**source.namespace, **{alias: source.namespace[name] for name, alias in renames.items()}}
    return dataclasses.replace(source, text=text, tree=tree, namespace=namespace)


_generated_modules = itertools.count()


def compile_generated(text: str, namespace: dict[str, Any], label: str, module: str) -> dict[str, Any]:
    """Execute generated kernel source in a copy of ``namespace`` and return the resulting namespace.

    Warp reads a kernel's source through ``inspect``/``linecache``, so the text is registered in
    ``linecache`` under a made-up file name first (plain ``exec`` of a string is refused by Warp).
    The generated kernels join the Warp module ``module``: the rewritten kernels of one user module
    share one Warp module, so rewriting them all before the first launch compiles them once.
    """
    number = next(_generated_modules)
    filename = f"<wp-rewrite {label} #{number}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    scope = dict(namespace)
    scope["__name__"] = module
    exec(compile(text, filename, "exec"), scope)
    return scope
