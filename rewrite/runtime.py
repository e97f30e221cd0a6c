"""warp-rewrite's runtime: what rewritten kernels call and how they are launched.

This one module is everything generated code needs once it exists: the ``@wp.func`` helpers the record and
replay kernels call, the launch of both phases (``RewrittenKernel``), the exact backward of floating-point
atomic returns and ``RewriteError``. It imports only warp, numpy and the standard library, so that
``wp-rewrite`` can write it, byte for byte, beside the modules it emits (as ``wp_rewrite_runtime.py``):
an emitted module then runs without warp-rewrite installed. The API (``warp_rewrite.wp_rewrite``) uses the
same module as ``warp_rewrite.runtime``.

Generated code refers to this module by one name (``wp_rewrite_runtime`` unless the user's module uses it),
for example ``wp_rewrite_runtime.record_returned(slot, slot_records, thread)``.
"""

import functools
import inspect
import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import warp as wp

__version__ = "0.2.0"


class RewriteError(Exception):
    """A kernel pattern the rewrite cannot make differentiable correctly.

    The message names the kernel, the ``file:line:col`` of the construct, what is unsupported and what
    to do instead: a clear error, never a silently wrong gradient.
    """

    def __init__(self, kernel: str, location: str, problem: str, advice: str):
        self.kernel = kernel
        self.location = location
        self.problem = problem
        self.advice = advice
        super().__init__(f"{location}: kernel '{kernel}': {problem}. {advice}")


# --- what a launch needs to know about the generated kernels ------------------------------------------------


@dataclass(frozen=True)
class ExactRecords:
    """The record parameters of an atomic whose float returns get exact gradients (see the exact backward)."""

    returned: str
    values: str  # the operands
    order: str  # each operation's place among the operations on its address (-1: never ran)
    addresses: str  # the flat address each operation touched
    compares: str | None = None  # atomic_cas: the compare operands


@dataclass(frozen=True)
class SiteSpec:
    """One recorded atomic."""

    target: str  # argument path of the target array: "count", or a struct field's "state.count"
    op: str  # "add", "cas", ...; "read": a plain read of an array the launch writes
    location: str  # "file:line:col" of the atomic in the user's source
    # argument paths a float return may be differentiable in; None: any array argument
    gradient_sources: tuple[str, ...] | None = ()
    exact: ExactRecords | None = None


@dataclass(frozen=True)
class RecordSpec:
    """One record parameter of the generated kernels, which each launch allocates.

    ``kind`` says how: "returned", "values" and "compares" hold the target's dtype, "order" and "addresses"
    int32; "tickets" are int32 counters shaped like the target; "trips" (how often a loop ran) and "carried"
    (ints a loop hands on) have ``dtype``. Each holds one entry per thread and iteration of ``loops``.
    """

    name: str
    kind: str
    target: str | None = None
    dtype: Any = None  # the Warp type of "trips" and "carried" records; None: decided by the kind
    loops: tuple[int, ...] = ()
    requires_grad: bool = False


@dataclass(frozen=True)
class LoopSpec:
    """A loop around a recorded atomic."""

    id: int
    location: str
    trips: int | None = None  # the trip count of a constant range()
    room: int | None = None  # records per execution compiled into the kernels; None: passed by each launch
    counted: bool = False  # of unknown length and replayed: needs room, and its trips are checked


@dataclass(frozen=True)
class KernelSpec:
    """What a launch of one pair of generated kernels needs to know about them."""

    key: str  # the original kernel's name, for messages
    parameters: tuple[str, ...]  # the original kernel's parameters, in order
    location: str = ""  # "file:line:col" of the kernel's definition
    written: tuple[str, ...] = ()  # argument paths of the arrays the launch writes
    copied: tuple[
        str, ...
    ] = ()  # those a dry run copies, which the launch reads back (the count kernel writes no others)
    sites: tuple[SiteSpec, ...] = ()
    records: tuple[RecordSpec, ...] = ()  # in the order of the generated kernels' record parameters
    loops: tuple[LoopSpec, ...] = ()
    launch_arity: int = 1  # how many indices the kernel unpacks wp.tid() into: the most launch dimensions


# --- device functions the generated kernels call ---------------------------------------------------------------


@wp.func
def record_returned(value: Any, records: wp.array(dtype=Any), index: int):
    """Store an atomic's returned value (or another int the replay needs) for the replay kernel and pass it on."""
    records[index] = value
    return value


@wp.func
def record_if_room(value: Any, records: wp.array(dtype=Any), index: int):
    """``record_returned`` inside a loop of unknown length, which may run more often than its records have room for.

    The launch then checks the trip counts afterwards and raises; until then the store past the end is only
    skipped, never out of bounds. Only such loops pay for the check (a few percent of a memory-bound kernel).
    """
    if index < records.shape[0]:
        records[index] = value
    return value


@wp.func
def replay_returned(value: Any, records: wp.array(dtype=Any), index: int):
    """Stand in for an atomic's returned value: the value recorded in forward.

    The atomic passed in as ``value`` keeps its own adjoint (d target / d value), but its side effect
    never runs: the replay kernel is only launched in backward, where Warp skips every atomic.
    """
    return records[index]


@wp.func
def exact_returned(value: Any, values: wp.array(dtype=Any), returned: wp.array(dtype=Any), record_index: int):
    """Stand in for a float atomic in the replay kernel: its recorded returned value.

    Storing the operand gives it an adjoint entry point: backward seeds ``values``' adjoint with the gradient
    that reaches this operand through later operations' returned values (see ``ExactBackward``).
    """
    if record_index < values.shape[0]:
        values[record_index] = values.dtype(value)
    return returned[record_index]


@wp.func
def range_length(start: int, stop: int, step: int):
    """How many iterations ``range(start, stop, step)`` makes: the capacity a loop's records need."""
    if step > 0:
        return wp.max((stop - start + step - 1) // step, 0)
    return wp.max((start - stop - step - 1) // (-step), 0)


READER_PREFIX = "recorded_"


def _reader(dtype: type) -> wp.Function:
    """``recorded_<dtype>(records, index)``: a record read back in the replay, with an empty gradient.

    Records never need a gradient, but a plain read would still cost the backward its adjoint. Warp allows
    custom gradients only for concrete types, hence one reader per dtype, made on first use (see
    ``__getattr__``) in a Warp module of their own, so that making one never makes Warp compile another
    module again.
    """

    @wp.func(name=f"{READER_PREFIX}{dtype.__name__}", module=f"{__name__}.readers")
    def recorded(records: wp.array(dtype=dtype), index: int) -> dtype:
        return records[index]

    @wp.func_grad(recorded)
    def recorded_adjoint(records: wp.array(dtype=dtype), index: int, adj_ret: dtype):
        pass

    return recorded


def reader_name(dtype: type) -> str | None:
    """The name of the reader of records of ``dtype`` (a Warp type), or None: such records are read plainly."""
    return f"{READER_PREFIX}{dtype.__name__}" if getattr(wp, dtype.__name__, None) is dtype else None


def __getattr__(name: str) -> Any:
    """Readers (``recorded_float32``, ``recorded_vec3d``, ...) are made when generated code first names them."""
    dtype = getattr(wp, name.removeprefix(READER_PREFIX), None) if name.startswith(READER_PREFIX) else None
    if not isinstance(dtype, type) or reader_name(dtype) != name:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = _reader(dtype)
    return globals()[name]


# --- launching both phases -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelPair:
    """A record kernel, its replay kernel, and what their launches need to know about them."""

    record: wp.Kernel  # the complete forward plus the record stores; enable_backward=False
    replay: wp.Kernel  # the original code reading the records back: only its adjoint runs
    spec: KernelSpec
    count: wp.Kernel | None = None  # the record kernel without writes nothing reads back: what dry runs launch


def argument_arrays(parameters: Sequence[str], args: Sequence[Any]):
    """Every array among a launch's arguments (of any of Warp's array kinds), struct fields included, with its
    path ("state.count")."""
    for path, value in zip(parameters, args, strict=True):
        if isinstance(value, wp._src.types.Array):
            yield path, value
        elif isinstance(value, wp._src.codegen.StructInstance):
            fields = value._cls.vars
            yield from argument_arrays([f"{path}.{name}" for name in fields], [getattr(value, f) for f in fields])


def argument_at(parameters: Sequence[str], args: Sequence[Any], path: str) -> Any:
    """The launch argument, or struct field of one, that ``path`` ("count", "state.count") names."""
    root, *fields = path.split(".")
    value = args[parameters.index(root)]
    for name in fields:
        value = getattr(value, name)
    return value


def is_float_dtype(dtype: type) -> bool:
    """True for float scalars and for vectors, matrices, quaternions and transforms of them."""
    return wp._src.types.type_scalar_type(dtype) in wp._src.types.float_types


def memory_extent(array: Any) -> tuple[int, int] | None:
    """The bytes ``[start, end)`` an array's elements lie in (an indexed array's: its data's); None where unknown."""
    if isinstance(array, wp.indexedarray):
        array = array.data
    if not isinstance(array, wp.array) or not array.ptr or array.size == 0:
        return None
    last = sum((extent - 1) * stride for extent, stride in zip(array.shape, array.strides, strict=True))
    return array.ptr, array.ptr + last + wp._src.types.type_size_in_bytes(array.dtype)


def check_aliasing(spec: KernelSpec, args: Sequence[Any]) -> None:
    """Refuse, before anything runs, a launch that binds memory the kernel writes to two arguments (or struct fields).

    The rewrite knows what a kernel writes and reads by argument: a write through one name and a read through another
    would go unrecorded.
    """
    extents = []
    for path, array in argument_arrays(spec.parameters, args):
        extent = memory_extent(array)
        if extent is not None:
            extents.append((path, array.device, extent))
    written = set(spec.written)
    for i, (path, device, (start, end)) in enumerate(extents):
        for other, other_device, (other_start, other_end) in extents[i + 1 :]:
            shared = device == other_device and start < other_end and other_start < end
            if shared and (path in written or other in written):
                writes = path if path in written else other
                raise RewriteError(
                    spec.key,
                    spec.location,
                    f"arguments '{path}' and '{other}' share memory and the kernel writes '{writes}': the rewrite "
                    "records reads and writes per argument, so it would miss those through the other one",
                    "Pass the array once (one parameter), or pass a copy",
                )


def scratch_copy(value: Any, path: str, written: frozenset[str]) -> Any:
    """What a dry run may run on in place of ``value`` (the argument at ``path``): a copy of each array the launch
    writes, struct fields copied likewise; everything else as it is (the kernel never writes it)."""
    if isinstance(value, wp._src.codegen.StructInstance):
        copy = type(value)()
        for name in value._cls.vars:
            setattr(copy, name, scratch_copy(getattr(value, name), f"{path}.{name}", written))
        return copy
    if path not in written:
        return value
    if isinstance(value, wp.array):
        return wp.clone(value, requires_grad=False)
    if isinstance(value, wp.indexedarray):
        return wp.indexedarray(wp.clone(value.data, requires_grad=False), value.indices[: value.ndim])
    return None  # not copyable: the caller refuses


def requires_grad_path(parameters: Sequence[str], args: Sequence[Any], site: SiteSpec) -> str | None:
    """The path of an array requiring grad that a float return may be differentiable in, if any."""
    if not is_float_dtype(argument_at(parameters, args, site.target).dtype):
        return None
    if site.gradient_sources is None:
        candidates = list(argument_arrays(parameters, args))
    else:
        candidates = [(path, argument_at(parameters, args, path)) for path in site.gradient_sources]
    for path, value in candidates:
        if isinstance(value, wp.array) and value.requires_grad and is_float_dtype(value.dtype):
            return path
    return None


def is_stand_in(record: RecordSpec, exact: frozenset[str]) -> bool:
    """Whether a record is an empty stand-in: exact-return records of a target with no exact returns this launch."""
    return record.kind in ("values", "order", "addresses", "compares", "tickets") and record.target not in exact


def capacities_of(spec: KernelSpec, max_records: int | None) -> dict[int, int | None]:
    """Records per execution of each loop: compiled in, ``max_records``, or None (to be counted by a dry run)."""
    return {
        loop.id: loop.room if loop.room is not None else max_records if loop.counted else (loop.trips or 1)
        for loop in spec.loops
    }


def phase_arguments(
    spec: KernelSpec,
    args: Sequence[Any],
    shape: tuple[int, ...],
    capacities: dict[int, int],
    device: wp.Device,
    exact: frozenset[str] = frozenset(),
) -> tuple[list[Any], wp.array | None]:
    """The arguments the record kernel takes after the kernel's own, and the array of trips needed (or None).

    They are: the records, the capacities of loops whose kernels do not have them compiled in, the array of trips
    needed (for loops of unknown length), and the launch shape (for kernels unpacking ``wp.tid()`` into several
    indices: they compute their row from it). The replay kernel takes the same but the trips needed.
    ``exact``: targets whose float returns need exact gradients in this launch; the other targets' exact-return
    records are empty (their returns are exact as constants).
    """
    threads = 1
    for extent in shape:
        threads *= extent
    extra = []
    empties = {}  # zero-size stand-ins are never written: one per (shape, dtype) serves every record
    for record in spec.records:
        size = threads
        for loop in record.loops:
            size *= capacities[loop]
        array = argument_at(spec.parameters, args, record.target) if record.target else None
        if is_stand_in(record, exact):
            empty = (0,) * array.ndim if record.kind == "tickets" else (0,)
            dtype = array.dtype if record.kind in ("values", "compares") else wp.int32
            if (empty, dtype) not in empties:
                empties[empty, dtype] = wp.empty(empty, dtype=dtype, device=device)
            extra.append(empties[empty, dtype])
        elif record.kind == "tickets":  # counters beside the target, one per address
            extra.append(wp.zeros(array.shape, dtype=wp.int32, device=device))
        elif record.kind == "order":  # -1: the operation never ran
            extra.append(wp.full(size, -1, dtype=wp.int32, device=device))
        else:
            dtype = array.dtype if record.kind in ("returned", "values", "compares") else record.dtype or wp.int32
            # The replay reads only records the record kernel wrote, so they need no zero fill.
            grad = record.requires_grad and record.target in exact
            extra.append(wp.empty(size, dtype=dtype, device=device, requires_grad=grad))
    # The capacities not compiled in, in loop order: the kernels' trip_capacity<id> parameters.
    extra += [capacities[loop.id] for loop in spec.loops if loop.counted and loop.room is None]
    trips_needed = None
    if any(loop.counted for loop in spec.loops):
        trips_needed = wp.zeros(len(spec.loops), dtype=wp.int32, device=device)
        extra.append(trips_needed)
    if spec.launch_arity > 1:
        extra.append(wp.vec4i(*shape, *(1,) * (4 - len(shape))))
    return extra, trips_needed


def replay_arguments(extra: list[Any], trips_needed: wp.array | None) -> list[Any]:
    """The replay kernel's arguments after the kernel's own: the record kernel's but the trips needed."""
    return [value for value in extra if value is not trips_needed]


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


def check_trips(spec: KernelSpec, capacities: dict[int, int], needed) -> None:
    """Refuse a launch in which a loop ran more often than its records had room for."""
    for loop in spec.loops:
        if loop.counted and needed[loop.id] > capacities[loop.id]:
            raise RewriteError(
                spec.key,
                loop.location,
                f"this loop ran {needed[loop.id]} times in one execution but its records had room for "
                f"{capacities[loop.id]}; the launch's gradients would be wrong",
                f"Pass max_records={needed[loop.id]} or more (to wp_rewrite, or to the generated launch function)",
            )


class PreparedLaunch:
    """The record kernel's launch, packed once for one signature of arguments, and its last records (CPU only).

    A launch with the same arrays repacks only the other values (as ``wp.launch`` would) and runs. It writes the
    last launch's records again when no tape holds them any more (they are still warm in the cache), new ones
    otherwise. Not for CUDA, where a backward enqueued on another stream could still be reading the records.
    """

    def __init__(self, command, pair: KernelPair, args, extra, trips_needed, capacities):
        command.fwd_args = None  # it would keep the arguments alive; Warp reads it only in graph captures
        self.command = command  # the record kernel's wp.Launch
        self.pair = pair
        arrays = [value for value in args if type(value) is wp.array]
        self.arrays = [weakref.ref(array) for array in arrays]
        self.descriptors = [array.__ctype__() for array in arrays]  # kept alive: see ``signature``
        self.values = {index: value for index, value in enumerate(args) if type(value) is not wp.array}  # as packed
        self.first_extra = len(args)  # the parameter index of extra[0]
        self.extra = extra
        self.records = [i for i, record in enumerate(pair.spec.records) if not is_stand_in(record, frozenset())]
        self.trips_needed = trips_needed  # an argument of the record kernel only
        # A CPU array's numpy() is a view of it: zeroed and read back without a copy or a launch.
        self.trips_view = trips_needed.numpy() if trips_needed is not None else None
        self.capacities = capacities

    def current(self) -> bool:
        """False once Warp has rebuilt the record kernel's module (a function it calls changed, or an option)."""
        command = self.command
        return command.kernel.module.load(command.device, command.block_dim) is command.module_exec

    def live(self) -> bool:
        """False once an array it was prepared for is gone: no launch can match it again."""
        return all(array() is not None for array in self.arrays)

    def launch(self, args, inputs, outputs, dim, block_dim, max_blocks, tape) -> None:
        """Run the record kernel on ``args`` and put the replay kernel's adjoint on ``tape``."""
        command, extra = self.command, self.extra
        for index, packed in self.values.items():
            value = args[index]
            # Packing a value costs microseconds; an int, float or bool equal to the one packed need not be.
            if type(value) is not type(packed) or type(value) not in (int, float, bool) or value != packed:
                command.set_param_at_index(index, value)
                self.values[index] = value
        if any(held_elsewhere(extra, self.records)):  # a tape may still replay the last ones
            for index in self.records:
                extra[index] = wp.empty(extra[index].shape, dtype=extra[index].dtype, device=command.device)
                command.set_param_at_index(self.first_extra + index, extra[index])
        if self.trips_view is not None:
            self.trips_view.fill(0)
        command.launch()
        if self.trips_view is not None:
            check_trips(self.pair.spec, self.capacities, self.trips_view)
        replay_extra = replay_arguments(extra, self.trips_needed)
        tape.record_launch(self.pair.replay, dim, max_blocks, list(inputs), [*outputs, *replay_extra],
                           command.device, block_dim or 0)  # fmt: skip


def remember(launches: dict, key: tuple, prepared: PreparedLaunch, most: int = 8) -> None:
    """Keep ``prepared`` for launches with ``key``: with at most ``most`` others, none that can no longer match."""
    for old_key, old in list(launches.items()):
        if not old.live():
            launches.pop(old_key, None)
    while len(launches) >= most:
        launches.pop(next(iter(launches)), None)  # the least recently used
    launches[key] = prepared


class RewrittenKernel:
    """A kernel rewritten into a record kernel (forward) and a replay kernel (backward).

    Launch it with ``.launch(...)`` (or ``warp_rewrite.launch``) exactly as you would launch ``kernel`` with
    ``wp.launch``. Under a ``wp.Tape`` the record kernel runs the original code and stores the values its atomics
    return, and the tape records the replay kernel, whose adjoint reads them back; without a tape (or with
    ``record_tape=False``) nothing runs backward, so ``kernel`` itself runs. A kernel that consumes no atomic's
    return has no pair and launches unchanged.
    """

    def __init__(
        self,
        kernel: wp.Kernel,
        pair: KernelPair | None,
        *,
        detached: Callable[[], KernelPair | None] | None = None,
        max_records: int | None = None,
        source: str = "",
    ):
        self.kernel = kernel
        self.pair = pair
        # Kernels with exact float returns: makes the variant recording them as constants, for launches in which
        # no gradient can flow through them (it costs what a hand-written record costs).
        self._make_detached = detached
        self.max_records = max_records  # room per execution of loops of unknown length without one compiled in
        self.source = source  # the generated source (API), for reading
        self._launches: dict = {}  # this kernel's PreparedLaunch per signature of arguments

    def __repr__(self) -> str:
        sites = len(self.pair.spec.sites) if self.pair else 0
        phases = "record+replay" if self.pair else "unchanged"
        return f"<RewrittenKernel {self.key!r}: {sites} site{'s' * (sites != 1)}, {phases}>"

    @property
    def key(self) -> str:
        return self.kernel.key

    @property
    def record_kernel(self) -> wp.Kernel | None:
        return self.pair.record if self.pair else None

    @property
    def replay_kernel(self) -> wp.Kernel | None:
        return self.pair.replay if self.pair else None

    @property
    def records(self) -> tuple[RecordSpec, ...]:
        return self.pair.spec.records if self.pair else ()

    def detached(self) -> KernelPair | None:
        """The variant recording float returns as constants (made on first use), or None if there is none."""
        if self._make_detached is not None:
            self._detached_pair, self._make_detached = self._make_detached(), None
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
        is refused: a rewritten kernel's backward runs from the tape (``tape.backward()``), which holds the records
        of the forward launch it belongs to. ``max_records``: records per execution of a loop of unknown length
        whose kernels do not have a room compiled in (default: the kernel's ``max_records``; None: counted by a dry
        run at each launch).
        """
        if adjoint:
            raise ValueError(
                f"kernel '{self.key}' is rewritten: its backward runs from the tape that recorded its forward launch "
                "(tape.backward()), where the records of that launch are; it cannot be launched with adjoint=True"
            )
        if record_cmd:
            arguments = {"dim": dim, "inputs": inputs, "outputs": outputs, "device": device, "stream": stream,
                         "record_tape": record_tape, "max_blocks": max_blocks, "block_dim": block_dim,
                         "max_records": max_records}  # fmt: skip
            return RewrittenLaunch(self, arguments)
        device = stream.device if stream is not None else wp.get_device(device)
        tape = wp._src.context.runtime.tape if record_tape else None  # Warp has no public accessor for it
        if self.pair is None or tape is None:
            # Without a tape nothing will run backward: the original kernel is the exact forward.
            _warp_launch(self.kernel, dim, inputs, outputs, device=device, stream=stream, record_tape=record_tape,
                         block_dim=block_dim, max_blocks=max_blocks)  # fmt: skip
            return None
        max_records = self.max_records if max_records is None else max_records
        args = [*inputs, *outputs]
        shape = (dim,) if isinstance(dim, int) else tuple(dim)
        # A CPU launch on a tape with the arrays of an earlier one takes the PreparedLaunch that one left.
        preparable = device.is_cpu and not device.is_capturing and not wp.config.verify_autograd_array_access
        key = signature(args, shape, block_dim, max_blocks, max_records) if preparable else None
        prepared = None if key is None else self._launches.pop(key, None)  # out while it runs: one thread uses it
        if prepared is not None and prepared.current():
            try:
                prepared.launch(args, inputs, outputs, dim, block_dim, max_blocks, tape)
            finally:
                self._launches[key] = prepared
            return None
        self._check_arguments(args, shape, device)
        self._launch_on_tape(tape, dim, shape, inputs, outputs, args, device, stream, block_dim, max_blocks,
                             max_records, key)  # fmt: skip
        return None

    def _compile(self, pair: KernelPair, device: wp.Device, block_dim: int | None) -> None:
        """Load the generated kernels' module; where it does not compile but the kernel's own does, say whose fault
        it is rather than leave the user with the compiler's output."""
        if pair.record.is_generic or pair.replay.is_generic:
            return  # compiled per overload at launch
        try:
            for kernel in (pair.record, pair.replay):
                kernel.module.load(device, block_dim)
        except Exception as error:
            self.kernel.module.load(device, block_dim)  # the kernel's own error, if it has one, is the user's
            first = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
            raise RewriteError(
                self.key,
                self.pair.spec.location,
                f"the kernels warp-rewrite generated for it do not compile ({first}), although the kernel does: this "
                "is a bug in warp-rewrite",
                "Please report it, with the kernel's source and RewrittenKernel.source",
            ) from error

    def _check_arguments(self, args: list[Any], shape: tuple[int, ...], device: wp.Device) -> None:
        """Refuse a bad launch before anything runs, so counters and outputs stay untouched."""
        spec = self.pair.spec
        if len(args) != len(spec.parameters):
            raise TypeError(f"kernel '{self.key}' takes {len(spec.parameters)} arguments (inputs + outputs), "
                            f"got {len(args)}")  # fmt: skip
        for path, array in argument_arrays(spec.parameters, args):
            if array.device != device:
                raise ValueError(
                    f"kernel '{self.key}': argument '{path}' is on device '{array.device}' "
                    f"but the launch is on '{device}'"
                )
        check_aliasing(spec, args)
        if len(shape) > spec.launch_arity:
            raise ValueError(
                f"kernel '{self.key}' unpacks wp.tid() into {spec.launch_arity} index(es) but is launched with "
                f"{len(shape)} dimensions: its records are kept per thread by those indices. Unpack all "
                f"{len(shape)} (e.g. i, j = wp.tid()) or launch with fewer dimensions"
            )

    def _launch_on_tape(self, tape, dim, shape, inputs, outputs, args, device, stream, block_dim, max_blocks,
                        max_records, key) -> None:  # fmt: skip
        pair = self.pair
        parameters = pair.spec.parameters
        # A detached float return, or a float read of an array the launch writes, is replayed as a constant: exact
        # only if nothing it is made of needs a gradient.
        for site in pair.spec.sites:
            path = None if site.exact else requires_grad_path(parameters, args, site)
            if path is not None and site.op == "read":
                raise RewriteError(
                    self.key,
                    site.location,
                    f"this reads '{site.target}', which the launch also writes, and the value read is a float that "
                    f"depends on '{path}', which requires grad: its gradient through what the launch wrote there is "
                    "not supported",
                    f"Write the result into a separate array, or launch with '{path}' not requiring grad",
                )
            if path is not None:
                raise RewriteError(
                    self.key,
                    site.location,
                    f"the value returned by wp.atomic_{site.op}() on '{site.target}' is a float that depends on "
                    f"'{path}', which requires grad; its exact gradient through the returned value is not supported",
                    f"Launch with '{path}' not requiring grad, or compute the value without using the atomic's return",
                )
        # Exact float returns cost nothing extra where no gradient can flow through them.
        exact = frozenset(
            site.target
            for site in pair.spec.sites
            if site.exact and requires_grad_path(parameters, args, site) is not None
        )
        if not exact:
            pair = self.detached() or pair
        self._compile(pair, device, block_dim)
        spec = pair.spec
        options = {"device": device, "stream": stream, "block_dim": block_dim, "max_blocks": max_blocks}
        capacities = capacities_of(spec, max_records)
        counted = None in capacities.values()
        if counted:
            # A dry run on scratch copies, with no room for records, counts the trips of loops of unknown length.
            copied = frozenset(spec.copied if pair.count is not None else spec.written)
            scratch = [scratch_copy(value, path, copied) for value, path in zip(args, parameters, strict=True)]
            uncopyable = next((path for path, value in zip(parameters, scratch, strict=True) if value is None), None)
            if uncopyable is not None:
                raise RewriteError(
                    self.key, spec.location,
                    f"counting the trips of its loops of unknown length would need a copy of '{uncopyable}', which "
                    "the kernel writes, and that kind of array cannot be copied",
                    "Pass max_records (to wp_rewrite, or to the launch) so that no count is needed",
                )  # fmt: skip
            no_room = {loop: room or 0 for loop, room in capacities.items()}
            dry, dry_trips = phase_arguments(spec, scratch, shape, no_room, device)
            _warp_launch(pair.count or pair.record, shape, scratch, dry, record_tape=False, **options)
            needed = dry_trips.numpy()
            capacities = {loop: room if room is not None else int(needed[loop]) for loop, room in capacities.items()}
        # Forward: the record kernel runs the original code and stores every consumed atomic's returned value.
        extra, trips_needed = phase_arguments(spec, args, shape, capacities, device, exact)
        # A launch whose record sizes depend only on its signature is prepared for the next one like it.
        if key is not None and not exact and not counted:
            command = wp.launch(pair.record, dim, inputs, [*outputs, *extra], record_tape=False, record_cmd=True,
                                **options)  # fmt: skip
            if command is not None:  # None: no threads, nothing to run
                remember(self._launches, key, PreparedLaunch(command, pair, args, extra, trips_needed, capacities))
                command.launch()
        else:
            wp.launch(pair.record, dim, inputs, [*outputs, *extra], record_tape=False, **options)
        if trips_needed is not None:
            check_trips(spec, capacities, trips_needed.numpy())
        # Exact float returns: a backward step that routes the returned values' adjoints, recorded before the replay
        # launch so that backward runs it right after the replay's adjoint.
        replay_extra = replay_arguments(extra, trips_needed)
        by_name = dict(zip([record.name for record in spec.records], extra, strict=False)) if exact else {}
        groups: dict[str, ExactTarget] = {}
        for site in spec.sites:
            if site.target in exact and by_name[site.exact.returned].size:  # empty: in a loop that never ran
                records = site.exact
                group = groups.setdefault(
                    site.target, ExactTarget(site.location, site.target, argument_at(parameters, args, site.target))
                )
                arrays = [by_name.get(name) for name in (records.returned, records.values, records.order,
                                                         records.addresses, records.compares)]  # fmt: skip
                group.sites.append(ExactSite(site.op, *arrays))
        if groups:
            targets = list(groups.values())
            step = ExactBackward(self.key, pair.replay, dim, list(inputs), [*outputs, *replay_extra], device, block_dim,
                                 max_blocks, targets)  # fmt: skip
            tape.record_func(backward=step, arrays=[s.returned for target in targets for s in target.sites])
        # Backward: the replay kernel's adjoint runs, reading the recorded values back.
        tape.record_launch(pair.replay, dim, max_blocks, list(inputs), [*outputs, *replay_extra], device,
                           block_dim or 0)  # fmt: skip
        if wp.config.verify_autograd_array_access:
            tape._check_kernel_array_access(pair.replay, [*args, *replay_extra])


@dataclass
class RewrittenLaunch:
    """A launch of a rewritten kernel made ready by ``launch(..., record_cmd=True)``: ``launch()`` runs it, both
    phases on the tape active then, as ``wp.launch``'s ``Launch`` objects do for plain kernels."""

    kernel: RewrittenKernel
    arguments: dict[str, Any]

    def launch(self) -> None:
        self.kernel.launch(**self.arguments)


# ``wp.launch`` takes rewritten kernels: importing this module puts ``launch`` below in its place, which hands them
# to their own ``launch`` and everything else to the ``wp.launch`` it found (Warp's, or another copy's of this
# module: the package's and the ones written beside emitted files each wrap the one before). For code one cannot
# edit, ``warp_rewrite.rewrite_launches()`` sets AUTO_REWRITE: then plain kernels that consume an atomic's return
# are rewritten when launched forward on a tape.
_warp_launch = wp.launch
AUTO_REWRITE: Callable[[wp.Kernel], RewrittenKernel] | None = None


@functools.wraps(_warp_launch)  # wp.launch's signature and documentation: the same arguments, the same meaning
def launch(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    if hasattr(kernel, "launches_rewritten"):  # a RewrittenKernel, of any copy of this module
        return kernel.launch(*args, **kwargs)
    if AUTO_REWRITE is not None and isinstance(kernel, wp.Kernel) and _needs_rewrite(kernel, args, kwargs):
        return AUTO_REWRITE(kernel).launch(*args, **kwargs)
    return _warp_launch(kernel, *args, **kwargs)


def _needs_rewrite(kernel: wp.Kernel, args: tuple, kwargs: dict) -> bool:
    """Is this a forward launch on a tape, of a kernel with a backward (the only launches a rewrite changes)?"""
    bound = inspect.signature(launch).bind(kernel, *args, **kwargs).arguments
    if bound.get("adjoint") or not bound.get("record_tape", True) or wp._src.context.runtime.tape is None:
        return False
    return (kernel.module.options | kernel.options).get("enable_backward", True) is not False


RewrittenKernel.launches_rewritten = True
wp.launch = launch


# --- exact gradients through floating-point atomic returns -----------------------------------------------------
#
# For the operations on one address, in execution order 1..m, ``prev_k`` (what op k returned) is made of the
# target's initial value and the operands of ops before k:
#
# - add/sub: ``prev_k = acc0 + sum_{j<k} s_j v_j``, so ``adj(v_j) += s_j * sum_{k>j} adj(prev_k)`` (a segmented
#   suffix sum in execution order) and ``adj(acc0) += sum_k adj(prev_k)``;
# - exch: ``prev_k`` is the operand of the op before k (or ``acc0``): its adjoint goes there;
# - max/min/cas: ``prev_k`` is the value stored by the last op before k that changed it (or ``acc0``): its
#   adjoint goes to that op's operand.
#
# The final value's adjoint (``target.grad``) is routed the same way: to every operand (add/sub) or to the op
# that stored the final value. The execution order comes from tickets taken from a counter beside the target
# right after each atomic (``passes.templates.record_exact``). On the CPU threads run in order, so tickets are
# exact; on a GPU another thread may slip between an atomic and its ticket, so the recorded values are checked
# against the ticket order and a mismatch raises instead of giving a wrong gradient.
#
# The replay kernel's adjoint gives ``adj(prev)`` (the returned-value records' gradient). Routing it produces
# extra adjoints for operands, which reach the kernel's inputs through a second adjoint launch of the replay
# kernel seeded only with them, through the operand records' adjoint (``exact_returned`` stores each operand).
# An operand that itself depends on an exact return feeds another round; rounds stop when nothing is left.
# Everything runs as Warp kernels, sort and scans: O(n log n) in the number of operations, parallel on a GPU.

ADD, EXCH, HOLD = 0, 1, 2  # how a returned value is made: running sum; the op before; the last op that stored
_KIND = {"add": ADD, "sub": ADD, "exch": EXCH, "max": HOLD, "min": HOLD, "cas": HOLD}
_MAX_ROUNDS = 64


@wp.kernel
def _sort_keys(
    order: wp.array(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    keys: wp.array(dtype=wp.int64),
    positions: wp.array(dtype=wp.int32),
):
    i = wp.tid()
    key = wp.int64(9223372036854775807)  # ops that never ran sort last
    if order[i] >= 0:
        key = wp.int64(addresses[i]) * wp.int64(2147483648) + wp.int64(order[i])
    keys[i] = key
    positions[i] = i


@wp.kernel
def _segment_starts(
    addresses: wp.array(dtype=wp.int32), perm: wp.array(dtype=wp.int32), starts: wp.array(dtype=wp.int32)
):
    p = wp.tid()
    starts[p] = wp.where(p == 0 or addresses[perm[p]] != addresses[perm[p - 1]], 1, 0)


@wp.kernel
def _segment_bounds(
    segment: wp.array(dtype=wp.int32),
    count: int,
    first: wp.array(dtype=wp.int32),
    last: wp.array(dtype=wp.int32),
):
    p = wp.tid()
    if p == 0 or segment[p] != segment[p - 1]:
        first[segment[p]] = p
    if p == count - 1 or segment[p] != segment[p + 1]:
        last[segment[p]] = p


@wp.kernel
def _check_order(
    kind: int,
    op_code: wp.array(dtype=wp.int32),
    perm: wp.array(dtype=wp.int32),
    starts: wp.array(dtype=wp.int32),
    returned: wp.array2d(dtype=Any),
    values: wp.array2d(dtype=Any),
    compares: wp.array2d(dtype=Any),
    mismatches: wp.array(dtype=wp.int32),
):
    """Does each op's returned value follow from the op before it in ticket order?"""
    p, c = wp.tid()
    if starts[p] == 0:
        j = perm[p - 1]
        k = perm[p]
        before = returned[j, c]
        expected = before
        if kind == 0:
            expected = wp.where(op_code[j] == 1, before - values[j, c], before + values[j, c])
        elif kind == 1:
            expected = values[j, c]
        elif op_code[j] == 2:  # max
            expected = wp.max(before, values[j, c])
        elif op_code[j] == 3:  # min
            expected = wp.min(before, values[j, c])
        elif before == compares[j, c]:  # cas that swapped
            expected = values[j, c]
        if expected != returned[k, c]:
            wp.atomic_add(mismatches, 0, 1)


@wp.kernel
def _stored(
    column: int,
    op_code: wp.array(dtype=wp.int32),
    perm: wp.array(dtype=wp.int32),
    returned: wp.array2d(dtype=Any),
    values: wp.array2d(dtype=Any),
    compares: wp.array2d(dtype=Any),
    holder: wp.array(dtype=wp.int32),
):
    """For max/min/cas: this op's position if it changed the stored component ``column``, else -1.

    Vector max/min work per component, so each component has holders of its own.
    """
    p = wp.tid()
    k = perm[p]
    changed = False
    if op_code[k] == 2:
        changed = values[k, column] > returned[k, column]
    elif op_code[k] == 3:
        changed = values[k, column] < returned[k, column]
    elif op_code[k] == 4:
        changed = returned[k, column] == compares[k, column]
    holder[p] = wp.where(changed, p, -1)


@wp.kernel
def _last_holder_step(
    distance: int,
    segment: wp.array(dtype=wp.int32),
    first: wp.array(dtype=wp.int32),
    source: wp.array(dtype=wp.int32),
    result: wp.array(dtype=wp.int32),
):
    """One step of a segmented max-scan (Hillis-Steele): the last op at or before p that stored a value."""
    p = wp.tid()
    value = source[p]
    if p - distance >= first[segment[p]]:
        value = wp.max(value, source[p - distance])
    result[p] = value


@wp.kernel
def _gather_sorted(
    perm: wp.array(dtype=wp.int32), adjoint: wp.array2d(dtype=wp.float64), column: int, out: wp.array(dtype=wp.float64)
):
    p = wp.tid()
    out[p] = adjoint[perm[p], column]


@wp.struct
class Segments:
    """Operations in execution order per address: ``perm[p]`` is the p-th, ``segment[p]`` its address's
    segment, which runs from position ``first[segment]`` to ``last[segment]``; ``addresses[op]`` by op."""

    perm: wp.array(dtype=wp.int32)
    segment: wp.array(dtype=wp.int32)
    first: wp.array(dtype=wp.int32)
    last: wp.array(dtype=wp.int32)
    addresses: wp.array(dtype=wp.int32)


@wp.kernel
def _route_sums(
    column: int,
    order: Segments,
    sums: wp.array(dtype=wp.float64),
    sign: wp.array(dtype=wp.float64),
    final: wp.array2d(dtype=wp.float64),
    extras: wp.array2d(dtype=wp.float64),
    initial: wp.array2d(dtype=wp.float64),
):
    """add/sub: operand j gets s_j * (final + sum of later returns' adjoints); acc0 gets all of them."""
    p = wp.tid()
    k = order.perm[p]
    seg = order.segment[p]
    a = order.addresses[k]
    last = order.last[seg]
    extras[k, column] += sign[k] * (sums[last] - sums[p] + final[a, column])
    if p == order.first[seg]:
        before = wp.float64(0.0)
        if p > 0:
            before = sums[p - 1]
        wp.atomic_add(initial, a, column, sums[last] - before)


@wp.kernel
def _route_holders(
    kind: int,
    column: int,
    order: Segments,
    holders: wp.array(dtype=wp.int32),
    adjoint: wp.array2d(dtype=wp.float64),
    final: wp.array2d(dtype=wp.float64),
    extras: wp.array2d(dtype=wp.float64),
    initial: wp.array2d(dtype=wp.float64),
):
    """exch/max/min/cas: each returned value's adjoint goes to the op whose operand it is (or acc0)."""
    p = wp.tid()
    k = order.perm[p]
    seg = order.segment[p]
    a = order.addresses[k]
    source = int(-1)  # position of the op whose operand op p returned; -1: the initial value
    if p > order.first[seg]:
        source = wp.where(kind == 1, p - 1, holders[p - 1])
    if source < 0:
        wp.atomic_add(initial, a, column, adjoint[k, column])
    else:
        wp.atomic_add(extras, order.perm[source], column, adjoint[k, column])
    if p == order.last[seg]:
        final_source = wp.where(kind == 1, p, holders[p])
        if final_source >= 0:  # the final value is that op's operand, not acc0's
            wp.atomic_add(extras, order.perm[final_source], column, final[a, column])
            wp.atomic_add(initial, a, column, -final[a, column])


@wp.kernel
def _to_float64(source: wp.array2d(dtype=Any), offset: int, out: wp.array2d(dtype=wp.float64)):
    i, c = wp.tid()
    out[offset + i, c] = wp.float64(source[i, c])


@wp.kernel
def _from_float64(source: wp.array2d(dtype=wp.float64), offset: int, out: wp.array2d(dtype=Any)):
    i, c = wp.tid()
    out[i, c] = out.dtype(source[offset + i, c])


@wp.kernel
def _add_float64(source: wp.array2d(dtype=wp.float64), out: wp.array2d(dtype=Any)):
    i, c = wp.tid()
    out[i, c] = out[i, c] + out.dtype(source[i, c])


@wp.kernel
def _accumulate(source: wp.array(dtype=Any), out: wp.array(dtype=Any)):
    i = wp.tid()
    out[i] = out[i] + source[i]


def components(array: wp.array) -> wp.array:
    """A (n, components) view of the scalars of an array of scalars, vectors or matrices (no copy)."""
    scalar = wp._src.types.type_scalar_type(array.dtype)
    count = wp._src.types.type_size(array.dtype)
    return wp.array(
        ptr=array.ptr,
        dtype=scalar,
        shape=(array.size, count),
        strides=(wp._src.types.type_size_in_bytes(array.dtype), wp._src.types.type_size_in_bytes(scalar)),
        device=array.device,
    )


@dataclass
class ExactSite:
    """One exact site's records in one launch."""

    op: str
    returned: wp.array
    values: wp.array
    order: wp.array
    addresses: wp.array
    compares: wp.array | None


@dataclass
class ExactTarget:
    """A target array with exact float returns in one launch, and its sites' records."""

    location: str  # of its first site, for messages
    path: str
    array: wp.array
    sites: list[ExactSite] = field(default_factory=list)


_OP_CODES = {"add": 0, "sub": 1, "max": 2, "min": 3, "cas": 4, "exch": 5}


class _Target:
    """The exact sites of one target array, their operations sorted by (address, ticket) once."""

    def __init__(self, kernel: str, location: str, path: str, target: wp.array, sites: list[ExactSite]):
        self.path, self.target, self.sites = path, target, sites
        self.kind = _KIND[sites[0].op]
        device = target.device
        self.device = device
        self.sizes = [s.returned.size for s in sites]
        self.offsets = list(np.cumsum([0, *self.sizes[:-1]]))
        n = sum(self.sizes)
        self.columns = wp._src.types.type_size(target.dtype)
        concat = lambda name: self._concat([getattr(s, name) for s in sites])  # noqa: E731
        order, addresses = concat("order"), concat("addresses")
        codes = np.concatenate(
            [np.full(size, _OP_CODES[s.op], np.int32) for s, size in zip(sites, self.sizes, strict=True)]
        )
        self.op_code = wp.array(codes, dtype=wp.int32, device=device)
        self.sign = wp.array(np.where(codes == 1, -1.0, 1.0), dtype=wp.float64, device=device)
        self.addresses = addresses
        keys = wp.empty(2 * n, dtype=wp.int64, device=device)
        perm = wp.empty(2 * n, dtype=wp.int32, device=device)
        wp.launch(_sort_keys, n, inputs=[order, addresses, keys, perm], device=device)
        wp.utils.radix_sort_pairs(keys, perm, n)
        self.count = int((order.numpy() >= 0).sum())
        self.perm = perm[: self.count]
        if self.count == 0:
            return
        starts = wp.empty(self.count, dtype=wp.int32, device=device)
        wp.launch(_segment_starts, self.count, inputs=[addresses, self.perm, starts], device=device)
        self.segment = wp.empty(self.count, dtype=wp.int32, device=device)
        wp.utils.array_scan(starts, self.segment, inclusive=True)
        wp.launch(_minus_one, self.count, inputs=[self.segment], device=device)
        segments = int(self.segment.numpy()[-1]) + 1
        self.first = wp.empty(segments, dtype=wp.int32, device=device)
        self.last = wp.empty(segments, dtype=wp.int32, device=device)
        wp.launch(_segment_bounds, self.count, inputs=[self.segment, self.count, self.first, self.last], device=device)

        returned, values = self._concat_components("returned"), self._concat_components("values")
        compares = self._concat_components("compares") if sites[0].op == "cas" else values
        mismatches = wp.zeros(1, dtype=wp.int32, device=device)
        inputs = [self.kind, self.op_code, self.perm, starts, returned, values, compares, mismatches]
        wp.launch(_check_order, (self.count, self.columns), inputs=inputs, device=device)
        if int(mismatches.numpy()[0]):
            raise RewriteError(
                kernel,
                location,
                f"the order of the float atomics on '{path}' could not be recovered: their returned values do not "
                "follow each other in ticket order (another thread ran between an atomic and its ticket)",
                "Rewrite with detach_returns=True, or run this kernel on the CPU for exact gradients",
            )
        if self.kind == HOLD:
            self.holders = [self._last_holders(c, returned, values, compares) for c in range(self.columns)]

    def _concat(self, arrays: list[wp.array]) -> wp.array:
        out = wp.empty(sum(a.size for a in arrays), dtype=arrays[0].dtype, device=self.device)
        for array, offset in zip(arrays, self.offsets, strict=True):
            wp.copy(out, array, dest_offset=int(offset), count=array.size)
        return out

    def _concat_components(self, name: str) -> wp.array:
        parts = [components(getattr(s, name)) for s in self.sites]
        out = wp.empty((sum(self.sizes), self.columns), dtype=parts[0].dtype, device=self.device)
        for part, offset in zip(parts, self.offsets, strict=True):
            wp.copy(out[int(offset) : int(offset) + part.shape[0]], part)
        return out

    def _last_holders(self, column: int, returned: wp.array, values: wp.array, compares: wp.array) -> wp.array:
        """For each position, the last op at or before it (in its segment) that stored its operand's component."""
        holders = wp.empty(self.count, dtype=wp.int32, device=self.device)
        inputs = [column, self.op_code, self.perm, returned, values, compares, holders]
        wp.launch(_stored, self.count, inputs=inputs, device=self.device)
        result = wp.empty_like(holders)
        distance = 1
        while distance < self.count:
            inputs = [distance, self.segment, self.first, holders, result]
            wp.launch(_last_holder_step, self.count, inputs=inputs, device=self.device)
            holders, result = result, holders
            distance *= 2
        return holders

    def route(self, adjoint: wp.array, final: wp.array) -> tuple[wp.array, wp.array]:
        """Route returned values' adjoints (and the final value's, in ``final``) to operands and acc0.

        Returns the operands' extra adjoints (n, columns) and acc0's (target size, columns), float64.
        """
        extras = wp.zeros((sum(self.sizes), self.columns), dtype=wp.float64, device=self.device)
        initial = wp.zeros((self.target.size, self.columns), dtype=wp.float64, device=self.device)
        if self.count == 0:
            return extras, initial
        order = Segments()
        order.perm, order.segment, order.first, order.last = self.perm, self.segment, self.first, self.last
        order.addresses = self.addresses
        for column in range(self.columns):
            if self.kind == ADD:
                sums = wp.empty(self.count, dtype=wp.float64, device=self.device)
                wp.launch(_gather_sorted, self.count, inputs=[self.perm, adjoint, column, sums], device=self.device)
                wp.utils.array_scan(sums, sums, inclusive=True)
                inputs = [column, order, sums, self.sign, final, extras, initial]
                wp.launch(_route_sums, self.count, inputs=inputs, device=self.device)
            else:
                holders = self.holders[column] if self.kind == HOLD else self.perm  # unused for exch
                inputs = [self.kind, column, order, holders, adjoint, final, extras, initial]
                wp.launch(_route_holders, self.count, inputs=inputs, device=self.device)
        return extras, initial

    def adjoints_of(self, arrays: list[wp.array]) -> wp.array:
        """The sites' per-op adjoints (one array per site, target dtype) as one (n, columns) float64 array."""
        out = wp.zeros((sum(self.sizes), self.columns), dtype=wp.float64, device=self.device)
        for array, offset in zip(arrays, self.offsets, strict=True):
            wp.launch(
                _to_float64,
                (array.size, self.columns),
                inputs=[components(array), int(offset), out],
                device=self.device,
            )
        return out

    def split(self, extras: wp.array) -> list[wp.array]:
        """Extra adjoints as one array per site, in the operand records' dtype: the seeds of the next launch."""
        seeds = []
        for site, offset in zip(self.sites, self.offsets, strict=True):
            seed = wp.zeros_like(site.values)
            wp.launch(
                _from_float64,
                (seed.size, self.columns),
                inputs=[extras, int(offset), components(seed)],
                device=self.device,
            )
            seeds.append(seed)
        return seeds


@wp.kernel
def _minus_one(values: wp.array(dtype=wp.int32)):
    i = wp.tid()
    values[i] = values[i] - 1


def _scratch_adjoint(value: Any, pairs: list[tuple[wp.array, wp.array]]) -> Any:
    """Like ``Tape.get_adjoint``, but a fresh zero array for every gradient (remembered in ``pairs``)."""
    if wp._src.types.is_native_type(type(value)):
        return type(value)()
    if isinstance(value, wp.array):
        if value.grad is None:
            return None
        scratch = wp.zeros_like(value.grad)
        pairs.append((value.grad, scratch))
        return scratch
    if wp._src.types.is_struct(value):
        adjoint = value._cls()
        for name in value._cls.vars:
            setattr(adjoint, name, _scratch_adjoint(getattr(value, name), pairs) or getattr(adjoint, name))
        return adjoint
    return None


@dataclass
class ExactBackward:
    """The tape step that runs right after the replay kernel's adjoint (see the module docstring)."""

    kernel: str
    replay_kernel: wp.Kernel
    dim: Any
    inputs: list[Any]
    outputs: list[Any]  # the original outputs, then every record array, then the trip and shape arguments
    device: Any
    block_dim: int | None
    max_blocks: int
    targets: list[ExactTarget]

    def __call__(self) -> None:
        targets = [_Target(self.kernel, t.location, t.path, t.array, t.sites) for t in self.targets]
        adjoints = [t.adjoints_of([s.returned.grad for s in t.sites]) for t in targets]
        finals = [self._take_finals(t) for t in targets]
        for _ in range(_MAX_ROUNDS):
            seeds: dict[int, wp.array] = {}
            for target, adjoint, final in zip(targets, adjoints, finals, strict=True):
                extras, initial = target.route(adjoint, final)
                if target.target.grad is not None:
                    wp.launch(
                        _add_float64,
                        initial.shape,
                        inputs=[initial, components(target.target.grad)],
                        device=target.device,
                    )
                for site, seed in zip(target.sites, target.split(extras), strict=True):
                    seeds[id(site.values)] = seed
            if not any(np.any(seed.numpy()) for seed in seeds.values()):
                return
            collected = self._seed_launch(seeds)
            adjoints = [t.adjoints_of([collected[id(s.returned)] for s in t.sites]) for t in targets]
            finals = [wp.zeros_like(f) for f in finals]
        raise RuntimeError(f"exact gradients of kernel '{self.kernel}' did not settle in {_MAX_ROUNDS} rounds")

    def _take_finals(self, target: _Target) -> wp.array:
        """The final values' adjoints (float64), which route() hands to operands instead."""
        final = wp.zeros((target.target.size, target.columns), dtype=wp.float64, device=target.device)
        if target.target.grad is not None:
            grad = components(target.target.grad)
            wp.launch(_to_float64, grad.shape, inputs=[grad, 0, final], device=target.device)
        return final

    def _seed_launch(self, seeds: dict[int, wp.array]) -> dict[int, wp.array]:
        """An adjoint launch of the replay kernel seeded only with the operands' extra adjoints."""
        pairs: list[tuple[wp.array, wp.array]] = []
        collected: dict[int, wp.array] = {}
        returned = {id(s.returned) for target in self.targets for s in target.sites}

        def adjoint_of(value: Any) -> Any:
            if isinstance(value, wp.array) and id(value) in seeds:
                return seeds[id(value)]
            if isinstance(value, wp.array) and id(value) in returned:
                collected[id(value)] = wp.zeros_like(value)
                return collected[id(value)]
            return _scratch_adjoint(value, pairs)

        wp.launch(
            self.replay_kernel,
            self.dim,
            inputs=self.inputs,
            outputs=self.outputs,
            adj_inputs=[adjoint_of(a) for a in self.inputs],
            adj_outputs=[adjoint_of(a) for a in self.outputs],
            adjoint=True,
            device=self.device,
            block_dim=self.block_dim,
            max_blocks=self.max_blocks,
            record_tape=False,
        )
        for real, scratch in pairs:
            wp.launch(_accumulate, real.size, inputs=[scratch.flatten(), real.flatten()], device=real.device)
        return collected
