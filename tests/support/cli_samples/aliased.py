"""A module that spells Warp its own way: ``import warp as w``, a bare imported atomic, no ``typing.Any``."""

import warp as w
from warp import atomic_sub


@w.kernel
def pop_and_scale(stack: w.array(dtype=w.int32), x: w.array(dtype=w.float64), out: w.array(dtype=w.float64)):
    tid = w.tid()
    top = atomic_sub(stack, 0, 1)
    out[top - 1] = x[tid] * x[tid] * w.float64(top)
