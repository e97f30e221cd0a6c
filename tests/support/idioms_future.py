"""Kernels of a module with string annotations (``from __future__ import annotations``, as Newton's modules are)."""

from __future__ import annotations

from typing import Any

import warp as wp


@wp.func
def unpack_id(packed: wp.uint64) -> int:
    return int(packed & wp.uint64(0xFF))


@wp.kernel
def export_unpacked(
    packed: wp.array(dtype=wp.uint64),
    count: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    out: wp.array(dtype=Any),  # generic: Warp cannot tell the locals' types before a launch
    last: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    item = int(0)
    for k in range(2):
        item = unpack_id(packed[2 * tid + k])  # an int, by the helper's string annotation alone
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * wp.float64(item)
    last[tid] = x[tid] * wp.float64(item)  # read after the loop
