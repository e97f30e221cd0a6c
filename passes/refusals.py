"""The planner's refusals (``Refusal``) and the rules that need only the tree: which loops around a consumed atomic
the rewrite can replay, and which atomics may share a target with exact float returns."""

from __future__ import annotations

import ast

from warp_rewrite.passes.atomics import WarpNames, find_atomic_calls
from warp_rewrite.passes.builtins import written_arguments
from warp_rewrite.passes.loop_hazards import unrolled_by_warp
from warp_rewrite.passes.plan_types import Site, Unit
from warp_rewrite.passes.syntax import Located, walk


class Refusal(Exception):
    """A construct the rewrite cannot handle; the caller turns it into a ``RewriteError``.

    ``location`` overrides where it is reported (``unit.location(node)`` by default).
    """

    def __init__(self, unit: Unit, node: Located, problem: str, advice: str, location: str | None = None):
        super().__init__(problem)
        self.unit, self.node, self.problem, self.advice = unit, node, problem, advice
        self.location = location or unit.location(node)


EXACT_OPS = ("add", "sub", "min", "max", "exch", "cas")
# Ops that may share a target with exact returns: a returned value is a running sum, the previous operand,
# or the operand of the last op that stored one.
EXACT_FAMILIES = ({"add", "sub"}, {"exch"}, {"max", "min", "cas"})


def check_exact_families(kernel: Unit, sites: list[Site]) -> None:
    """Refuse atomics of kinds from different families (``EXACT_FAMILIES``) on one target with exact returns."""
    ops: dict[str, set[str]] = {}
    for site in sites:
        if site.exact:
            ops.setdefault(site.target, set()).add(site.op)
    for target, kinds in ops.items():
        if not any(kinds <= family for family in EXACT_FAMILIES):
            on_target = [site for site in sites if site.exact and site.target == target]
            family = next(f for f in EXACT_FAMILIES if on_target[0].op in f)
            odd_one = next(site for site in on_target if site.op not in family)
            raise Refusal(
                kernel,
                kernel.tree,
                f"atomics of different kinds ({', '.join(sorted(kinds))}) on '{target}', whose float returns "
                "need exact gradients",
                "Use one kind of atomic per target array, or rewrite with detach_returns=True",
                location=odd_one.location,
            )


def check_loop(
    unit: Unit, loop: ast.For | ast.While, names: WarpNames, max_unroll: int, iterates_query: bool = False
) -> None:
    """Refuse a loop around a consumed atomic (or one Warp's backward replays wrong) that the rewrite cannot replay;
    ``iterates_query``: the loop is a for loop over a spatial query, which it replays like a while loop."""
    if isinstance(loop, ast.While):
        # The pipeline moves such a condition into the body first (passes.while_conditions); a planner handed a
        # tree that was not desugared refuses it here.
        if find_atomic_calls(loop.test, names):
            raise Refusal(
                unit,
                loop.test,
                "an atomic in a while loop's condition",
                "Call the atomic in the loop body and leave the loop with 'break'",
            )
        check_returns(unit, loop)
        return
    iterates_range = (
        isinstance(loop.iter, ast.Call)
        and isinstance(loop.iter.func, ast.Name)
        and loop.iter.func.id == "range"
        and not loop.iter.keywords
        and 1 <= len(loop.iter.args) <= 3
    )
    if not (iterates_range or iterates_query) or not isinstance(loop.target, ast.Name):
        raise Refusal(
            unit,
            loop,
            "a for loop over something other than range() or a spatial query, where the rewrite replays the loop "
            "(around a consumed atomic, or one Warp's backward replays wrong)",
            "Loop over range(...) or a query (for j in wp.hash_grid_query(...)) with a single loop variable",
        )
    nodes = [node for statement in loop.body for node in walk(statement)]
    assigned = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    assigned |= {local.id for n in nodes if isinstance(n, ast.Call) for local in written_arguments(n, names)}
    if loop.target.id in assigned:
        raise Refusal(
            unit, loop, f"the loop variable '{loop.target.id}' is reassigned in the loop", "Use another local"
        )
    if not unrolled_by_warp(loop, max_unroll):
        check_returns(unit, loop)


def check_returns(unit: Unit, loop: ast.For | ast.While) -> None:
    """Refuse a return from a loop Warp does not unroll (what ``passes.loop_returns`` leaves there): in the replay
    kernel's backward, Warp jumps from the return into the middle of its reverse loop, which then runs the wrong
    iterations."""
    returns = sorted((n for n in walk(loop) if isinstance(n, ast.Return)), key=lambda n: (n.lineno, n.col_offset))
    if returns:
        raise Refusal(
            unit,
            returns[0],
            "a 'return' inside a loop the rewrite replays (Warp's backward cannot replay a return from a loop it "
            "does not unroll)",
            "Leave the loop with 'break', setting a flag, and return after the loop",
        )
