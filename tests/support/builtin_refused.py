"""Kernels that consume an atomic's return and call a builtin the rewrite cannot replay right, or write a loop's own
variable or a float it carries through a builtin (tests/passes/test_fence.py): each is refused, with the same message
through the API and the command line (a query's index a loop's step writes is replayed: test_spatial_queries.py)."""

import warp as wp

F = wp.float64


@wp.kernel
def local_array(count: wp.array[int], x: wp.array[F], out: wp.array[F]):
    i = wp.tid()
    kept = wp.zeros(shape=4, dtype=F)
    kept[0] = x[i] * F(2.0)
    s = wp.atomic_add(count, 0, 1)
    out[s] = kept[0] * kept[0]


@wp.kernel
def volume_store(count: wp.array[int], volume: wp.uint64, x: wp.array[F], out: wp.array[F]):
    i = wp.tid()
    s = wp.atomic_add(count, 0, 1)
    wp.volume_store_f(volume, i, 0, 0, float(x[i]))
    out[s] = x[i]


@wp.kernel
def tile_view(count: wp.array[int], x: wp.array[F], out: wp.array[F]):
    i = wp.tid()
    t = wp.tile_zeros(shape=(2, 2), dtype=F, storage="shared")
    row = wp.tile_view(t, offset=(0,))
    s = wp.atomic_add(count, 0, 1)
    out[s] = x[i] * wp.tile_sum(row)[0]


@wp.kernel
def raw_array(count: wp.array[int], address: wp.uint64, x: wp.array[F], out: wp.array[F]):
    i = wp.tid()
    raw = wp.array(ptr=address, shape=(4,), dtype=F)
    s = wp.atomic_add(count, 0, 1)
    out[s] = x[i] * raw[i]


@wp.kernel
def reads_written_array(count: wp.array[int], x: wp.array[float], out: wp.array[float]):
    i = wp.tid()
    s = wp.atomic_add(count, 0, 1)
    out[s] = x[i] * float(wp.lower_bound(out, 0.5))


@wp.kernel
def address_taken(count: wp.array[int], x: wp.array[F], out: wp.array[F]):
    i = wp.tid()
    s = wp.atomic_add(count, 0, 1)
    pointer = wp.address_of(out[i])
    out[s] = x[i] * F(pointer % wp.uint64(2))


@wp.kernel
def loop_variable_written(count: wp.array[int], grid: wp.uint64, out: wp.array[F]):
    query = wp.hash_grid_query(grid, wp.vec3(0.0), 1.0)
    for j in range(3):
        s = wp.atomic_add(count, 0, 1)
        wp.hash_grid_query_next(query, j)  # writes the loop variable
        out[s] = F(j)


@wp.kernel
def out_argument_carried(count: wp.array[int], trips: wp.array[int], q: wp.array[wp.quatd], out: wp.array[F]):
    """``angle`` is written by ``wp.quat_to_axis_angle`` (an out-argument) and read by the next trip: a float the
    loop carries, which no assignment statement changes."""
    i = wp.tid()
    axis = wp.vec3d()
    angle = F(0.5)
    for k in range(trips[0]):
        s = wp.atomic_add(count, 0, 1)
        out[s] = angle * angle * F(i + 1)
        wp.quat_to_axis_angle(q[k], axis, angle)
