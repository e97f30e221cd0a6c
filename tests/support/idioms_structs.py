"""A kernel taking two @wp.struct types of one name from two modules, each with helpers of one name too (as Newton
has two ContactWriterData): the rewrite tells them apart by what they are, not by their names."""

import warp as wp

from tests.support import idioms_buffers_in, idioms_buffers_out
from tests.support.idioms_buffers_out import Buffers


@wp.kernel
def scatter_between_buffers(source: idioms_buffers_in.Buffers, target: Buffers):
    tid = wp.tid()
    if source.data[tid] > wp.float64(0.0):
        slot = idioms_buffers_in.take(source)  # each helper takes its own module's Buffers
        written = idioms_buffers_out.take(target)
        target.values[slot] = target.scale * source.data[tid] + wp.float64(written - written)
