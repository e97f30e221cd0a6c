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
    """``wp.float32``: how generated code spells a dtype Warp exports; None for any other (a user's own vector)."""
    name = getattr(dtype, "__name__", None)
    return f"{warp_alias}.{name}" if name and getattr(wp, name, None) is dtype else None
