"""The API's front end: a kernel and its helpers as the live Warp objects ``@wp.kernel`` and ``@wp.func`` made.

Warp knows each argument's type and each helper a call refers to; the source comes from the objects (through
``inspect``, as Warp reads it). The generated source is compiled back into Warp kernels here too.
"""

from __future__ import annotations

import ast
import builtins
import functools
import itertools
import linecache
from dataclasses import dataclass
from typing import Any

import warp as wp
from warp._src.codegen import Struct, get_closure_vars
from warp._src.context import Function

from warp_rewrite import runtime
from warp_rewrite.passes import dtypes
from warp_rewrite.passes.atomics import ATOMIC_OPS, WarpNames
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.plan import KernelPlan, Refusal
from warp_rewrite.passes.syntax import walk
from warp_rewrite.passes.two_phase import ModuleNames
from warp_rewrite.runtime import RewriteError

RUNTIME_NAME = "wp_rewrite_runtime"  # the name generated code gives the runtime, unless the user's module uses it


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
        return cls(adj.fun_name, adj.source, tree, namespace, adj.filename, first_line, indent, obj)

    def location(self, node: ast.AST) -> str:
        """``file:line:col`` (1-based, as editors and ruff print them) of a node of ``tree``."""
        return f"{self.filename}:{self.first_line + node.lineno - 1}:{self.indent + node.col_offset + 1}"

    @functools.cached_property
    def warp_names(self) -> WarpNames:
        """How this namespace spells Warp's module and its atomics."""
        modules = frozenset(name for name, value in self.namespace.items() if value is wp)
        atomics = {id(getattr(wp, f"atomic_{op}")): op for op in ATOMIC_OPS}
        bare = tuple(
            (name, atomics[id(value)])
            for name, value in self.namespace.items()
            if id(value) in atomics and not name.startswith("__")
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


def read_source(obj: wp.Kernel | Function, unit: FunctionSource | None = None, node: ast.AST | None = None):
    """``FunctionSource.of(obj)``; a kernel whose source cannot be read is refused (a helper, where it is called)."""
    try:
        return FunctionSource.of(obj)
    except (OSError, TypeError, SyntaxError, StopIteration) as error:
        if unit is not None:
            problem = f"the source of helper '{obj.key}' cannot be read ({error})"
            raise Refusal(unit, node, problem, "Define the helper with @wp.func in a .py file") from None
        where = f"{getattr(obj.adj, 'filename', '<unknown>')}:{getattr(obj.adj, 'fun_lineno', 0)}:1"
        raise RewriteError(
            obj.key, where, f"its source cannot be read ({error})", "Define the kernel with @wp.kernel in a .py file"
        ) from None


class LiveFrontend:
    """``warp_rewrite.pipeline.Frontend`` for a ``wp.Kernel``; ``taken``: names already defined where the generated
    kernels go (the rewritten kernels of one user module share a Warp module)."""

    def __init__(self, kernel: wp.Kernel, taken: set[str]):
        self.warp_kernel = kernel
        self.kernel = read_source(kernel)
        self.options = dict(kernel.options)
        self.placement = {}  # the generated kernels join a Warp module the API chooses (warp_rewrite.api)
        self.taken = set(taken) | set(self.kernel.namespace)
        warp = min(self.kernel.warp_names.modules)
        self.module = ModuleNames(warp, Namer(self.taken).fresh(RUNTIME_NAME))
        self._helpers: dict[int, FunctionSource] = {}

    def warp_names(self, unit: FunctionSource) -> WarpNames:
        return unit.warp_names

    def resolve_helper(self, unit: FunctionSource, call: ast.Call) -> FunctionSource | None:
        func = unit.resolve(call.func)
        if not isinstance(func, Function) or func.is_builtin() or getattr(func, "adj", None) is None:
            return None
        if id(func) not in self._helpers:
            self._helpers[id(func)] = read_source(func, unit, call)
        return self._helpers[id(func)]

    def is_builtin(self, unit: FunctionSource, call: ast.Call) -> bool:
        callee = unit.resolve(call.func)
        if isinstance(callee, Function):
            return callee.is_builtin()
        python_builtin = getattr(builtins, getattr(callee, "__name__", ""), None) is callee
        return python_builtin or isinstance(callee, type | Struct)

    def parameter_types(self, unit: FunctionSource) -> dict[str, Any]:
        return {arg.label: dtypes.normalized(arg.type) for arg in unit.obj.adj.args}

    def array(self, path: str) -> dtypes.ArrayInfo | None:
        root, *fields = path.split(".")
        arg_type = self.warp_kernel.adj.arg_types.get(root)
        for name in fields:
            struct_var = getattr(arg_type, "vars", {}).get(name)
            arg_type = struct_var.type if struct_var is not None else None
        return dtypes.array_info(arg_type)

    def namespace(self, plan: KernelPlan) -> dict[str, Any]:
        """The kernel's namespace plus what cloned helpers from other modules refer to, and the runtime."""
        kernel = self.kernel
        namespace = {**kernel.namespace, self.module.runtime: runtime}
        for function in plan.root.walk():
            unit = function.unit
            if unit is kernel:
                continue
            local = {a.arg for a in unit.tree.args.args} | {
                n.id for n in walk(unit.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
            for name in {n.id for n in walk(unit.tree) if isinstance(n, ast.Name)} - local:
                if name not in unit.namespace:
                    continue
                if name in namespace and namespace[name] is not unit.namespace[name]:
                    raise RewriteError(
                        kernel.name,
                        unit.location(unit.tree),
                        f"helper '{unit.name}' uses '{name}', which means something else in the kernel's module",
                        f"Import '{name}' in the kernel's module under the same name, or rename one of them",
                    )
                namespace[name] = unit.namespace[name]
        return namespace


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
