"""Float atomics whose returns get exact gradients, on a target a struct argument holds, used in helpers the struct
is handed to whole: the helper consuming the return, helpers beside it reading other fields of the struct."""

import warp as wp


@wp.struct
class Bank:
    balance: wp.array[wp.float64]  # the exact target
    served: wp.array[wp.int32]
    rate: wp.float64


@wp.func
def charge(bank: Bank, amount: wp.float64) -> wp.float64:
    before = wp.atomic_sub(bank.balance, 0, amount)
    return before


@wp.kernel
def pay(x: wp.array[wp.float64], bank: Bank, out: wp.array[wp.float64]):
    tid = wp.tid()
    before = charge(bank, x[tid] * x[tid])
    out[tid] = before * x[tid]


@wp.func
def count_in(bank: Bank):
    """Handed the whole struct, it updates another field: the exact target's shadow is none of its business."""
    wp.atomic_add(bank.served, 0, 1)


@wp.kernel
def pay_and_count(x: wp.array[wp.float64], bank: Bank, out: wp.array[wp.float64]):
    tid = wp.tid()
    before = charge(bank, x[tid] * x[tid])
    count_in(bank)
    out[tid] = before * x[tid]


@wp.func
def rate_of(bank: Bank) -> wp.float64:
    return bank.rate


@wp.func
def pay_at_rate(bank: Bank, x: wp.float64) -> wp.float64:
    """A helper two calls above the atomic, handing the struct on."""
    return charge(bank, x * rate_of(bank))


@wp.kernel
def pay_at_the_rate(x: wp.array[wp.float64], bank: Bank, out: wp.array[wp.float64]):
    tid = wp.tid()
    out[tid] = pay_at_rate(bank, x[tid]) * x[tid] + rate_of(bank)
