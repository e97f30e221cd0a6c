# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""Launching both phases of a rewritten kernel: ``RewrittenKernel``, ``KernelRewrite`` and what a launch allocates."""

import dataclasses
import functools
import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import warp as wp

from .abi import Op, RecordKind
from .arguments import (
    UNCOPYABLE,
    adjoint_stand_ins,
    argument_arrays,
    argument_at,
    check_aliasing,
    requires_grad_path,
    scratch_copy,
)
from .checks import device_checks, explain_status, host_view, trips_of, unbounded_chain
from .errors import RewriteError, RewriteWarning, left_to_warp
from .exact import ExactBackward
from .hook import backward_enabled, warp_launch
from .memory import requires_float_grad, written_first
from .records import Capacities, LaunchRecords, capacities_of, is_stand_in, phase_arguments
from .specs import KernelPair, KernelSpec, RecordSpec, SiteSpec
from .verify import ReadMemory, verify_everywhere


@dataclass(frozen=True)
class LaunchRequest:
    """A launch of a rewritten kernel as ``RewrittenKernel.launch`` received it, with its device resolved."""

    shape: tuple[int, ...]  # ``dim`` as Warp reads it
    inputs: Sequence[Any]
    outputs: Sequence[Any]
    device: wp.Device
    stream: wp.Stream | None
    block_dim: int | None
    max_blocks: int
    max_records: int | None  # the launch's, else the kernel's
    verify: bool  # fingerprint what the replay reads from memory, and check it in backward (``verify``)

    @functools.cached_property
    def args(self) -> list[Any]:
        """The kernel's arguments, in parameter order (made once: the prepared launches' path is short)."""
        return [*self.inputs, *self.outputs]

    @property
    def options(self) -> dict[str, Any]:
        """What every ``wp.launch`` of the launch's kernels takes."""
        return dict(device=self.device, stream=self.stream, block_dim=self.block_dim, max_blocks=self.max_blocks)


def held_elsewhere(values: list[Any], indices: list[int]) -> list[bool]:
    """For each ``values[i]``: whether anything besides the list ``values`` refers to it.

    How many references ``sys.getrefcount`` reports for an object in one list slot differs across Python
    versions; a probe in a list of its own, read the same way, calibrates it.
    """
    probe = [object()]
    alone = sys.getrefcount(probe[0])
    return [sys.getrefcount(values[i]) > alone for i in indices]


def signature(args: Sequence[Any], shape: tuple[int, ...], block_dim, max_blocks: int, max_records) -> tuple | None:
    """The key of a launch's ``PreparedLaunch``; None where an argument could change unseen (a struct's fields).

    An array stands for itself by its packed descriptor: Warp keeps one per array and replaces it whenever the
    array's gradient changes, and a prepared launch keeps the descriptors it was made for alive, so their ids
    are never reused. Other values are repacked at every launch: only their types count.
    """
    key = [shape, block_dim, max_blocks, max_records]
    for value in args:
        if type(value) is wp.array:
            key.append(id(value.__ctype__()))
        elif wp.types.is_value(value):
            key.append(type(value))
        else:
            return None
    return tuple(key)


class PreparedLaunch:
    """The record kernel's launch, packed once for one signature of arguments, and its last records (CPU only).

    A launch with the same arrays repacks only the other values (as ``wp.launch`` would) and runs. It writes the
    last launch's records (and status) again when no tape holds them any more (they are still warm in the cache),
    new ones otherwise. Not for CUDA, where a backward enqueued on another stream could still be reading the
    records, nor for exact float returns, whose shadows are filled and read around each launch.
    """

    def __init__(self, command, pair: KernelPair, args, records: LaunchRecords, capacities):
        command.fwd_args = None  # it would keep the arguments alive; Warp reads it only in graph captures
        self.command = command  # the record kernel's wp.Launch
        self.pair = pair
        arrays = [value for value in args if type(value) is wp.array]
        self.arrays = [weakref.ref(array) for array in arrays]
        self.descriptors = [array.__ctype__() for array in arrays]  # kept alive: see ``signature``
        self.values = {index: value for index, value in enumerate(args) if type(value) is not wp.array}  # as packed
        self.first_extra = len(args)  # the parameter index of extra[0]
        self.extra = records.extra
        self.renewed = [i for i, record in enumerate(pair.spec.records) if not is_stand_in(record, frozenset())]
        if records.status is not None:
            self.renewed.append(next(i for i, value in enumerate(records.extra) if value is records.status))
        # append pools' marks start every launch at zero (``pool_read``)
        self.marks = [i for i, record in enumerate(pair.spec.records) if record.kind == RecordKind.MARKS]
        # A CPU array's memory is the host's: its status is zeroed and read back without a copy or a launch.
        self.status = host_view(records.status) if records.status is not None else None
        self.capacities = capacities

    def current(self) -> bool:
        """False once Warp has rebuilt the record kernel's module (a function it calls changed, or an option)."""
        command = self.command
        return command.kernel.module.load(command.device, command.block_dim) is command.module_exec

    def live(self) -> bool:
        """False once an array it was prepared for is gone: no launch can match it again."""
        return all(array() is not None for array in self.arrays)

    def launch(self, request: LaunchRequest, tape: Any) -> None:
        """Run the record kernel on the request's arguments and put the replay kernel's adjoint on ``tape``."""
        command, extra, args = self.command, self.extra, request.args
        for index, packed in self.values.items():
            value = args[index]
            # Packing a value costs microseconds; an int, float or bool equal to the one packed need not be.
            if type(value) is not type(packed) or type(value) not in (int, float, bool) or value != packed:
                command.set_param_at_index(index, value)
                self.values[index] = value
        if any(held_elsewhere(extra, self.renewed)):  # a tape may still replay the last ones
            for index in self.renewed:
                extra[index] = written_first(extra[index].shape, extra[index].dtype, command.device)
                command.set_param_at_index(self.first_extra + index, extra[index])
            if self.status is not None:
                self.status = host_view(extra[self.renewed[-1]])
        if self.status is not None:
            self.status.fill(0)
        for index in self.marks:
            if extra[index].size:
                extra[index].zero_()
        command.launch()
        if self.status is not None:
            error = explain_status(self.pair.spec, self.capacities, self.status)
            if error is not None:
                raise error
        tape.record_launch(
            self.pair.replay,
            request.shape,
            request.max_blocks,
            list(request.inputs),
            [*request.outputs, *extra],
            command.device,
            request.block_dim or 0,
        )


def remember(launches: dict, key: tuple, prepared: PreparedLaunch, most: int = 8) -> None:
    """Keep ``prepared`` for launches with ``key``: with at most ``most`` others, none that can no longer match."""
    for old_key, old in list(launches.items()):
        if not old.live():
            launches.pop(old_key, None)
    while len(launches) >= most:
        launches.pop(next(iter(launches)), None)  # the least recently used
    launches[key] = prepared


_making_detached = threading.RLock()  # reentrant: an overload's variant is made by the generic kernel's (add_overload)


class Freshness(Protocol):
    """Whether what a kernel's generated kernels were made from may have changed since (``stale``, asked at every
    launch: it must cost next to nothing), and the making of them again from what the kernel reaches now (``renew``,
    which hands them to ``RewrittenKernel.adopt``). ``wp_rewrite`` gives its kernels one (``warp_rewrite.api``); the
    blocks of an emitted module are checked against their source when it is imported."""

    def stale(self) -> bool: ...

    def renew(self, rewritten: "RewrittenKernel") -> None: ...


class RewrittenKernel(wp.Kernel):
    """A kernel rewritten into a record kernel (forward) and a replay kernel (backward).

    Launch it with ``.launch(...)`` (or ``warp_rewrite.launch``) exactly as you would launch ``kernel`` with
    ``wp.launch``. Under a ``wp.Tape`` the record kernel runs the original code and stores the values its atomics
    return, and the tape records the replay kernel, whose adjoint reads them back; without a tape (or with
    ``record_tape=False``) nothing runs backward, so ``kernel`` itself runs. A kernel that consumes no atomic's
    return has no pair and launches unchanged.

    It is a ``wp.Kernel`` so that Warp's tools that take one (``wp.autograd.jacobian``, ``gradcheck``...) take it,
    but never compiled itself (``wp.Kernel.__init__`` does not run): ``module`` and ``options`` are the generated
    kernels' and ``key`` the replay kernel's (what Warp's tools see on a tape), ``adj`` (the parameters) the original's.
    """

    launches_rewritten = True  # how the wp.launch hook (``hook``) of any copy of the runtime recognises one

    def __init__(
        self,
        kernel: wp.Kernel,
        pair: KernelPair | None,
        *,
        detached: Callable[[], KernelPair | None] | None = None,
        max_records: int | None = None,
        source: str = "",
        refusal: RewriteError | None = None,
        left: RewriteError | None = None,
        verify: bool = False,
        freshness: Freshness | None = None,
    ):
        self.kernel = kernel
        self.pair = with_parameters(pair, kernel)
        # Why the kernel could not be rewritten (``on_refusal="original"``): raised by launches a gradient could
        # flow through; the others run the original kernel, which is exact forward.
        self.refusal = refusal
        # Why the kernel is left as plain Warp (``pipeline.LeftToWarp``, said by a ``RewriteWarning``): it runs as
        # the original kernel everywhere, with Warp's own gradient through its loops.
        self.left = left
        self.verify = verify  # check in backward that the memory the replay reads is unchanged (see ``verify``)
        # Kernels with exact float returns: makes the variant recording them as constants, for launches in which
        # no gradient can flow through them (it costs what a hand-written record costs).
        self._make_detached = detached
        self.max_records = max_records  # room per execution of loops of unknown length without one compiled in
        self.source = source  # the generated source (API), for reading
        self._launches: dict = {}  # this kernel's PreparedLaunch per signature of arguments
        self.freshness = freshness

    def adopt(self, fresh: "RewrittenKernel") -> None:
        """Take over ``fresh``'s generated kernels: those of this same kernel, made again after a helper, struct or
        constant it reaches was redefined (``Freshness.renew``). Nothing prepared for the old ones is kept."""
        self.pair, self.refusal, self.left, self.source = fresh.pair, fresh.refusal, fresh.left, fresh.source
        self.freshness = fresh.freshness
        with _making_detached:
            self._make_detached = fresh._make_detached
            self.__dict__.pop("_detached_pair", None)
        self._launches = {}

    @property
    def _generated(self) -> KernelPair:  # the generated kernels, for the steps a refused kernel never reaches
        assert self.pair is not None
        return self.pair

    def __getattr__(self, name: str) -> Any:
        """What plain code reads of a kernel (``.module``, ``.options``, ``.func``, ``.adj``...) is the original's:
        a file ``wp-rewrite`` rewrote binds the kernel's name to its ``RewrittenKernel``."""
        if name.startswith("__") or name in ("kernel", "pair"):  # not set yet (copy, pickle): no kernel to ask
            raise AttributeError(name)
        return getattr(self.kernel, name)

    def __repr__(self) -> str:
        sites = len(self.pair.spec.sites) if self.pair else 0
        phases = "record+replay" if self.pair else "refused" if self.refusal else "unchanged"
        return f"<RewrittenKernel {self.kernel.key!r}: {sites} site{'s' * (sites != 1)}, {phases}>"

    @property
    def key(self) -> str:
        """The key of the kernel Warp runs backward, the one its tools see on a tape (``gradcheck_tape``'s white and
        black lists, ``Tape.visualize``); messages name ``kernel.key``, the user's."""
        return self.pair.replay.key if self.pair else self.kernel.key

    @property
    def adj(self):
        return self.kernel.adj

    @property
    def module(self) -> wp._src.context.Module:
        return self.pair.record.module if self.pair else self.kernel.module

    @property
    def options(self) -> dict[str, Any]:
        return self.pair.replay.options if self.pair else self.kernel.options

    @property
    def is_generic(self) -> bool:
        return self.kernel.is_generic

    @property
    def record_kernel(self) -> wp.Kernel | None:
        return self.pair.record if self.pair else None

    @property
    def replay_kernel(self) -> wp.Kernel | None:
        return self.pair.replay if self.pair else None

    @property
    def records(self) -> tuple[RecordSpec, ...]:
        return self.pair.spec.records if self.pair else ()

    def add_overload(self, arg_types: list[Any]) -> "RewrittenKernel":
        """``wp.overload(rewritten, types)``: the overload of the original kernel, rewritten. Its launches run the same
        generic record and replay kernels, which Warp instantiates for the overload's types at the first of them (as
        it instantiates the generic kernels of every launch with types no overload declared)."""
        return RewrittenKernel(
            self.kernel.add_overload(arg_types),
            self.pair,
            detached=self.detached if self.pair else None,
            max_records=self.max_records,
            source=self.source,
            refusal=self.refusal,
            verify=self.verify,
        )

    def detached(self) -> KernelPair | None:
        """The variant recording float returns as constants (made on first use), or None if there is none."""
        with _making_detached:  # once, however many threads launch it at once
            if self._make_detached is not None:
                self._detached_pair, self._make_detached = with_parameters(self._make_detached(), self.kernel), None
        return getattr(self, "_detached_pair", None)

    def launch(
        self,
        dim: int | Sequence[int],
        inputs: Sequence[Any] = (),
        outputs: Sequence[Any] = (),
        adj_inputs: Sequence[Any] = (),
        adj_outputs: Sequence[Any] = (),
        device: Any = None,
        stream: wp.Stream | None = None,
        adjoint: bool = False,
        record_tape: bool = True,
        record_cmd: bool = False,
        max_blocks: int = 0,
        block_dim: int | None = None,
        *,
        max_records: int | None = None,
    ) -> "RewrittenLaunch | None":
        """Launch like ``wp.launch`` (the same parameters, in the same order); on an active tape, as the record and
        replay kernels. ``wp.launch(rewritten, ...)`` comes here too.

        ``record_cmd=True`` returns a ``RewrittenLaunch`` whose ``launch()`` runs both phases then. ``adjoint=True``
        adds the gradient of the forward from memory as it is now into the adjoints (see ``_launch_adjoint``); a
        rewritten launch's own backward runs from the tape that recorded it (``tape.backward()``). ``max_records``:
        records per execution of a loop of unknown length whose kernels do not have a room compiled in (default:
        the kernel's ``max_records``; None: counted by a dry run at each launch).
        """
        if self.freshness is not None and self.freshness.stale():
            self.freshness.renew(self)  # a helper it calls was redefined (a notebook's cell run again)
        if record_cmd:
            arguments = {
                "dim": dim,
                "inputs": inputs,
                "outputs": outputs,
                "device": device,
                "stream": stream,
                "record_tape": record_tape,
                "max_blocks": max_blocks,
                "block_dim": block_dim,
                "max_records": max_records,
            }
            return RewrittenLaunch(self, arguments)
        device = stream.device if stream is not None else wp.get_device(device)
        # Warp has no public accessor for the tape; the ignore: it declares context.runtime None until wp.init().
        tape = wp._src.context.runtime.tape if record_tape else None  # type: ignore[attr-defined]
        args = [*inputs, *outputs]
        original = {"device": device, "stream": stream, "block_dim": block_dim, "max_blocks": max_blocks}
        if self.refusal is not None and adjoint:
            check_like_warp(self.kernel, args, device, [*adj_inputs, *adj_outputs])
            refusal = self.refusal  # the original kernel's adjoint would give wrong gradients
            raise RewriteError(refusal.kernel, refusal.location, refusal.problem, refusal.advice)
        if self.refusal is not None:
            parameters = [parameter.label for parameter in self.kernel.adj.args]
            if tape is not None:
                check_like_warp(self.kernel, args, device)  # raises where wp.launch would
                if any(array.requires_grad for _, array in argument_arrays(parameters, args)):
                    refusal = self.refusal
                    raise RewriteError(refusal.kernel, refusal.location, refusal.problem, refusal.advice)
            # Forward only: nothing handed to it can take a gradient, so the original kernel is exact.
            warp_launch(self.kernel, dim, inputs, outputs, record_tape=False, **original)
            return None
        if self.pair is None or not backward_enabled(self.pair.replay) or (tape is None and not adjoint):
            # Without a tape nothing will run backward: the original kernel is the exact forward. Without a
            # backward pass (the replay kernel has its kernel's and module's options as they were when it was
            # generated), plain Warp's tape skips the original in backward, with a warning.
            warp_launch(
                self.kernel,
                dim,
                inputs,
                outputs,
                adj_inputs,
                adj_outputs,
                adjoint=adjoint,
                record_tape=record_tape,
                **original,
            )
            return None
        max_records = self.max_records if max_records is None else max_records
        shape, threads = wp._src.context._normalize_launch_dim(dim)  # as wp.launch reads dim, and refuses it
        if threads == 0:
            return None  # plain Warp checks and runs nothing
        verifies = self.verify or verify_everywhere()
        request = LaunchRequest(
            tuple(shape), inputs, outputs, device, stream, block_dim, max_blocks, max_records, verifies
        )
        if adjoint:
            adjoints = [*adj_inputs, *adj_outputs]
            check_like_warp(self.kernel, args, device, adjoints)
            self._check_arguments(args, shape, device)
            self._launch_adjoint(dataclasses.replace(request, verify=False), adjoints)
            return None
        # A CPU launch on a tape with the arrays of an earlier one takes the PreparedLaunch that one left.
        preparable = device.is_cpu and not device.is_capturing and not wp.config.verify_autograd_array_access
        preparable = preparable and not verifies
        key = signature(args, shape, block_dim, max_blocks, max_records) if preparable else None
        prepared = None if key is None else self._launches.pop(key, None)  # out while it runs: one thread uses it
        if prepared is not None and prepared.current():
            try:
                prepared.launch(request, tape)
            finally:
                self._launches[key] = prepared
            return None
        check_like_warp(self.kernel, args, device)
        self._check_arguments(args, shape, device)
        with wp.ScopedStream(stream) if stream is not None else nullcontext():
            try:
                checked = self._checked_variant(request)
            except RewriteError as left:
                if not self._generated.spec.uses_no_returns:
                    raise
                # It launched before it was rewritten: it runs as plain Warp, with Warp's gradients.
                warnings.warn(f"{left.location}: {left_to_warp(left)}", RewriteWarning, stacklevel=2)
                warp_launch(self.kernel, dim, inputs, outputs, record_tape=record_tape, **original)
                return None
            # Records are allocated and filled, and both phases run, on the launch's stream (see the README: Streams).
            self._launch_on_tape(tape, request, key, checked)
        return None

    def _checked_variant(self, request: LaunchRequest) -> tuple[KernelPair, frozenset[str]]:
        """The kernels a launch runs (``_variant``), compiled, after what ``_launch_on_tape`` refuses before it runs
        anything: a read of memory the launch writes whose gradient is needed, generated kernels that do not compile,
        targets without their shadow."""
        self._refuse_constant_replays(request)
        pair, exact = self._variant(request)
        self._compile(pair, request.device, request.block_dim)
        self._refuse_unshadowed_targets(pair.spec, request, exact)
        return pair, exact

    def _launch_adjoint(self, request: LaunchRequest, adjoints: Sequence[Any]) -> None:
        """``adjoint=True``, as custom autograd functions and Warp's tools launch a kernel (``wp.autograd.jacobian``
        records it on a tape without running it): adds the gradient of the forward from memory as it is now into
        ``adjoints``, as Warp's adjoint launch adds into them, and leaves memory as it is.

        Both phases run on a tape of their own, on stand-ins for the arguments (``adjoint_stand_ins``): copies whose
        gradients are the adjoints given, so that nothing of the user's arrays changes, their ``.grad`` included.
        """
        spec = self._generated.spec
        stand_ins = adjoint_stand_ins(self.kernel.key, spec.location, spec.parameters, request.args, adjoints)
        split = len(request.inputs)
        on_copies = dataclasses.replace(request, inputs=stand_ins.args[:split], outputs=stand_ins.args[split:])
        tape = wp.Tape()
        with wp.ScopedStream(request.stream) if request.stream is not None else nullcontext():
            self._launch_on_tape(tape, on_copies, None)
            tape.backward()
        stand_ins.write_back()

    def _compile(self, pair: KernelPair, device: wp.Device, block_dim: int | None) -> None:
        """Load the generated kernels' module; where it does not compile but the kernel's own does, say whose fault
        it is rather than leave the user with the compiler's output."""
        if pair.record.is_generic or pair.replay.is_generic:
            return  # compiled per overload at launch
        # The variant wp.launch will run: Warp resolves an unset block_dim per device (1 on the CPU, 256 on CUDA);
        # loading with None would compile the module's 256-thread variant on the CPU as well.
        block_dim = wp._src.context._resolve_launch_block_dim(device, block_dim)
        try:
            for kernel in (pair.record, pair.replay):
                kernel.module.load(device, block_dim)
        except Exception as error:
            self.kernel.module.load(device, block_dim)  # the kernel's own error, if it has one, is the user's
            first = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
            raise RewriteError(
                self.kernel.key,
                self._generated.spec.location,
                f"the kernels warp-rewrite generated for it do not compile ({first}), although the kernel does: this "
                "is a bug in warp-rewrite",
                "Please report it, with the kernel's source and RewrittenKernel.source",
            ) from error

    def _check_arguments(self, args: list[Any], shape: tuple[int, ...], device: wp.Device) -> None:
        """Refuse a bad launch before anything runs, so counters and outputs stay untouched."""
        spec = self._generated.spec
        for path, array in argument_arrays(spec.parameters, args):
            if array.device != device:
                raise ValueError(
                    f"kernel '{self.kernel.key}': argument '{path}' is on device '{array.device}' "
                    f"but the launch is on '{device}'"
                )
        check_aliasing(spec, args)
        if len(shape) > spec.launch_arity:
            raise ValueError(
                f"kernel '{self.kernel.key}' unpacks wp.tid() into {spec.launch_arity} index(es) but is launched with "
                f"{len(shape)} dimensions: its records are kept per thread by those indices. Unpack all "
                f"{len(shape)} (e.g. i, j = wp.tid()) or launch with fewer dimensions"
            )

    def _launch_on_tape(
        self,
        tape: Any,
        request: LaunchRequest,
        key: tuple | None,
        checked: tuple[KernelPair, frozenset[str]] | None = None,
    ) -> None:
        """Both phases of a launch on ``tape``: the record kernel runs now, the replay kernel's adjoint in backward.
        ``checked``: what ``_checked_variant`` gave, where the caller has asked it already."""
        pair, exact = checked or self._checked_variant(request)
        capacities = self._capacities(pair, request)
        if key is not None and capacities.from_values:
            # Rooms a dry run counted or the arguments gave: the PreparedLaunch of an earlier launch with these
            # arguments and these rooms
            key = (*key, tuple(sorted(capacities.rooms.items())))
            prepared = self._launches.pop(key, None)  # out while it runs: one thread uses it
            if prepared is not None and prepared.current():
                try:
                    prepared.launch(request, tape)
                finally:
                    self._launches[key] = prepared
                return
        records = self._record(pair, request, capacities, exact, key)
        self._put_on_tape(tape, pair, request, capacities, records)

    def _refuse_constant_replays(self, request: LaunchRequest) -> None:
        """A detached float return, or a float read of an array the launch writes, is replayed as a constant: exact
        only if nothing it is made of needs a gradient."""
        parameters = self._generated.spec.parameters
        for site in self._generated.spec.sites:
            # an append pool's read is checked by the device where it needs a gradient (``pool_read``)
            path = None if site.exact or site.pool else requires_grad_path(parameters, request.args, site)
            if path is not None and site.op == Op.READ:
                raise RewriteError(
                    self.kernel.key,
                    site.location,
                    f"this reads '{site.target}', which the launch also writes, and the value read is a float that "
                    f"depends on '{path}', which requires grad: its gradient through what the launch wrote there is "
                    "not supported",
                    f"Write the result into a separate array, or launch with '{path}' not requiring grad",
                )
            if path is not None:
                raise RewriteError(
                    self.kernel.key,
                    site.location,
                    f"the value returned by wp.atomic_{site.op}() on '{site.target}' is a float that depends on "
                    f"'{path}', which requires grad; rewritten with detach_returns=True, the replay reads that value "
                    "back as a constant, and its gradient would be lost",
                    "Rewrite without detach_returns=True (returned floats then get exact gradients), or launch with "
                    f"'{path}' not requiring grad",
                )

    def _variant(self, request: LaunchRequest) -> tuple[KernelPair, frozenset[str]]:
        """The kernels to launch and the targets whose float returns get exact gradients in this launch: exact
        returns cost nothing extra where no gradient can flow through them (the detached variant). A target that
        requires grad takes the exact path too, even where its returns are only compared: only the exact backward
        routes its gradient to the operands and to its initial values (Warp's atomic_min adjoint does not)."""
        spec, args = self._generated.spec, request.args

        def needs_exact(site: SiteSpec) -> bool:
            target = argument_at(spec.parameters, args, site.target)
            return requires_grad_path(spec.parameters, args, site) is not None or requires_float_grad(target)

        exact = frozenset(site.target for site in spec.sites if site.exact and needs_exact(site))
        return (self._generated if exact else self.detached() or self._generated), exact

    def _refuse_unshadowed_targets(self, spec: KernelSpec, request: LaunchRequest, exact: frozenset[str]) -> None:
        """The variant launched keeps its exact targets' values in shadows, which only a ``wp.array`` has."""
        for site in spec.sites:
            target = argument_at(spec.parameters, request.args, site.target)
            if site.exact and type(target) is not wp.array:
                raise RewriteError(
                    self.kernel.key,
                    site.location,
                    f"the target '{site.target}' of float atomics whose returns get exact gradients is a "
                    f"{type(target).__name__}; while the kernel runs, its values live in a shadow of a wp.array",
                    "Pass a wp.array (a view or slice of one is fine), or rewrite with detach_returns=True",
                )
        if exact and spec.exact_rounds is None and request.device.is_capturing:
            raise unbounded_chain(spec, next(site for site in spec.sites if site.target in exact), "launch this kernel")

    def _capacities(self, pair: KernelPair, request: LaunchRequest) -> Capacities:
        """Records per execution of each loop; those of unknown length counted by a dry run on scratch copies,
        with no room for records."""
        spec = pair.spec
        known = capacities_of(spec, request.max_records, request.args)
        if None not in known.values():
            given = any(loop.counted and loop.room is None and loop.argument_range for loop in spec.loops)
            return Capacities({loop: room for loop, room in known.items() if room is not None}, from_values=given)
        loop = next(loop for loop in spec.loops if known[loop.id] is None)
        if request.device.is_capturing:
            raise RewriteError(
                self.kernel.key,
                loop.location,
                "this loop's trip count is not known before the launch: it would be counted by a dry run read "
                "back on the host, which a CUDA graph capture cannot wait for",
                "Pass max_records=N (to wp_rewrite, or to the launch) to bound its trips",
            )
        copied = frozenset(spec.copied if pair.count is not None else spec.written)
        args = request.args
        scratch = [scratch_copy(value, path, copied) for value, path in zip(args, spec.parameters, strict=True)]
        uncopyable = next(
            (path for path, value in zip(spec.parameters, scratch, strict=True) if value is UNCOPYABLE), None
        )
        if uncopyable is not None:
            raise RewriteError(
                self.kernel.key,
                spec.location,
                f"counting the trips of its loops of unknown length would need a copy of '{uncopyable}', which "
                "the kernel writes, and that kind of array cannot be copied",
                "Pass max_records (to wp_rewrite, or to the launch) so that no count is needed",
            )
        no_room = {loop: room or 0 for loop, room in known.items()}
        dry = phase_arguments(spec, scratch, request.shape, no_room, request.device)
        for shadow in dry.shadows:
            shadow.load()
        arguments = [*scratch, *dry.extra]
        kernel, taken = (pair.count, pair.count_arguments(arguments)) if pair.count else (pair.record, arguments)
        warp_launch(kernel, request.shape, taken, record_tape=False, **request.options)
        assert dry.status is not None  # (a kernel with counted loops reports into its status)
        needed = dry.status.numpy()  # the host needs the counts to size the records: it waits here
        counts = {loop: room if room is not None else trips_of(needed, loop) for loop, room in known.items()}
        return Capacities(counts, from_values=True)

    def _record(
        self, pair: KernelPair, request: LaunchRequest, capacities: Capacities, exact: frozenset[str], key: tuple | None
    ) -> LaunchRecords:
        """Forward: the record kernel runs the original code and stores every consumed atomic's returned value."""
        spec, rooms = pair.spec, capacities.rooms
        records = phase_arguments(spec, request.args, request.shape, rooms, request.device, exact)
        for shadow in records.shadows:
            shadow.load()
        outputs = [*request.outputs, *records.extra]
        # A launch is prepared for the next one like it: the same signature, and the same rooms where they are counted.
        if key is not None and not records.shadows:
            command = warp_launch(
                pair.record,
                request.shape,
                request.inputs,
                outputs,
                record_tape=False,
                record_cmd=True,
                **request.options,
            )
            if command is not None:  # None: no threads, nothing to run
                remember(self._launches, key, PreparedLaunch(command, pair, request.args, records, rooms))
                command.launch()
        else:
            warp_launch(pair.record, request.shape, request.inputs, outputs, record_tape=False, **request.options)
        for shadow in records.shadows:
            shadow.store()
        if records.status is not None:
            device_checks.watch(records.status, lambda values: explain_status(spec, rooms, values))
        return records

    def _put_on_tape(
        self, tape: Any, pair: KernelPair, request: LaunchRequest, capacities: Capacities, records: LaunchRecords
    ) -> None:
        """Backward runs these in reverse: the exact order's preparation and checks, then the replay kernel's
        adjoint (reading the recorded values back), then the routing of the returned values' adjoints."""
        shape, inputs, device, block_dim = request.shape, list(request.inputs), request.device, request.block_dim
        replay_outputs = [*request.outputs, *records.extra]
        exact_targets = [target for target in records.exact if target.count]  # none: in loops that never ran
        step = None
        if exact_targets:
            step = ExactBackward(
                pair.spec,
                pair.replay,
                shape,
                inputs,
                replay_outputs,
                device,
                block_dim,
                request.max_blocks,
                records.status,
                capacities.rooms,
                exact_targets,
            )
            tape.record_func(backward=step.route, arrays=[target.returned for target in exact_targets])
        tape.record_launch(pair.replay, shape, request.max_blocks, inputs, replay_outputs, device, block_dim or 0)
        if step is not None:
            tape.record_func(backward=step.prepare, arrays=[])
        if request.verify:  # fingerprints of what the replay reads from memory, checked first in backward
            unwritten = [
                (path, array)
                for path, array in argument_arrays(pair.spec.parameters, request.args)
                if path not in pair.spec.written
            ]
            tape.record_func(backward=ReadMemory(pair.spec, unwritten).check, arrays=[])
        if wp.config.verify_autograd_array_access:
            tape._check_kernel_array_access(pair.replay, [*request.args, *records.extra])


def check_like_warp(
    kernel: wp.Kernel, args: Sequence[Any], device: wp.Device, adjoints: Sequence[Any] | None = None
) -> None:
    """Refuse arguments ``wp.launch`` would refuse for the original kernel, as it refuses them (its exception types
    and messages, which name the user's kernel and parameter), before anything compiles or runs. ``adjoints``: those
    of an adjoint launch, checked as Warp checks them; there must be one per parameter (Warp would read past the
    ones given)."""
    parameters = kernel.adj.args
    if len(args) != len(parameters):
        raise RuntimeError(
            f"Error launching kernel '{kernel.key}', passed {len(args)} arguments but kernel "
            f"requires {len(parameters)}."
        )
    if adjoints is not None and len(adjoints) != len(parameters):
        raise RuntimeError(
            f"Error launching kernel '{kernel.key}' with adjoint=True: passed {len(adjoints)} adjoints (adj_inputs "
            f"and adj_outputs) but kernel requires {len(parameters)}."
        )
    if kernel.is_generic:
        kernel.infer_argument_types(list(args))  # each overload checks its own when it is launched
        return
    for parameter, value in zip(parameters, args, strict=True):
        wp._src.context.pack_arg(kernel, parameter.type, parameter.label, value, device)
    for parameter, adjoint in zip(parameters, adjoints or (), strict=False):
        wp._src.context.pack_arg(kernel, parameter.type, parameter.label, adjoint, device, adjoint=True)


@dataclass
class RewrittenLaunch:
    """A launch of a rewritten kernel made ready by ``launch(..., record_cmd=True)``: ``launch()`` runs it, both
    phases on the tape active then, as ``wp.launch``'s ``Launch`` objects do for plain kernels, whose parameters and
    dimensions may be set again between launches (Newton's implicit MPM runs one recorded launch on other arrays)."""

    kernel: RewrittenKernel
    arguments: dict[str, Any]

    def set_dim(self, dim: int | list[int] | tuple[int, ...]) -> None:
        self.arguments["dim"] = dim

    def set_param_at_index(self, index: int, value: Any, adjoint: bool = False) -> None:
        """The kernel's parameter ``index`` (its inputs, then its outputs), as ``Launch.set_param_at_index``."""
        if adjoint:
            raise RewriteError(
                self.kernel.key,
                self.kernel._generated.spec.location,
                "a recorded launch of a rewritten kernel takes no adjoints (its backward runs from the tape that "
                "recorded its launch)",
                "Launch it on a wp.Tape and call tape.backward(), or launch the kernel with adjoint=True",
            )
        inputs, outputs = list(self.arguments["inputs"] or []), list(self.arguments["outputs"] or [])
        parameters = inputs + outputs
        parameters[index] = value  # an IndexError past the last, as Warp's
        self.arguments["inputs"], self.arguments["outputs"] = parameters[: len(inputs)], parameters[len(inputs) :]

    def set_param_by_name(self, name: str, value: Any, adjoint: bool = False) -> None:
        labels = [parameter.label for parameter in self.kernel.adj.args]
        if name not in labels:
            raise ValueError(f"Argument '{name}' not found in kernel '{self.kernel.key}'")
        self.set_param_at_index(labels.index(name), value, adjoint)

    def set_params(self, values: Sequence[Any]) -> None:
        for index, value in enumerate(values):
            self.set_param_at_index(index, value)

    def launch(self, stream: wp.Stream | None = None) -> None:
        self.kernel.launch(**{**self.arguments, "stream": stream or self.arguments["stream"]})


def with_parameters(pair: KernelPair | None, kernel: wp.Kernel) -> KernelPair | None:
    """``pair`` with its spec's parameters those of ``kernel``, the one it was generated from: their one home is the
    kernel (generated code, which defines the kernel right above its spec, does not repeat them)."""
    if pair is None:
        return None
    parameters = tuple(argument.label for argument in kernel.adj.args)
    return dataclasses.replace(pair, spec=dataclasses.replace(pair.spec, parameters=parameters))


def _leads(kernel: wp.Kernel, record: wp.Kernel) -> bool:
    """Whether ``record`` takes ``kernel``'s parameters first, as a record kernel generated from it does."""
    names = [argument.label for argument in kernel.adj.args]
    return [argument.label for argument in record.adj.args[: len(names)]] == names


@dataclass(frozen=True)
class KernelRewrite:
    """The record and replay kernels generated for a plain function that its file makes a kernel of when it runs
    (``wp.Kernel(func=f)``, ``wp.kernel(f)``, a function of the file calling one of those): ``wp-rewrite`` wraps
    each call that makes the kernel in a call of this, which gives the ``RewrittenKernel`` launching them."""

    pair: KernelPair
    max_records: int | None = None
    detached: Callable[[], KernelPair | None] | None = None  # (``RewrittenKernel``'s)

    def __call__(self, kernel: wp.Kernel) -> RewrittenKernel:
        spec = self.pair.spec
        if not isinstance(kernel, wp.Kernel) or not _leads(kernel, self.pair.record):
            problem = (
                f"the call wrapped to rewrite it gave {kernel!r}, not a kernel made of the function "
                f"'{spec.key}' the record and replay kernels were generated from"
            )
            raise RewriteError(spec.key, spec.location, problem, "Make that call return the kernel it makes")
        return RewrittenKernel(kernel, self.pair, detached=self.detached, max_records=self.max_records)
