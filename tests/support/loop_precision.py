"""Kernels with loops Warp does not unroll that no gradient depends on (``passes.loop_hazards``: they are no hazard),
and kernels beside them whose loops are one: the same file for ``--check``, the command line and the API
(tests/passes/test_loop_hazards.py)."""

import warp as wp


@wp.func
def probe(keys: wp.array(dtype=wp.int32), key: wp.int32) -> int:
    """A hash probe returning its slot: an int return, int memory."""
    slot = key % keys.shape[0]
    for _ in range(keys.shape[0]):
        if keys[slot] == key:
            return slot
        slot = (slot + 1) % keys.shape[0]
    return -1


@wp.func
def window_sum(x: wp.array(dtype=float), n: int) -> float:
    total = float(0.0)
    for k in range(n):
        total += x[k] * x[k]
    return total * total


@wp.func
def smoothed(x: wp.array(dtype=float), n: int) -> float:
    """Its loop is replayed wrong, but Warp's backward calls the gradient below instead."""
    total = float(0.0)
    for k in range(n):
        total = total * 0.5 + x[k]
    return total


@wp.func_grad(smoothed)
def smoothed_grad(x: wp.array(dtype=float), n: int, adj_ret: float):
    weight = float(1.0)
    for k in range(n - 1, -1, -1):
        wp.adjoint[x][k] += weight * adj_ret
        weight = weight * 0.5


@wp.kernel
def count_above(x: wp.array(dtype=float), n: wp.array(dtype=int), count: wp.array(dtype=wp.int32)):
    """A count into an int array: no gradient."""
    i = wp.tid()
    found = int(0)
    for j in range(n[i]):
        if x[j] > 0.5:
            found += 1
    count[i] = found


@wp.kernel
def lookup(keys: wp.array(dtype=wp.int32), x: wp.array(dtype=float), out: wp.array(dtype=float)):
    """A probe loop in a helper returning an int: the slot is right in backward (the helper runs whole)."""
    i = wp.tid()
    slot = probe(keys, i)
    out[i] = x[slot] * x[slot]


@wp.kernel
def sum_of_squares(x: wp.array(dtype=float), n: wp.array(dtype=int), scale: float, out: wp.array(dtype=float)):
    """A sum only added to, used linearly."""
    i = wp.tid()
    acc = float(0.0)
    for j in range(n[i]):
        acc += x[j] * x[j]
    out[i] = scale * acc + x[i]


@wp.kernel
def smoothed_sums(x: wp.array(dtype=float), n: wp.array(dtype=int), out: wp.array(dtype=float)):
    """A helper with a hand-written gradient."""
    i = wp.tid()
    out[i] = smoothed(x, n[i]) * x[i]


@wp.kernel
def squared_window(x: wp.array(dtype=float), n: wp.array(dtype=int), out: wp.array(dtype=float)):
    """A hazard: the helper squares its sum before it returns it (Warp issue 1754)."""
    i = wp.tid()
    out[i] = window_sum(x, n[i])


@wp.kernel
def scaled_by_count(x: wp.array(dtype=float), n: wp.array(dtype=int), out: wp.array(dtype=float)):
    """A hazard: a count scales a float."""
    i = wp.tid()
    found = int(0)
    for j in range(n[i]):
        if x[j] > 0.5:
            found += 1
    out[i] = x[i] * float(found)


NO_HAZARD = (count_above, lookup, sum_of_squares, smoothed_sums)
HAZARD = (squared_window, scaled_by_count)
