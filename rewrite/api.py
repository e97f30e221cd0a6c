"""Public API: ``wp_rewrite(kernel)`` and ``launch(...)``, a drop-in for ``wp.launch``."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import warp as wp

from warp_rewrite.build import Generated, LoopInfo, RecordInfo, SiteInfo, generate
from warp_rewrite.errors import RewriteError
from warp_rewrite.exact import ExactBackward, ExactSite
from warp_rewrite.launching import launch_recorded


@dataclass
class RewrittenKernel:
    """A kernel rewritten into a record kernel (forward) and a replay kernel (backward).

    Launch it with ``launch(...)`` or ``.launch(...)``, exactly as you would launch ``kernel`` with
    ``wp.launch``. A kernel that consumes no atomic return has no phases and launches unchanged.
    """

    kernel: wp.Kernel
    record_kernel: wp.Kernel | None = None
    replay_kernel: wp.Kernel | None = None
    source: str = ""
    sites: list[SiteInfo] = field(default_factory=list)
    records: list[RecordInfo] = field(default_factory=list)
    loops: list[LoopInfo] = field(default_factory=list)
    max_records: int | None = None
    launch_arity: int = 4
    _launches: dict = field(default_factory=dict, repr=False, compare=False)  # see rewrite.launching.PreparedLaunch

    @property
    def key(self) -> str:
        return self.kernel.key

    def launch(
        self,
        dim: int | Sequence[int],
        inputs: Sequence[Any] = (),
        outputs: Sequence[Any] = (),
        device: wp.context.Devicelike = None,
        stream: wp.Stream | None = None,
        record_tape: bool = True,
        block_dim: int | None = None,
        max_blocks: int = 0,
    ) -> None:
        if self.record_kernel is None:
            wp.launch(self.kernel, dim, inputs, outputs, device=device, stream=stream, record_tape=record_tape,
                      block_dim=block_dim, max_blocks=max_blocks)  # fmt: skip
            return
        parameters, sites, records, loops = self._launch_tables
        launch_recorded(
            self.kernel, self.record_kernel, self.replay_kernel,
            dim, inputs, outputs, device, stream, record_tape, block_dim, max_blocks, self.max_records,
            parameters=parameters, sites=sites, records=records, loops=loops,
            exact_runtime=(ExactSite, ExactBackward), launch_arity=self.launch_arity,
            detached=self._detached_factory, launches=self._launches,
        )  # fmt: skip

    @functools.cached_property
    def _detached_factory(self) -> Callable[[], tuple | None] | None:
        """How a launch gets the detached variant: only kernels with exact float returns have one."""
        return (lambda: self._detached) if any(site.exact_records for site in self.sites) else None

    @functools.cached_property
    def _detached(self) -> tuple | None:
        """The variant recording float returns as constants, for launches where no exact gradient can flow.

        Generated at the first such launch, into a Warp module of its own: kernels added to a module that has
        been loaded make Warp compile it all again, and a program that never needs the variant never compiles it.
        """
        try:
            generated = generate(self.kernel, True, ".detached", self.max_records)
        except RewriteError:
            return None  # refused without exact returns (not expected): the exact variant is right for every launch
        tables = _as_launch_tables(generated.sites, generated.records, generated.loops)
        return generated.record_kernel, generated.replay_kernel, *tables

    @functools.cached_property
    def _launch_tables(self) -> tuple[tuple, tuple, tuple, tuple]:
        """This kernel's parameters, sites, records and loops as the plain tuples ``rewrite.launching`` reads."""
        parameters = tuple(arg.label for arg in self.kernel.adj.args)
        return parameters, *_as_launch_tables(self.sites, self.records, self.loops)


def _as_launch_tables(
    sites: list[SiteInfo], records: list[RecordInfo], loops: list[LoopInfo]
) -> tuple[tuple, tuple, tuple]:
    """Sites, records and loops as the plain tuples ``rewrite.launching`` reads."""
    site_table = tuple(
        (s.target, s.op, s.location, None if s.gradient_sources is None else tuple(sorted(s.gradient_sources)),
         s.exact_records)
        for s in sites
    )  # fmt: skip
    record_table = tuple((r.name, r.kind, r.target, r.dtype, r.loops, r.requires_grad) for r in records)
    loop_table = tuple((loop.id, loop.static_trips, loop.location, loop.opaque, loop.room) for loop in loops)
    return site_table, record_table, loop_table


_generated: weakref.WeakKeyDictionary[wp.Kernel, dict[tuple, Generated | None]] = weakref.WeakKeyDictionary()
_rewritten: weakref.WeakKeyDictionary[wp.Kernel, dict[tuple, RewrittenKernel]] = weakref.WeakKeyDictionary()


def wp_rewrite(kernel: wp.Kernel, *, max_records: int | None = None, detach_returns: bool = False) -> RewrittenKernel:
    """Rewrite a kernel whose code uses atomics' returned values into a record and a replay kernel.

    Floating-point returns get exact gradients (through the target's initial values and every earlier
    operand on the same address). ``detach_returns=True`` records them as constants instead, which is
    exact only when nothing they are made of requires grad: launches refuse otherwise.

    ``max_records`` bounds how many times any loop around a consumed atomic runs in one execution, for
    loops whose trip count is not a constant; without it each launch counts the trips in a dry run of the
    record kernel on scratch copies of the arguments first.

    Raises ``TypeError`` for anything but a ``@wp.kernel`` and ``RewriteError`` for a pattern that cannot
    be made differentiable correctly. Repeated calls on the same kernel return the cached result.
    """
    if not isinstance(kernel, wp.Kernel):
        what = "a @wp.func" if isinstance(kernel, wp._src.context.Function) else repr(type(kernel).__name__)
        raise TypeError(f"wp_rewrite() expects a Warp kernel (the object @wp.kernel returns), got {what}")
    if max_records is not None and (not isinstance(max_records, int) or max_records < 0):
        raise ValueError(f"max_records must be a non-negative int, got {max_records!r}")
    by_option = _rewritten.setdefault(kernel, {})
    key = (max_records, bool(detach_returns))
    if key not in by_option:
        generated = _generated_for(kernel, bool(detach_returns), max_records)
        if generated is None:
            source = f"# kernel '{kernel.key}' uses no atomic's return: launched unchanged\n"
            by_option[key] = RewrittenKernel(kernel, source=source, max_records=max_records)
        else:
            by_option[key] = RewrittenKernel(
                kernel,
                generated.record_kernel,
                generated.replay_kernel,
                generated.source,
                generated.sites,
                generated.records,
                generated.loops,
                max_records,
                generated.launch_arity,
            )
    return by_option[key]


def _generated_for(kernel: wp.Kernel, detach_returns: bool, max_records: int | None) -> Generated | None:
    """The generated kernels for these options: one with no loop of unknown length serves every max_records."""
    by_options = _generated.setdefault(kernel, {})
    for (detached, _), generated in by_options.items():
        if detached == detach_returns and not any(loop.needs_capacity for loop in getattr(generated, "loops", ())):
            return generated
    if (detach_returns, max_records) not in by_options:
        by_options[detach_returns, max_records] = generate(kernel, detach_returns, max_records=max_records)
    return by_options[detach_returns, max_records]


def launch(
    kernel: RewrittenKernel | wp.Kernel,
    dim: int | Sequence[int],
    inputs: Sequence[Any] = (),
    outputs: Sequence[Any] = (),
    device: wp.context.Devicelike = None,
    stream: wp.Stream | None = None,
    record_tape: bool = True,
    block_dim: int | None = None,
    max_blocks: int = 0,
) -> None:
    """``wp.launch`` for rewritten kernels: the same arguments with the same meaning.

    A ``RewrittenKernel`` runs as its two phases; a plain ``wp.Kernel`` goes straight to ``wp.launch``.
    """
    if isinstance(kernel, RewrittenKernel):
        kernel.launch(dim, inputs, outputs, device, stream, record_tape, block_dim, max_blocks)
    else:
        wp.launch(kernel, dim, inputs, outputs, device=device, stream=stream, record_tape=record_tape,
                  block_dim=block_dim, max_blocks=max_blocks)  # fmt: skip
