"""Rewrites the bundled example kernels and prints their gradients before (plain Warp) and after."""

import logging

import numpy as np
import warp as wp

from examples.kernels import compact_positive, running_sum, scale_by_previous, squared_window_sum
from warp_rewrite import launch, wp_rewrite

wp.config.log_level = logging.WARNING  # no init banner, no per-module load lines


def gradient(kernel_launch, x: np.ndarray, others, output_index: int) -> tuple[np.ndarray, np.ndarray]:
    """Forward output and d(sum of output)/dx for one launch made by ``kernel_launch``."""
    args = [wp.array(x, dtype=float, requires_grad=True), *(o() for o in others)]
    tape = wp.Tape()
    with tape:
        kernel_launch(args)
    out = args[output_index]
    tape.backward(grads={out: wp.ones_like(out)})
    return out.numpy(), args[0].grad.numpy()


def show(title: str, kernel: wp.Kernel, dim: int, x: np.ndarray, others, output_index: int) -> None:
    rewritten = wp_rewrite(kernel)
    print(f"\n== {title} ==")
    for label, kernel_launch in (
        ("plain Warp", lambda args: wp.launch(kernel, dim, inputs=args)),
        ("wp_rewrite", lambda args: launch(rewritten, dim, inputs=args)),
    ):
        out, grad = gradient(kernel_launch, x, others, output_index)
        print(f"{label:>11}: output = {np.round(out, 3)}  x.grad = {np.round(grad, 3)}")


def main() -> None:
    for kernel in (scale_by_previous, compact_positive, running_sum, squared_window_sum):
        wp_rewrite(kernel)  # rewrite all kernels before the first launch: their module then compiles once
    show(
        "previous = wp.atomic_add(total, 0, 1.0); y[0] = previous * x[0]   (x=[3], total=[10], want x.grad=[10])",
        scale_by_previous,
        1,
        np.array([3.0]),
        [lambda: wp.array([10.0], dtype=float), lambda: wp.zeros(1, dtype=float, requires_grad=True)],
        2,
    )
    x = np.array([0.5, -1.0, 2.0, 1.5, -0.5, 3.0])
    show(
        "slot = wp.atomic_add(count, 0, 1); out[slot] = x[tid]**2   (want x.grad = 2x where x > 0, else 0)",
        compact_positive,
        len(x),
        x,
        [lambda: wp.zeros(1, dtype=int), lambda: wp.zeros(len(x), dtype=float, requires_grad=True)],
        2,
    )
    x = np.array([1.0, 2.0, 3.0])
    show(
        "before = wp.atomic_add(acc, 0, x[tid]); out[tid] = before * x[tid]   (acc=[0.5]; exact: want [5.5 4.5 3.5])",
        running_sum,
        len(x),
        x,
        [lambda: wp.array([0.5], dtype=float), lambda: wp.zeros(len(x), dtype=float, requires_grad=True)],
        2,
    )
    x = np.array([1.0, 2.0, 3.0])
    show(
        "for k in range(n[tid]): acc += x[(tid + k) % 3]; out[tid] = acc**2   (n=[2,1,3], no atomic; want [18 22 12])",
        squared_window_sum,
        len(x),
        x,
        [lambda: wp.array([2, 1, 3], dtype=int), lambda: wp.zeros(len(x), dtype=float, requires_grad=True)],
        2,
    )
    print("\nGenerated source of the rewritten compaction kernel:\n")
    print(wp_rewrite(compact_positive).source)


if __name__ == "__main__":
    main()
