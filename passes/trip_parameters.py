"""The trip parameters of the generated functions: each loop's room for records per execution (compiled in, or
passed by the launch), the launch's status, and which of them a cloned helper takes (``two_phase``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from warp_rewrite.passes.plan_types import FunctionPlan, KernelPlan, Loop

if TYPE_CHECKING:
    from warp_rewrite.passes.two_phase import KernelNames


def compiled_room(loop: Loop, max_records: int | None) -> int | None:
    """The room for records per execution of a loop the replay runs, where the kernels have it compiled in: a
    constant ``range()``'s trip count, or ``max_records`` when it is fixed for every launch. None: the launch
    passes it (and loops the replay skips have no coordinates, so none)."""
    if loop.opaque:
        return None
    return loop.static_trips if loop.static_trips is not None else max_records


def trip_capacities(loops: list[Loop], names: KernelNames, max_records: int | None) -> dict[int, str]:
    """Each loop's room per execution as code (the row stride of its coordinates): a constant, else a parameter.

    A constant costs nothing per iteration and keeps an argument out of every launch (Warp packs each
    argument, and in backward its adjoint too, at every launch).
    """
    capacities = {}
    for loop in (loop for loop in loops if not loop.opaque):
        room = compiled_room(loop, max_records)
        capacities[loop.id] = f"{names.trip_capacity}{loop.id}" if room is None else str(room)
    return capacities


def has_status(plan: KernelPlan) -> bool:
    """Whether the kernels take the launch's status: for loops that may outgrow their records (the record kernel
    reports their trips) and exact float returns (the exact backward's checks). The replay kernel, and the exact
    backward, do nothing in a launch its status refuses. Append pools' reads too: the record kernel checks them."""
    return any(loop.needs_room for loop in plan.loops) or any(site.exact or site.marks for site in plan.sites)


def trip_parameters(plan: KernelPlan, names: KernelNames, max_records: int | None) -> tuple[str, ...]:
    """The parameters every function of both phases takes and passes on: the capacities a launch passes, then
    the launch's status, where it has one (``has_status``)."""
    rewritten = [loop for loop in plan.loops if not loop.opaque]
    parameters = [f"{names.trip_capacity}{loop.id}" for loop in rewritten if compiled_room(loop, max_records) is None]
    return (*parameters, names.status) if has_status(plan) else tuple(parameters)


def clone_trip_parameters(plan: FunctionPlan, trip_args: tuple[str, ...], names: KernelNames) -> tuple[str, ...]:
    """The trip parameters a cloned helper takes and passes on: the capacities and numbers of the loops in it and
    in the clones it calls, and the launch's status where one of those reports trips or checks a pool. Only
    those: a clone of one helper then reads the same in every kernel that calls it."""
    functions = list(plan.walk())
    loops = [loop for function in functions for loop in function.loops.values() if not loop.opaque]
    reporting = sorted(loop.id for loop in loops if loop.static_trips is None)
    capacities = {f"{names.trip_capacity}{loop.id}" for loop in loops}
    parameters = [name for name in trip_args if name in capacities]
    parameters += [f"{names.loop_number}{number}" for number in reporting]
    pools = any(site.marks for function in functions for site in function.sites)
    if names.status in trip_args and (reporting or pools):
        parameters.append(names.status)
    return tuple(parameters)
