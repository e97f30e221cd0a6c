"""Which locals of a kernel are ints or bools, read off the source alone.

Warp's backward replays a dynamic loop's body at most once before running the reverse pass, so a local that a
loop changes and later code reads has the wrong value in backward. The rewrite records such locals at the
loop's exit and restores them in the replay kernel, which needs their Warp type; only ints and bools (slots,
flags, probe positions) carry no gradient, so only they can be restored without losing one.
"""

from __future__ import annotations

import ast
from typing import Any

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.dtypes import BOOL, INT
from warp_rewrite.passes.syntax import walk

_UNKNOWN = "?"
_INT_CASTS = {"int", "int32"}
_INT_RESULTS = {"tid", "len", "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_cas", "atomic_exch",
                "atomic_and", "atomic_or", "atomic_xor", "min", "max", "abs", "select", "where"}  # fmt: skip


def _name(expr: ast.expr | None) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


class IntLocals:
    """Fixpoint over a function: a local is int (bool) when every value assigned to it is."""

    def __init__(self, func: ast.FunctionDef, parameter_types: dict[str, Any], nodes: list[ast.AST] | None = None):
        """``parameter_types``: the function's parameters' Warp types, where known; ``nodes``: ``walk(func)``."""
        self.params: dict[str, Any] = {}
        self.int_arrays: set[str] = set()
        for name, annotation in parameter_types.items():
            if annotation is INT or annotation is BOOL:
                self.params[name] = annotation
            elif dtypes.is_array(annotation) and annotation.dtype is INT:
                self.int_arrays.add(name)
        assignments: dict[str, list[ast.expr | None]] = {}
        for node in walk(func) if nodes is None else nodes:
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = (
                    node.value if not isinstance(node, ast.AugAssign) else ast.BinOp(node.target, node.op, node.value)
                )
                for target in targets:
                    if isinstance(target, ast.Name):
                        assignments.setdefault(target.id, []).append(value)
                    elif isinstance(target, ast.Tuple):  # i, j = wp.tid()
                        for element in target.elts:
                            if isinstance(element, ast.Name):
                                assignments.setdefault(element.id, []).append(value if _is_tid(value) else None)
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                assignments.setdefault(node.target.id, []).append(ast.Constant(0))
        # Optimistic fixpoint, so that ``slot = (slot + 1) % n`` can be an int: every local starts unknown
        # ("?", compatible with anything) and settles on the one kind all its assignments agree on.
        self.locals: dict[str, Any] = dict.fromkeys(assignments, _UNKNOWN)
        changed = True
        while changed:
            changed = False
            for name, values in assignments.items():
                kinds = {self.kind(v) for v in values} - {_UNKNOWN}
                settled = next(iter(kinds)) if len(kinds) == 1 else (_UNKNOWN if not kinds else None)
                if settled != self.locals[name]:
                    self.locals[name] = settled
                    changed = True
        self.locals = {name: kind for name, kind in self.locals.items() if kind not in (None, _UNKNOWN)}

    def kind(self, expr: ast.expr | None) -> Any:
        """INT, BOOL or None (not known to be either)."""
        if expr is None:
            return None
        if isinstance(expr, ast.Constant):
            return BOOL if isinstance(expr.value, bool) else INT if isinstance(expr.value, int) else None
        if isinstance(expr, ast.Name):
            return self.locals.get(expr.id) or self.params.get(expr.id)
        if isinstance(expr, ast.Compare | ast.BoolOp) or (
            isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not)
        ):
            return BOOL
        if isinstance(expr, ast.UnaryOp):
            operand = self.kind(expr.operand)
            return operand if operand in (INT, _UNKNOWN) else None
        if isinstance(expr, ast.BinOp):
            kinds = {self.kind(expr.left), self.kind(expr.right)}
            if isinstance(expr.op, ast.Div) or not kinds <= {INT, _UNKNOWN}:
                return None
            return INT if INT in kinds else _UNKNOWN
        if isinstance(expr, ast.Subscript):
            return INT if isinstance(expr.value, ast.Name) and expr.value.id in self.int_arrays else None
        if isinstance(expr, ast.Call):
            called = _name(expr.func)
            if called in _INT_CASTS or (called == "tid" and not expr.args):
                return INT
            if called in _INT_RESULTS and expr.args:
                if called.startswith("atomic_"):
                    target = expr.args[0]
                    return INT if isinstance(target, ast.Name) and target.id in self.int_arrays else None
                kinds = {self.kind(a) for a in expr.args if called not in {"select", "where"} or a is not expr.args[0]}
                return INT if INT in kinds and kinds <= {INT, _UNKNOWN} else None
        return None


def _is_tid(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.Call) and _name(expr.func) == "tid"
