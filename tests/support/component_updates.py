"""Kernels that update one field or one component of an element of an array the launch writes, beside a consumed
atomic: Warp lowers ``+=`` and ``-=`` on such a slot to an atomic on the slot, so the element is never read."""

import warp as wp


@wp.struct
class Body:
    mass: wp.float64
    com: wp.vec3d


@wp.kernel
def add_mass(x: wp.array[wp.float64], count: wp.array[wp.int32], bodies: wp.array[Body], out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    bodies[tid % 2].mass += x[tid] * x[tid]
    bodies[tid % 2].com[1] -= wp.float64(3.0) * x[tid]
    out[slot] = x[tid] * wp.float64(2.0)


@wp.kernel
def tally_components(
    x: wp.array[wp.float64],
    count: wp.array[wp.int32],
    tally: wp.array[wp.vec3d],
    stats: wp.array[wp.mat22d],
    out: wp.array[wp.float64],
):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    tally[tid % 2][1] += x[tid]
    tally[tid % 2][2] -= wp.float64(1.0)
    stats[tid % 3][0, 1] += x[tid] * x[tid]
    out[slot] = x[tid] * wp.float64(3.0) + wp.float64(slot)


@wp.func
def deposit(bodies: wp.array[Body], tally: wp.array[wp.vec3d], b: int, amount: wp.float64):
    """A helper doing the updates on arrays handed to it, with a local vector updated by component too."""
    local = wp.vec3d(amount, amount, amount)
    local[0] += amount
    bodies[b].mass += local[0]
    bodies[b].com[2] += amount * amount
    tally[b][0] += local[1]


@wp.kernel
def deposit_through_helper(
    x: wp.array[wp.float64],
    count: wp.array[wp.int32],
    bodies: wp.array[Body],
    tally: wp.array[wp.vec3d],
    out: wp.array[wp.float64],
):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    deposit(bodies, tally, tid % 2, x[tid])
    out[slot] = wp.sin(x[tid])


@wp.kernel
def masses_of(bodies: wp.array[Body], masses: wp.array[wp.float64]):
    """What the loss sees of an array of structs: each body's mass plus its centre of mass's components."""
    b = wp.tid()
    masses[b] = bodies[b].mass + bodies[b].com[0] + wp.float64(2.0) * bodies[b].com[1] + bodies[b].com[2]


@wp.func
def tally_into(total: wp.array[wp.float64], hits: wp.array[wp.int32], b: int, amount: wp.float64):
    """Updates by atomics, consuming nothing: Warp's backward runs this again, so the rewrite gives it a twin."""
    wp.atomic_add(total, b, amount * amount)
    wp.atomic_add(hits, b, 1)


@wp.kernel
def tally_through_helper(
    x: wp.array[wp.float64],
    count: wp.array[wp.int32],
    total: wp.array[wp.float64],
    hits: wp.array[wp.int32],
    out: wp.array[wp.float64],
):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    tally_into(total, hits, tid % 2, x[tid])
    out[slot] = x[tid] * wp.float64(slot + 1)


@wp.kernel
def weigh_bodies(
    m: wp.array[wp.float64],
    p: wp.array[wp.vec3d],
    acc: wp.array[wp.vec3d],
    bodies: wp.array[Body],
    out: wp.array[wp.float64],
):
    """Field and component updates of an array of structs beside a consumed vector atomic whose return carries a
    gradient: each alone was right, together the updates' gradient was taken twice."""
    b = wp.tid()
    bodies[b % 2].mass += m[b] * m[b]
    bodies[b % 2].com[1] += m[b] * p[b][1]
    prev = wp.atomic_add(acc, 0, p[b] * m[b])
    out[b] = prev[0] * m[b] + prev[1]


@wp.kernel
def fill_bodies(m: wp.array[wp.float64], bodies: wp.array[Body]):
    """Bodies made of plain floats, so that the loss can be differentiated with respect to those."""
    b = wp.tid()
    bodies[b].mass = m[b]
    bodies[b].com = wp.vec3d(m[b], m[b] * m[b], wp.float64(0.5))


@wp.kernel
def running_moment(bodies: wp.array[Body], acc: wp.array[wp.float64], out: wp.array[wp.float64]):
    """A float return made of an array of structs alone: where only the bodies require grad, the launch must still
    take the exact path (it once took the bodies for arrays without a gradient, and the gradient was zero)."""
    b = wp.tid()
    prev = wp.atomic_add(acc, 0, bodies[b].mass * bodies[b].com[1])
    out[b] = prev * prev
