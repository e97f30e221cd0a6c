"""A struct and a helper of the same names as those in idioms_buffers_out.py (Newton has two ContactWriterData)."""

import warp as wp


@wp.struct
class Buffers:
    count: wp.array(dtype=wp.int32)
    data: wp.array(dtype=wp.float64)


@wp.func
def take(buffers: Buffers) -> int:
    return wp.atomic_add(buffers.count, 0, 1)
