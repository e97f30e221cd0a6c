"""Helpers imported by the coverage tests' kernels: consumed atomics behind a module boundary."""

import warp as wp

GROWTH = wp.constant(wp.float64(1.5))


@wp.func
def claim_slot(count: wp.array(dtype=wp.int32)) -> wp.int32:
    return wp.atomic_add(count, 0, 1)


@wp.func
def append_scaled(count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64), value: wp.float64):
    """Two calls deep: the slot comes from claim_slot."""
    slot = claim_slot(count)
    out[slot] = value * GROWTH


@wp.struct
class Counter:
    """A struct from another module whose field is an atomic target."""

    count: wp.array(dtype=wp.int32)
    scale: wp.float64
