"""Kernels that read an array their launch updates (an atomic, ``+=``), or stores into where the value read is used
other than linearly, with no other hazard: no atomic's return used, no loop Warp replays wrong
(``passes.fence.Fence.reads_written``, WR009). Warp's backward replays each such read against what the whole launch
left there (tests/api/test_updated_reads.py).

- ``crowding``: a per-cell count, then the count so far decides a branch (an int read: no gradient through it, the
  rewrite records it and the gradients are right);
- ``shade_by_coverage``: a float coverage summed per pixel, read back to scale this thread's own value (the
  coverage's terms need no gradient here: ``weights`` does not require grad);
- ``histogram_in_helper``: a count updated in a helper (``+=``), read in the kernel to scale this thread's value;
- ``reads_what_it_stored``, ``sine_squared``: the thread's own element stored, then read into a product (found by an
  outside trial; plain Warp's x.grad is x*x + x where 2x is right): the read becomes the stored value
  (``passes.own_writes``), which is the whole rewrite;
- ``read_back``: the sum read back and squared, where its terms require grad: no gradient through memory the launch
  wrote is supported, so the launch is refused and, since no atomic's return is used, runs as plain Warp with a
  ``RewriteWarning``.
"""

import warp as wp


@wp.kernel
def crowding(
    cells: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    counts: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    c = cells[tid]
    wp.atomic_add(counts, c, 1)
    if counts[c] > 1:  # another thread reached the cell first (on the CPU, the threads run in order)
        out[tid] = x[tid] * x[tid]
    else:
        out[tid] = wp.sin(x[tid])


@wp.kernel
def shade_by_coverage(
    pixels: wp.array(dtype=wp.int32),
    weights: wp.array(dtype=wp.float64),
    colour: wp.array(dtype=wp.float64),
    coverage: wp.array(dtype=wp.float64),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    p = pixels[tid]
    wp.atomic_add(coverage, p, weights[tid])
    out[tid] = colour[tid] * colour[tid] / coverage[p]


@wp.func
def count_into(histogram: wp.array(dtype=wp.int32), b: int):
    histogram[b] += 1


@wp.kernel
def histogram_in_helper(
    bins: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    histogram: wp.array(dtype=wp.int32),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    b = bins[tid]
    count_into(histogram, b)
    out[tid] = wp.exp(x[tid]) * wp.float64(histogram[b])


@wp.kernel
def read_back(
    pixels: wp.array(dtype=wp.int32),
    c: wp.array(dtype=wp.float64),
    image: wp.array(dtype=wp.float64),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    p = pixels[tid]
    wp.atomic_add(image, p, c[tid])
    v = image[p]
    out[tid] = v * v


@wp.kernel
def reads_what_it_stored(x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    out[tid] = x[tid]
    out[tid] = out[tid] * x[tid]


@wp.kernel
def sine_squared(x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    out[tid] = wp.sin(x[tid])
    out[tid] = out[tid] * out[tid] + x[tid]


@wp.kernel
def through_a_copied_index(x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    """``sine_squared`` through a copy of the thread's index (an outside trial's): the same element, which only a
    launch with ``out`` not requiring grad can rewrite (``own_writes`` forwards stores at the thread's index by its
    own name)."""
    tid = wp.tid()
    j = tid
    out[j] = wp.sin(x[tid])
    out[tid] = out[j] * out[j]


# --- no such hazard -------------------------------------------------------------------------------------------


@wp.kernel
def adds_to_what_it_stored(x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    """The value read only added to: Warp's adjoint of the read needs no value."""
    tid = wp.tid()
    out[tid] = x[tid]
    out[tid] = out[tid] + x[tid] * wp.float64(2.0)


@wp.kernel
def updates_another(
    cells: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    sums: wp.array(dtype=wp.float64),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    wp.atomic_add(sums, cells[tid], x[tid])
    out[tid] = x[tid] * x[tid]


@wp.kernel(enable_backward=False)
def no_backward(
    cells: wp.array(dtype=wp.int32),
    x: wp.array(dtype=wp.float64),
    sums: wp.array(dtype=wp.float64),
    out: wp.array(dtype=wp.float64),
):
    tid = wp.tid()
    wp.atomic_add(sums, cells[tid], x[tid])
    out[tid] = sums[cells[tid]]
