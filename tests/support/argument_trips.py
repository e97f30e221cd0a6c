"""Kernels with loops of unknown length whose range the launch's arguments give (``passes/launch_trips.py``): a
parameter, an array's ``shape``, a local assigned once from those, ``range(a, b)``, a literal step, nested; each
carries a value out of its loop, which Warp's backward replays wrong. Also one that breaks, whose trips a dry run
still counts. ``tests/passes/test_launch_trips.py`` checks them end to end, through the API and the command line."""

import warp as wp


@wp.kernel
def powers_to_parameter(x: wp.array[wp.float64], n: int, out: wp.array[wp.float64]):
    tid = wp.tid()
    s = x[tid]
    for _i in range(n):
        s = s * x[tid] + wp.float64(0.25)
    out[tid] = s * s


@wp.kernel
def horner_over_shape(x: wp.array[wp.float64], c: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    s = wp.float64(0.0)
    for i in range(c.shape[0]):
        s = s * x[tid] + c[i]
    out[tid] = s * s


@wp.kernel
def from_one_to_local(x: wp.array[wp.float64], c: wp.array[wp.float64], out: wp.array[wp.float64]):
    tid = wp.tid()
    m = c.shape[0]
    s = c[0]
    for i in range(1, m):
        s = s * x[tid] + c[i]
    out[tid] = s * s


@wp.kernel
def every_other(x: wp.array[wp.float64], c: wp.array[wp.float64], n: int, out: wp.array[wp.float64]):
    tid = wp.tid()
    s = wp.float64(1.0)
    for i in range(0, n, 2):
        s = s * x[tid] + c[i]
    out[tid] = s * s


@wp.kernel
def nested_steps(x: wp.array[wp.float64], c: wp.array[wp.float64], steps: int, out: wp.array[wp.float64]):
    tid = wp.tid()
    s = x[tid]
    for _k in range(steps):
        for i in range(c.shape[0]):
            s = wp.sin(s) * c[i] + x[tid]
    out[tid] = s * s


@wp.kernel
def until_large(x: wp.array[wp.float64], n: int, out: wp.array[wp.float64]):
    tid = wp.tid()
    s = x[tid]
    for _i in range(n):
        s = s * wp.float64(1.5) + x[tid]
        if s > wp.float64(2.0):
            break
    out[tid] = s * s
