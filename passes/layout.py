"""From a kernel's source to its plan and record layout: what the API (``rewrite.build``) and the CLI
(``rewrite.emit``) share. They differ only in how they learn types: from Warp's objects, or from annotations.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from warp_rewrite.passes.atomics import AtomicCall, WarpNames
from warp_rewrite.passes.dataflow import argument_path, gradient_sources, single_assignments
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.plan import HelperResolver, KernelPlan, Planner, Refusal, Unit
from warp_rewrite.passes.syntax import walk
from warp_rewrite.passes.two_phase import needs_forward_twin


@dataclass(frozen=True)
class RecordInfo:
    """One record parameter of the generated kernels, in order.

    ``kind`` says how the launch allocates it: "returned", "values" and "compares" hold the target's
    dtype; "order" (tickets, -1 for ops that never ran) and "addresses" int32; "tickets" are counters
    shaped like the target; "trips" and "carried" (ints kept at a loop's iterations or exit) ``dtype``.
    """

    name: str
    kind: str
    target: str | None
    dtype: str
    loops: tuple[int, ...]  # loops whose capacities multiply the per-thread record count
    requires_grad: bool = False


def plan_kernel(
    kernel: Unit,
    params: list[str],
    resolve_helper: HelperResolver,
    unit_names: Callable[[Unit], WarpNames],
    is_int_path: Callable[[str], bool],
    taken: set[str],
    detach_returns: bool,
) -> tuple[KernelPlan, Namer]:
    """The kernel's plan, its generated names fresh in ``taken`` and in every function involved.

    The first pass finds the functions involved and the targets whose float returns get exact gradients (all
    but int targets, unless ``detach_returns``). A second pass, with exact targets and with names fresh in
    every function involved, is needed only when there are exact targets or the first pass's names clash with
    a helper's. Raises ``passes.plan.Refusal`` for what cannot be rewritten.
    """
    analyses = {}
    namer = Namer.for_tree(kernel.tree, taken)
    plan = Planner(kernel, params, resolve_helper, is_int_path=is_int_path, analyses=analyses).plan(namer, unit_names)
    exact_targets = (
        frozenset() if detach_returns else frozenset(s.target for s in plan.sites if not is_int_path(s.target))
    )
    helpers = [f.unit.tree for f in plan.root.walk() if f.unit is not kernel]
    if not exact_targets and not (helpers and namer.issued & Namer.for_tree(ast.Module(helpers, [])).taken):
        return plan, namer  # the common case: the first pass's names clash with nothing
    namer = Namer.for_tree(ast.Module([f.unit.tree for f in plan.root.walk()], []), taken)
    planner = Planner(kernel, params, resolve_helper, exact_targets, is_int_path, analyses)
    return planner.plan(namer, unit_names), namer


def record_infos(plan: KernelPlan) -> dict[str, RecordInfo]:
    """Every record parameter of the plan, by name."""
    records = {}
    for s in plan.sites:
        records[s.records] = RecordInfo(s.records, "returned", s.target, "", s.loops, requires_grad=s.exact)
        if s.exact:
            records[s.values] = RecordInfo(s.values, "values", s.target, "", s.loops)
            records[s.order] = RecordInfo(s.order, "order", s.target, "int32", s.loops)
            records[s.addresses] = RecordInfo(s.addresses, "addresses", s.target, "int32", s.loops)
            records[s.tickets] = RecordInfo(s.tickets, "tickets", s.target, "int32", ())
            if s.compares:
                records[s.compares] = RecordInfo(s.compares, "compares", s.target, "", s.loops)
    for loop in plan.loops:
        if loop.trips_records:
            records[loop.trips_records] = RecordInfo(loop.trips_records, "trips", None, "int32", loop.outer_loops)
        for _, name, dtype in loop.carried_in:
            records[name] = RecordInfo(name, "carried", None, dtype, (*loop.outer_loops, loop.id))
        for _, name, dtype in loop.carried:
            records[name] = RecordInfo(name, "carried", None, dtype, loop.outer_loops)
    return records


def record_annotations(
    records: dict[str, RecordInfo],
    dtype_text: Callable[[str], str | None],
    ndim_of: Callable[[str], int | None],
    warp: str,
    any_name: str,
) -> dict[str, str]:
    """Each record parameter's annotation; ``dtype_text``/``ndim_of`` read a target's from its declaration."""
    annotations = {}
    for name, info in records.items():
        if info.kind == "tickets":
            ndim = ndim_of(info.target)
            annotations[name] = f"{warp}.array(dtype={warp}.int32, ndim={ndim})" if ndim else any_name
        elif info.kind in ("returned", "values", "compares"):
            annotations[name] = f"{warp}.array(dtype={dtype_text(info.target) or any_name})"
        else:
            annotations[name] = f"{warp}.array(dtype={warp}.{info.dtype})"
    return annotations


def site_gradient_sources(
    kernel: Unit,
    plan: KernelPlan,
    params: list[str],
    names: WarpNames,
    resolve_helper: HelperResolver,
    int_paths: frozenset[str],
) -> dict[int, frozenset[str] | None]:
    """For each float (or not-known-int) site, by id: the argument paths its returned value may be
    differentiable in. None means any array: the site is in a helper, or a helper may write into its target.
    """
    if all(site.target in int_paths for site in plan.sites):
        return {}  # int returns carry no gradient
    aliases = single_assignments(kernel.tree)
    passed_to_helpers = {
        argument_path(arg, params, aliases)
        for node in walk(kernel.tree)
        if isinstance(node, ast.Call) and resolve_helper(kernel, node) is not None
        for arg in node.args
    }
    local = [s for s in plan.sites if s.target not in int_paths and not s.in_helper]
    calls = [AtomicCall(s.call, s.op, consumed=True) for s in local]
    sources = gradient_sources(kernel.tree, params, names, calls) if calls else {}
    result = {}
    for site in plan.sites:
        if site.target in int_paths:
            continue
        in_reach_of_helpers = site.in_helper or site.target in passed_to_helpers
        result[id(site)] = None if in_reach_of_helpers else sources[site.call]
    return result


def check_replay_twins(plan: KernelPlan, annotations: dict[str, str], int_paths: frozenset[str], any_name: str) -> None:
    """Refuse a generic helper whose replay keeps a float atomic: its twin needs ``@wp.func_replay``.

    Warp does not let a function with generic parameters have a custom replay.
    """
    for function in plan.root.walk():
        if function is plan.root or not needs_forward_twin(function, int_paths):
            continue
        params = [ast.unparse(a.annotation) for a in function.unit.tree.args.args if a.annotation is not None]
        params += [annotations[name] for name in function.record_params()]
        if any(re.search(rf"\b{re.escape(any_name)}\b", text) for text in params):
            raise Refusal(
                function.unit,
                function.unit.tree,
                f"helper '{function.unit.name}' has generic parameters and keeps a float atomic's adjoint in its "
                "replay, which needs a @wp.func_replay that Warp does not allow for generic functions",
                f"Give '{function.unit.name}' concrete parameter types",
            )
