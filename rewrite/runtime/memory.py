# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The memory of a launch as the runtime sees it: which dtypes carry float gradients (and where each float component
lies in an element), and the arrays it allocates for the generated kernels to write before they read them."""

from typing import Any

import warp as wp


def is_float_dtype(dtype: Any) -> bool:
    """Does an array of ``dtype`` carry float gradients? True for float scalars, for vectors, matrices, quaternions
    and transforms of them, and for structs with such a field (an array of structs has a gradient of structs, which
    component updates such as ``bodies[b].mass += m`` read in backward)."""
    return bool(float_components(dtype))


def requires_float_grad(value: Any) -> bool:
    """Is ``value`` an array of float gradients (see ``is_float_dtype``) whose gradient is asked for?"""
    return isinstance(value, wp.array) and value.requires_grad and is_float_dtype(value.dtype)


def float_components(dtype: Any) -> list[tuple[int, type]]:
    """The byte offset and scalar type of each float component of an element of ``dtype``: every component of a
    float scalar, vector or matrix, and of a struct, those of its float fields (nested structs too; its ints and
    arrays carry no gradient)."""
    if isinstance(dtype, wp._src.codegen.Struct):
        fields = [(name, dtype.vars[name].type) for name, _ in dtype.ctype._fields_]
        return [
            (getattr(dtype.ctype, name).offset + offset, scalar)
            for name, field in fields
            if not wp._src.types.is_array(field)
            for offset, scalar in float_components(field)
        ]
    scalar = wp._src.types.type_scalar_type(dtype)
    if scalar not in wp._src.types.float_types:
        return []
    step = wp._src.types.type_size_in_bytes(scalar)
    return [(c * step, scalar) for c in range(wp._src.types.type_size(dtype))]


def written_first(shape: Any, dtype: Any, device: Any, requires_grad: bool = False) -> wp.array:
    """An array whose elements the kernels write before they read them: left as the allocator gives it (a fill would
    cost every launch time), but for float elements under ``wp.config.verify_fp``, zeros. Warp then checks the value
    a store overwrites (``index()`` in ``native/array.h`` verifies every element it hands out, stores included), so
    memory no one wrote yet would be reported as a NaN of the user's."""
    if wp.config.verify_fp and is_float_dtype(dtype):
        return wp.zeros(shape, dtype=dtype, device=device, requires_grad=requires_grad)
    return wp.empty(shape, dtype=dtype, device=device, requires_grad=requires_grad)
