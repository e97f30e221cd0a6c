"""Benchmark kernels: each realistic pattern as the original kernel and as a hand-written record/replay kernel.

The original kernel is what users write; its gradients are wrong because Warp's backward skips the atomic
whose returned value the kernel uses. The hand-written variant is the best a Warp expert writes by hand (the
pattern of Warp's differentiability guide): a ``@wp.func`` that performs the atomic and stores its result,
a ``@wp.func_replay`` that returns the stored result in backward, and an empty ``@wp.func_grad`` so that
backward does not re-run the atomic. It is the bar the rewritten kernel is measured against.

Every kernel lives in its own Warp module (``module="unique"``) so compile times compare kernel by kernel.
``BENCH_CASES`` describes how to build the arguments of each pattern at a given size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import warp as wp

EMPTY_KEY = wp.constant(-1)
MAX_PROBES = wp.constant(64)
MAX_EMITTED = 4  # particles one emitter emits at most per launch
MAX_NEIGHBOURS = 8  # neighbours one particle sums over at most


# --- hand-written record/replay helpers --------------------------------------------------------------


@wp.func
def record_slot(count: wp.array[wp.int32], records: wp.array[wp.int32], row: int) -> int:
    """Claim the next slot of a counter and remember it for backward."""
    slot = wp.atomic_add(count, 0, 1)
    records[row] = slot
    return slot


@wp.func_replay(record_slot)
def replay_slot(count: wp.array(dtype=wp.int32), records: wp.array(dtype=wp.int32), row: int):
    """Backward's forward replay: the slot claimed in forward, without touching the counter."""
    return records[row]


@wp.func_grad(record_slot)
def adj_record_slot(count: wp.array(dtype=wp.int32), records: wp.array(dtype=wp.int32), row: int, adj_ret: int):
    """A slot carries no gradient; the empty adjoint keeps Warp's default one from re-running the counter."""
    pass


@wp.func
def record_previous(total: wp.array[float], records: wp.array[float], row: int) -> float:
    """Add one to a running total and remember the total seen before, for backward."""
    previous = wp.atomic_add(total, 0, 1.0)
    records[row] = previous
    return previous


@wp.func_replay(record_previous)
def replay_previous(total: wp.array(dtype=float), records: wp.array(dtype=float), row: int):
    return records[row]


@wp.func_grad(record_previous)
def adj_record_previous(total: wp.array(dtype=float), records: wp.array(dtype=float), row: int, adj_ret: float):
    """The running total does not require grad in this benchmark, so the returned value is a constant."""
    pass


@wp.func
def add_and_record(target: wp.array[float], address: int, value: float, records: wp.array[float], row: int) -> float:
    """Add into a float target and remember what it held before, for backward (the local-term pattern)."""
    previous = wp.atomic_add(target, address, value)
    records[row] = previous
    return previous


@wp.func_replay(add_and_record)
def replay_add_and_record(
    target: wp.array(dtype=float), address: int, value: float, records: wp.array(dtype=float), row: int
):
    return records[row]


@wp.func_grad(add_and_record)
def adj_add_and_record(
    target: wp.array(dtype=float),
    address: int,
    value: float,
    records: wp.array(dtype=float),
    row: int,
    adj_ret: float,
):
    """Only the local terms: the returned value is a constant, so no gradient reaches earlier operands."""
    pass


# --- shared math --------------------------------------------------------------------------------------


@wp.func
def terrain_height(x: float, z: float) -> float:
    """A few octaves of waves: the kind of analytic height field a contact query evaluates."""
    h = 0.5 * wp.sin(1.3 * x) * wp.cos(0.7 * z)
    h += 0.25 * wp.sin(2.9 * x + 1.1) * wp.cos(3.1 * z - 0.4)
    h += 0.125 * wp.sin(6.7 * x - 2.0) * wp.cos(5.3 * z + 0.9)
    h += 0.0625 * wp.exp(-0.1 * (x * x + z * z)) * wp.sin(11.0 * x * z)
    return h


@wp.func
def terrain_normal(x: float, z: float) -> wp.vec3:
    """Unit normal from central differences: four more height evaluations (the heavy math)."""
    e = 1.0e-3
    dx = (terrain_height(x + e, z) - terrain_height(x - e, z)) / (2.0 * e)
    dz = (terrain_height(x, z + e) - terrain_height(x, z - e)) / (2.0 * e)
    return wp.normalize(wp.vec3(-dx, 1.0, -dz))


@wp.func
def hash_slot(key: int, capacity: int) -> int:
    """Multiplicative hash of a key onto a power-of-two table (73856093: the spatial-hashing prime)."""
    h = wp.uint32(key) * wp.uint32(73856093)
    return wp.int32(h >> wp.uint32(8)) & (capacity - 1)


# --- compaction behind heavy math (contact generation) -----------------------------------------------


@wp.kernel(module="unique")
def contacts_original(
    points: wp.array[wp.vec3],
    radius: float,
    capacity: int,
    count: wp.array[wp.int32],
    contact_points: wp.array[wp.vec3],
    contact_depths: wp.array[float],
):
    tid = wp.tid()
    p = points[tid]
    n = terrain_normal(p[0], p[2])
    depth = terrain_height(p[0], p[2]) + radius - p[1]
    if depth > 0.0:
        slot = wp.atomic_add(count, 0, 1)
        if slot < capacity:
            contact_points[slot] = p - n * (radius - depth)
            contact_depths[slot] = depth * depth + wp.length(p)


@wp.kernel(module="unique")
def contacts_handwritten(
    points: wp.array[wp.vec3],
    radius: float,
    capacity: int,
    count: wp.array[wp.int32],
    contact_points: wp.array[wp.vec3],
    contact_depths: wp.array[float],
    records: wp.array[wp.int32],
):
    tid = wp.tid()
    p = points[tid]
    n = terrain_normal(p[0], p[2])
    depth = terrain_height(p[0], p[2]) + radius - p[1]
    if depth > 0.0:
        slot = record_slot(count, records, tid)
        if slot < capacity:
            contact_points[slot] = p - n * (radius - depth)
            contact_depths[slot] = depth * depth + wp.length(p)


# --- particle emission: a consumed counter in a per-thread loop --------------------------------------


@wp.kernel(module="unique")
def emit_original(
    emitters: wp.array[wp.vec3],
    velocities: wp.array[wp.vec3],
    emit_counts: wp.array[wp.int32],
    dt: float,
    capacity: int,
    count: wp.array[wp.int32],
    positions: wp.array[wp.vec3],
):
    tid = wp.tid()
    origin = emitters[tid]
    v = velocities[tid]
    for i in range(emit_counts[tid]):
        slot = wp.atomic_add(count, 0, 1)
        if slot < capacity:
            t = dt * float(i + 1)
            positions[slot] = origin + v * t + wp.vec3(0.0, -4.9, 0.0) * (t * t)


@wp.kernel(module="unique")
def emit_handwritten(
    emitters: wp.array[wp.vec3],
    velocities: wp.array[wp.vec3],
    emit_counts: wp.array[wp.int32],
    dt: float,
    capacity: int,
    count: wp.array[wp.int32],
    positions: wp.array[wp.vec3],
    records: wp.array[wp.int32],
):
    tid = wp.tid()
    origin = emitters[tid]
    v = velocities[tid]
    for i in range(emit_counts[tid]):
        slot = record_slot(count, records, tid * MAX_EMITTED + i)
        if slot < capacity:
            t = dt * float(i + 1)
            positions[slot] = origin + v * t + wp.vec3(0.0, -4.9, 0.0) * (t * t)


# --- the reported float-return kernel, one running total per launch ----------------------------------


@wp.kernel(module="unique")
def running_total_original(x: wp.array[float], total: wp.array[float], y: wp.array[float]):
    tid = wp.tid()
    previous = wp.atomic_add(total, 0, 1.0)
    y[tid] = previous * x[tid]


@wp.kernel(module="unique")
def running_total_handwritten(x: wp.array[float], total: wp.array[float], y: wp.array[float], records: wp.array[float]):
    tid = wp.tid()
    previous = record_previous(total, records, tid)
    y[tid] = previous * x[tid]


# --- hash-table insert: a CAS probe loop, then accumulation into the found slot ----------------------


@wp.func
def insert_key(table_keys: wp.array[wp.int32], key: int, capacity: int) -> int:
    """Linear probing: the slot that holds ``key`` after this call (MAX_PROBES bounds a full table)."""
    slot = hash_slot(key, capacity)
    probes = wp.int32(0)  # a variable, not a constant: the loop mutates it
    while probes < MAX_PROBES:
        previous = wp.atomic_cas(table_keys, slot, EMPTY_KEY, key)
        if previous == EMPTY_KEY or previous == key:  # noqa: SIM109 (Warp has no `in`)
            break
        slot = (slot + 1) & (capacity - 1)
        probes += 1
    return slot


@wp.kernel(module="unique")
def hash_insert_original(
    keys: wp.array[wp.int32],
    weights: wp.array[float],
    capacity: int,
    table_keys: wp.array[wp.int32],
    table_values: wp.array[float],
):
    tid = wp.tid()
    key = keys[tid]
    # wp.int32(): without it the rewrite cannot tell that a @wp.func returns an int, and refuses the loop
    slot = wp.int32(hash_slot(key, capacity))
    probes = wp.int32(0)  # a variable, not a constant: the loop mutates it
    while probes < MAX_PROBES:
        previous = wp.atomic_cas(table_keys, slot, EMPTY_KEY, key)
        if previous == EMPTY_KEY or previous == key:  # noqa: SIM109 (Warp has no `in`)
            break
        slot = (slot + 1) & (capacity - 1)
        probes += 1
    w = weights[tid]
    wp.atomic_add(table_values, slot, w * wp.sqrt(w * w + 1.0))


@wp.func
def record_insert(
    table_keys: wp.array[wp.int32], key: int, capacity: int, records: wp.array[wp.int32], row: int
) -> int:
    """Insert a key and remember the slot it landed in, for backward."""
    slot = insert_key(table_keys, key, capacity)
    records[row] = slot
    return slot


@wp.func_replay(record_insert)
def replay_insert(
    table_keys: wp.array(dtype=wp.int32), key: int, capacity: int, records: wp.array(dtype=wp.int32), row: int
):
    return records[row]


@wp.func_grad(record_insert)
def adj_record_insert(
    table_keys: wp.array(dtype=wp.int32),
    key: int,
    capacity: int,
    records: wp.array(dtype=wp.int32),
    row: int,
    adj_ret: int,
):
    """A slot carries no gradient; the empty adjoint keeps backward from probing the table again."""
    pass


@wp.kernel(module="unique")
def hash_insert_handwritten(
    keys: wp.array[wp.int32],
    weights: wp.array[float],
    capacity: int,
    table_keys: wp.array[wp.int32],
    table_values: wp.array[float],
    records: wp.array[wp.int32],
):
    tid = wp.tid()
    slot = record_insert(table_keys, keys[tid], capacity, records, tid)
    w = weights[tid]
    wp.atomic_add(table_values, slot, w * wp.sqrt(w * w + 1.0))


# --- exact float returns: a running sum and a scatter, consumed in differentiable math -----------------


@wp.kernel(module="unique")
def running_sum_original(x: wp.array[float], total: wp.array[float], y: wp.array[float]):
    tid = wp.tid()
    v = x[tid]
    before = wp.atomic_add(total, 0, v * v)
    y[tid] = wp.sin(before * 1.0e-3) * v


@wp.kernel(module="unique")
def running_sum_handwritten(x: wp.array[float], total: wp.array[float], y: wp.array[float], records: wp.array[float]):
    tid = wp.tid()
    v = x[tid]
    before = add_and_record(total, 0, v * v, records, tid)
    y[tid] = wp.sin(before * 1.0e-3) * v


@wp.kernel(module="unique")
def scatter_original(cells: wp.array[wp.int32], weights: wp.array[float], grid: wp.array[float], y: wp.array[float]):
    tid = wp.tid()
    w = weights[tid]
    before = wp.atomic_add(grid, cells[tid], w * w)
    y[tid] = wp.sqrt(before + 1.0) * w


@wp.kernel(module="unique")
def scatter_handwritten(
    cells: wp.array[wp.int32],
    weights: wp.array[float],
    grid: wp.array[float],
    y: wp.array[float],
    records: wp.array[float],
):
    tid = wp.tid()
    w = weights[tid]
    before = add_and_record(grid, cells[tid], w * w, records, tid)
    y[tid] = wp.sqrt(before + 1.0) * w


# --- a sum over a data-dependent neighbour count: a loop Warp does not unroll (issue 34) ---------------


@wp.func
def keep_carried(value: float, records: wp.array[float], row: int) -> float:
    """Remember what a loop carries at this point, for backward."""
    records[row] = value
    return value


@wp.func_replay(keep_carried)
def restore_carried(value: float, records: wp.array(dtype=float), row: int):
    """Backward's replay of the loop: the value the forward carried there, not the one the replay left."""
    return records[row]


@wp.func_grad(keep_carried)
def adj_keep_carried(value: float, records: wp.array(dtype=float), row: int, adj_ret: float):
    """The gradient passes on to the value carried in, so that it flows from trip to trip."""
    wp.adjoint[value] += adj_ret


@wp.kernel(module="unique")
def neighbour_sum_original(
    x: wp.array[float], starts: wp.array[wp.int32], counts: wp.array[wp.int32], energy: wp.array[float]
):
    tid = wp.tid()
    xi = x[tid]
    start = starts[tid]
    e = float(0.0)
    for k in range(counts[tid]):
        d = x[start + k] - xi
        e += d * d
    energy[tid] = wp.sqrt(e + 1.0)


@wp.kernel(module="unique")
def neighbour_sum_handwritten(
    x: wp.array[float],
    starts: wp.array[wp.int32],
    counts: wp.array[wp.int32],
    energy: wp.array[float],
    trip_records: wp.array[float],
    after_records: wp.array[float],
):
    tid = wp.tid()
    xi = x[tid]
    start = starts[tid]
    e = float(0.0)
    for k in range(counts[tid]):
        e = keep_carried(e, trip_records, tid * MAX_NEIGHBOURS + k)
        d = x[start + k] - xi
        e += d * d
    e = keep_carried(e, after_records, tid)
    energy[tid] = wp.sqrt(e + 1.0)


# --- arguments ----------------------------------------------------------------------------------------


@dataclass
class Arguments:
    """One launch's arguments, and which of them the benchmark resets, seeds and differentiates.

    ``values`` are the original kernel's arguments in order; the hand-written kernel takes them plus
    ``records``. ``state`` pairs each array a forward mutates with a pristine copy to reset it from, so
    every repeat starts from the same counters and tables. ``outputs`` get ``seeds`` as incoming
    gradients; ``wrt`` are the inputs whose gradients are compared.
    """

    dim: int
    values: list
    records: list[wp.array]
    state: list[tuple[wp.array, wp.array]]
    outputs: list[wp.array]
    seeds: list[wp.array]
    wrt: list[wp.array]
    arrays: list[wp.array] = field(default_factory=list)  # everything, for zeroing gradients

    def reset(self) -> None:
        """Restore counters, tables and outputs and zero every gradient (outside the timed region)."""
        for array, pristine in self.state:
            wp.copy(array, pristine)
        for array in self.arrays:
            if array.grad is not None:
                array.grad.zero_()

    def seed(self) -> None:
        for output, seed in zip(self.outputs, self.seeds, strict=True):
            wp.copy(output.grad, seed)


def _array(values: np.ndarray, dtype, device: str, grad: bool = False) -> wp.array:
    return wp.array(values, dtype=dtype, device=device, requires_grad=grad)


def _seed(output: wp.array, rng: np.random.Generator) -> wp.array:
    """An incoming gradient for ``output``: weights in [0.5, 1.5], so every element of it matters."""
    components = wp.types.type_size(output.dtype)
    shape = (*output.shape, components) if components > 1 else output.shape
    return wp.array(rng.uniform(0.5, 1.5, size=shape).astype(np.float32), dtype=output.dtype, device=output.device)


def _arguments(dim: int, values: list, records: list, mutable: list, outputs: list, wrt: list) -> Arguments:
    """Fill in pristine copies of what a forward mutates, and the gradient seeds."""
    rng = np.random.default_rng(7)
    seeds = [_seed(output, rng) for output in outputs]
    state = [(a, wp.clone(a)) for a in mutable]
    arrays = [v for v in values if isinstance(v, wp.array)] + list(records)
    return Arguments(dim, values, records, state, outputs, seeds, wrt, arrays)


def contacts_arguments(n: int, device: str) -> Arguments:
    """Points scattered over the terrain; roughly half of them touch it."""
    rng = np.random.default_rng(1)
    points = rng.uniform((-20.0, -0.6, -20.0), (20.0, 1.0, 20.0), size=(n, 3)).astype(np.float32)
    p = _array(points, wp.vec3, device, grad=True)
    count = wp.zeros(1, dtype=wp.int32, device=device)
    contact_points = wp.zeros(n, dtype=wp.vec3, device=device, requires_grad=True)
    contact_depths = wp.zeros(n, dtype=float, device=device, requires_grad=True)
    records = wp.zeros(n, dtype=wp.int32, device=device)
    values = [p, 0.05, n, count, contact_points, contact_depths]
    return _arguments(
        n, values, [records], [count, contact_points, contact_depths], [contact_points, contact_depths], [p]
    )


def emit_arguments(n: int, device: str) -> Arguments:
    """Emitters emit 0 to MAX_EMITTED particles each (data dependent, as a spawn rate would be)."""
    rng = np.random.default_rng(2)
    emitters = _array(rng.uniform(-1.0, 1.0, size=(n, 3)).astype(np.float32), wp.vec3, device, grad=True)
    velocities = _array(rng.uniform(-2.0, 2.0, size=(n, 3)).astype(np.float32), wp.vec3, device, grad=True)
    emit_counts = _array(rng.integers(0, MAX_EMITTED + 1, size=n).astype(np.int32), wp.int32, device)
    capacity = n * MAX_EMITTED
    count = wp.zeros(1, dtype=wp.int32, device=device)
    positions = wp.zeros(capacity, dtype=wp.vec3, device=device, requires_grad=True)
    records = wp.zeros(n * MAX_EMITTED, dtype=wp.int32, device=device)
    values = [emitters, velocities, emit_counts, 0.01, capacity, count, positions]
    return _arguments(n, values, [records], [count, positions], [positions], [emitters, velocities])


def running_total_arguments(n: int, device: str) -> Arguments:
    """The reported kernel with one thread per element; the total starts at 10 and needs no gradient."""
    rng = np.random.default_rng(3)
    x = _array(rng.uniform(-1.0, 1.0, size=n).astype(np.float32), float, device, grad=True)
    total = _array(np.array([10.0], dtype=np.float32), float, device)
    y = wp.zeros(n, dtype=float, device=device, requires_grad=True)
    records = wp.zeros(n, dtype=float, device=device)
    return _arguments(n, [x, total, y], [records], [total, y], [y], [x])


def hash_insert_arguments(n: int, device: str) -> Arguments:
    """Keys with duplicates (about n/2 distinct) into a table of load factor at most 1/2."""
    rng = np.random.default_rng(4)
    capacity = 1 << max(4, int(np.ceil(np.log2(n))) + 1)
    keys = _array(rng.integers(0, max(n // 2, 1), size=n).astype(np.int32), wp.int32, device)
    weights = _array(rng.uniform(0.1, 2.0, size=n).astype(np.float32), float, device, grad=True)
    table_keys = _array(np.full(capacity, -1, dtype=np.int32), wp.int32, device)
    table_values = wp.zeros(capacity, dtype=float, device=device, requires_grad=True)
    records = wp.zeros(n, dtype=wp.int32, device=device)
    values = [keys, weights, capacity, table_keys, table_values]
    return _arguments(n, values, [records], [table_keys, table_values], [table_values], [weights])


def running_sum_arguments(n: int, device: str) -> Arguments:
    """Every thread adds into one total (the reported kernel's contention) and uses what it saw."""
    rng = np.random.default_rng(5)
    x = _array(rng.uniform(-1.0, 1.0, size=n).astype(np.float32), float, device, grad=True)
    total = _array(np.array([0.5], dtype=np.float32), float, device)
    y = wp.zeros(n, dtype=float, device=device, requires_grad=True)
    records = wp.zeros(n, dtype=float, device=device)
    return _arguments(n, [x, total, y], [records], [total, y], [y], [x])


def scatter_arguments(n: int, device: str) -> Arguments:
    """Weights scattered into n/8 cells (eight on average each) that use what the cell held before."""
    rng = np.random.default_rng(6)
    cells = _array(rng.integers(0, max(n // 8, 1), size=n).astype(np.int32), wp.int32, device)
    weights = _array(rng.uniform(0.1, 1.0, size=n).astype(np.float32), float, device, grad=True)
    grid = wp.zeros(max(n // 8, 1), dtype=float, device=device)
    y = wp.zeros(n, dtype=float, device=device, requires_grad=True)
    records = wp.zeros(n, dtype=float, device=device)
    return _arguments(n, [cells, weights, grid, y], [records], [grid, y], [y], [weights])


def neighbour_sum_arguments(n: int, device: str) -> Arguments:
    """Each particle sums over 0 to MAX_NEIGHBOURS neighbours (a data-dependent count, as a neighbour list's), a run
    of consecutive particles from a random start. The hand-written records have room for MAX_NEIGHBOURS trips."""
    rng = np.random.default_rng(8)
    x = _array(rng.uniform(-1.0, 1.0, size=n).astype(np.float32), float, device, grad=True)
    starts = _array(rng.integers(0, max(n - MAX_NEIGHBOURS, 1), size=n).astype(np.int32), wp.int32, device)
    counts = _array(rng.integers(0, MAX_NEIGHBOURS + 1, size=n).astype(np.int32), wp.int32, device)
    energy = wp.zeros(n, dtype=float, device=device, requires_grad=True)
    records = [wp.zeros(n * MAX_NEIGHBOURS, dtype=float, device=device), wp.zeros(n, dtype=float, device=device)]
    return _arguments(n, [x, starts, counts, energy], records, [energy], [energy], [x])


def running_sum_gradient(arguments: Arguments) -> list[np.ndarray]:
    """The exact dL/dx of ``running_sum`` in thread order (the CPU's): before_k = total + sum_{j<k} x_j^2,
    y_k = sin(before_k / 1000) x_k, so dL/dx_j = w_j sin(before_j / 1000) + 2 x_j sum_{k>j} w_k cos(.) x_k / 1000."""
    x = arguments.values[0].numpy().astype(np.float64)
    w = arguments.seeds[0].numpy().astype(np.float64)
    before = 0.5 + np.concatenate([[0.0], np.cumsum(x * x)[:-1]])
    later = w * np.cos(before * 1e-3) * x * 1e-3
    after = np.concatenate([np.cumsum(later[::-1])[::-1][1:], [0.0]])
    return [w * np.sin(before * 1e-3) + 2 * x * after]


def scatter_gradient(arguments: Arguments) -> list[np.ndarray]:
    """The exact dL/dw of ``scatter`` in thread order: the running sum per cell, as ``running_sum_gradient``."""
    cells = arguments.values[0].numpy()
    w = arguments.values[1].numpy().astype(np.float64)
    seed = arguments.seeds[0].numpy().astype(np.float64)
    gradient = np.zeros_like(w)
    for cell in np.unique(cells):
        ops = np.flatnonzero(cells == cell)  # in thread order
        before = np.concatenate([[0.0], np.cumsum(w[ops] ** 2)[:-1]])
        later = seed[ops] * w[ops] * 0.5 / np.sqrt(before + 1.0)
        after = np.concatenate([np.cumsum(later[::-1])[::-1][1:], [0.0]])
        gradient[ops] = seed[ops] * np.sqrt(before + 1.0) + 2 * w[ops] * after
    return [gradient]


@dataclass(frozen=True)
class BenchCase:
    """One benchmarked pattern.

    ``rewrite_options`` go to ``wp_rewrite``: only what the hand-written variant knows as well (emission's
    records are sized by MAX_EMITTED in both), so the comparison is like for like. ``exact_gradient``: a case
    whose float returns get exact gradients, which the hand-written variant (the local terms only) does not
    have: the rewritten gradients are checked against this instead, and its targets are the exact path's.
    """

    name: str
    description: str
    original: wp.Kernel
    handwritten: wp.Kernel
    make_arguments: Callable[[int, str], Arguments]
    rewrite_options: dict = field(default_factory=dict)
    exact_gradient: Callable[[Arguments], list[np.ndarray]] | None = None


BENCH_CASES = [
    BenchCase(
        "contacts",
        "compaction behind heavy math (terrain contacts)",
        contacts_original,
        contacts_handwritten,
        contacts_arguments,
    ),
    BenchCase(
        "emission",
        f"particle emission, 0-{MAX_EMITTED} per thread in a loop",
        emit_original,
        emit_handwritten,
        emit_arguments,
        {"max_records": MAX_EMITTED},
    ),
    BenchCase(
        "running_total",
        "reported float return: previous = atomic_add(total, 0, 1.0)",
        running_total_original,
        running_total_handwritten,
        running_total_arguments,
    ),
    BenchCase(
        "hash_insert",
        "hash-table insert: CAS probe loop, accumulate into the slot",
        hash_insert_original,
        hash_insert_handwritten,
        hash_insert_arguments,
    ),
    BenchCase(
        "neighbour_sum",
        f"a sum over 0-{MAX_NEIGHBOURS} neighbours in a loop Warp does not unroll (no atomic): without max_records, "
        "a dry run counts the trips first",
        neighbour_sum_original,
        neighbour_sum_handwritten,
        neighbour_sum_arguments,
    ),
    BenchCase(
        "neighbour_sum_room",
        f"the same with max_records={MAX_NEIGHBOURS}, the room the hand-written records have",
        neighbour_sum_original,
        neighbour_sum_handwritten,
        neighbour_sum_arguments,
        {"max_records": MAX_NEIGHBOURS},
    ),
    BenchCase(
        "exact_running_sum",
        "exact float returns: every thread's running sum into one total, in differentiable math",
        running_sum_original,
        running_sum_handwritten,
        running_sum_arguments,
        exact_gradient=running_sum_gradient,
    ),
    BenchCase(
        "exact_scatter",
        "exact float returns: a scatter into n/8 cells, each thread using what its cell held",
        scatter_original,
        scatter_handwritten,
        scatter_arguments,
        exact_gradient=scatter_gradient,
    ),
]


@wp.kernel(module="unique")
def compiler_warm_up(a: wp.array[float]):
    a[wp.tid()] = 1.0


def warm_up_compiler(device: str) -> None:
    """Compile a trivial module, so the compiler's one-time start-up is not charged to a benchmark kernel."""
    compiler_warm_up.module.load(wp.get_device(device))


@wp.kernel
def add_one(values: wp.array(dtype=float)):
    """A kernel with nothing to rewrite, for the cost of a launch (``bench.launch_cost``)."""
    tid = wp.tid()
    values[tid] = values[tid] + 1.0
