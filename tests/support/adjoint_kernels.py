"""Kernels launched with ``adjoint=True`` (tests/runtime/test_adjoint_launches.py), through ``wp_rewrite`` and through
the command line's copy of this file: one file, so that each compiles once."""

import warp as wp


@wp.kernel
def scaled_product(
    a: wp.array(dtype=wp.float64),
    b: wp.array(dtype=wp.float64),
    s: wp.float64,
    count: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    """Compaction of a * b * s: two float inputs, which a launch may bind to one array, and a scalar."""
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = a[tid] * b[tid] * s + wp.float64(slot) * a[tid]


@wp.kernel
def running_total(
    x: wp.array(dtype=wp.float64),
    weight: wp.array(dtype=wp.float64),
    total: wp.array(dtype=wp.float64),
    out: wp.array(dtype=wp.float64),
):
    """A float return, with an exact gradient through the target's initial value and the earlier operands."""
    tid = wp.tid()
    before = wp.atomic_add(total, 0, x[tid] * weight[tid])
    out[tid] = before * x[tid]


@wp.struct
class Particles:
    x: wp.array(dtype=wp.float64)
    count: wp.array(dtype=wp.int32)


@wp.kernel
def gather(particles: Particles, out: wp.array(dtype=wp.float64)):
    """Compaction through the arrays of a struct argument, whose adjoint is a struct of adjoints."""
    tid = wp.tid()
    slot = wp.atomic_add(particles.count, 0, 1)
    out[slot] = particles.x[tid] * particles.x[tid] * wp.float64(slot + 1)
