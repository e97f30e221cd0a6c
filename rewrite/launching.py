"""The launch glue: run the record kernel forward, put the replay kernel's adjoint on the tape.

It works on plain tuples describing the generated kernels (built by ``rewrite.build`` for the API, written
as constants into the standalone modules of ``wp-rewrite``), so that the CLI can copy this very code into
the modules it emits (``rewrite.launch_template``): one launch path for both.

- sites, per recorded atomic: (target path, op, "file:line:col", gradient source paths or None: any array,
  exact records: (returned, values, order, addresses, compares) or ());
- records, per record parameter in order: (name, kind, target path or None, fixed dtype or "", ids of the
  loops around it, requires grad); see ``passes.layout.RecordInfo`` for the kinds;
- loops, per loop around a recorded atomic: (id, constant trip count or None, "file:line:col", opaque, room
  per execution compiled into the kernels or None: passed by the launch; see ``passes.two_phase``).

On the CPU a launch whose arrays were all seen before reuses the record kernel's packed ``wp.Launch`` and, once
no tape holds them any more, that launch's records (``PreparedLaunch``): ``wp.launch`` costs 30-40 us of
checking and packing, more than the record stores of a kernel of 10,000 threads.
"""

import sys
import weakref

import warp as wp

from warp_rewrite.errors import RewriteError


def argument_arrays(parameters, args):
    """Every array among a launch's arguments, struct fields included, with its path ("state.count")."""
    for path, value in zip(parameters, args, strict=True):
        if isinstance(value, wp.array):
            yield path, value
        elif isinstance(value, wp._src.codegen.StructInstance):
            fields = value._cls.vars
            yield from argument_arrays([f"{path}.{field}" for field in fields], [getattr(value, f) for f in fields])


def argument_at(parameters, args, path):
    """The launch argument, or struct field of one, that ``path`` ("count", "state.count") names."""
    root, *fields = path.split(".")
    value = args[parameters.index(root)]
    for field in fields:
        value = getattr(value, field)
    return value


def is_float_dtype(dtype):
    """True for float scalars and for vectors, matrices, quaternions and transforms of them."""
    return wp._src.types.type_scalar_type(dtype) in wp._src.types.float_types


def scratch_copy(value):
    """A copy a dry run may write into: arrays cloned, struct fields copied, plain values as they are."""
    if isinstance(value, wp.array):
        return wp.clone(value, requires_grad=False)
    if isinstance(value, wp._src.codegen.StructInstance):
        copy = type(value)()
        for field in value._cls.vars:
            setattr(copy, field, scratch_copy(getattr(value, field)))
        return copy
    return value


def requires_grad_path(parameters, args, site):
    """The path of an array requiring grad that a float return may be differentiable in, if any."""
    target, _, _, sources, _ = site
    if not is_float_dtype(argument_at(parameters, args, target).dtype):
        return None
    if sources is None:
        candidates = list(argument_arrays(parameters, args))
    else:
        candidates = [(path, argument_at(parameters, args, path)) for path in sources]
    for path, value in candidates:
        if isinstance(value, wp.array) and value.requires_grad and is_float_dtype(value.dtype):
            return path
    return None


def is_stand_in(kind, target, exact):
    """Whether a record is an empty stand-in: exact-return records of a target with no exact returns this launch."""
    return kind in ("values", "order", "addresses", "compares", "tickets") and target not in exact


def phase_arguments(parameters, records, loops, args, shape, capacities, device, launch_arity, exact=frozenset()):
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
    for _, kind, target, fixed_dtype, around, requires_grad in records:
        size = threads
        for loop in around:
            size *= capacities[loop]
        array = argument_at(parameters, args, target) if target else None
        if is_stand_in(kind, target, exact):
            empty = (0,) * array.ndim if kind == "tickets" else (0,)
            dtype = array.dtype if kind in ("values", "compares") else wp.int32
            if (empty, dtype) not in empties:
                empties[empty, dtype] = wp.empty(empty, dtype=dtype, device=device)
            extra.append(empties[empty, dtype])
        elif kind == "tickets":  # counters beside the target, one per address
            extra.append(wp.zeros(array.shape, dtype=wp.int32, device=device))
        elif kind == "order":  # -1: the operation never ran
            extra.append(wp.full(size, -1, dtype=wp.int32, device=device))
        else:
            dtype = array.dtype if kind in ("returned", "values", "compares") else getattr(wp, fixed_dtype)
            # The replay reads only records the record kernel wrote, so they need no zero fill.
            grad = requires_grad and target in exact
            extra.append(wp.empty(size, dtype=dtype, device=device, requires_grad=grad))
    counted = [trips is None and not opaque for _, trips, _, opaque, _ in loops]
    # The capacities not compiled in, in loop order: the kernels' trip_capacity<id> parameters.
    extra += [
        capacities[loop_id] for (loop_id, *_, room), count in zip(loops, counted, strict=True) if count and room is None
    ]
    trips_needed = None
    if any(counted):
        trips_needed = wp.zeros(len(loops), dtype=wp.int32, device=device)
        extra.append(trips_needed)
    if launch_arity > 1:
        extra.append(wp.vec4i(*shape, *(1,) * (4 - len(shape))))
    return extra, trips_needed


def replay_arguments(extra, trips_needed):
    """The replay kernel's arguments after the kernel's own: the record kernel's but the trips needed."""
    return [value for value in extra if value is not trips_needed]


def held_elsewhere(values, indices):
    """For each ``values[i]``: whether anything besides the list ``values`` refers to it.

    How many references ``sys.getrefcount`` reports for an object in one list slot differs across Python
    versions; a probe in a list of its own, read the same way, calibrates it.
    """
    probe = [object()]
    alone = sys.getrefcount(probe[0])
    return [sys.getrefcount(values[i]) > alone for i in indices]


def signature(args, shape, block_dim, max_blocks, max_records):
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


def check_trips(kernel_key, loops, needs_room, capacities, needed):
    """Refuse a launch in which a loop ran more often than its records had room for."""
    for (loop, _, where, _, _), room in zip(loops, needs_room, strict=True):
        if room and needed[loop] > capacities[loop]:
            raise RewriteError(
                kernel_key,
                where,
                f"this loop ran {needed[loop]} times in one execution but its records had room for "
                f"{capacities[loop]}; the launch's gradients would be wrong",
                f"Pass max_records={needed[loop]} or more (to wp_rewrite, or to the generated launch function)",
            )


class PreparedLaunch:
    """The record kernel's launch, packed once for one signature of arguments, and its last records (CPU only).

    A launch with the same arrays repacks only the other values (as ``wp.launch`` would) and runs. It writes the
    last launch's records again when no tape holds them any more (they are still warm in the cache), new ones
    otherwise. Not for CUDA, where a backward enqueued on another stream could still be reading the records.
    """

    def __init__(self, command, replay_kernel, args, extra, records, trips_needed, loops, needs_room, capacities):
        command.fwd_args = None  # it would keep the arguments alive; Warp reads it only in graph captures
        self.command = command  # the record kernel's wp.Launch
        self.replay_kernel = replay_kernel
        arrays = [value for value in args if type(value) is wp.array]
        self.arrays = [weakref.ref(array) for array in arrays]
        self.descriptors = [array.__ctype__() for array in arrays]  # kept alive: see ``signature``
        self.values = {index: value for index, value in enumerate(args) if type(value) is not wp.array}  # as packed
        self.first_extra = len(args)  # the parameter index of extra[0]
        self.extra = extra
        self.records = [i for i, (_, kind, target, *_) in enumerate(records) if not is_stand_in(kind, target, ())]
        self.trips_needed = trips_needed  # an argument of the record kernel only
        # A CPU array's numpy() is a view of it: zeroed and read back without a copy or a launch.
        self.trips_view = trips_needed.numpy() if any(needs_room) else None
        self.loops = (loops, needs_room, capacities)

    def current(self):
        """False once Warp has rebuilt the record kernel's module (a function it calls changed, or an option)."""
        command = self.command
        return command.kernel.module.load(command.device, command.block_dim) is command.module_exec

    def live(self):
        """False once an array it was prepared for is gone: no launch can match it again."""
        return all(array() is not None for array in self.arrays)

    def launch(self, kernel_key, args, inputs, outputs, dim, block_dim, max_blocks, tape):
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
            check_trips(kernel_key, *self.loops, self.trips_view)
        replay_extra = replay_arguments(extra, self.trips_needed)
        tape.record_launch(self.replay_kernel, dim, max_blocks, list(inputs), [*outputs, *replay_extra],
                           command.device, block_dim or 0)  # fmt: skip


def remember(launches, key, prepared, most=8):
    """Keep ``prepared`` for launches with ``key``: with at most ``most`` others, none that can no longer match."""
    for old_key, old in list(launches.items()):
        if not old.live():
            launches.pop(old_key, None)
    while len(launches) >= most:
        launches.pop(next(iter(launches)), None)  # the least recently used
    launches[key] = prepared


def launch_recorded(
    kernel, record_kernel, replay_kernel, dim, inputs, outputs, device, stream, record_tape, block_dim, max_blocks,
    max_records, parameters, sites, records, loops, exact_runtime, launch_arity, detached=None, launches=None,
):  # fmt: skip
    """Launch ``kernel`` like ``wp.launch``; on an active tape, as its record and replay kernels.

    ``detached``: for kernels with exact float returns, a function returning (record kernel, replay kernel,
    sites, records, loops) of the variant that records them as constants, or None; launches in which no exact
    gradient can flow use it (it skips the exact-return bookkeeping), the others the kernels passed in.
    ``launches``: a dict the caller keeps for this kernel, where CPU launches keep their ``PreparedLaunch``.
    """
    device = stream.device if stream is not None else wp.get_device(device)
    args = [*inputs, *outputs]
    tape = wp._src.context.runtime.tape if record_tape else None  # Warp has no public accessor for it
    shape = (dim,) if isinstance(dim, int) else tuple(dim)
    # A CPU launch on a tape with the arrays of an earlier one takes the PreparedLaunch that one left.
    preparable = launches is not None and tape is not None and device.is_cpu and not device.is_capturing
    preparable = preparable and not wp.config.verify_autograd_array_access
    key = signature(args, shape, block_dim, max_blocks, max_records) if preparable else None
    prepared = None if key is None else launches.pop(key, None)  # out while it runs: one thread at a time uses it
    if prepared is not None and prepared.current():
        try:
            prepared.launch(kernel.key, args, inputs, outputs, dim, block_dim, max_blocks, tape)
        finally:
            launches[key] = prepared
        return

    # Refuse a bad launch before anything runs, so counters and outputs stay untouched.
    if len(args) != len(parameters):
        raise TypeError(f"kernel '{kernel.key}' takes {len(parameters)} arguments (inputs + outputs), got {len(args)}")
    for path, array in argument_arrays(parameters, args):
        if array.device != device:
            raise ValueError(
                f"kernel '{kernel.key}': argument '{path}' is on device '{array.device}' "
                f"but the launch is on '{device}'"
            )
    options = {"device": device, "stream": stream, "block_dim": block_dim, "max_blocks": max_blocks}
    if tape is None:
        # Without a tape nothing will run backward: the original kernel is the exact forward.
        wp.launch(kernel, dim, inputs, outputs, record_tape=record_tape, **options)
        return

    # A detached float return is replayed as a constant: exact only if nothing it is made of needs a gradient.
    for site in sites:
        target, op, where, _, exact_records = site
        path = None if exact_records else requires_grad_path(parameters, args, site)
        if path is not None:
            raise RewriteError(
                kernel.key,
                where,
                f"the value returned by wp.atomic_{op}() on '{target}' is a float that depends on '{path}', "
                "which requires grad; its exact gradient through the returned value is not supported",
                f"Launch with '{path}' not requiring grad, or compute the value without using the atomic's return",
            )

    # Exact float returns cost nothing extra where no gradient can flow through them.
    exact = {site[0] for site in sites if site[4] and requires_grad_path(parameters, args, site) is not None}
    variant = detached() if detached is not None and not exact else None
    if variant is not None:
        record_kernel, replay_kernel, sites, records, loops = variant

    if len(shape) > launch_arity:
        raise ValueError(
            f"kernel '{kernel.key}' unpacks wp.tid() into {launch_arity} index(es) but is launched with "
            f"{len(shape)} dimensions: its records are kept per thread by those indices. Unpack all "
            f"{len(shape)} (e.g. i, j = wp.tid()) or launch with fewer dimensions"
        )
    # Loops of unknown length not skipped by the replay need room for max_records executions (unless the kernels
    # have it compiled in), and their trips checked.
    needs_room = [trips is None and not opaque for _, trips, _, opaque, _ in loops]
    capacities = [
        room if room is not None else max_records if needed else (trips or 1)
        for needed, (_, trips, _, _, room) in zip(needs_room, loops, strict=True)
    ]
    counted = None in capacities
    if counted:
        # A dry run on scratch copies, with no room for records, counts the trips of loops of unknown length.
        scratch = [scratch_copy(value) for value in args]
        no_room = [c or 0 for c in capacities]
        dry, dry_trips = phase_arguments(parameters, records, loops, scratch, shape, no_room, device, launch_arity)
        wp.launch(record_kernel, shape, scratch, dry, record_tape=False, **options)
        needed = dry_trips.numpy()
        capacities = [c if c is not None else int(needed[i]) for i, c in enumerate(capacities)]
    # Forward: the record kernel runs the original code and stores every consumed atomic's returned value.
    extra, trips_needed = phase_arguments(parameters, records, loops, args, shape, capacities, device, launch_arity,
                                          exact)  # fmt: skip
    # A launch whose record sizes depend only on its signature is prepared for the next one like it.
    if key is not None and not exact and not counted:
        command = wp.launch(record_kernel, dim, inputs, [*outputs, *extra], record_tape=False, record_cmd=True,
                            **options)  # fmt: skip
        if command is not None:  # None: no threads, nothing to run
            prepared = PreparedLaunch(command, replay_kernel, args, extra, records, trips_needed, loops, needs_room,
                                      capacities)  # fmt: skip
            remember(launches, key, prepared)
            command.launch()
    else:
        wp.launch(record_kernel, dim, inputs, [*outputs, *extra], record_tape=False, **options)
    if any(needs_room):
        check_trips(kernel.key, loops, needs_room, capacities, trips_needed.numpy())
    # Exact float returns: a backward step that routes the returned values' adjoints, recorded before the replay
    # launch so that backward runs it right after the replay's adjoint.
    replay_extra = replay_arguments(extra, trips_needed)
    groups = {}
    by_name = dict(zip([record[0] for record in records], extra, strict=False)) if exact else {}
    for target, op, where, _, exact_records in sites:
        if target in exact and by_name[exact_records[0]].size:  # empty: in a loop that never ran
            returned, values, order, addresses, compares = (by_name.get(name) for name in exact_records)
            group = groups.setdefault(target, (where, target, argument_at(parameters, args, target), []))
            group[3].append(exact_runtime[0](op, returned, values, order, addresses, compares))
    if groups:
        exact_targets = list(groups.values())
        step = exact_runtime[1](kernel.key, replay_kernel, dim, list(inputs), [*outputs, *replay_extra], device,
                                block_dim, max_blocks, exact_targets)  # fmt: skip
        tape.record_func(backward=step, arrays=[s.returned for *_, exact_sites in exact_targets for s in exact_sites])
    # Backward: the replay kernel's adjoint runs, reading the recorded values back.
    tape.record_launch(replay_kernel, dim, max_blocks, list(inputs), [*outputs, *replay_extra], device, block_dim or 0)
    if wp.config.verify_autograd_array_access:
        tape._check_kernel_array_access(replay_kernel, [*args, *replay_extra])
