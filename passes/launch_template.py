"""The ``launch_<kernel>`` function of a standalone rewritten module, written as a real Python function.

A module emitted by ``wp-rewrite FILE.py -o OUT.py`` must run without this project installed, so the launch
glue of ``rewrite/runtime.py`` is emitted into it as source text. ``render`` copies ``launch_kernel`` below
and substitutes its placeholders *by source span* rather than unparsing it, so the emitted function keeps this
file's layout and comments: it reads like code written by hand.

``launch_kernel`` becomes each kernel's ``launch_<kernel>``: placeholders ``kernel``, ``record_kernel``,
``replay_kernel``, ``launch_kernel`` (generated names) and the upper-case constants, read from the kernel's
source. The functions of ``SUPPORT`` are emitted once per module (their names are placeholders too, renamed to
names fresh in the module); ``wp`` becomes the module's name for warp. ``launch_recorded`` is a port of
``rewrite.runtime.launch_two_phase`` and must be kept in step with it.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import warp as wp

# Placeholders (see the module docstring). They exist so that the templates below are valid, lint-clean Python.
kernel = record_kernel = replay_kernel = None
PARAMETERS: tuple[str, ...] = ()  # the kernel's parameter names, in order
SITES: tuple = ()  # per consumed atomic: (target path, op, "file:line:col", gradient source paths or None: any)
RECORDS: tuple = ()  # per record parameter, in order: (target path or None, else a fixed dtype, ids of loops around)
LOOPS: tuple = ()  # per loop around a consumed atomic: (id, constant trip count or None, "file:line:col")
MAX_RECORDS = None  # records per execution of a loop whose trip count is not a constant; None: counted by a dry run


def launch_kernel(
    dim, inputs=(), outputs=(), device=None, stream=None, record_tape=True, block_dim=None, max_blocks=0,
    max_records=MAX_RECORDS,
):  # fmt: skip
    """Replaced by ``render``."""
    launch_recorded(
        kernel, record_kernel, replay_kernel,
        dim, inputs, outputs, device, stream, record_tape, block_dim, max_blocks, max_records,
        parameters=PARAMETERS,
        sites=SITES,
        records=RECORDS,
        loops=LOOPS,
    )  # fmt: skip


# --- shared by every launch_<kernel> of a module: emitted once, after the first rewritten kernel ---------------


def argument_arrays(parameters, args):
    """Every array among a launch's arguments, struct fields included, with its path ("state.count")."""
    pending = list(zip(parameters, args, strict=True))
    while pending:
        path, value = pending.pop(0)
        if isinstance(value, wp.array):
            yield path, value
        elif isinstance(value, wp._src.codegen.StructInstance):
            pending += [(f"{path}.{field}", getattr(value, field)) for field in value._cls.vars]


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


def phase_arguments(parameters, records, loops, args, shape, capacities, device):
    """The arguments both phases take after the kernel's own: records, trip arrays, launch shape."""
    threads = 1
    for extent in shape:
        threads *= extent
    extra = []
    for target, fixed_dtype, around in records:
        size = threads
        for loop in around:
            size *= capacities[loop]
        dtype = argument_at(parameters, args, target).dtype if target else getattr(wp, fixed_dtype)
        extra.append(wp.zeros(size, dtype=dtype, device=device))
    if loops:
        trip_capacity = wp.array(capacities, dtype=wp.int32, device=device)
        trips_needed = wp.zeros(len(capacities), dtype=wp.int32, device=device)
        extra += [trip_capacity, trips_needed]
    extra.append(wp.vec4i(*shape, *(1,) * (4 - len(shape))))
    return extra


def launch_recorded(
    kernel, record_kernel, replay_kernel, dim, inputs, outputs, device, stream, record_tape, block_dim, max_blocks,
    max_records, parameters, sites, records, loops,
):  # fmt: skip
    """Launch ``kernel`` like ``wp.launch``; on an active tape, as its record and replay kernels."""
    device = wp.get_device(device)
    args = [*inputs, *outputs]
    # Refuse a bad launch before anything runs, so counters and outputs stay untouched.
    if len(args) != len(parameters):
        raise TypeError(f"kernel '{kernel.key}' takes {len(parameters)} arguments (inputs + outputs), got {len(args)}")
    for path, array in argument_arrays(parameters, args):
        if array.device != device:
            raise ValueError(
                f"kernel '{kernel.key}': argument '{path}' is on device '{array.device}' "
                f"but the launch is on '{device}'"
            )
    tape = wp._src.context.runtime.tape if record_tape else None  # Warp has no public accessor for it
    options = {"device": device, "stream": stream, "block_dim": block_dim, "max_blocks": max_blocks}
    if tape is None:
        # Without a tape nothing will run backward: the original kernel is the exact forward.
        wp.launch(kernel, dim, inputs, outputs, record_tape=record_tape, **options)
        return

    # A recorded float return is replayed as a constant: exact only if nothing it is made of needs a gradient.
    for target, op, where, sources in sites:
        if not is_float_dtype(argument_at(parameters, args, target).dtype):
            continue
        if sources is None:
            candidates = list(argument_arrays(parameters, args))
        else:
            candidates = [(path, argument_at(parameters, args, path)) for path in sources]
        for path, value in candidates:
            if isinstance(value, wp.array) and value.requires_grad and is_float_dtype(value.dtype):
                raise ValueError(
                    f"{where}: kernel '{kernel.key}': the value returned by wp.atomic_{op}() on '{target}' is a float "
                    f"that depends on '{path}', which requires grad; its exact gradient through the returned value "
                    f"is not supported. Launch with '{path}' not requiring grad, or compute the value without using "
                    "the atomic's return"
                )

    shape = (dim,) if isinstance(dim, int) else tuple(dim)
    capacities = [trips if trips is not None else max_records for _, trips, _ in loops]
    if None in capacities:
        # A dry run on scratch copies, with no room for records, counts the trips of loops of unknown length.
        scratch = [scratch_copy(value) for value in args]
        dry = phase_arguments(parameters, records, loops, scratch, shape, [c or 0 for c in capacities], device)
        wp.launch(record_kernel, shape, scratch, dry, record_tape=False, **options)
        needed = dry[-2].numpy()
        capacities = [c if c is not None else int(needed[i]) for i, c in enumerate(capacities)]
    # Forward: the record kernel runs the original code and stores every consumed atomic's returned value.
    extra = phase_arguments(parameters, records, loops, args, shape, capacities, device)
    wp.launch(record_kernel, dim, inputs, [*outputs, *extra], record_tape=False, **options)
    if loops:
        needed = extra[-2].numpy()
        for loop, trips, where in loops:
            if trips is None and needed[loop] > capacities[loop]:
                raise ValueError(
                    f"{where}: kernel '{kernel.key}': this loop ran {needed[loop]} times in one execution but its "
                    f"records had room for {capacities[loop]}; the launch's gradients would be wrong. Pass "
                    f"max_records={needed[loop]} or more"
                )
    # Backward: only the replay kernel's adjoint runs, reading the recorded values back.
    tape.record_launch(replay_kernel, dim, max_blocks, list(inputs), [*outputs, *extra], device, block_dim or 0)
    if wp.config.verify_autograd_array_access:
        tape._check_kernel_array_access(replay_kernel, [*args, *extra])


SUPPORT = (argument_arrays, argument_at, is_float_dtype, scratch_copy, phase_arguments, launch_recorded)


def _offsets(text: str) -> list[int]:
    """Character offset of the start of each line (index 0 unused: ast lines are 1-based)."""
    starts, total = [0], 0
    for line in text.splitlines(keepends=True):
        starts.append(total)
        total += len(line)
    return starts


def _literal(value: Any, indent: str) -> str:
    """``repr`` of a tuple constant, one item a line when it would make a long line."""
    text = repr(value)
    if len(text) <= 80 or not isinstance(value, tuple) or not value:
        return text
    items = "".join(f"{indent}    {item!r},\n" for item in value)
    return f"(\n{items}{indent})"


def _defined_name_span(node: ast.FunctionDef, starts: list[int], text: str) -> tuple[int, int]:
    start = starts[node.lineno] + node.col_offset
    at = text.index(node.name, text.index("def", start))
    return at, at + len(node.name)


def render(
    template: Callable, names: dict[str, str], constants: dict[str, Any] | None = None, docstring: str | None = None
) -> str:
    """The template's source with placeholders renamed (``names``) or replaced by constants' reprs.

    ``docstring`` replaces the template's own. A local of the template that a new name would capture (a kernel
    called ``records``) is renamed too.
    """
    constants = constants or {}
    text = textwrap.dedent(inspect.getsource(template))
    definition = ast.parse(text).body[0]
    starts = _offsets(text)
    locals_ = {n.id for n in ast.walk(definition) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    locals_ |= {n.name for n in ast.walk(definition) if isinstance(n, ast.FunctionDef) and n is not definition}
    renames = dict(names)
    for name in sorted(locals_ & set(names.values())):
        renames[name] = f"{name}_"
    edits = []
    for node in ast.walk(definition):
        if isinstance(node, ast.Name) and (node.id in renames or node.id in constants):
            start = starts[node.lineno] + node.col_offset
            line = text[starts[node.lineno] : text.index("\n", starts[node.lineno])]
            indent = line[: len(line) - len(line.lstrip())]
            new = renames[node.id] if node.id in renames else _literal(constants[node.id], indent)
            edits.append((start, start + len(node.id), new))
        elif isinstance(node, ast.FunctionDef) and node.name in renames:
            edits.append((*_defined_name_span(node, starts, text), renames[node.name]))
    if docstring is not None:
        edits.append(_docstring_edit(definition, starts, docstring))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _docstring_edit(definition: ast.FunctionDef, starts: list[int], docstring: str) -> tuple[int, int, str]:
    doc = definition.body[0]
    indent = " " * doc.col_offset
    lines = [f"{indent}{line}" if line else "" for line in docstring.strip().splitlines()]
    closing = f"\n{indent}" if len(lines) > 1 else ""
    quoted = '"""' + "\n".join(lines).lstrip() + closing + '"""'
    return starts[doc.lineno] + doc.col_offset, starts[doc.end_lineno] + doc.end_col_offset, quoted
