"""Which locals of a function are ints or bools, and of which Warp type.

Warp's backward replays a dynamic loop's body at most once before running the reverse pass, so a local that a
loop changes and later code reads has the wrong value in backward. The rewrite records such locals at the
loop's exit and restores them in the replay kernel, which needs their Warp type; only ints and bools (slots,
flags, probe positions) carry no gradient, so only they can be restored without losing one.

Where the front end knows a local's type (the API: Warp's own, once it has built the kernel), that counts.
Otherwise it is read off the source: a local is an int of one type when every value assigned to it is.
"""

from __future__ import annotations

import ast
from typing import Any

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.atomics import PLAIN, WarpNames, positional_arguments
from warp_rewrite.passes.builtins import returned_type, written_locals
from warp_rewrite.passes.dtypes import BOOL, INT
from warp_rewrite.passes.memory import path_parts
from warp_rewrite.passes.syntax import walk

_UNKNOWN = "?"  # not settled yet: compatible with anything
_LITERAL = "literal"  # an int literal: takes the type of the int it meets, int32 on its own
# Warp's int types by the names that cast to them (int(x) makes an int32).
_INT_CASTS = {"int": INT, **{t.__name__: t for t in dtypes.INT_TYPES}}
_SAME_AS_OPERANDS = {"min", "max", "abs", "select", "where"}
_INT_RESULTS = {"tid": INT, "len": INT}
_BIT_OPS = (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)


def _name(expr: ast.expr | None) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def _unify(kinds: set) -> Any:
    """The one int type a set of operand kinds makes, ``_UNKNOWN`` while undecided, None if none."""
    kinds = kinds - {_UNKNOWN}
    types = kinds - {_LITERAL}
    if len(types) > 1 or not all(dtypes.is_int(t) for t in types):
        return None
    if types:
        return next(iter(types))
    return _LITERAL if kinds else _UNKNOWN


class IntLocals:
    """The int and bool locals of a function (``locals``: name -> Warp type)."""

    def __init__(
        self,
        func: ast.FunctionDef,
        parameter_types: dict[str, Any],
        nodes: list[ast.AST] | None = None,
        local_types: dict[str, Any] | None = None,
        call_types: dict[ast.Call, Any] | None = None,
        names: WarpNames = PLAIN,
    ):
        """``parameter_types``: the function's parameters' Warp types, where known; ``nodes``: ``walk(func)``;
        ``local_types``: the locals' Warp types, where the front end knows them; ``call_types``: the return type
        of each call of a helper, where known; ``names``: how the function spells Warp."""
        self.names = names
        self.params: dict[str, Any] = {}
        self.parameter_types = parameter_types
        self.int_arrays: dict[str, Any] = {}
        for name, annotation in parameter_types.items():
            if dtypes.is_int(annotation) or annotation is BOOL:
                self.params[name] = annotation
            elif dtypes.is_array(annotation) and dtypes.is_int(annotation.dtype):
                self.int_arrays[name] = annotation.dtype
        self.call_types = call_types or {}
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
                assignments.setdefault(node.target.id, []).append(_cast(INT))
            elif isinstance(node, ast.Call):  # a builtin writing a local: a value of its parameter's type
                for written in written_locals(node, names):
                    assignments.setdefault(written.local.id, []).append(_cast(written.dtype))
        # Optimistic fixpoint, so that ``slot = (slot + 1) % n`` can be an int: every local starts unknown
        # (compatible with anything) and settles on the one type all its assignments agree on.
        self.locals: dict[str, Any] = dict.fromkeys(assignments, _UNKNOWN)
        changed = True
        while changed:
            changed = False
            for name, values in assignments.items():
                kinds = {self.kind(v) for v in values}
                settled = BOOL if kinds - {_UNKNOWN} == {BOOL} else _unify(kinds)
                if settled != self.locals[name]:
                    self.locals[name] = settled
                    changed = True
        self.locals = {
            name: INT if kind is _LITERAL else kind
            for name, kind in self.locals.items()
            if kind not in (None, _UNKNOWN)
        }
        # What the front end knows wins (Warp's symbols keep only the locals still in scope at the function's end).
        for name, known in (local_types or {}).items():
            if dtypes.is_int(known) or known is BOOL:
                self.locals[name] = known
            else:
                self.locals.pop(name, None)

    def kind(self, expr: ast.expr | None) -> Any:
        """An int type, BOOL, ``_LITERAL``, ``_UNKNOWN`` (a local not settled yet) or None (neither)."""
        if expr is None:
            return None
        if isinstance(expr, ast.Constant):
            return BOOL if isinstance(expr.value, bool) else _LITERAL if isinstance(expr.value, int) else None
        if isinstance(expr, ast.Name):
            return self.locals.get(expr.id) or self.params.get(expr.id)
        if isinstance(expr, ast.Compare | ast.BoolOp) or (
            isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not)
        ):
            return BOOL
        if isinstance(expr, ast.UnaryOp):
            return _unify({self.kind(expr.operand)})
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, _BIT_OPS):
            return self._bit_op_kind(expr)
        if isinstance(expr, ast.BinOp):
            return None if isinstance(expr.op, ast.Div) else _unify({self.kind(expr.left), self.kind(expr.right)})
        if isinstance(expr, ast.Subscript):
            return self._subscript_kind(expr)
        if isinstance(expr, ast.Call):
            return self._call_kind(expr)
        return None

    def _bit_op_kind(self, expr: ast.BinOp) -> Any:
        """Warp defines ``& | ^ << >>`` on two scalars of one int type (or int vectors, matrices): where one
        operand is an int, the other one is too, as the result, also where it is not known here
        (``1 << wp.static(N)``, ``bits & helper(x)``)."""
        kinds = {self.kind(expr.left), self.kind(expr.right)}
        if kinds & ({_LITERAL, *dtypes.INT_TYPES}):
            kinds = {_UNKNOWN if kind is None else kind for kind in kinds}
        return _unify(kinds)

    def _subscript_kind(self, expr: ast.Subscript) -> Any:
        if isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape":  # arr.shape[0]
            return INT
        return self._int_array(expr.value)

    def _int_array(self, expr: ast.expr) -> Any:
        """The int dtype of the array ``expr`` names (a parameter, or a struct parameter's field), if any."""
        parts = path_parts(expr)
        if parts is None:
            return None
        root, *fields = parts
        if not fields:
            return self.int_arrays.get(root)
        annotation: Any = self.parameter_types.get(root)
        for name in fields:
            annotation = dtypes.field_type(annotation, name)
        return annotation.dtype if dtypes.is_array(annotation) and dtypes.is_int(annotation.dtype) else None

    def _call_kind(self, expr: ast.Call) -> Any:
        called = _name(expr.func)
        if expr in self.call_types:
            declared = dtypes.normalized(self.call_types[expr])
            return declared if dtypes.is_int(declared) or declared is BOOL else None
        if called == "bool":
            return BOOL
        if called in _INT_CASTS:
            return _INT_CASTS[called]
        if called in _INT_RESULTS and (called != "tid" or not expr.args):
            return _INT_RESULTS[called]
        if called and called.startswith("atomic_") and expr.args:
            return self._int_array(positional_arguments(expr)[0])
        if called in _SAME_AS_OPERANDS and expr.args:
            operands = expr.args[1:] if called in ("select", "where") else expr.args
            return _unify({self.kind(a) for a in operands})
        returned = returned_type(expr, self.names)  # wp.rand_init(seed): a uint32, by Warp's registry
        return returned if dtypes.is_int(returned) or returned is BOOL else None


def _cast(dtype: Any) -> ast.expr | None:
    """A value of an int or bool type (its cast, ``int32()``); None, no int, for any other."""
    if dtypes.is_int(dtype) or dtype is BOOL:
        return ast.Call(ast.Name(dtype.__name__), [], [])
    return None


def _is_tid(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.Call) and _name(expr.func) == "tid"
