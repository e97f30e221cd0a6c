"""Loops whose trip count a launch's arguments give, so that no dry run has to count it.

A ``for`` loop of the kernel itself over ``range()`` of int literals, the kernel's parameters, their arrays'
``.shape[i]``, and locals the kernel assigns once, before the loop, from those: every execution of it runs the same
trips, which the host can tell from the launch's arguments, unless something leaves it early (a ``break``, a
``return``), which may make its range much longer than its trips (a probe over a hash table's capacity). A launch
sizes such a loop's records from its arguments (``runtime.records.capacities_of``); a kernel whose loops of unknown
length are all such needs no count kernel (``pipeline.count_phase``): no dry run, no wait for the device.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass

from warp_rewrite.passes.loop_hazards import own_jumps
from warp_rewrite.passes.syntax import walk


@dataclass(frozen=True)
class ArgumentBound:
    """A bound of a loop's range as a launch's arguments give it: a parameter's value, or its array's
    ``shape[axis]``."""

    parameter: str
    axis: int | None = None


Bound = int | ArgumentBound


def argument_range(kernel: ast.FunctionDef, loop: ast.For) -> tuple[Bound, ...] | None:
    """The bounds of the kernel's ``loop`` (``range()``'s arguments, as written) where the launch's arguments give
    them, else None (a bound computed otherwise, a loop in a helper, one left early)."""
    called = loop.iter
    if not (isinstance(called, ast.Call) and isinstance(called.func, ast.Name) and called.func.id == "range"):
        return None
    if any(isinstance(jump, ast.Break) for jump in own_jumps(loop.body)) or any(
        isinstance(node, ast.Return) for node in walk(loop)
    ):
        return None
    top = next((i for i, statement in enumerate(kernel.body) if any(n is loop for n in walk(statement))), None)
    if top is None:  # (a loop of a helper)
        return None
    stores = Counter(n.id for n in walk(kernel) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    parameters = {argument.arg for argument in kernel.args.args if not stores[argument.arg]}
    assigned = {
        statement.targets[0].id: statement.value
        for statement in kernel.body[:top]
        if isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and stores[statement.targets[0].id] == 1
    }

    def bound(value: ast.expr) -> Bound | None:
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
            negated = bound(value.operand)
            return -negated if isinstance(negated, int) else None
        if isinstance(value, ast.Constant):
            return value.value if isinstance(value.value, int) and not isinstance(value.value, bool) else None
        if isinstance(value, ast.Name):
            if value.id in parameters:
                return ArgumentBound(value.id)
            return bound(assigned[value.id]) if value.id in assigned else None
        if (
            isinstance(value, ast.Subscript)
            and isinstance(value.value, ast.Attribute)
            and value.value.attr == "shape"
            and isinstance(value.value.value, ast.Name)
            and value.value.value.id in parameters
            and isinstance(value.slice, ast.Constant)
            and isinstance(value.slice.value, int)
        ):
            return ArgumentBound(value.value.value.id, value.slice.value)
        return None

    bounds = [bound(argument) for argument in called.args]
    if any(b is None for b in bounds) or (len(bounds) == 3 and not isinstance(bounds[2], int)) or 0 in bounds[2:]:
        return None  # (a step the launch gives might be 0, which Python's range() refuses and Warp's runs forever)
    return tuple(b for b in bounds if b is not None)
