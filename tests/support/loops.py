"""Kernels whose values cross a loop Warp does not unroll (issue 34): carried out of it, or from trip to trip, used
linearly and not, with and without a consumed atomic's return. Plain Warp gets every one of them wrong in backward;
the rewrite replays each loop from records (``passes.loop_hazards``, ``passes.plan``).

Each kernel runs over N = 4 threads; ``n`` holds each thread's trip count (0 included)."""

import warp as wp

R, C = 2, 3  # a constant range built from module-level names: range(R * C) is a loop Warp does not unroll
LONG = 20  # longer than Warp's default max_unroll (16)


@wp.kernel
def squared_sum(x: wp.array[wp.float64], n: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    """The issue's smallest form: a sum over a data-dependent count, squared after the loop, into a slot."""
    i = wp.tid()
    acc = wp.float64(0.0)
    for j in range(n[i]):
        acc += x[i] * wp.float64(j + 1)
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = acc * acc


@wp.kernel
def squared_sum_alone(x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    """The same with no atomic at all: the loop is the kernel's only hazard."""
    i = wp.tid()
    acc = wp.float64(0.0)
    for j in range(n[i]):
        acc += x[i] * wp.float64(j + 1)
    out[i] = acc * acc


@wp.kernel
def neighbour_energy(
    x: wp.array[wp.float64], starts: wp.array[wp.int32], n: wp.array[wp.int32], out: wp.array[wp.float64]
):
    """A sum over a data-dependent neighbour list (other threads' values), then a nonlinear use of it."""
    i = wp.tid()
    energy = wp.float64(0.0)
    for k in range(starts[i], starts[i] + n[i]):
        d = x[k % 4] - x[i]
        energy += d * d
    out[i] = wp.sqrt(energy + wp.float64(1.0))


@wp.kernel
def substeps(v0: wp.array[wp.float64], f: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    """A nonlinear sub-step loop (quadratic drag): every trip's value feeds the next one nonlinearly."""
    i = wp.tid()
    v = v0[i]
    dt = wp.float64(0.1)
    for _step in range(n[i]):
        v = v - wp.float64(0.5) * v * wp.abs(v) * dt + f[i] * dt
    out[i] = v * v


@wp.kernel
def halvings(x: wp.array[wp.float64], scale: wp.array[wp.float64], out: wp.array[wp.float64]):
    """A while loop counting halvings until the value drops below one, with a continue and a break; the count and
    the last step feed the result."""
    i = wp.tid()
    value = x[i] * scale[0]
    step = wp.float64(0.0)
    count = int(0)
    while value > wp.float64(1.0):
        count += 1
        if count > 50:
            break
        step = value * wp.float64(0.5)
        value = step
        if value > wp.float64(3.0):
            continue
        value = value * wp.float64(1.01)
    out[i] = wp.float64(count) * step + value * value


@wp.kernel
def long_constant_range(x: wp.array[wp.float64], out: wp.array[wp.float64]):
    """A constant range longer than max_unroll: a loop to Warp, carrying a product."""
    i = wp.tid()
    p = wp.float64(1.0)
    for k in range(LONG):
        p = p * (wp.float64(1.0) + x[(i + k) % 4] * wp.float64(0.01))
    out[i] = p * p


@wp.kernel
def argmax_of_grid(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    """An argmax index carried through range(R * C) (bounds from module-level names), then used to read: plain Warp
    sends the whole gradient to element 0."""
    i = wp.tid()
    best = wp.float64(-1.0e9)
    at = int(0)
    for k in range(R * C):
        value = x[(i + k) % 4] * wp.float64(k + 1)
        if value > best:
            best = value
            at = (i + k) % 4
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[at] * x[at] + best


@wp.func
def window_norm(x: wp.array[wp.float64], start: int, length: int) -> wp.float64:
    """A helper summing a window in a loop and returning a nonlinear function of the sum (Warp issue #1754: the
    workaround of moving the loop into a helper is wrong exactly here)."""
    total = wp.float64(0.0)
    for k in range(start, start + length):
        total += x[k % 4] * x[k % 4]
    return wp.sqrt(total)


@wp.kernel
def windows(x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    i = wp.tid()
    out[i] = window_norm(x, i, n[i]) * x[i]


@wp.kernel
def nested(x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    """Nested loops of unknown length: the inner one's result carried through the outer one."""
    i = wp.tid()
    outer = wp.float64(0.0)
    for a in range(n[i]):
        inner = wp.float64(1.0)
        for b in range(a + 1):
            inner = inner * x[(i + b) % 4] + wp.float64(0.1)
        outer += inner * inner
    out[i] = outer


@wp.kernel
def vector_sum(p: wp.array[wp.vec3d], n: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    """A vector carried through a loop of unknown length, its length used after it."""
    i = wp.tid()
    total = wp.vec3d(0.0, 0.0, 0.0)
    for k in range(n[i]):
        total += p[(i + k) % 4] * wp.float64(k + 1)
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = wp.length(total)


@wp.func
def first_above(x: wp.array[wp.float64], start: int, threshold: wp.float64) -> int:
    """A return inside ``while True`` in a helper: the first index from ``start`` whose value exceeds the threshold."""
    k = start
    while True:
        if x[k % 4] > threshold:
            return k % 4
        k += 1


@wp.kernel
def probe_while_true(x: wp.array[wp.float64], out: wp.array[wp.float64]):
    i = wp.tid()
    at = first_above(x, i, wp.float64(0.22))
    out[i] = x[at] * x[at] * x[i]


@wp.func
def best_of_window(keys: wp.array[wp.int32], n: wp.array[wp.int32], i: int) -> int:
    """A return inside ``while True`` in a helper, with ints carried from trip to trip: the index of the largest key
    in a window. Plain Warp's backward loses every gradient of a kernel that calls it (all zeros), although the
    helper returns only an int; made a break (``passes.loop_returns``), the loop is still recorded."""
    step = int(0)
    at = i
    best = int(-1)
    while True:
        step += 1
        if keys[(i + step) % 4] > best:
            best = keys[(i + step) % 4]
            at = (i + step) % 4
        if step >= n[i] + 1:
            return at


@wp.kernel
def argmax_while_true(
    x: wp.array[wp.float64], keys: wp.array[wp.int32], n: wp.array[wp.int32], out: wp.array[wp.float64]
):
    i = wp.tid()
    at = best_of_window(keys, n, i)
    out[i] = x[at] * x[at] * x[i]


@wp.kernel
def gathered_sum(count: wp.array[wp.int32], x: wp.array[wp.float64], out: wp.array[wp.float64]):
    """A float carried through a constant range Warp unrolls, around a consumed atomic whose slot picks what is
    summed."""
    i = wp.tid()
    total = wp.float64(0.0)
    for _step in range(4):
        total = total + x[wp.atomic_add(count, 0, 1) % 4]
    out[i] = total * total


@wp.kernel
def component_sums(
    count: wp.array[wp.int32], x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]
):
    """A vector carried through a loop of unknown length one component at a time (a store into a component reads
    the rest of the vector), around a consumed atomic."""
    i = wp.tid()
    acc = wp.vec2d(0.0, 0.0)
    for _step in range(n[i]):
        acc[0] = acc[0] + x[wp.atomic_add(count, 0, 1) % 4]
        acc[1] = acc[1] * wp.float64(0.5) + acc[0] * acc[0]
    out[i] = acc[0] * acc[1]


@wp.kernel
def named_components(x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    """A vector carried through a loop one named component at a time (``acc.x = ...``)."""
    i = wp.tid()
    acc = wp.vec2d(0.5, 0.25)
    for _step in range(n[i]):
        acc.x = acc.x * acc.y + x[i]
        acc.y = acc.y * acc.x
    out[i] = acc.x + acc.y


@wp.kernel
def named_bound(x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    """A range over a module-level name, which Warp unrolls (it looks the constant up), inside a loop it does not:
    the rewrite counts it as a loop too, and replays it from records, right either way."""
    i = wp.tid()
    acc = wp.float64(1.0)
    for _outer in range(n[i]):
        for k in range(R):
            acc = acc * x[(i + k) % 4] + wp.float64(0.05)
    out[i] = acc * acc


@wp.kernel
def variable_after(counts: wp.array[wp.int32], x: wp.array[wp.float64], out: wp.array[wp.float64]):
    """A for loop's variable read after the loop (Python's last value), as the next loop's bound: Warp's backward
    leaves the first loop out, so it knows no such value (plain Warp's gradients are all zero)."""
    tid = wp.tid()
    i = int(0)
    for i in range(counts[tid]):  # noqa: B007 (read after the loop)
        pass
    s = wp.float64(1.0)
    for j in range(i + 1):
        s = s * x[j] + wp.float64(1.0)
    out[tid] = s


@wp.kernel
def strided_and_shrinking(x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    """Ranges whose bounds the rewrite reads again where they stand (a stride over the array's shape, as written)
    and one over a local the loop itself changes (read once, before the loop, as Warp does)."""
    i = wp.tid()
    acc = wp.float64(1.0)
    for k in range(1, x.shape[0], 2):
        acc = acc * x[k] + wp.float64(0.1)
    m = n[i]
    for _step in range(m):
        m = m - 1
        acc = acc * x[m % 4] + wp.float64(0.05)
    out[i] = acc * acc


@wp.kernel
def update_then_break(x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    """A carried float updated right before a ``break``: no later trip sees the update, but Warp's backward replays
    each trip with the value the whole loop left it (a work-queue pop, a search that stops at its hit)."""
    i = wp.tid()
    acc = wp.float64(1.0)
    k = int(0)
    while k < 10:
        k += 1
        if k >= n[i]:
            acc = acc * x[i] + wp.float64(0.1)
            break
    out[i] = acc * acc


@wp.kernel
def update_then_break_into_slot(
    x: wp.array[wp.float64], n: wp.array[wp.int32], count: wp.array[wp.int32], out: wp.array[wp.float64]
):
    """The same in a ``for`` over a data-dependent range, the result stored at a slot: the update's only assignment
    in the loop is the one before the break (n = 2 makes no update)."""
    i = wp.tid()
    acc = x[i]
    for j in range(n[i]):
        if j * j >= n[i]:
            acc = acc * x[i] + wp.float64(j)
            break
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = acc * acc


# A builtin's result a loop Warp does not unroll assigns: Warp's forward overwrites the local's variable in place, so
# the builtin's adjoint (which reads what it returned) reads the loop's value (found by an outside trial: a ray's
# direction normalised before a bounce loop). Each is right only with the replay's copy before the loop.


@wp.kernel
def root_then_doubled(x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    """``wp.sqrt``'s result doubled in each trip: the gradient comes out halved per trip without the copy."""
    i = wp.tid()
    a = wp.sqrt(x[i] + wp.float64(0.5))
    for _j in range(n[i]):
        a = a * wp.float64(2.0)
    out[i] = a


@wp.kernel
def quotient_then_summed(x: wp.array[wp.float64], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    """A division's result that the loop only adds to, which Warp's backward gets right but for the division's own
    adjoint: the overwritten result is the loop's only hazard."""
    i = wp.tid()
    a = wp.float64(1.0) / (x[i] + wp.float64(0.5))
    for j in range(n[i]):
        a = a + wp.float64(j)
    out[i] = a


@wp.kernel
def exp_then_long_drag(x: wp.array[wp.float64], out: wp.array[wp.float64]):
    """``wp.exp``'s result through a constant range longer than ``max_unroll``, updated nonlinearly."""
    i = wp.tid()
    y = wp.exp(x[i])
    for _j in range(LONG):
        y = y - wp.float64(0.01) * y * y
    out[i] = y * y


@wp.kernel
def direction_bounces(p: wp.array[wp.vec3d], n: wp.array[wp.int32], out: wp.array[wp.float64]):
    """A direction ``wp.normalize`` made, turned at each bounce of a ``while`` loop, its components weighed after."""
    i = wp.tid()
    d = wp.normalize(p[i])
    k = int(0)
    while k < n[i]:
        d = wp.vec3d(d[1], -d[0], d[2]) * wp.float64(0.9) + p[i] * wp.float64(0.1)
        k += 1
    out[i] = d[0] + wp.float64(2.0) * d[1] + wp.float64(3.0) * d[2]
