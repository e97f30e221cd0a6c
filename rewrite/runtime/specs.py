# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""What a launch needs to know about the generated kernels: frozen records the pipeline fills and emitted modules
spell out as source text (``k_spec = KernelSpec(...)``, then ``KernelPair(record, replay, k_spec)``)."""

import dataclasses
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import warp as wp

from .abi import Op, RecordKind

# --- what a launch needs to know about the generated kernels ------------------------------------------------


_LINE_COLUMN = re.compile(r"\d+:\d+")  # a location in the file of the spec that holds it


@dataclass(frozen=True)
class ExactRecords:
    """The record parameters of an atomic whose float returns get exact gradients (see the exact backward)."""

    returned: str
    values: str  # the operands
    order: str  # each operation's place among the operations on its address, per component (-1: never ran)
    addresses: str  # the flat address each operation touched
    compares: str | None = None  # atomic_cas: the compare operands


@dataclass(frozen=True)
class SiteSpec:
    """One recorded atomic."""

    target: str  # argument path of the target array: "count", or a struct field's "state.count"
    op: Op  # the atomic, or Op.READ: a plain read of an array the launch writes
    location: str  # "file:line:col" of the atomic in the user's source ("line:col" in its spec's file)
    # argument paths a float return may be differentiable in; None: any array argument
    gradient_sources: tuple[str, ...] | None = ()
    exact: ExactRecords | None = None
    pool: bool = False  # a read of an append pool: checked by the record kernel where it needs a gradient


@dataclass(frozen=True)
class RecordSpec:
    """One record parameter of the generated kernels, which each launch allocates.

    ``kind`` says how (``RecordKind``). Each but the shadow holds one entry per thread and iteration of ``loops``.
    """

    name: str
    kind: RecordKind
    target: str | None = None
    dtype: Any = None  # the Warp type of TRIPS and CARRIED records; None: decided by the kind
    loops: tuple[int, ...] = ()
    requires_grad: bool = False


@dataclass(frozen=True)
class ArgumentBound:
    """A bound of a loop's range as a launch's arguments give it: the parameter's value, or its array's
    ``shape[axis]``."""

    parameter: str
    axis: int | None = None

    def value(self, parameters: tuple[str, ...], args: Sequence[Any]) -> int:
        argument = args[parameters.index(self.parameter)]
        if self.axis is None:
            return int(argument)
        return 0 if argument is None else int(argument.shape[self.axis])  # (None: Warp's empty array)


@dataclass(frozen=True)
class LoopSpec:
    """A loop around a recorded atomic."""

    id: int
    location: str  # "file:line:col" ("line:col" in its spec's file)
    trips: int | None = None  # the trip count of a constant range()
    room: int | None = None  # records per execution compiled into the kernels; None: passed by each launch
    counted: bool = False  # of unknown length and replayed: needs room, and its trips are checked
    # Of unknown length, its range() as the launch's arguments give it (ints and bounds): each launch sizes its records
    # from them, where else a dry run would count its trips
    argument_range: tuple[int | ArgumentBound, ...] = ()

    def argument_trips(self, parameters: tuple[str, ...], args: Sequence[Any]) -> int:
        """The trips of each execution of a loop whose range the launch's arguments give."""
        bounds = [b if isinstance(b, int) else b.value(parameters, args) for b in self.argument_range]
        return len(range(*bounds))


@dataclass(frozen=True)
class KernelSpec:
    """What a launch of one pair of generated kernels needs to know about them."""

    key: str  # the original kernel's name, for messages
    # The original kernel's parameters, in order: the kernel's own (``RewrittenKernel`` fills them in from it; generated
    # code leaves them out, the kernel right above names them)
    parameters: tuple[str, ...] = ()
    location: str = ""  # "file:line:col" of the kernel's definition
    written: tuple[str, ...] = ()  # argument paths of the arrays the launch writes
    # those of them a dry run copies: the ones the launch reads back (the count kernel writes no others)
    copied: tuple[str, ...] = ()
    # The sites the device names by number (exact ones, reads of an append pool) first, then the others, each once
    sites: tuple[SiteSpec, ...] = ()
    records: tuple[RecordSpec, ...] = ()  # in the order of the generated kernels' record parameters
    loops: tuple[LoopSpec, ...] = ()
    launch_arity: int = 1  # how many indices the kernel unpacks wp.tid() into: the most launch dimensions
    # The adjoint launches of the replay kernel the exact backward makes: one, plus one per link of the longest
    # chain of exact returns feeding exact operands; None: found by the backward, which then reads on the host
    # whether gradient is left after each (a chain through a helper, or one that can feed back into its target).
    exact_rounds: int | None = 0
    # No atomic's return used (only loops Warp replays wrong, reads of arrays the launch updates): a launch the rewrite
    # refuses before anything runs runs the original kernel instead, as plain Warp, with a ``RewriteWarning`` (it
    # launched before it was rewritten)
    uses_no_returns: bool = False

    def __post_init__(self) -> None:
        """A site or loop in the spec's own file may leave the file out (``"12:9"``): generated code names it once,
        in the spec's ``location``; every message gets it whole."""
        file = self.location.rsplit(":", 2)[0]
        for field in ("sites", "loops"):
            completed = tuple(
                dataclasses.replace(item, location=f"{file}:{item.location}")
                if _LINE_COLUMN.fullmatch(item.location)
                else item
                for item in getattr(self, field)
            )
            object.__setattr__(self, field, completed)

    @property
    def has_status(self) -> bool:
        """Whether both kernels take a status array: the device's checks (records overflowing, exact orders)."""
        return any(loop.counted for loop in self.loops) or any(site.exact or site.pool for site in self.sites)


@dataclass(frozen=True)
class KernelPair:
    """A record kernel, its replay kernel, and what their launches need to know about them."""

    record: wp.Kernel  # the complete forward plus the record stores; enable_backward=False
    replay: wp.Kernel  # the original code reading the records back: only its adjoint runs
    spec: KernelSpec
    count: wp.Kernel | None = None  # the record kernel without writes nothing reads back: what dry runs launch

    @functools.cached_property
    def _counted(self) -> tuple[bool, ...]:
        """Which of the record kernel's parameters the count kernel takes: only those it reads
        (``passes.count_slice``)."""
        assert self.count is not None  # (asked only of a pair with a count kernel)
        taken = {argument.label for argument in self.count.adj.args}
        return tuple(argument.label in taken for argument in self.record.adj.args)

    def count_arguments(self, arguments: list[Any]) -> list[Any]:
        """Of the record kernel's arguments (the kernel's own, then ``records.phase_arguments``' extra), those the
        count kernel takes."""
        return [argument for argument, taken in zip(arguments, self._counted, strict=True) if taken]
