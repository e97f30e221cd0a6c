"""Launch glue: run the record kernel forward, put the replay kernel's adjoint on the tape."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import warp as wp

if TYPE_CHECKING:
    from rewrite.api import RewrittenKernel


def active_tape() -> wp.Tape | None:
    """The tape ``with wp.Tape():`` is recording into (Warp has no public accessor for it)."""
    return wp._src.context.runtime.tape


def resolve_path(kernel: wp.Kernel, args: Sequence[Any], path: str) -> Any:
    """The launch argument (or struct field of one) named by ``path``, e.g. ``"w.count"``."""
    root, *fields = path.split(".")
    value = args[kernel.arg_indices[root]]
    for field in fields:
        value = getattr(value, field)
    return value


def is_float_dtype(dtype: Any) -> bool:
    """True for float scalars and for vectors, matrices, quaternions and transforms of them."""
    return wp._src.types.type_scalar_type(dtype) in wp._src.types.float_types


def _check_arguments(kernel: wp.Kernel, args: Sequence[Any], device: wp.context.Device) -> None:
    """Refuse a bad launch before anything runs, so counters and outputs stay untouched."""
    expected = len(kernel.adj.args)
    if len(args) != expected:
        raise TypeError(f"kernel '{kernel.key}' takes {expected} arguments (inputs + outputs), got {len(args)}")
    for param, value in zip(kernel.adj.args, args, strict=True):
        if isinstance(value, wp.array) and value.device != device:
            raise ValueError(
                f"kernel '{kernel.key}': argument '{param.label}' is on device '{value.device}' "
                f"but the launch is on '{device}'"
            )


def launch_two_phase(
    rewritten: RewrittenKernel,
    dim: int | Sequence[int],
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    device: wp.context.Devicelike,
    stream: wp.Stream | None,
    record_tape: bool,
    block_dim: int | None,
    max_blocks: int,
) -> None:
    kernel = rewritten.kernel
    device = wp.get_device(device)
    args = [*inputs, *outputs]
    _check_arguments(kernel, args, device)
    tape = active_tape() if record_tape else None
    if tape is None or not rewritten.sites:
        # Without a tape nothing will run backward: the original kernel is the exact forward.
        wp.launch(kernel, dim, inputs, outputs, device=device, stream=stream, record_tape=record_tape,
                  block_dim=block_dim, max_blocks=max_blocks)  # fmt: skip
        return
    rewritten.check_float_returns(args)

    shape = (dim,) if isinstance(dim, int) else tuple(dim)
    records = [
        wp.zeros(math.prod(shape), dtype=resolve_path(kernel, args, site.target).dtype, device=device)
        for site in rewritten.sites
    ]
    launch_shape = wp.vec4i(*shape, *(1,) * (4 - len(shape)))
    phase_outputs = [*outputs, *records, launch_shape]
    wp.launch(rewritten.record_kernel, dim, inputs, phase_outputs, device=device, stream=stream,
              record_tape=False, block_dim=block_dim, max_blocks=max_blocks)  # fmt: skip
    tape.record_launch(rewritten.replay_kernel, dim, max_blocks, list(inputs), phase_outputs, device, block_dim or 0)
    if wp.config.verify_autograd_array_access:
        tape._check_kernel_array_access(rewritten.replay_kernel, [*inputs, *phase_outputs])
