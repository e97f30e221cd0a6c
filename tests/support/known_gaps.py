"""Kernels whose gradients are still wrong through the rewrite, with no error or warning: found by an outside trial
(2026-12-07), kept here so that the suite says so (``tests/api/test_known_gaps.py``, strict expected failures: one
fixed fails there until it moves to the tests of its fix). docs/user-guide.md lists them under "Known gaps".

- Several threads store into one element (the last store is what the forward leaves): Warp's backward hands the
  element's gradient to the first store it replays, not the last. Plain Warp is as wrong (``last_writer``), but for a
  z-buffer read back only compared, where it happens to replay only the winner's store and the rewrite, replaying
  each thread's comparison as the forward saw it, replays every store (``depth_read_back``).
- A read of another thread's element the launch stores into, with no atomic in the kernel (``neighbour_read``; in
  place too, ``x[i] += 0.5 * x[i - 1] ** 2``): the rule takes a store at another index, as written, for one into
  another element."""

import warp as wp


@wp.kernel
def depth_read_back(
    depth: wp.array[wp.float64], pixel: wp.array[wp.int32], zbuffer: wp.array[wp.float64], image: wp.array[wp.float64]
):
    t = wp.tid()
    p = pixel[t]
    d = depth[t]
    wp.atomic_min(zbuffer, p, d)
    if zbuffer[p] == d:
        image[p] = wp.float64(2.0) - d


@wp.kernel
def last_writer(x: wp.array[wp.float64], out: wp.array[wp.float64]):
    i = wp.tid()
    out[0] = x[i] * x[i]


@wp.kernel
def neighbour_read(x: wp.array[wp.float64], y: wp.array[wp.float64], z: wp.array[wp.float64]):
    i = wp.tid()
    y[i] = x[i] * x[i]
    if i > 0:
        z[i] = y[i - 1] * x[i]
