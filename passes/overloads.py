"""Which definition of an overloaded ``@wp.func`` (one name, several signatures) a call runs.

Warp picks the overload whose parameters take the types of the call's arguments. The front ends hand each candidate
definition's parameter types; this module reads what the source tells of the arguments' types and keeps the
candidates that could take them. It reads leniently (a literal int fits any int parameter, an argument of unknown
type fits anything), so Warp's choice is always among those kept: where one is kept, it is Warp's; where several
are, the call is refused rather than guessed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import warp as wp
from warp._src import types as warp_types

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.memory import path_parts
from warp_rewrite.passes.plan_types import Unit
from warp_rewrite.passes.refusals import Refusal

Candidate = TypeVar("Candidate")
_PYTHON_CASTS = {"int": int, "float": float, "bool": bool}


@dataclass(frozen=True)
class Literal:
    """The type of a literal, which fits any scalar parameter of its kind."""

    kind: type  # int, float or bool


@dataclass(frozen=True)
class Overload(Generic[Candidate]):
    """One definition of the helper, with its parameters' names and Warp types in order (None where not known)."""

    definition: Candidate
    parameters: Sequence[tuple[str, Any]]


def argument_type(expr: ast.expr, known: Callable[[str], Any]) -> Any:
    """What the source tells of the type of an argument: a Warp type, a ``Literal``, or None (not known). ``known``:
    the type of a name (a parameter or a local) where the front end knows it."""
    if isinstance(expr, ast.Constant) and type(expr.value) in (int, float, bool):
        return Literal(type(expr.value))
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return argument_type(expr.operand, known)
    if isinstance(expr, ast.Call) and not expr.keywords:  # a constructor: wp.int64(k), wp.vec3d(...), int(x)
        name = expr.func.attr if isinstance(expr.func, ast.Attribute) else getattr(expr.func, "id", None)
        made = dtypes.normalized(_PYTHON_CASTS.get(name or "", getattr(wp, name or "", None)))
        return made if isinstance(made, type) and warp_types.type_is_value(made) else None
    if isinstance(expr, ast.Subscript):  # an element of an array, indexed whole
        array = argument_type(expr.value, known)
        indices = len(expr.slice.elts) if isinstance(expr.slice, ast.Tuple) else 1
        whole = dtypes.is_array(array) and indices == array.ndim and not _has_slice(expr.slice)
        return array.dtype if whole else None
    parts = path_parts(expr)  # a name, or a field of one
    if parts is None:
        return None
    root, *fields = parts
    annotation = known(root)
    for field in fields:
        annotation = dtypes.field_type(annotation, field)
    return dtypes.normalized(annotation)


def _has_slice(index: ast.expr) -> bool:
    return any(isinstance(node, ast.Slice) for node in ast.walk(index))


def fits(parameter: Any, argument: Any) -> bool:
    """Could Warp pass an argument of type ``argument`` (None: unknown) to a parameter of type ``parameter`` (None:
    unknown)? Lenient: never False where Warp would take it."""
    if parameter is None or argument is None or dtypes.is_generic(parameter):
        return True
    if isinstance(argument, Literal):
        scalar = warp_types.type_scalar_type(parameter) if dtypes.is_scalar(parameter) else None
        if argument.kind is bool:
            return scalar in (wp.bool, *warp_types.int_types)
        allowed = warp_types.int_types if argument.kind is int else ()
        return scalar in (*allowed, *warp_types.float_types)
    if dtypes.is_array(parameter) or dtypes.is_array(argument):
        if not (dtypes.is_array(parameter) and dtypes.is_array(argument)):
            return False
        return parameter.ndim == argument.ndim and warp_types.type_matches_template(argument, parameter)
    if dtypes.is_generic(argument):
        return True
    try:
        return warp_types.types_equal(argument, parameter)
    except Exception:
        return True  # types Warp cannot compare (a front end's struct): not told apart here


def candidates(
    call: ast.Call, overloads: Sequence[Overload[Candidate]], known: Callable[[str], Any]
) -> list[Candidate]:
    """The overloads the call could run: those whose parameters fit its arguments, by position then keyword."""
    kept = []
    for overload in overloads:
        names = [name for name, _ in overload.parameters]
        types = dict(overload.parameters)
        if len(call.args) > len(names) or any(k.arg not in types for k in call.keywords):
            continue
        bound = list(zip(names, call.args, strict=False)) + [(k.arg, k.value) for k in call.keywords if k.arg]
        if all(fits(types[name], argument_type(arg, known)) for name, arg in bound):
            kept.append(overload.definition)
    return kept


class Ambiguous(Refusal):
    """A call whose overload the source does not tell, with the definitions it may run (``candidates``, units of
    the front end): the fence follows them all to decide whether the kernel needs a rewrite, and raises this only
    where it does (a kernel that needs none runs as plain Warp, which picks the overload itself)."""

    def __init__(self, unit: Unit, call: ast.Call, name: str, candidates: Sequence[Unit], defined: int):
        which = "none of" if not candidates else f"{len(candidates)} of"
        super().__init__(
            unit,
            call,
            f"'{name}' has {defined} definitions (overloads), and {which} them fit this call's arguments as far as "
            "the source tells their types",
            f"Give the overloads of '{name}' distinct names, or pass arguments whose types the source shows "
            "(parameters, locals assigned a typed value, wp.int64(...) and the like)",
        )
        self.candidates = list(candidates)
