"""The ``launch_<kernel>`` function of a standalone rewritten module, written as a real Python function.

A module emitted by ``wp-rewrite FILE.py -o OUT.py`` must run without this project installed, so the launch
glue of ``rewrite/runtime.py`` is emitted into it as source text. ``render`` copies ``launch_kernel`` below
and substitutes its placeholders *by source span* rather than unparsing it, so the emitted function keeps this
file's layout and comments: it reads like code written by hand.

``launch_kernel`` becomes each kernel's ``launch_<kernel>``: placeholders ``kernel``, ``record_kernel``,
``replay_kernel``, ``launch_kernel`` (generated names) and the upper-case constants, read from the kernel's
source. The functions of ``SUPPORT`` are emitted once per module (their names are placeholders too, renamed to
names fresh in the module); ``wp`` becomes the module's name for warp, ``RewriteError`` the module's copy of
``rewrite.errors.RewriteError``. ``launch_recorded`` is a port of
``rewrite.runtime.launch_two_phase`` and must be kept in step with it.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import warp as wp

# Placeholders (see the module docstring). They exist so that the templates below are valid, lint-clean Python.
kernel = record_kernel = replay_kernel = RewriteError = None
PARAMETERS: tuple[str, ...] = ()  # the kernel's parameter names, in order
# per recorded atomic: (target path, op, "file:line:col", gradient source paths or None: any, exact records)
SITES: tuple = ()
# per record parameter, in order: (name, kind, target path or None, fixed dtype or "", ids of loops around, grad)
RECORDS: tuple = ()
# per loop around a recorded atomic: (id, constant trip count or None, "file:line:col", opaque: the replay skips it)
LOOPS: tuple = ()
MAX_RECORDS = None  # records per execution of a loop whose trip count is not a constant; None: counted by a dry run
EXACT_RUNTIME = None  # (ExactSite, ExactBackward) of the module's copy of rewrite.exact, for exact float returns
LAUNCH_ARITY = 1  # how many indices the kernel unpacks wp.tid() into: the most launch dimensions it can take


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
        exact_runtime=EXACT_RUNTIME,
        launch_arity=LAUNCH_ARITY,
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


def phase_arguments(parameters, records, loops, args, shape, capacities, device, exact=frozenset()):
    """The arguments both phases take after the kernel's own: records, trip arrays, launch shape.

    ``exact``: targets whose float returns need exact gradients in this launch; the other targets' exact-return
    records are empty (their returns are exact as constants).
    """
    threads = 1
    for extent in shape:
        threads *= extent
    extra = []
    for _, kind, target, fixed_dtype, around, requires_grad in records:
        size = threads
        for loop in around:
            size *= capacities[loop]
        array = argument_at(parameters, args, target) if target else None
        if kind in ("values", "order", "addresses", "compares", "tickets") and target not in exact:
            empty = (0,) * array.ndim if kind == "tickets" else 0
            dtype = array.dtype if kind in ("values", "compares") else wp.int32
            extra.append(wp.empty(empty, dtype=dtype, device=device))
        elif kind == "tickets":  # counters beside the target, one per address
            extra.append(wp.zeros(array.shape, dtype=wp.int32, device=device))
        elif kind == "order":  # -1: the operation never ran
            extra.append(wp.full(size, -1, dtype=wp.int32, device=device))
        else:
            dtype = array.dtype if kind in ("returned", "values", "compares") else getattr(wp, fixed_dtype)
            # The replay reads only records the record kernel wrote, so they need no zero fill.
            grad = requires_grad and target in exact
            extra.append(wp.empty(size, dtype=dtype, device=device, requires_grad=grad))
    if any(not opaque for *_, opaque in loops):
        trip_capacity = wp.array(capacities, dtype=wp.int32, device=device)
        trips_needed = wp.zeros(len(capacities), dtype=wp.int32, device=device)
        extra += [trip_capacity, trips_needed]
    extra.append(wp.vec4i(*shape, *(1,) * (4 - len(shape))))
    return extra


def launch_recorded(
    kernel, record_kernel, replay_kernel, dim, inputs, outputs, device, stream, record_tape, block_dim, max_blocks,
    max_records, parameters, sites, records, loops, exact_runtime, launch_arity,
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

    shape = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(shape) > launch_arity:
        raise ValueError(
            f"kernel '{kernel.key}' unpacks wp.tid() into {launch_arity} index(es) but is launched with "
            f"{len(shape)} dimensions: its records are kept per thread by those indices. Unpack all "
            f"{len(shape)} (e.g. i, j = wp.tid()) or launch with fewer dimensions"
        )
    # Loops of unknown length not skipped by the replay need room for max_records executions.
    needs_room = [trips is None and not opaque for _, trips, _, opaque in loops]
    capacities = [
        max_records if room else (trips or 1) for room, (_, trips, _, _) in zip(needs_room, loops, strict=True)
    ]
    if None in capacities:
        # A dry run on scratch copies, with no room for records, counts the trips of loops of unknown length.
        scratch = [scratch_copy(value) for value in args]
        dry = phase_arguments(parameters, records, loops, scratch, shape, [c or 0 for c in capacities], device)
        wp.launch(record_kernel, shape, scratch, dry, record_tape=False, **options)
        needed = dry[-2].numpy()
        capacities = [c if c is not None else int(needed[i]) for i, c in enumerate(capacities)]
    # Exact float returns cost nothing extra where no gradient can flow through them.
    exact = {site[0] for site in sites if site[4] and requires_grad_path(parameters, args, site) is not None}
    # Forward: the record kernel runs the original code and stores every consumed atomic's returned value.
    extra = phase_arguments(parameters, records, loops, args, shape, capacities, device, exact)
    wp.launch(record_kernel, dim, inputs, [*outputs, *extra], record_tape=False, **options)
    if any(needs_room):
        needed = extra[-2].numpy()
        for (loop, _, where, _), room in zip(loops, needs_room, strict=True):
            if room and needed[loop] > capacities[loop]:
                raise RewriteError(
                    kernel.key,
                    where,
                    f"this loop ran {needed[loop]} times in one execution but its records had room for "
                    f"{capacities[loop]}; the launch's gradients would be wrong",
                    f"Launch with max_records={needed[loop]} or more",
                )
    # Exact float returns: a backward step that routes the returned values' adjoints, recorded before the replay
    # launch so that backward runs it right after the replay's adjoint.
    groups = {}
    by_name = dict(zip([record[0] for record in records], extra, strict=False))
    for target, op, where, _, exact_records in sites:
        if target in exact:
            returned, values, order, addresses, compares = (by_name.get(name) for name in exact_records)
            group = groups.setdefault(target, (where, target, argument_at(parameters, args, target), []))
            group[3].append(exact_runtime[0](op, returned, values, order, addresses, compares))
    if groups:
        exact_targets = list(groups.values())
        step = exact_runtime[1](kernel.key, replay_kernel, dim, list(inputs), [*outputs, *extra], device, block_dim,
                                max_blocks, exact_targets)  # fmt: skip
        tape.record_func(backward=step, arrays=[s.returned for *_, exact_sites in exact_targets for s in exact_sites])
    # Backward: the replay kernel's adjoint runs, reading the recorded values back.
    tape.record_launch(replay_kernel, dim, max_blocks, list(inputs), [*outputs, *extra], device, block_dim or 0)
    if wp.config.verify_autograd_array_access:
        tape._check_kernel_array_access(replay_kernel, [*args, *extra])


SUPPORT = (
    argument_arrays, argument_at, is_float_dtype, requires_grad_path, scratch_copy, phase_arguments, launch_recorded
)  # fmt: skip


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


def _defined_name_span(node: ast.FunctionDef | ast.ClassDef, starts: list[int], text: str) -> tuple[int, int]:
    """Where the name of a ``def`` or ``class`` statement is in ``text``."""
    keyword = "class" if isinstance(node, ast.ClassDef) else "def"
    found = re.compile(rf"\b{keyword}\s+({re.escape(node.name)})\b").search(text, starts[node.lineno] + node.col_offset)
    return found.span(1)


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


class _Spans(ast.NodeVisitor):
    """Source spans to rewrite when a module's code is copied into another module (see ``copy_module_code``)."""

    def __init__(self, text: str, renames: dict[str, str], kernel_decorator: str | None):
        self.starts = _offsets(text)
        self.text = text
        self.renames = renames
        self.kernel_decorator = kernel_decorator
        self.shadowed: list[set[str]] = [set()]
        self.edits: list[tuple[int, int, str]] = []

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.starts[node.lineno] + node.col_offset,
            self.starts[node.end_lineno] + node.end_col_offset,
        )

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.renames and node.id not in self.shadowed[-1]:
            self.edits.append((*self.span(node), self.renames[node.id]))

    def _visit_definition(self, node: ast.FunctionDef | ast.ClassDef, scope: set[str]) -> None:
        if len(self.shadowed) == 1 and node.name in self.renames:
            self.edits.append((*_defined_name_span(node, self.starts, self.text), self.renames[node.name]))
        for decorator in node.decorator_list:
            if self.kernel_decorator and ast.unparse(decorator) == "wp.kernel":
                self.edits.append((*self.span(decorator), self.kernel_decorator))
            else:
                self.visit(decorator)
        outer = [n for n in ast.iter_child_nodes(node) if n not in node.decorator_list and n not in node.body]
        for child in outer:  # arguments, annotations, defaults, bases: evaluated in the enclosing scope
            self.visit(child)
        self.shadowed.append(self.shadowed[-1] | scope)
        for statement in node.body:
            self.visit(statement)
        self.shadowed.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        arguments = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        self._visit_definition(node, stored | arguments)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_definition(node, set())


def copy_module_code(module: ModuleType, renames: dict[str, str], kernel_decorator: str | None = None) -> str:
    """A module's code to paste into another module: without its docstring and imports, names renamed.

    ``renames`` maps the module's global names (and the names it imports, such as ``wp``) to the names they get
    in the receiving module; a function's own locals of the same name are left alone. ``kernel_decorator``
    replaces each bare ``@wp.kernel`` (e.g. to give the copied kernels Warp modules of their own).
    """
    text = inspect.getsource(module)
    tree = ast.parse(text)
    spans = _Spans(text, renames, kernel_decorator)
    starts = spans.starts
    for statement in tree.body:
        is_docstring = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        if is_docstring or isinstance(statement, ast.Import | ast.ImportFrom):
            spans.edits.append((starts[statement.lineno], starts[statement.end_lineno + 1], ""))
        else:
            spans.visit(statement)
    for start, end, new in sorted(spans.edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text.strip("\n") + "\n"


def module_globals(module: ModuleType) -> list[str]:
    """The names a module's code defines at top level (functions, classes, assigned names), in order."""
    names = []
    for statement in ast.parse(inspect.getsource(module)).body:
        if isinstance(statement, ast.FunctionDef | ast.ClassDef):
            names.append(statement.name)
        elif isinstance(statement, ast.Assign | ast.AnnAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names
