"""A struct and a helper of the same names as those in idioms_buffers_in.py, with other fields."""

import warp as wp


@wp.struct
class Buffers:
    scale: wp.float64
    values: wp.array(dtype=wp.float64)
    written: wp.array(dtype=wp.int32)


@wp.func
def take(buffers: Buffers) -> int:
    return wp.atomic_add(buffers.written, 0, 1)
