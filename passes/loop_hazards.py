"""Which loops of a function Warp's backward replays wrong: the loops it does not unroll, where the replay would see
a value other than the forward's.

Warp's backward runs a function's forward code again before its reverse pass, but leaves out every loop it does not
unroll (a ``for`` over a range it cannot count when it builds the kernel, a ``while``, a constant range longer than
``max_unroll`` or one that breaks); its reverse pass then runs such a loop's iterations backwards, each replayed
with the locals the loop changes at whatever value the replay left them (``codegen.Adjoint.end_for``,
``end_while``). So, in backward:

- a local carried out of the loop keeps the value it had before the loop, and a local carried from one iteration
  into the next holds, in each replayed iteration, a value of another iteration (``Hazard.CARRIED``);
- a ``while`` loop's condition is evaluated again on the replay's values, so it runs other iterations than the
  forward did, usually none (``Hazard.WHILE``);
- a replayed ``break`` or ``continue`` jumps past the adjoint of its iteration and, for a break, of every earlier
  one (``Hazard.JUMPS``).

The rewrite records what such a loop needs and replays it from the records (``passes.plan``, ``passes.two_phase``);
``--check`` reports the hazard. Loops Warp unrolls are straight code to its backward, and a loop whose body does
nothing at all (``while spin(): pass`` style, no locals carried) hands nothing wrong to the replay.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass
from typing import TypeGuard

from warp_rewrite.passes.loop_carried import LoopFlow
from warp_rewrite.passes.syntax import walk


class Hazard(enum.Enum):
    """Why Warp's backward replays a loop wrong (see the module's docstring)."""

    CARRIED = "carries {carried} from one trip into the next or out of the loop"
    WHILE = "is a while loop, whose condition Warp's backward evaluates again on the values it replays"
    JUMPS = "breaks or continues, which Warp's backward replays by jumping past the trip's adjoint"


@dataclass(frozen=True)
class LoopHazard:
    """A loop Warp does not unroll, the reasons its replay goes wrong, and the locals it carries."""

    loop: ast.For | ast.While
    hazards: frozenset[Hazard]
    carried: tuple[str, ...]  # sorted

    def why(self) -> str:
        """What goes wrong, as a clause: "carries 'acc' from one trip into the next or out of the loop and ..."."""
        carried = ", ".join(f"'{name}'" for name in self.carried)
        return " and ".join(h.value.format(carried=carried) for h in Hazard if h in self.hazards)


def loop_hazards(function: ast.FunctionDef, flow: LoopFlow, max_unroll: int) -> list[LoopHazard]:
    """The loops of ``function`` that Warp does not unroll and replays wrong, in source order; ``flow``: the
    function's ``LoopFlow``; ``max_unroll``: its module's option."""
    found = []
    for node in walk(function):
        if not isinstance(node, ast.For | ast.While) or unrolled_by_warp(node, max_unroll):
            continue
        carried = flow.carried(node)
        names = carried.into_iterations | carried.out_of_loop
        hazards = {Hazard.CARRIED} if names else set()
        if _does_something(node):
            if isinstance(node, ast.While):
                hazards.add(Hazard.WHILE)
            if own_jumps(node.body):
                hazards.add(Hazard.JUMPS)
        if hazards:
            found.append(LoopHazard(node, frozenset(hazards), tuple(sorted(names))))
    return found


def _does_something(loop: ast.For | ast.While) -> bool:
    """Does the loop's body hold more than ``pass``, ``break`` and ``continue``?"""
    return any(not isinstance(statement, ast.Pass | ast.Break | ast.Continue) for statement in loop.body)


def unrolled_by_warp(loop: ast.For | ast.While, max_unroll: int) -> bool:
    """Does Warp unroll the loop? A ``range()`` of int literals (or ``wp.static(...)``s), which Warp unrolls whenever
    the loop holds a ``wp.static(...)``, else when it has at most ``max_unroll`` trips (the module's option) and
    never breaks (``codegen.get_unroll_range``). A name's constant value is not looked up: such a loop counts as
    one Warp runs as a loop."""
    if not isinstance(loop, ast.For) or not _calls(loop.iter, "range") or loop.iter.keywords:
        return False
    args = loop.iter.args
    if not 1 <= len(args) <= 3 or not all(_int_literal(a) is not None or _is_static(a) for a in args):
        return False
    if any(_is_static(node) for node in walk(loop)):
        return True
    if any(_is_static(a) for a in args):
        return False
    breaks = any(isinstance(jump, ast.Break) for jump in own_jumps(loop.body))
    bounds = [bound for a in args if (bound := _int_literal(a)) is not None]  # every one, no static left
    return len(range(*bounds)) <= max_unroll and not breaks


def _int_literal(expr: ast.expr) -> int | None:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        value = _int_literal(expr.operand)
        return None if value is None else -value
    return expr.value if isinstance(expr, ast.Constant) and type(expr.value) is int else None


def _is_static(expr: ast.AST) -> bool:
    """``wp.static(...)`` (under any name of Warp's module), or ``static(...)`` imported from it."""
    if not isinstance(expr, ast.Call):
        return False
    name = expr.func.attr if isinstance(expr.func, ast.Attribute) else getattr(expr.func, "id", None)
    return name == "static"


def own_jumps(body: list[ast.stmt]) -> list[ast.Break | ast.Continue]:
    """The break and continue statements of the loop with this body, not of loops nested in it."""
    jumps = []
    for statement in body:
        if isinstance(statement, ast.Break | ast.Continue):
            jumps.append(statement)
        elif isinstance(statement, ast.If):
            jumps += own_jumps(statement.body) + own_jumps(statement.orelse)
    return jumps


def _calls(expr: ast.expr, name: str) -> TypeGuard[ast.Call]:
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == name
