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

from warp_rewrite.passes.loop_carried import LoopFlow
from warp_rewrite.passes.loop_returns import own_jumps, unrolled_by_warp
from warp_rewrite.passes.syntax import walk


class Hazard(enum.Enum):
    """Why Warp's backward replays a loop wrong (see the module's docstring)."""

    CARRIED = "carries a local from one iteration into the next or out of the loop"
    WHILE = "is a while loop, whose condition Warp's backward evaluates again on the values it replays"
    JUMPS = "breaks or continues, which Warp's backward replays by jumping past the iteration's adjoint"


@dataclass(frozen=True)
class LoopHazard:
    """A loop Warp does not unroll, the reasons its replay goes wrong, and the locals it carries."""

    loop: ast.For | ast.While
    hazards: frozenset[Hazard]
    carried: tuple[str, ...]  # sorted


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
