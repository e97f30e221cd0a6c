"""Turn a kernel into its generated record/replay source and compile it (the passes do the AST work)."""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from dataclasses import dataclass

import warp as wp
from warp._src.context import Function

from warp_rewrite.errors import RewriteError
from warp_rewrite.passes.layout import (
    RecordInfo,
    check_replay_twins,
    plan_kernel,
    record_annotations,
    record_infos,
    site_gradient_sources,
)
from warp_rewrite.passes.plan import KernelPlan, Loop, Refusal, Unit
from warp_rewrite.passes.syntax import walk
from warp_rewrite.passes.two_phase import (
    RECORD,
    REPLAY,
    Names,
    compiled_room,
    helper_functions,
    launch_arity,
    loops_that_may_outgrow,
    phase_functions,
    reader_name,
    record_exact_name,
)
from warp_rewrite.printing import unparse_keeping_text
from warp_rewrite.source import FunctionSource, compile_generated


@dataclass(frozen=True)
class SiteInfo:
    """What the launch needs to know about one recorded atomic."""

    op: str
    location: str
    target: str  # argument path of the target array, e.g. "count" or "w.count"
    # argument paths the returned value may be differentiable in; None: any array argument
    gradient_sources: frozenset[str] | None
    consumed: bool
    # exact float returns: the record parameters (returned, values, order, addresses, compares or "")
    exact_records: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoopInfo:
    id: int
    static_trips: int | None
    location: str
    opaque: bool  # skipped by the replay: needs no trip capacity
    # records per execution compiled into the kernels (a constant range(), or max_records given to generate);
    # None: a launch passes it (see passes.two_phase.trip_capacities)
    room: int | None = None

    @property
    def needs_capacity(self) -> bool:
        return self.static_trips is None and not self.opaque


@dataclass
class Generated:
    source: str
    record_kernel: wp.Kernel
    replay_kernel: wp.Kernel
    sites: list[SiteInfo]
    records: list[RecordInfo]
    loops: list[LoopInfo]
    launch_arity: int  # launches may have at most this many dimensions (see passes.two_phase.launch_arity)


class _Helpers:
    """Finds the ``@wp.func`` a call refers to, loading each helper's source once."""

    def __init__(self):
        self.loaded: dict[int, FunctionSource] = {}

    def __call__(self, unit: FunctionSource, call: ast.Call) -> FunctionSource | None:
        func = unit.resolve(call.func)
        if not isinstance(func, Function) or func.is_builtin() or getattr(func, "adj", None) is None:
            return None
        if id(func) not in self.loaded:
            try:
                self.loaded[id(func)] = FunctionSource.of(func)
            except (OSError, TypeError, SyntaxError, StopIteration) as error:
                problem = f"the source of helper '{func.key}' cannot be read ({error})"
                raise Refusal(unit, call, problem, "Define the helper with @wp.func in a .py file") from None
        return self.loaded[id(func)]


def refusal_error(kernel: Unit, refusal: Refusal) -> RewriteError:
    """The user-facing error for a construct the passes refuse, located where the construct is."""
    location = refusal.location
    problem = refusal.problem if refusal.unit is kernel else f"{refusal.problem} (in helper '{refusal.unit.name}')"
    return RewriteError(kernel.name, location, problem, refusal.advice)


def _target_type(kernel: wp.Kernel, path: str):
    """The declared Warp type of the argument (or struct field) at ``path``; None if unknown."""
    root, *fields = path.split(".")
    arg_type = kernel.adj.arg_types.get(root)
    for name in fields:
        struct_var = getattr(arg_type, "vars", {}).get(name)
        arg_type = struct_var.type if struct_var is not None else None
    return arg_type


def _is_int_target(kernel: wp.Kernel, path: str) -> bool:
    """Is the target array's dtype known, before launch, to be an integer type (no adjoint)?"""
    dtype = getattr(_target_type(kernel, path), "dtype", None)
    return dtype is not None and dtype in wp._src.types.int_types


def _dtype_text(kernel: wp.Kernel, path: str, warp_alias: str, any_alias: str) -> str:
    """Source text of the target's dtype when it is known before launch; ``Any`` (generic) otherwise."""
    dtype = getattr(_target_type(kernel, path), "dtype", None)
    if dtype is not None and getattr(wp, getattr(dtype, "__name__", ""), None) is dtype:
        return f"{warp_alias}.{dtype.__name__}"
    return any_alias


def _merged_namespace(kernel: FunctionSource, plan: KernelPlan) -> dict:
    """The kernel's namespace plus what cloned helpers from other modules refer to."""
    namespace = dict(kernel.namespace)
    for function in plan.root.walk():
        unit = function.unit
        if unit is kernel:
            continue
        local = {a.arg for a in unit.tree.args.args} | {
            n.id for n in walk(unit.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        for name in {n.id for n in walk(unit.tree) if isinstance(n, ast.Name)} - local:
            if name not in unit.namespace:
                continue
            if name in namespace and namespace[name] is not unit.namespace[name]:
                raise RewriteError(
                    kernel.name,
                    unit.location(unit.tree),
                    f"helper '{unit.name}' uses '{name}', which means something else in the kernel's module",
                    f"Import '{name}' in the kernel's module under the same name, or rename one of them",
                )
            namespace[name] = unit.namespace[name]
    return namespace


_defined_in_module: dict[str, set[str]] = {}
_shared_helpers: dict[str, Function] = {}  # by template name: built once per process, called by every rewrite


def _helper_bindings(names: Names, loops: list[Loop]) -> dict[str, Function]:
    """The ``@wp.func`` helpers the phases call, under the names the generated code calls them by.

    They are the same for every kernel, so each is rendered and built into a Warp function once per process, in
    a Warp module of its own (Warp compiles a function into every module whose kernels call it): a rewrite
    pays only for its own kernels.
    """
    usual = dataclasses.replace(
        names,
        warp="wp",
        any="Any",
        record_helper="record_returned",
        record_if_room="record_if_room",
        replay_helper="replay_returned",
        exact_returned="exact_returned",
        record_exact={key: record_exact_name(*key) for key in names.record_exact},
        range_length="range_length",
        readers={_usual_dtype(dtype): reader_name(dtype) for dtype in names.readers},
    )
    definitions = helper_functions(usual, loops)
    missing = [d for d in definitions if d.name not in _shared_helpers]
    if missing:
        text = "\n\n\n".join(ast.unparse(d) for d in missing) + "\n"
        scope = compile_generated(text, {"wp": wp, "Any": typing.Any}, "helpers", "wp_rewrite.helpers")
        _shared_helpers.update((d.name, scope[d.name]) for d in missing)
    called = {names.record_helper, names.record_if_room, names.replay_helper, names.exact_returned, names.range_length}
    called |= {*names.record_exact.values(), *names.readers.values()}  # not the gradients registered for readers
    chosen = helper_functions(names, loops)  # the same helpers, in the same order
    return {
        mine.name: _shared_helpers[theirs.name]
        for mine, theirs in zip(chosen, definitions, strict=True)
        if mine.name in called
    }


def _usual_dtype(dtype: str) -> str:
    """``wp.float32`` for ``warp.float32``: the shared helpers are written against ``import warp as wp``."""
    return "wp." + dtype.rsplit(".", 1)[-1]


def generate(
    kernel: wp.Kernel, detach_returns: bool = False, module_suffix: str = "", max_records: int | None = None
) -> Generated | None:
    """The generated record/replay kernels of ``kernel``, or None when it consumes no atomic return.

    Float returns get exact gradients unless ``detach_returns``, which records them as constants. The kernels
    join the Warp module ``wp_rewrite.<kernel's module><module_suffix>``; those of a kernel with loops of unknown
    length and a ``max_records``, which they have compiled in, a module of their own per ``max_records``
    (beside the others, they would make Warp compile those again).
    """
    try:
        source = FunctionSource.of(kernel)
    except (OSError, TypeError, SyntaxError, StopIteration) as error:
        where = f"{getattr(kernel.adj, 'filename', '<unknown>')}:{getattr(kernel.adj, 'fun_lineno', 0)}:1"
        raise RewriteError(
            kernel.key, where, f"its source cannot be read ({error})", "Define the kernel with @wp.kernel in a .py file"
        ) from None
    module = f"wp_rewrite.{kernel.module.name}{module_suffix}"
    room_module = f"{module}.max_records{max_records}"
    helpers = _Helpers()
    params = [arg.label for arg in kernel.adj.args]
    is_int_path = lambda path: _is_int_target(kernel, path)  # noqa: E731
    # The rewritten kernels of a module share a Warp module, where functions are found by name: fresh names
    # avoid those of both modules the kernels may join (which one, the plan tells).
    taken = set(source.namespace) | _defined_in_module.setdefault(module, set())
    taken |= _defined_in_module.get(room_module, set()) if max_records is not None else set()
    try:
        plan, namer = plan_kernel(
            source, params, helpers, FunctionSource.warp_names, is_int_path, taken, detach_returns
        )
    except Refusal as refusal:
        raise refusal_error(source, refusal) from None
    if not plan.sites and not plan.loops:  # a probe loop's consumed atomics may leave only a loop to record
        return None
    if max_records is not None and loops_that_may_outgrow(plan.loops):  # the loops whose room it sets
        module = room_module
    else:
        max_records = None  # nothing to compile it into

    warp_alias = source.warp_alias()
    any_alias = source.any_alias() or namer.fresh("Any")
    exact_kinds = sorted({(s.op, s.indices) for s in plan.sites if s.exact})
    names = Names(
        warp=warp_alias,
        any=any_alias,
        record_helper=namer.fresh("record_returned"),
        record_if_room=namer.fresh("record_if_room"),
        replay_helper=namer.fresh("replay_returned"),
        exact_returned=namer.fresh("exact_returned"),
        record_exact={(op, n): namer.fresh(record_exact_name(op, n)) for op, n in exact_kinds},
        range_length=namer.fresh("range_length"),
        launch_shape=namer.fresh("launch_shape"),
        thread=namer.fresh("thread"),
        coordinate=namer.fresh("coordinate"),
        trip_capacity=namer.fresh_base("trip_capacity", tuple(str(loop.id) for loop in plan.loops)),
        trips_needed=namer.fresh("trips_needed"),
        coords=tuple(namer.fresh(f"coord{i}") for i in range(launch_arity(source.tree))),
        readers={
            dtype: namer.fresh(reader_name(dtype))
            for dtype in sorted({_dtype_text(kernel, s.target, warp_alias, "") for s in plan.sites if not s.exact})
            if dtype
        },
    )
    records = record_infos(plan)
    annotations = record_annotations(
        records,
        lambda path: _dtype_text(kernel, path, warp_alias, any_alias),
        lambda path: getattr(_target_type(kernel, path), "ndim", None),
        warp_alias,
        any_alias,
    )
    paths = {s.target for s in plan.sites} | {p for f in plan.root.walk() for p in f.unconsumed.values() if p}
    int_paths = frozenset(p for p in paths if _is_int_target(kernel, p))
    try:
        check_replay_twins(plan, annotations, int_paths, any_alias)
    except Refusal as refusal:
        raise refusal_error(source, refusal) from None
    record_options = {**kernel.options, "enable_backward": False}
    helper_bindings = _helper_bindings(names, plan.loops)
    untouched = {}
    definitions = [
        *phase_functions(plan, RECORD, names, annotations, int_paths, record_options, untouched, max_records),
        *phase_functions(plan, REPLAY, names, annotations, int_paths, dict(kernel.options), untouched, max_records),
    ]
    header = [f"# Generated by warp-rewrite from kernel '{kernel.key}' ({source.filename}:{source.first_line})"]
    if source.any_alias() is None:
        header.append("from typing import Any" if any_alias == "Any" else f"from typing import Any as {any_alias}")
    if warp_alias not in source.namespace:
        header.append(f"import warp as {warp_alias}")
    body = "\n\n\n".join(unparse_keeping_text(d, untouched) for d in definitions)
    called = [name for name in helper_bindings if re.search(rf"\b{re.escape(name)}\(", body)]
    keys = {name: helper_bindings[name].key for name in called}
    shown = [name if name == key else f"{name} (= {key})" for name, key in keys.items()]
    header.append(f"# Calls warp-rewrite's shared helpers {', '.join(shown)}: see passes/templates.py")
    text = "\n".join(header) + "\n\n\n" + body + "\n"

    _defined_in_module.setdefault(module, set()).update(d.name for d in definitions)
    scope = compile_generated(text, {**_merged_namespace(source, plan), **helper_bindings}, kernel.key, module)
    wp.get_module(module).options.update(kernel.module.options)
    sources = site_gradient_sources(source, plan, params, source.warp_names(), helpers, int_paths)
    sites = [
        SiteInfo(
            s.op,
            s.location,
            s.target,
            sources.get(id(s), frozenset()),
            s.consumed,
            (s.records, s.values, s.order, s.addresses, s.compares) if s.exact else (),
        )
        for s in plan.sites
    ]
    ordered_records = [records[name] for name in plan.root.record_params()]
    loops = [
        LoopInfo(loop.id, loop.static_trips, loop.location, loop.opaque, compiled_room(loop, max_records))
        for loop in plan.loops
    ]
    root = plan.root.name
    kernels = scope[f"{root}_{RECORD}"], scope[f"{root}_{REPLAY}"]
    return Generated(text, *kernels, sites, ordered_records, loops, len(names.coords))
