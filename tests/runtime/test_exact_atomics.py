"""The exact float atomics of the runtime, against Warp's own atomics on the CPU (and on the ints a shadow holds: a
generic kernel's target launched with ints beside targets whose float returns need exact gradients).

Each operation takes its returned value and its ticket (its place among the operations on its address) from one
atomic on the target's shadow. The returned values and the final values must be Warp's own, bit for bit; the
tickets must count each address's operations in execution order (thread order on the CPU). The paths a CPU never
takes by itself are taken here on purpose: the compare-and-swap retried after a stale guess (what contention does
on a GPU), and the float64 ticket lock that GPUs below sm_90 use instead of the 128-bit compare-and-swap.
"""

from typing import Any

import numpy as np
import pytest
import warp as wp

from warp_rewrite import runtime
from warp_rewrite.runtime import abi, exact, exact_atomics, exact_kernels

N = 12
ADDRESSES = np.arange(N) % 3


def _recorded(op: str) -> wp.Kernel:
    exact = getattr(runtime, f"exact_{op}")

    @wp.kernel(module="unique")
    def recorded(
        values: wp.array(dtype=Any),
        target: wp.array(dtype=Any),
        shadow: wp.array2d(dtype=wp.uint64),
        returned: wp.array(dtype=Any),
        operands: wp.array(dtype=Any),
        order: wp.array2d(dtype=wp.int32),
        addresses: wp.array(dtype=wp.int32),
    ):
        tid = wp.tid()
        address = runtime.flat_index(target, tid % 3)
        exact(address, values[tid], shadow, returned, operands, order, addresses, tid)

    return recorded


# Warp's own atomics, each written out: called through a closure variable, wp.atomic_sub adds (Warp 1.19).
@wp.kernel(module="unique")
def add_reference(values: wp.array(dtype=Any), target: wp.array(dtype=Any), returned: wp.array(dtype=Any)):
    tid = wp.tid()
    returned[tid] = wp.atomic_add(target, tid % 3, values[tid])


@wp.kernel(module="unique")
def sub_reference(values: wp.array(dtype=Any), target: wp.array(dtype=Any), returned: wp.array(dtype=Any)):
    tid = wp.tid()
    returned[tid] = wp.atomic_sub(target, tid % 3, values[tid])


@wp.kernel(module="unique")
def min_reference(values: wp.array(dtype=Any), target: wp.array(dtype=Any), returned: wp.array(dtype=Any)):
    tid = wp.tid()
    returned[tid] = wp.atomic_min(target, tid % 3, values[tid])


@wp.kernel(module="unique")
def max_reference(values: wp.array(dtype=Any), target: wp.array(dtype=Any), returned: wp.array(dtype=Any)):
    tid = wp.tid()
    returned[tid] = wp.atomic_max(target, tid % 3, values[tid])


@wp.kernel(module="unique")
def exch_reference(values: wp.array(dtype=Any), target: wp.array(dtype=Any), returned: wp.array(dtype=Any)):
    tid = wp.tid()
    returned[tid] = wp.atomic_exch(target, tid % 3, values[tid])


@wp.kernel(module="unique")
def cas_reference(values: wp.array(dtype=Any), target: wp.array(dtype=Any), returned: wp.array(dtype=Any)):
    tid = wp.tid()
    returned[tid] = wp.atomic_cas(target, tid % 3, values[(tid + 5) % 12], values[tid])


@wp.kernel(module="unique")
def cas_recorded(
    values: wp.array(dtype=Any),
    target: wp.array(dtype=Any),
    shadow: wp.array2d(dtype=wp.uint64),
    returned: wp.array(dtype=Any),
    operands: wp.array(dtype=Any),
    order: wp.array2d(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    compares: wp.array(dtype=Any),
):
    tid = wp.tid()
    address = runtime.flat_index(target, tid % 3)
    runtime.exact_cas(
        address, values[(tid + 5) % 12], values[tid], shadow, returned, operands, order, addresses, compares, tid
    )


REFERENCES = {
    "add": add_reference,
    "sub": sub_reference,
    "min": min_reference,
    "max": max_reference,
    "exch": exch_reference,
}
KERNELS = {op: (reference, _recorded(op)) for op, reference in REFERENCES.items()}
KERNELS["cas"] = (cas_reference, cas_recorded)
# The dtypes Warp's own atomics support for each op (no min/max on float16, no exch/cas on 16-bit floats).
DTYPES = {
    "add": [wp.float32, wp.float16, wp.bfloat16, wp.float64, wp.vec3f, wp.mat22d, wp.quatf],
    "sub": [wp.float32, wp.float16, wp.float64, wp.vec2d],
    "min": [wp.float32, wp.bfloat16, wp.float64, wp.vec3f],
    "max": [wp.float32, wp.float64, wp.vec3d],
    "exch": [wp.float32, wp.float64],
    "cas": [wp.float32, wp.float64],
}
for _dtypes in DTYPES.values():  # a generic kernel's int targets, launched beside targets with exact returns
    _dtypes += exact_atomics.SHADOWED_INTS
for _op, _dtypes in DTYPES.items():  # declared up front: the test module compiles once
    for _dtype in _dtypes:
        _values = wp.array(dtype=_dtype)
        _reference, _recorded = KERNELS[_op]
        wp.overload(_reference, [_values, _values, _values])
        _records = [_values, _values, wp.array2d(dtype=wp.int32), wp.array(dtype=wp.int32)]
        _extra = [_values] if _op == "cas" else []
        wp.overload(_recorded, [_values, _values, wp.array2d(dtype=wp.uint64), *_records, *_extra])


def _array(values: np.ndarray, dtype) -> wp.array:
    """An array of ``dtype`` holding ``values`` (float64 scalars, one row per element), rounded as Warp rounds (ints:
    ten times the values, truncated)."""
    components = wp._src.types.type_size(dtype)
    scalar = wp._src.types.type_scalar_type(dtype)
    flat = values.reshape(len(values), -1)[:, :components]
    if scalar is wp.bfloat16:  # NumPy has no bfloat16: let Warp round each value
        array = wp.empty(len(values), dtype=dtype, device="cpu")
        scalars = wp.array(flat.astype(np.float32).reshape(-1), dtype=wp.float32, device="cpu")
        wp.launch(_to_bfloat16, scalars.size, inputs=[scalars, exact.records_view(array)], device="cpu")
        return array
    if scalar in exact_atomics.SHADOWED_INTS:  # whole numbers, negative ones wrapped into the unsigned types
        numpy_int = np.dtype(wp._src.types.warp_type_to_np_dtype[scalar])
        return wp.array((flat * 10).astype(np.int64).astype(numpy_int).reshape(-1), dtype=dtype, device="cpu")
    numpy_scalar = {wp.float16: np.float16, wp.float32: np.float32, wp.float64: np.float64}[scalar]
    shape = (len(values), *getattr(dtype, "_shape_", ()))
    return wp.array(flat.astype(numpy_scalar).reshape(shape), dtype=dtype, device="cpu")


@wp.kernel(module="unique")
def _to_bfloat16(source: wp.array(dtype=wp.float32), out: wp.array2d(dtype=wp.bfloat16)):
    i = wp.tid()
    out[i // out.shape[1], i % out.shape[1]] = wp.bfloat16(source[i])


def _bits(array: wp.array) -> bytes:
    return array.numpy().tobytes()


def _operands() -> np.ndarray:
    rng = np.random.default_rng(7)
    values = rng.uniform(-2.0, 2.0, size=(N, 16))
    values[4] = values[1]  # ties: equal operands on one address
    return values


@pytest.mark.parametrize(
    "op, dtype",
    [(op, dtype) for op, dtypes in DTYPES.items() for dtype in dtypes],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_returned_and_final_values_are_warps_own_and_tickets_count_each_address(op, dtype):
    values = _operands()
    initial = np.random.default_rng(3).uniform(-1.0, 1.0, size=(3, 16))
    if op == "cas":
        initial[1] = values[(1 + 5) % N]  # address 1's first compare matches: the swap happens
    reference_kernel, recorded_kernel = KERNELS[op]
    operands, expected_target = _array(values, dtype), _array(initial, dtype)
    expected = wp.empty(N, dtype=dtype, device="cpu")
    wp.launch(reference_kernel, N, inputs=[operands, expected_target, expected], device="cpu")

    target = _array(initial, dtype)
    shadow = exact.Shadow(target, target.device)
    components = shadow.components
    returned, recorded = wp.empty(N, dtype=dtype, device="cpu"), wp.empty(N, dtype=dtype, device="cpu")
    order = wp.full((N, components), -1, dtype=wp.int32, device="cpu")
    addresses = wp.empty(N, dtype=wp.int32, device="cpu")
    inputs = [operands, target, shadow.words, returned, recorded, order, addresses]
    inputs += [wp.empty(N, dtype=dtype, device="cpu")] if op == "cas" else []
    shadow.load()
    wp.launch(recorded_kernel, N, inputs=inputs, device="cpu")
    shadow.store()

    assert _bits(returned) == _bits(expected), "returned values"
    assert _bits(target) == _bits(expected_target), "final values"
    assert _bits(recorded) == _bits(operands), "recorded operands"
    np.testing.assert_array_equal(addresses.numpy(), ADDRESSES)
    places = np.array([np.sum(ADDRESSES[:t] == ADDRESSES[t]) for t in range(N)])
    np.testing.assert_array_equal(order.numpy(), np.repeat(places[:, None], components, axis=1))
    counts = shadow.words.numpy()[:, [shadow.ticket_column(c) for c in range(components)]] >> 32
    np.testing.assert_array_equal(counts, np.full((3, components), N // 3))


@wp.kernel(module="unique")
def float64_paths(
    op: int,
    values: wp.array(dtype=wp.float64),
    locked: wp.array2d(dtype=wp.uint64),
    swapped: wp.array2d(dtype=wp.uint64),
    retried: wp.array2d(dtype=wp.uint64),
    returned: wp.array2d(dtype=wp.float64),
    tickets: wp.array2d(dtype=wp.int32),
):
    """One operation per thread through each float64 path: the ticket lock, the 128-bit compare-and-swap, and the
    compare-and-swap from a stale guess (it fails once, then succeeds from what it saw)."""
    tid = wp.tid()
    a = tid % 3
    v, compare = values[tid], values[(tid + 5) % 12]
    old, ticket = exact_atomics._exact_pair_locked(op, locked, a, 0, v, compare)
    returned[0, tid] = old
    tickets[0, tid] = ticket
    old, ticket = exact_atomics._exact_pair_cas(op, swapped, a, 0, v, compare)
    returned[1, tid] = old
    tickets[1, tid] = ticket
    stale = wp.vec2ul(wp.uint64(12345), wp.uint64(99) << wp.uint64(32))
    old, ticket = exact_atomics._exact_pair_cas_from(op, retried, a, 0, v, compare, stale)
    returned[2, tid] = old
    tickets[2, tid] = ticket


@wp.kernel(module="unique")
def float32_retried(
    op: int,
    values: wp.array(dtype=wp.float32),
    words: wp.array2d(dtype=wp.uint64),
    returned: wp.array(dtype=wp.float32),
    tickets: wp.array(dtype=wp.int32),
):
    tid = wp.tid()
    stale = (wp.uint64(7) << wp.uint64(32)) | wp.uint64(3)
    old, ticket = exact_atomics._exact_word_from(op, words, tid % 3, 0, values[tid], values[(tid + 5) % 12], stale)
    returned[tid] = old
    tickets[tid] = ticket


@pytest.mark.parametrize("op", ["add", "sub", "min", "max", "exch", "cas"])
def test_float64_ticket_lock_and_retried_compare_and_swap_agree_with_warp(op):
    code = abi.EXACT_OPS.index(abi.Op(op))  # the device's op code
    values = _operands()[:, 0]
    initial = np.array([0.5, values[6], -0.25])  # address 0's ops compare against values[5], [8], [11], [2]
    reference_kernel, _ = KERNELS[op]
    expected_target = wp.array(initial, dtype=wp.float64, device="cpu")
    expected = wp.empty(N, dtype=wp.float64, device="cpu")
    operands = wp.array(values, dtype=wp.float64, device="cpu")
    wp.launch(reference_kernel, N, inputs=[operands, expected_target, expected], device="cpu")

    shadows = []
    for _ in range(3):
        target = wp.array(initial, dtype=wp.float64, device="cpu")
        shadows.append((target, exact.Shadow(target, target.device)))
        shadows[-1][1].load()
    returned = wp.empty((3, N), dtype=wp.float64, device="cpu")
    tickets = wp.empty((3, N), dtype=wp.int32, device="cpu")
    inputs = [code, operands, *(shadow.words for _, shadow in shadows), returned, tickets]
    wp.launch(float64_paths, N, inputs=inputs, device="cpu")
    places = np.array([np.sum(ADDRESSES[:t] == ADDRESSES[t]) for t in range(N)])
    for path, (target, shadow) in zip(["lock", "128-bit cas", "retried cas"], shadows, strict=True):
        shadow.store()
        index = ["lock", "128-bit cas", "retried cas"].index(path)
        assert returned.numpy()[index].tobytes() == expected.numpy().tobytes(), path
        assert target.numpy().tobytes() == expected_target.numpy().tobytes(), path
        np.testing.assert_array_equal(tickets.numpy()[index], places, err_msg=path)
        np.testing.assert_array_equal(shadow.words.numpy()[:, 1] >> 32, [4, 4, 4], err_msg=path)
        np.testing.assert_array_equal(shadow.words.numpy()[:, 1] & 0xFFFFFFFF, [4, 4, 4], err_msg=path)

    values32 = wp.array(values, dtype=wp.float32, device="cpu")
    target32 = wp.array(initial, dtype=wp.float32, device="cpu")
    expected32_target = wp.array(initial, dtype=wp.float32, device="cpu")
    expected32 = wp.empty(N, dtype=wp.float32, device="cpu")
    wp.launch(reference_kernel, N, inputs=[values32, expected32_target, expected32], device="cpu")
    shadow32 = exact.Shadow(target32, target32.device)
    shadow32.load()
    returned32, tickets32 = wp.empty(N, dtype=wp.float32, device="cpu"), wp.empty(N, dtype=wp.int32, device="cpu")
    wp.launch(float32_retried, N, inputs=[code, values32, shadow32.words, returned32, tickets32], device="cpu")
    shadow32.store()
    assert returned32.numpy().tobytes() == expected32.numpy().tobytes()
    assert target32.numpy().tobytes() == expected32_target.numpy().tobytes()
    np.testing.assert_array_equal(tickets32.numpy(), places)


def test_the_runtime_declares_its_kernels_overloads_up_front():
    """Cold start: every generic kernel of the exact backward has its overloads for every float scalar
    declared when the runtime is imported, so that its module compiles once per process."""
    generic = [kernel for kernel in vars(exact_kernels).values() if isinstance(kernel, wp.Kernel) and kernel.is_generic]
    assert generic
    shadows = (exact_kernels.load_shadow, exact_kernels.store_shadow)  # also for the ints a shadow holds
    for kernel in generic:
        scalars = len(exact_kernels.SCALARS) + (len(exact_atomics.SHADOWED_INTS) if kernel in shadows else 0)
        assert len(kernel.overloads) == scalars, kernel.key
