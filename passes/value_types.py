"""The Warp types of a function's locals, read off its source by Warp's own rules.

A loop Warp does not unroll hands the locals it carries to the replay through records, and a record needs the
local's Warp type: the record array's dtype and the function that restores it. Where the front end knows a local's
type (the API: Warp's own, once it has built the kernel), that counts. Otherwise each local takes the one type
that every value assigned to it agrees on, and the type of a value is worked out as Warp works it out when it
builds the kernel: a call of a Warp builtin or an operator through the builtin's overloads and value function in
Warp's registry, a constructor as its type, an element of an array as the array's dtype, a helper's call as its
declared return type. A Python literal takes the type of what it meets (``acc * 2.0`` keeps ``acc``'s type).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Sequence
from typing import Any

import warp as wp
from warp._src import codegen as warp_codegen
from warp._src import types as warp_types
from warp._src.context import builtin_functions

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.atomics import WarpNames
from warp_rewrite.passes.syntax import walk


class _Literal:
    """A Python literal's type before it meets another: Warp gives it the type of the operand beside it."""

    def __init__(self, alone: Any):
        self.alone = alone  # its type where it meets nothing typed

    def __repr__(self) -> str:
        return f"literal({self.alone.__name__})"


INT_LITERAL, FLOAT_LITERAL = _Literal(wp.int32), _Literal(wp.float32)
_UNKNOWN = object()  # a local not settled yet: compatible with anything

_OPERATORS: dict[type[ast.operator], str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.MatMult: "mul",
    ast.Div: "div",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.Pow: "pow",
    ast.BitAnd: "bit_and",
    ast.BitOr: "bit_or",
    ast.BitXor: "bit_xor",
    ast.LShift: "lshift",
    ast.RShift: "rshift",
}
_PYTHON_TYPES = {"int": wp.int32, "float": wp.float32, "bool": wp.bool}
_COMPONENTS = {"x": 0, "y": 1, "z": 2, "w": 3}


def _scalar_of(kind: Any) -> Any:
    """The scalar type of a concrete type (itself for a scalar), None for anything else."""
    if dtypes.is_scalar(kind):
        return kind
    return getattr(kind, "_wp_scalar_type_", None)


def _settled(kind: Any) -> Any:
    return kind.alone if isinstance(kind, _Literal) else kind


_MOST_CHANGES = 3  # unknown, a literal's type, a concrete type: no settling local changes more often (ValueTypes)


def unify(kinds: Sequence[Any]) -> Any:
    """The one type a set of values makes: a concrete type they all have (literals adapting to it), a literal
    where all are literals, ``_UNKNOWN`` while only unsettled locals are known, None where they disagree or none
    can be told. A value whose type cannot be told (None) is left out where others tell it: a local a loop carries
    has one type in Warp (its trips' values are assigned to one variable), and other locals' types are not used."""
    told = [kind for kind in kinds if kind is not None]
    if not told:
        return None
    known = [kind for kind in told if kind is not _UNKNOWN]
    concrete: list[Any] = []  # a list, compared with ==: the command line's struct types are not hashable
    for kind in known:
        if not isinstance(kind, _Literal) and kind not in concrete:
            concrete.append(kind)
    if len(concrete) > 1:
        return None
    if concrete:
        kind = concrete[0]
        floats = any(kind is FLOAT_LITERAL for kind in known)
        return None if floats and dtypes.is_int(_scalar_of(kind)) else kind
    if not known:
        return _UNKNOWN
    return FLOAT_LITERAL if FLOAT_LITERAL in known else INT_LITERAL


@functools.cache
def _overloads(name: str) -> tuple[Any, ...]:
    function = builtin_functions.get(name)
    if function is None:
        return ()
    return tuple(getattr(function, "overloads", None) or [function])


def builtin_result(name: str, arguments: Sequence[Any]) -> Any:
    """The type Warp gives a call of builtin ``name`` with positional arguments of these (concrete) types: its first
    matching overload's value function, as Warp resolves a call (``codegen.Adjoint.resolve_func``); None if none
    matches or its value function needs more than the types."""
    for erased in (False, True):
        for overload in _overloads(name):
            if overload.variadic or len(overload.input_types) < len(arguments):
                continue
            if not warp_codegen.func_match_args(overload, list(arguments), {}, allow_erasure=erased):
                continue
            try:
                bound = overload.signature.bind(*arguments).arguments
                result = overload.value_func(dict(bound), dict.fromkeys(bound))
            except Exception:  # a value function that needs the arguments' values (a shape, a dtype)
                return None
            return None if isinstance(result, Sequence) else dtypes.exported(dtypes.normalized(result))
    return None


class ValueTypes:
    """The Warp types of one function's locals (``locals``: name -> type), where they can be told."""

    def __init__(
        self,
        func: ast.FunctionDef,
        names: WarpNames,
        parameter_types: dict[str, Any],
        nodes: list[ast.AST] | None = None,
        local_types: dict[str, Any] | None = None,
        call_types: Callable[[ast.Call], Any] | None = None,
        named_type: Callable[[ast.expr], Any] | None = None,
    ):
        """``parameter_types``: the function's parameters' Warp types; ``local_types``: what the front end knows of
        its locals; ``call_types``: the declared return type of a call of a helper (None: not a helper's call);
        ``named_type``: the Warp type a name or attribute names (``F`` after ``F = wp.float64``), if any."""
        self.names = names
        # A generic parameter (``v: Any``) has a type only per instantiation: it cannot be told from the source.
        self.parameters = {
            name: dtypes.normalized(kind) for name, kind in parameter_types.items() if not dtypes.is_generic(kind)
        }
        self.call_types = call_types or (lambda call: None)
        self.named_type = named_type or (lambda expr: None)
        assignments: dict[str, list[ast.expr | None]] = {}
        for node in walk(func) if nodes is None else nodes:
            for name, value in _assigned_values(node):
                assignments.setdefault(name, []).append(value)
        # Optimistic fixpoint: every local starts unknown (compatible with anything), so that a local assigned from
        # itself (``acc = acc * c + x[i]``) settles on the type its other assignments give it. Warp gives a local one
        # type (it refuses to assign a value of another: ``codegen.Adjoint.emit_Assign``), so an assignment whose
        # type the source does not tell (a helper's undeclared return) leaves the type to the others.
        # Leaving untold values out makes the iteration non-monotone (a local that becomes untold stops disagreeing
        # with the others), so a local whose type changes more than ``_MOST_CHANGES`` times is untold for good.
        self.locals: dict[str, Any] = dict.fromkeys(assignments, _UNKNOWN)
        changes = dict.fromkeys(assignments, 0)
        changed = True
        while changed:
            changed = False
            for name, values in assignments.items():
                if changes[name] > _MOST_CHANGES:
                    continue
                kinds = [self.of(value) for value in values if value is not None]
                settled = unify([kind for kind in kinds if kind is not None])
                if settled is not self.locals[name] and settled != self.locals[name]:
                    changes[name] += 1
                    self.locals[name] = settled if changes[name] <= _MOST_CHANGES else None
                    changed = True
        self.locals = {
            name: _settled(kind) for name, kind in self.locals.items() if kind is not None and kind is not _UNKNOWN
        }
        for name, known in (local_types or {}).items():
            if not dtypes.is_generic(known):
                self.locals[name] = dtypes.exported(dtypes.normalized(known))

    def returned(self, function: ast.FunctionDef) -> Any:
        """The type the function returns, told from its ``return`` statements (a tuple of types for ``return a, b``):
        what a call of a helper with no return annotation makes."""
        kinds = []
        for node in walk(function):
            if isinstance(node, ast.Return) and node.value is not None:
                value = node.value
                kinds.append(
                    tuple(_settled(self.of(e)) for e in value.elts) if isinstance(value, ast.Tuple) else self.of(value)
                )
        kind = unify(kinds)
        if isinstance(kind, tuple):
            return None if any(k is None or k is _UNKNOWN for k in kind) else kind
        return None if kind is _UNKNOWN else _settled(kind)

    def of(self, expr: ast.expr) -> Any:
        """The type of ``expr``: a Warp type, a literal's (``INT_LITERAL``, ``FLOAT_LITERAL``), ``_UNKNOWN`` (made of
        unsettled locals), or None where it cannot be told."""
        if isinstance(expr, ast.Constant):
            value = expr.value
            if isinstance(value, bool):
                return wp.bool
            return INT_LITERAL if isinstance(value, int) else FLOAT_LITERAL if isinstance(value, float) else None
        if isinstance(expr, ast.Name):
            return self.locals.get(expr.id, self.parameters.get(expr.id))
        if isinstance(expr, ast.Compare | ast.BoolOp) or (
            isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not)
        ):
            return wp.bool
        if isinstance(expr, ast.UnaryOp):
            return self.of(expr.operand)
        if isinstance(expr, ast.IfExp):
            return unify([self.of(expr.body), self.of(expr.orelse)])
        if isinstance(expr, ast.BinOp):
            return self._call(
                "mul" if isinstance(expr.op, ast.MatMult) else _OPERATORS[type(expr.op)], [expr.left, expr.right]
            )
        if isinstance(expr, ast.Attribute):
            return self._attribute(expr)
        if isinstance(expr, ast.Subscript):
            return self._subscript(expr)
        if isinstance(expr, ast.Call):
            return self._call_type(expr)
        return None

    def _attribute(self, expr: ast.Attribute) -> Any:
        if isinstance(expr.value, ast.Name) and expr.value.id in self.names.modules:
            constant = getattr(wp, expr.attr, None)  # wp.pi, wp.inf: Python floats
            return FLOAT_LITERAL if isinstance(constant, float) else None
        owner = self.of(expr.value)
        if owner is None or owner is _UNKNOWN:
            return owner
        if dtypes.field_type(owner, expr.attr) is not None:
            return dtypes.normalized(dtypes.field_type(owner, expr.attr))
        if expr.attr in _COMPONENTS and (warp_types.type_is_vector(owner) or warp_types.type_is_quaternion(owner)):
            return _scalar_of(owner)
        if warp_types.type_is_transformation(owner) and expr.attr in ("p", "q"):
            scalar = _scalar_of(owner)
            return dtypes.exported(warp_types.vector(3, scalar) if expr.attr == "p" else warp_types.quaternion(scalar))
        return None

    def _subscript(self, expr: ast.Subscript) -> Any:
        if isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape":
            return wp.int32
        owner = self.of(expr.value)
        if owner is None or owner is _UNKNOWN:
            return owner
        if isinstance(owner, tuple):  # a helper's tuple return, unpacked
            index = expr.slice.value if isinstance(expr.slice, ast.Constant) else None
            return owner[index] if isinstance(index, int) and 0 <= index < len(owner) else None
        indices = len(expr.slice.elts) if isinstance(expr.slice, ast.Tuple) else 1
        if dtypes.is_array(owner):
            return dtypes.normalized(owner.dtype) if indices == owner.ndim else None
        if isinstance(expr.slice, ast.Slice):
            return None
        if warp_types.type_is_matrix(owner) and indices == 1:
            return dtypes.exported(warp_types.vector(owner._shape_[1], _scalar_of(owner)))
        if warp_types.type_is_vector(owner) or warp_types.type_is_matrix(owner) or warp_types.type_is_quaternion(owner):
            return _scalar_of(owner)
        return None

    def _call_type(self, call: ast.Call) -> Any:
        declared = self.call_types(call)
        if declared is not None:
            return dtypes.normalized(declared)
        named = self.named_type(call.func) if isinstance(call.func, ast.Name | ast.Attribute) else None
        if named is not None and warp_types.type_is_value(named):
            return dtypes.exported(named)  # a constructor under another name: F(0.5) after F = wp.float64
        builtin = self._builtin_name(call)
        if builtin is None:
            return None
        if builtin in _PYTHON_TYPES:
            return _PYTHON_TYPES[builtin]
        made = getattr(wp, builtin, None)
        if isinstance(made, type) and warp_types.type_is_value(made):
            return made  # a constructor: wp.float64(0.0), wp.vec3(), wp.mat33(...)
        if call.keywords or any(isinstance(argument, ast.Starred) for argument in call.args):
            return None
        return self._call(builtin, call.args)

    def _builtin_name(self, call: ast.Call) -> str | None:
        """The name of the Warp builtin (or Python type) ``call`` calls, if it calls one by name."""
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.names.modules:
            return func.attr
        if isinstance(func, ast.Name) and func.id not in self.locals and func.id not in self.parameters:
            return func.id if func.id in _PYTHON_TYPES or func.id in builtin_functions else None
        return None

    def _call(self, builtin: str, arguments: Sequence[ast.expr]) -> Any:
        kinds = [self.of(argument) for argument in arguments]
        if any(kind is None for kind in kinds):
            return None
        if any(kind is _UNKNOWN for kind in kinds):
            return _UNKNOWN
        literals = [kind for kind in kinds if isinstance(kind, _Literal)]
        if len(literals) == len(kinds):  # literals only: Warp folds nothing, each is its own type
            return (
                unify(literals) if builtin in _OPERATORS.values() else builtin_result(builtin, [k.alone for k in kinds])
            )
        scalars = {
            scalar for kind in kinds if not isinstance(kind, _Literal) and (scalar := _scalar_of(kind)) is not None
        }
        meets = next(iter(scalars)) if len(scalars) == 1 else None
        concrete = [
            kind.alone
            if isinstance(kind, _Literal) and meets is None
            else meets
            if isinstance(kind, _Literal)
            else kind
            for kind in kinds
        ]
        return builtin_result(builtin, concrete)


def _element(whole: ast.expr, index: int) -> ast.expr:
    """``whole[index]``: an element of a tuple a call returns (``a, b = helper(x)``), as the expression typed."""
    return ast.Subscript(whole, ast.Constant(index), ast.Load())


def _assigned_values(node: ast.AST) -> list[tuple[str, ast.expr | None]]:
    """The locals a statement assigns, each with the value it assigns (None where it is no expression of its own: a
    loop's variable over something other than ``range()``)."""
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        found: list[tuple[str, ast.expr | None]] = []
        for target in targets:
            if isinstance(target, ast.Name) and node.value is not None:
                found.append((target.id, node.value))
            elif isinstance(target, ast.Tuple) and node.value is not None:
                whole = node.value
                if isinstance(whole, ast.Tuple):
                    values = list(whole.elts)
                elif _is_tid(whole):  # i, j = wp.tid(): an int each
                    values = [ast.Call(ast.Name("int", ast.Load()), [], []) for _ in target.elts]
                else:
                    values = [_element(whole, k) for k in range(len(target.elts))]
                for element, value in zip(target.elts, values, strict=False):
                    if isinstance(element, ast.Name):
                        found.append((element.id, value))
        return found
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        return [(node.target.id, ast.BinOp(node.target, node.op, node.value))]
    if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
        over_range = (
            isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range"
        )
        return [(node.target.id, ast.Call(ast.Name("int", ast.Load()), [], []) if over_range else None)]
    return []


def _is_tid(expr: ast.expr | None) -> bool:
    """``wp.tid()`` (or ``tid()`` imported from Warp), spelled any way."""
    return isinstance(expr, ast.Call) and getattr(expr.func, "attr", getattr(expr.func, "id", None)) == "tid"
