"""Kernels that walk spatial queries as contact generation does (issue 34, item 2): hash-grid neighbour lists in both
spellings, a BVH broad phase over boxes and rays, mesh queries by point, ray and box; each takes a contact slot from a
counter, in the loop's body or in a writer helper with an early return, and carries a float through the loop.

The queries take float32 points (Warp's query builtins do); what carries a gradient is computed in float64 from the
kernel's own arrays, indexed by what the query found, so that finite differences of the original forward are exact
to float64. Every structure is rebuilt from the current positions before each step
(``tests/api/test_spatial_queries.py``)."""

import warp as wp

CAPACITY = 64


@wp.func
def write_contact(count: wp.array[wp.int32], depths: wp.array[wp.float64], depth: wp.float64) -> wp.int32:
    """A writer helper as contact generation has them: takes a slot, returns early when the buffer is full."""
    slot = wp.atomic_add(count, 0, 1)
    if slot >= CAPACITY:
        return -1
    depths[slot] = depth * depth
    return slot


@wp.kernel
def grid_neighbours(
    grid: wp.uint64,
    points: wp.array[wp.vec3],
    x: wp.array[wp.vec3d],
    radius: wp.float64,
    count: wp.array[wp.int32],
    depths: wp.array[wp.float64],
    energy: wp.array[wp.float64],
):
    """``while wp.hash_grid_query_next(query, j)``: a slot per close pair in the loop's body, an energy carried."""
    i = wp.tid()
    query = wp.hash_grid_query(grid, points[i], wp.float32(radius))
    j = int(0)
    e = wp.float64(0.0)
    while wp.hash_grid_query_next(query, j):
        if j != i:
            d = wp.length(x[i] - x[j])
            if d < radius:
                overlap = radius - d
                e += overlap * overlap
                slot = wp.atomic_add(count, 0, 1)
                depths[slot] = overlap * d
    energy[i] = e * e


@wp.kernel
def grid_neighbours_for(
    grid: wp.uint64,
    points: wp.array[wp.vec3],
    x: wp.array[wp.vec3d],
    radius: wp.float64,
    count: wp.array[wp.int32],
    depths: wp.array[wp.float64],
    energy: wp.array[wp.float64],
):
    """``for j in wp.hash_grid_query(...)``: the contact written by a helper with an early return."""
    i = wp.tid()
    e = wp.float64(0.0)
    for j in wp.hash_grid_query(grid, points[i], wp.float32(radius)):
        if j != i:
            d = wp.length(x[i] - x[j])
            if d < radius:
                e += (radius - d) * d
                write_contact(count, depths, radius - d)
    energy[i] = wp.sqrt(e + wp.float64(1.0))


@wp.kernel
def box_pairs(
    bvh: wp.uint64,
    lowers: wp.array[wp.vec3],
    uppers: wp.array[wp.vec3],
    x: wp.array[wp.vec3d],
    count: wp.array[wp.int32],
    depths: wp.array[wp.float64],
    energy: wp.array[wp.float64],
):
    """A BVH broad phase: each box's overlapping boxes, a slot per pair, an energy carried."""
    i = wp.tid()
    query = wp.bvh_query_aabb(bvh, lowers[i], uppers[i])
    k = int(0)
    e = wp.float64(0.0)
    while wp.bvh_query_next(query, k):
        if k > i:
            d = x[i] - x[k]
            e += wp.dot(d, d)
            slot = wp.atomic_add(count, 0, 1)
            depths[slot] = wp.length(d)
    energy[i] = e * wp.float64(0.5) + e * e


@wp.kernel
def ray_hits(
    bvh: wp.uint64,
    starts: wp.array[wp.vec3],
    x: wp.array[wp.vec3d],
    direction: wp.vec3,
    count: wp.array[wp.int32],
    depths: wp.array[wp.float64],
    energy: wp.array[wp.float64],
):
    """A ray through a BVH: the boxes it passes, the nearest one's distance carried."""
    i = wp.tid()
    query = wp.bvh_query_ray(bvh, starts[i], direction)
    k = int(0)
    nearest = wp.float64(1.0e6)
    while wp.bvh_query_next(query, k):
        d = wp.length(x[k] - x[i])
        if k != i and d < nearest:
            nearest = d
    if nearest < wp.float64(1.0e5):
        slot = write_contact(count, depths, nearest)
        if slot >= 0:
            energy[i] = nearest * nearest


@wp.kernel
def mesh_boxes(
    mesh: wp.uint64,
    lowers: wp.array[wp.vec3],
    uppers: wp.array[wp.vec3],
    x: wp.array[wp.vec3d],
    centers: wp.array[wp.vec3d],
    count: wp.array[wp.int32],
    depths: wp.array[wp.float64],
    energy: wp.array[wp.float64],
):
    """``mesh_query_aabb`` and ``mesh_query_aabb_next``: the faces near a particle, a slot per face."""
    i = wp.tid()
    query = wp.mesh_query_aabb(mesh, lowers[i], uppers[i])
    face = int(0)
    e = wp.float64(0.0)
    while wp.mesh_query_aabb_next(query, face):
        d = wp.length(x[i] - centers[face])
        e += d * d
        slot = wp.atomic_add(count, 0, 1)
        depths[slot] = d
    energy[i] = e * e


@wp.kernel
def mesh_points(
    mesh: wp.uint64,
    points: wp.array[wp.vec3],
    x: wp.array[wp.vec3d],
    centers: wp.array[wp.vec3d],
    normals: wp.array[wp.vec3d],
    count: wp.array[wp.int32],
    depths: wp.array[wp.float64],
    energy: wp.array[wp.float64],
):
    """``mesh_query_point``: the closest face, a contact slot where the particle is within reach of its plane."""
    i = wp.tid()
    closest = wp.mesh_query_point(mesh, points[i], wp.float32(10.0))
    if closest.result:
        height = wp.dot(x[i] - centers[closest.face], normals[closest.face])
        slot = write_contact(count, depths, height)
        if slot >= 0:
            energy[i] = height * height * height


@wp.kernel
def mesh_rays(
    mesh: wp.uint64,
    points: wp.array[wp.vec3],
    x: wp.array[wp.vec3d],
    centers: wp.array[wp.vec3d],
    normals: wp.array[wp.vec3d],
    count: wp.array[wp.int32],
    depths: wp.array[wp.float64],
    energy: wp.array[wp.float64],
):
    """``mesh_query_ray`` straight down: the face hit, and the distance to its plane along the ray."""
    i = wp.tid()
    hit = wp.mesh_query_ray(mesh, points[i], wp.vec3(0.0, 0.0, -1.0), wp.float32(100.0))
    if hit.result:
        n = normals[hit.face]
        t = wp.dot(x[i] - centers[hit.face], n) / n[2]
        slot = wp.atomic_add(count, 0, 1)
        depths[slot] = t
        energy[i] = t * t
