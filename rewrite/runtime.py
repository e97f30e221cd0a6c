"""Launch glue: run the record kernel forward, put the replay kernel's adjoint on the tape."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import warp as wp
from warp._src.codegen import StructInstance

from rewrite.errors import RewriteError
from rewrite.exact import ExactBackward, ExactSite

if TYPE_CHECKING:
    from rewrite.api import RewrittenKernel
    from rewrite.build import RecordInfo, SiteInfo


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


def _arrays(kernel: wp.Kernel, args: Sequence[Any]) -> Iterator[tuple[str, Any]]:
    """Every array among the arguments, struct fields included, with its path."""

    def walk(path: str, value: Any) -> Iterator[tuple[str, Any]]:
        if isinstance(value, wp.array):
            yield path, value
        elif isinstance(value, StructInstance):
            for field in value._cls.vars:
                yield from walk(f"{path}.{field}", getattr(value, field))

    for param, value in zip(kernel.adj.args, args, strict=True):
        yield from walk(param.label, value)


def check_arguments(kernel: wp.Kernel, args: Sequence[Any], device: wp.context.Device) -> None:
    """Refuse a bad launch before anything runs, so counters and outputs stay untouched."""
    expected = len(kernel.adj.args)
    if len(args) != expected:
        raise TypeError(f"kernel '{kernel.key}' takes {expected} arguments (inputs + outputs), got {len(args)}")
    for path, array in _arrays(kernel, args):
        if array.device != device:
            raise ValueError(
                f"kernel '{kernel.key}': argument '{path}' is on device '{array.device}', "
                f"but the launch is on '{device}'"
            )


def check_float_returns(rewritten: RewrittenKernel, args: Sequence[Any]) -> None:
    """Refuse a launch whose floating-point returns would need gradients the replay cannot give.

    A recorded float return is treated as a constant. That is exact only when nothing it is made of (the
    target's initial values, the values written into it) carries a gradient in this launch.
    """
    kernel = rewritten.kernel
    for site in rewritten.sites:
        path = None if site.exact_records else _requires_grad(kernel, args, site)
        if path is not None:
            raise RewriteError(
                kernel.key,
                site.location,
                f"the value returned by wp.atomic_{site.op}() on '{site.target}' is a float that depends on "
                f"'{path}', which requires grad; its exact gradient through the returned value is not supported",
                f"Launch with '{path}' not requiring grad, or compute the value without using the atomic's return",
            )


def _scratch_copy(value: Any) -> Any:
    """A copy a dry run may write into: arrays cloned, struct fields copied, plain values as they are."""
    if isinstance(value, wp.array):
        return wp.clone(value, requires_grad=False)
    if isinstance(value, StructInstance):
        copy = type(value)()
        for field in value._cls.vars:
            setattr(copy, field, _scratch_copy(getattr(value, field)))
        return copy
    return value


def _allocate(record: RecordInfo, target: wp.array | None, size: int, exact: bool, device) -> wp.array:
    """One record array. Exact-return records are empty when this launch needs no gradient through them."""
    if record.kind in ("values", "order", "addresses", "compares", "tickets") and not exact:
        shape = (0,) * target.ndim if record.kind == "tickets" else 0
        dtype = target.dtype if record.kind in ("values", "compares") else wp.int32
        return wp.empty(shape, dtype=dtype, device=device)
    if record.kind == "tickets":
        return wp.zeros(target.shape, dtype=wp.int32, device=device)
    if record.kind == "order":
        return wp.full(size, -1, dtype=wp.int32, device=device)
    dtype = target.dtype if record.kind in ("returned", "values", "compares") else getattr(wp, record.dtype)
    # The replay reads only records the record kernel wrote, so they need no zero fill.
    return wp.empty(size, dtype=dtype, device=device, requires_grad=record.requires_grad and exact)


def exact_targets_needed(rewritten: RewrittenKernel, args: Sequence[Any]) -> set[str]:
    """Targets whose float returns need exact gradients in this launch: something they are made of requires grad."""
    needed = set()
    for site in rewritten.sites:
        if site.exact_records and _requires_grad(rewritten.kernel, args, site) is not None:
            needed.add(site.target)
    return needed


def _requires_grad(kernel: wp.Kernel, args: Sequence[Any], site: SiteInfo) -> str | None:
    """The path of an array this float return may be differentiable in that requires grad, if any."""
    if not is_float_dtype(resolve_path(kernel, args, site.target).dtype):
        return None
    if site.gradient_sources is None:
        candidates = list(_arrays(kernel, args))
    else:
        candidates = [(path, resolve_path(kernel, args, path)) for path in sorted(site.gradient_sources)]
    for path, value in candidates:
        if isinstance(value, wp.array) and value.requires_grad and is_float_dtype(value.dtype):
            return path
    return None


class _Phases:
    """The record arrays and trip arrays of one launch of the record kernel."""

    def __init__(
        self,
        rewritten: RewrittenKernel,
        args: Sequence[Any],
        shape: tuple[int, ...],
        capacities: list[int],
        device: wp.context.Device,
        exact: set[str] = frozenset(),
    ):
        kernel = rewritten.kernel
        threads = math.prod(shape)
        self.capacities = capacities
        self.records = {
            record.name: _allocate(
                record,
                resolve_path(kernel, args, record.target) if record.target else None,
                threads * math.prod(capacities[i] for i in record.loops),
                record.target in exact,
                device,
            )
            for record in rewritten.records
        }
        self.extra = list(self.records.values())
        if any(not loop.opaque for loop in rewritten.loops):
            self.trip_capacity = wp.array(np.array(capacities, dtype=np.int32), dtype=wp.int32, device=device)
            self.trips_needed = wp.zeros(len(capacities), dtype=wp.int32, device=device)
            self.extra += [self.trip_capacity, self.trips_needed]
        self.extra.append(wp.vec4i(*shape, *(1,) * (4 - len(shape))))

    def trips_needed_now(self) -> np.ndarray:
        return self.trips_needed.numpy()


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
    check_arguments(kernel, args, device)
    tape = active_tape() if record_tape else None
    options = {"device": device, "stream": stream, "block_dim": block_dim, "max_blocks": max_blocks}
    if tape is None or rewritten.record_kernel is None:
        # Without a tape nothing will run backward: the original kernel is the exact forward.
        wp.launch(kernel, dim, inputs, outputs, record_tape=record_tape, **options)
        return
    check_float_returns(rewritten, args)
    shape = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(shape) > rewritten.launch_arity:
        raise ValueError(
            f"kernel '{kernel.key}' unpacks wp.tid() into {rewritten.launch_arity} index(es) but is launched with "
            f"{len(shape)} dimensions: its records are kept per thread by those indices. Unpack all "
            f"{len(shape)} (e.g. i, j = wp.tid()) or launch with fewer dimensions"
        )

    capacities = [
        rewritten.max_records if loop.needs_capacity else (loop.static_trips or 1) for loop in rewritten.loops
    ]
    if None in capacities:
        capacities = _count_trips(rewritten, args, shape, capacities, options)
    exact_needed = exact_targets_needed(rewritten, args)
    phases = _Phases(rewritten, args, shape, capacities, device, exact_needed)
    wp.launch(rewritten.record_kernel, dim, inputs, [*outputs, *phases.extra], record_tape=False, **options)
    if any(loop.needs_capacity for loop in rewritten.loops):
        _check_capacity(rewritten, phases)
    exact = _exact_targets(rewritten, args, phases, exact_needed)
    if exact:
        # Recorded before the replay launch, so that backward runs it right after the replay's adjoint.
        step = ExactBackward(kernel.key, rewritten.replay_kernel, dim, list(inputs), [*outputs, *phases.extra], device,
                             block_dim, max_blocks, exact)  # fmt: skip
        tape.record_func(backward=step, arrays=[site.returned for *_, sites in exact for site in sites])
    tape.record_launch(rewritten.replay_kernel, dim, max_blocks, list(inputs), [*outputs, *phases.extra], device,
                       block_dim or 0)  # fmt: skip
    if wp.config.verify_autograd_array_access:
        tape._check_kernel_array_access(rewritten.replay_kernel, [*args, *phases.extra])


def _exact_targets(rewritten: RewrittenKernel, args, phases: _Phases, needed: set[str]) -> list:
    """The exact sites of this launch grouped by target: (location, path, target array, sites)."""
    groups: dict[str, tuple] = {}
    for site in rewritten.sites:
        if site.target not in needed:
            continue
        target = resolve_path(rewritten.kernel, args, site.target)
        returned, values, order, addresses, compares = (phases.records.get(name) for name in site.exact_records)
        group = groups.setdefault(site.target, (site.location, site.target, target, []))
        group[3].append(ExactSite(site.op, returned, values, order, addresses, compares))
    return list(groups.values())


def _count_trips(rewritten: RewrittenKernel, args, shape, capacities, options) -> list[int]:
    """A dry run of the record kernel on scratch copies, with no room for records, to count loop trips."""
    scratch = [_scratch_copy(a) for a in args]
    dry = _Phases(rewritten, scratch, shape, [c or 0 for c in capacities], options["device"])
    wp.launch(rewritten.record_kernel, shape, scratch, dry.extra, record_tape=False, **options)
    needed = dry.trips_needed_now()
    return [c if c is not None else int(needed[i]) for i, c in enumerate(capacities)]


def _check_capacity(rewritten: RewrittenKernel, phases: _Phases) -> None:
    """Right after the launch: did every loop fit its records? Never leave a gradient built on lost records."""
    needed = phases.trips_needed_now()
    for loop in rewritten.loops:
        if loop.needs_capacity and needed[loop.id] > phases.capacities[loop.id]:
            raise RewriteError(
                rewritten.kernel.key,
                loop.location,
                f"this loop ran {needed[loop.id]} times in one execution but its records had room for "
                f"{phases.capacities[loop.id]}; the launch's gradients would be wrong",
                f"Rewrite with wp_rewrite({rewritten.kernel.key}, max_records={needed[loop.id]}) or more",
            )
