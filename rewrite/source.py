"""Loading a kernel's source and namespace, and compiling generated source back into Warp kernels."""

from __future__ import annotations

import ast
import functools
import itertools
import linecache
import typing
from dataclasses import dataclass
from typing import Any

import warp as wp
from warp._src.codegen import get_closure_vars
from warp._src.context import Function

from warp_rewrite.passes.atomics import ATOMIC_OPS, WarpNames


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

    @classmethod
    def of(cls, obj: wp.Kernel | Function) -> FunctionSource:
        adj = obj.adj
        namespace = {**adj.func.__globals__, **get_closure_vars(adj.func)}
        first_line = max(adj.fun_lineno, 1)
        original = linecache.getline(adj.filename, first_line)
        indent = len(original) - len(original.lstrip()) if original.strip() else 0
        tree = next(node for node in ast.parse(adj.source).body if isinstance(node, ast.FunctionDef))
        return cls(adj.fun_name, adj.source, tree, namespace, adj.filename, first_line, indent)

    def location(self, node: ast.AST) -> str:
        """``file:line:col`` (1-based, as editors and ruff print them) of a node of ``tree``."""
        return f"{self.filename}:{self.first_line + node.lineno - 1}:{self.indent + node.col_offset + 1}"

    @functools.cached_property
    def _warp_names(self) -> WarpNames:
        modules = frozenset(name for name, value in self.namespace.items() if value is wp)
        atomics = {id(getattr(wp, f"atomic_{op}")): op for op in ATOMIC_OPS}
        bare = tuple(
            (name, atomics[id(value)])
            for name, value in self.namespace.items()
            if id(value) in atomics and not name.startswith("__")
        )
        return WarpNames(modules or frozenset({"wp"}), bare)

    def warp_names(self) -> WarpNames:
        """How this namespace spells Warp's module and its atomics."""
        return self._warp_names

    def warp_alias(self) -> str:
        return min(self.warp_names().modules)

    def any_alias(self) -> str | None:
        """The name this namespace binds to ``typing.Any``, if any."""
        return next((name for name, value in self.namespace.items() if value is typing.Any), None)

    def resolve(self, expr: ast.expr) -> Any:
        """The object a ``name`` or ``module.attr`` expression denotes in this namespace, or None."""
        if isinstance(expr, ast.Name):
            return self.namespace.get(expr.id)
        if isinstance(expr, ast.Attribute):
            owner = self.resolve(expr.value)
            return getattr(owner, expr.attr, None) if owner is not None else None
        return None


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
