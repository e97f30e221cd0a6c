"""Warp dtypes as the passes see them: Warp's own type objects, classified by Warp's own tables.

Both front ends describe a kernel's arguments with these objects (the API takes them from Warp, the command line
resolves annotations to them), so the passes have one notion of an int, a float or a printable dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import warp as wp
from warp._src import types as warp_types

INT = wp.int32  # the type of int literals, int(x), wp.tid(), and of the records of trip counts and tickets
BOOL = wp.bool
INT_TYPES = tuple(warp_types.int_types)
SHADOW = wp.uint64  # the words of a target's shadow while the record kernel runs (see the runtime's exact_add)

# Python's scalar annotations, as Warp reads them.
_PYTHON_SCALARS = {int: wp.int32, float: wp.float32, bool: wp.bool}
_PYTHON_SCALARS_BY_NAME = {t.__name__ for t in _PYTHON_SCALARS}


@dataclass(frozen=True)
class ArrayInfo:
    """What the passes know about an array argument before launch."""

    dtype: Any = None  # a Warp scalar, vector or matrix type; None: generic (known at launch)
    ndim: int | None = None


def normalized(annotation: Any) -> Any:
    """A parameter's Warp type: Python's ``int``, ``float`` and ``bool`` as Warp reads them, others as they are."""
    return _PYTHON_SCALARS.get(annotation, annotation) if isinstance(annotation, type) else annotation


def is_type_name(name: str | None) -> bool:
    """Is ``name`` that of a Python scalar or of a Warp type (``float``, ``float64``, ``vec3``), whose call only makes
    a value?"""
    return name in _PYTHON_SCALARS_BY_NAME or isinstance(getattr(wp, name or "", None), type)


def is_int(dtype: Any) -> bool:
    return dtype in warp_types.int_types


def holds_no_gradient(dtype: Any) -> bool:
    """An int or a bool, or a vector or matrix of them (``wp.types.vector(9, wp.uint64)``): no gradient flows
    through its values."""
    scalar = _scalar(dtype)
    return is_int(scalar) or scalar is BOOL


def is_scalar(dtype: Any) -> bool:
    """A concrete Warp scalar type (``wp.float32``, ``wp.int64``, ``wp.bool``)."""
    return dtype in warp_types.scalar_types or dtype is wp.bool


def is_array(annotation: Any) -> bool:
    return warp_types.is_array(annotation)


def array_info(annotation: Any) -> ArrayInfo | None:
    """An array annotation's dtype and ndim (a generic dtype as None); None for anything but an array."""
    if not is_array(annotation):
        return None
    dtype = annotation.dtype
    return ArrayInfo(None if warp_types.type_is_generic(dtype) else dtype, annotation.ndim)


def same_type(a: Any, b: Any) -> bool:
    """Do two annotations declare one type? (An array annotation is a new object wherever it is written.)"""
    if is_array(a) and is_array(b):
        return type(a) is type(b) and array_info(a) == array_info(b)
    return a is b or a == b  # the command line's struct types are equal where they read the same class


def field_type(struct: Any, name: str) -> Any:
    """The type of a struct type's field (Warp's struct types, and the command line's, keep them in ``vars``)."""
    field = getattr(struct, "vars", {}).get(name)
    return field.type if field is not None else None


def is_value_type(annotation: Any) -> bool:
    """A scalar, vector, matrix, quaternion or transform type: a parameter of it holds no memory of the caller's."""
    return annotation is not None and warp_types.type_is_value(annotation)


def is_generic(annotation: Any) -> bool:
    return annotation is Any or warp_types.type_is_generic(annotation)


def source(dtype: Any, warp_alias: str) -> str | None:
    """How generated code spells a dtype: ``wp.float32`` for one Warp exports, ``wp.types.matrix(shape=(6, 1),
    dtype=wp.float32)`` for a vector, matrix, quaternion or transform type made by Warp's type constructors (what
    Warp checks at a call is the shape and the scalar type, not the class); None for any other (a struct)."""
    name = getattr(dtype, "__name__", None)
    if name and getattr(wp, name, None) is dtype:
        return f"{warp_alias}.{name}"
    constructor = _CONSTRUCTORS.get(getattr(dtype, "_wp_generic_type_hint_", None))
    scalar = source(dtype._wp_scalar_type_, warp_alias) if constructor is not None else None
    if scalar is None:
        return None
    if constructor == "vector":
        return f"{warp_alias}.types.vector(length={dtype._length_}, dtype={scalar})"
    if constructor == "matrix":
        return f"{warp_alias}.types.matrix(shape={tuple(dtype._shape_)}, dtype={scalar})"
    return f"{warp_alias}.types.{constructor}(dtype={scalar})"


def is_vector_or_quaternion(dtype: Any) -> bool:
    """Does ``dtype`` name its components ``.x`` to ``.w`` (a vector or a quaternion)?"""
    return dtype is not None and (warp_types.type_is_vector(dtype) or warp_types.type_is_quaternion(dtype))


def is_exported(dtype: Any) -> bool:
    """Is ``dtype`` a value type Warp exports by name (``wp.float32``, ``wp.vec3d``, ``wp.transformf``)?"""
    name = getattr(dtype, "__name__", None)
    return isinstance(name, str) and getattr(wp, name, None) is dtype and warp_types.type_is_value(dtype)


def exported(dtype: Any) -> Any:
    """The type Warp exports by name that equals ``dtype`` (``wp.vec3f`` for ``wp.types.vector(3, wp.float32)``), else
    ``dtype`` itself: Warp matches value types by shape and scalar type, not class."""
    if is_exported(dtype) or not warp_types.type_is_value(dtype):
        return dtype
    return _EXPORTED_VALUE_TYPES.get(
        (getattr(dtype, "_wp_generic_type_hint_", None), _shape(dtype), _scalar(dtype)), dtype
    )


def _shape(dtype: Any) -> tuple[int, ...]:
    return tuple(getattr(dtype, "_shape_", ()))


def _scalar(dtype: Any) -> Any:
    return getattr(dtype, "_wp_scalar_type_", dtype)


def has_source(dtype: Any) -> bool:
    """Can generated code name ``dtype`` (see ``source``)? Not a generic one (None), nor a struct."""
    return source(dtype, "wp") is not None


_CONSTRUCTORS: dict[Any, str] = {
    warp_types.Vector: "vector",
    warp_types.Matrix: "matrix",
    warp_types.Quaternion: "quaternion",
    warp_types.Transformation: "transformation",
}

# Warp's exported value types by what Warp matches them on (see ``exported``).
_EXPORTED_VALUE_TYPES: dict[tuple[Any, tuple[int, ...], Any], Any] = {
    (getattr(kind, "_wp_generic_type_hint_", None), _shape(kind), _scalar(kind)): kind
    for name in dir(wp)
    if isinstance(kind := getattr(wp, name), type) and is_exported(kind) and not warp_types.type_is_generic(kind)
}
