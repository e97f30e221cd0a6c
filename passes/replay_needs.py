"""What a replay needs: the replay keeps what carries gradients (stores, atomics, returns, and what they read), so
a call whose value nothing kept reads can go where it only computes, and a record nothing kept reads need not be
recorded (``pipeline.unread_reads``)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from warp_rewrite.passes.pruning import constructs
from warp_rewrite.passes.slicing import LeavesOut
from warp_rewrite.passes.syntax import walk

if TYPE_CHECKING:  # the passes import no runtime: the ABI's names come in through ModuleNames
    from warp_rewrite.runtime.abi import RuntimeNames


def leaves_out(computing: frozenset[ast.Call], runtime: RuntimeNames) -> LeavesOut:
    """Which calls of a replay can go where nothing reads their value: those that only compute (the planner's
    ``computing``), construct one, or read a record back (``recorded_<dtype>``, ``carried_<dtype>``: the gradient
    of a value nothing reads is zero). A replay keeps what carries gradients: stores, atomics, returns."""

    def goes(call: ast.Call) -> bool:
        return call in computing or constructs(call) or runtime.is_reader(ast.unparse(call.func))

    return goes


def records_read(replay: list[ast.FunctionDef]) -> frozenset[str]:
    """The records the replay phase's functions read, other than to hand them on to a clone (every function names
    a record alike)."""
    generated = {function.name for function in replay}
    read: set[str] = set()
    for function in replay:
        handed = {
            id(argument)
            for call in walk(function)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in generated
            for argument in call.args
        }
        names = [n for n in walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
        read |= {n.id for n in names if id(n) not in handed}
    return frozenset(read)
