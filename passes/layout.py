"""The record parameters of a plan: one per recorded value, in the order the generated kernels take them."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.atomics import WarpNames
from warp_rewrite.passes.dataflow import argument_path, gradient_sources, single_assignments
from warp_rewrite.passes.plan_types import HelperResolver, KernelPlan, Unit, needs_forward_twin, overlap
from warp_rewrite.passes.refusals import Refusal
from warp_rewrite.passes.syntax import parent_map, walk


@dataclass(frozen=True)
class RecordParam:
    """One record parameter of the generated kernels (its kinds: ``warp_rewrite.runtime.RecordSpec``)."""

    name: str
    kind: str
    target: str | None  # argument path of the atomic's target, for records shaped or typed after it
    dtype: Any  # the Warp type of its elements; None: the target's, known only at launch (generic kernels)
    loops: tuple[int, ...] = ()  # loops whose capacities multiply the per-thread record count
    requires_grad: bool = False


def record_params(plan: KernelPlan, array_of: Callable[[str], dtypes.ArrayInfo | None]) -> dict[str, RecordParam]:
    """Every record parameter of the plan, by name; ``array_of`` tells what is known of a target's array."""
    records = {}

    def add(name: str, kind: str, target: str | None, dtype: Any, loops: tuple[int, ...], **more: Any) -> None:
        records[name] = RecordParam(name, kind, target, dtype, loops, **more)

    for s in plan.sites:
        target = array_of(s.target) or dtypes.ArrayInfo()
        add(s.records, "returned", s.target, target.dtype, s.loops, requires_grad=s.exact)
        if s.exact:
            add(s.values, "values", s.target, target.dtype, s.loops)
            add(s.order, "order", s.target, dtypes.INT, s.loops)
            add(s.addresses, "addresses", s.target, dtypes.INT, s.loops)
            add(s.shadow, "shadow", s.target, dtypes.SHADOW, ())
            if s.compares:
                add(s.compares, "compares", s.target, target.dtype, s.loops)
        if s.marks:
            add(s.marks, "marks", s.target, dtypes.INT, ())
    for loop in plan.loops:
        if loop.trips_records:
            add(loop.trips_records, "trips", None, dtypes.INT, loop.outer_loops)
        for carried in loop.carried_in:
            add(carried.records, "carried", None, carried.dtype, (*loop.outer_loops, loop.id))
        for carried in loop.carried:
            add(carried.records, "carried", None, carried.dtype, loop.outer_loops)
    return records


def site_gradient_sources(
    kernel: Unit,
    plan: KernelPlan,
    params: list[str],
    names: WarpNames,
    resolve_helper: HelperResolver,
    int_paths: frozenset[str],
) -> dict[int, frozenset[str] | None]:
    """For each float (or not-known-int) site, by id: the argument paths its recorded value may be
    differentiable in. None means any array: the site is in a helper, or a helper may write into its array.
    """
    if all(site.target in int_paths for site in plan.sites):
        return {}  # int values carry no gradient
    aliases = single_assignments(kernel.tree)
    passed_to_helpers = {
        path
        for node in walk(kernel.tree)
        if isinstance(node, ast.Call) and resolve_helper(kernel, node) is not None
        for arg in [*node.args, *(keyword.value for keyword in node.keywords)]
        if (path := argument_path(arg, params, aliases)) is not None
    }
    local: dict[ast.AST, str] = {s.node: s.target for s in plan.sites if s.target not in int_paths and not s.in_helper}
    sources = gradient_sources(kernel.tree, params, names, local) if local else {}
    nodes = walk(kernel.tree)
    parents = parent_map(nodes)
    result: dict[int, frozenset[str] | None] = {}
    for site in plan.sites:
        if site.target in int_paths:
            continue
        in_reach_of_helpers = site.in_helper or any(overlap(site.target, path) for path in passed_to_helpers)
        # it decides branches, and a comparison has no gradient: in the kernel, or a read of an exact target through
        # its shadow (which the planner makes only of reads only compared, in helpers too)
        compared_read = site.op == "read" and bool(site.shadow)
        if compared_read or (not site.in_helper and only_compared(site.node, nodes, parents)):
            result[id(site)] = frozenset()
        else:
            result[id(site)] = None if in_reach_of_helpers else sources[site.node]
    return result


def only_compared(node: ast.AST, nodes: list[ast.AST], parents: dict[ast.AST, ast.AST]) -> bool:
    """Is the value of ``node`` only compared: an operand of a comparison, or bound once to a local that is only
    ever an operand of comparisons (``if d < zbuf[p]``, ``best = peak[0]; if v > best``)?"""
    parent = parents.get(node)
    if isinstance(parent, ast.Compare):
        return True
    if not (isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1):
        return False
    target = parent.targets[0]
    if not isinstance(target, ast.Name):
        return False
    named = [n for n in nodes if isinstance(n, ast.Name) and n.id == target.id]
    uses = [n for n in named if isinstance(n.ctx, ast.Load)]
    return len(named) - len(uses) == 1 and bool(uses) and all(isinstance(parents.get(u), ast.Compare) for u in uses)


def check_replay_twins(
    plan: KernelPlan,
    records: dict[str, RecordParam],
    int_paths: frozenset[str],
    is_generic: Callable[[Unit], bool],
) -> None:
    """Refuse a generic helper whose replay keeps a float atomic: its twin needs ``@wp.func_replay``.

    Warp does not let a function with generic parameters have a custom replay, and a record parameter whose type
    generated code cannot name (a struct's) would be one.
    """
    for function in plan.root.walk():
        if function is plan.root or not needs_forward_twin(function, int_paths):
            continue
        generic = is_generic(function.unit)
        generic |= any(records[name].dtype is None for name in function.record_params())
        unnamed = [name for name in function.record_params() if not dtypes.has_source(records[name].dtype)]
        if generic or unnamed:
            what = "generic parameters" if generic else f"a record ('{unnamed[0]}') of a type code cannot name"
            raise Refusal(
                function.unit,
                function.unit.tree,
                f"helper '{function.unit.name}' has {what} and keeps a float atomic's adjoint in its "
                "replay, which needs a @wp.func_replay that Warp does not allow for generic functions",
                f"Give '{function.unit.name}' concrete parameter types",
            )
