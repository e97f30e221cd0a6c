"""Kernels that consume an atomic's return and call a builtin of each class the rewrite accepts
(``warp_rewrite.passes.builtins``), for tests/api/test_builtin_classes.py: through the API and the command line,
against finite differences of the original forward."""

import warp as wp

F = wp.float64
N = 4


@wp.kernel
def pure_value(count: wp.array[int], x: wp.array[F], out: wp.array[F]):
    i = wp.tid()
    s = wp.atomic_add(count, 0, 1)
    out[s] = wp.sin(x[i]) * wp.max(x[i], F(0.5)) + wp.float64(wp.float32(2.0))


@wp.kernel
def handle_reads(count: wp.array[int], mesh: wp.uint64, grid: wp.uint64, x: wp.array[F], out: wp.array[F]):
    i = wp.tid()
    s = wp.atomic_add(count, 0, 1)
    corner = wp.mesh_eval_position(mesh, 0, 0.2, 0.3)  # reads the mesh's points through its id
    closest = wp.mesh_query_point_no_sign(mesh, wp.vec3(0.1, 0.2, 1.0), 10.0)
    j = wp.hash_grid_point_id(grid, i)  # the grid's order: a permutation of the points
    out[s] = x[j] * x[i] * F(corner[1] + closest.u)


@wp.kernel
def out_arguments(count: wp.array[int], mesh: wp.uint64, q: wp.array[wp.quatd], x: wp.array[F], out: wp.array[F]):
    i = wp.tid()
    axis = wp.vec3d()
    angle = F(0.0)
    wp.quat_to_axis_angle(q[i], axis, angle)  # writes axis and angle
    inside = float(0.0)
    face = int(-1)
    u = float(0.0)
    v = float(0.0)
    wp.mesh_query_point(mesh, wp.vec3(0.1, 0.2, 1.0), 10.0, inside, face, u, v)  # Warp's older form
    s = wp.atomic_add(count, 0, 1)
    out[s] = x[i] * x[i] * angle * axis[2] + x[i] * F(u + v) + F(face)


@wp.kernel
def random_state_in_a_loop(count: wp.array[int], trips: wp.array[int], x: wp.array[F], out: wp.array[F]):
    """``wp.randf`` advances ``state`` in place: a local the loop carries, which the replay restores per trip."""
    i = wp.tid()
    state = wp.rand_init(1234, i)
    for _k in range(trips[0]):
        r = wp.randf(state)
        s = wp.atomic_add(count, 0, 1)
        out[s] = x[i] * x[i] * F(r)


@wp.kernel
def arrays_and_shapes(count: wp.array[int], keys: wp.array[float], x: wp.array[F], out: wp.array[F]):
    i = wp.tid()
    s = wp.atomic_add(count, 0, 1)
    below = wp.lower_bound(keys, float(i) + 0.5)  # reads keys, which the launch does not write
    out[s] = x[i] * F(below + len(keys))


@wp.kernel
def no_adjoint_output_and_devices(count: wp.array[int], x: wp.array[F], out: wp.array[F]):
    i = wp.tid()
    s = wp.atomic_add(count, 0, 1)
    wp.expect_near(x[i], x[i], F(1.0))  # prints only when it fails
    out[s] = wp.div_approx(x[i] * x[i], F(2.0)) + wp.floor(x[i] * F(3.0) + F(0.5))


@wp.kernel
def tiles(count: wp.array[int], x: wp.array[F], out: wp.array[F]):
    i = wp.tid()
    s = wp.atomic_add(count, 0, 1)
    t = wp.tile_ones(shape=2, dtype=F)
    out[s] = x[i] * x[i] * wp.tile_sum(t)[0]
