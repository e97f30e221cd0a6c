# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The device's checks of a launch, read by the host when it can without waiting, and ``check()``."""

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

from .device import (
    CANCELLED,
    CHAIN,
    FINAL,
    MISSING,
    ORDER,
    OVERFLOW,
    POOL,
    REPLAY_DIFFERS,
    STATUS_CODE,
    STATUS_SITE,
    STATUS_TRIPS,
    UNSETTLED,
)
from .errors import RewriteError
from .specs import KernelSpec, SiteSpec

#
# A launch that can go wrong in ways only the device sees (a loop outgrowing its records, an inconsistent exact
# order) gets a status array (``STATUS_CODE``...). Its kernels write it; the replay kernel and the exact backward
# read it and, once it says "refused", leave every gradient alone. The host copies it to host memory right after
# the work that writes it, without waiting, and reads the copy once the device has got there: at the launch's
# next checkpoint (after its forward, and after each step of its backward), at ``check()``, which waits. On the
# CPU the device is always there already, so a refusal raises at once; on a GPU it raises at the first checkpoint
# after the device got there, or at ``check()``. Nothing here synchronizes, so a launch and its backward can be
# captured in a CUDA graph: there the copies are part of the graph, and ``check()`` reads them after a replay.


def host_view(array: wp.array) -> np.ndarray:
    """A NumPy view of a host array's int32 values (no copy, no synchronization)."""
    pointer = ctypes.cast(array.ptr, ctypes.POINTER(ctypes.c_int32))
    return np.ctypeslib.as_array(pointer, shape=array.shape)


@dataclass(eq=False)
class PendingCheck:
    """A launch's status on its way to the host, and what to make of it."""

    status: wp.array  # the device's: a launch's checks are reported once, however many copies are on their way
    host: wp.array  # the host copy (pinned memory when the status is on a GPU)
    values: np.ndarray  # a view of it
    event: Any  # a wp.Event recorded after the copy; None: already there (CPU), or in a graph capture
    explain: Callable[[np.ndarray], RewriteError | None]

    def arrived(self) -> bool:
        return self.event is None or self.event.is_complete


class DeviceChecks:
    """The statuses of launches on their way to the host (see above)."""

    def __init__(self, captured_kept: int = 256):
        self.pending: list[PendingCheck] = []
        self.captured: list[PendingCheck] = []  # read by check() after each replay of the graph
        self.captured_kept = captured_kept
        self.spare: dict[tuple, list[wp.array]] = {}  # host copies read already, by (length, pinned)

    def watch(self, status: wp.array, explain: Callable[[np.ndarray], RewriteError | None]) -> None:
        """Copy ``status`` to the host behind the work that writes it, then read what has arrived."""
        device = status.device
        assert device is not None  # an allocated array's
        spare = self.spare.setdefault((status.size, device.is_cuda), [])
        # Pinned host memory is slow to allocate: copies that have been read are used again.
        host = spare.pop() if spare else wp.empty(status.shape, dtype=wp.int32, device="cpu", pinned=device.is_cuda)
        wp.copy(host, status)
        check = PendingCheck(status, host, host_view(host), None, explain)
        if device.is_cuda and device.is_capturing:
            self.captured = [*self.captured[-self.captured_kept + 1 :], check]
            return
        if device.is_cuda:
            check.event = device.stream.record_event()
        self.pending.append(check)
        self.poll()

    def poll(self, wait: bool = False) -> None:
        """Read every status that has arrived (``wait``: every one), and raise the first refusal among them."""
        arrived = [check for check in self.pending if wait or check.arrived()]
        if not arrived:
            return
        self.pending = [check for check in self.pending if check not in arrived]
        for check in arrived:
            if check.event is not None:
                wp.synchronize_event(check.event)  # arrived already unless waiting: returns at once
        try:
            self._raise_first(arrived)
        finally:
            for check in arrived:
                self.spare[check.host.size, check.host.pinned].append(check.host)

    def check(self) -> None:
        """Wait for every launch's checks (and those of captured graphs, after their last replay) and raise."""
        self.poll(wait=True)
        if self.captured:
            wp.synchronize()  # a graph's copies land when its replay ends
            self._raise_first(self.captured)

    def _raise_first(self, checks: list[PendingCheck]) -> None:
        for check in checks:
            error = check.explain(check.values)
            if error is not None:
                self.pending = [other for other in self.pending if other.status is not check.status]
                raise error


device_checks = DeviceChecks()
# Every copy of the runtime (the package's, and each ``wp_rewrite_runtime/`` written beside emitted modules) has its
# own module state, so its own ``device_checks``. They meet in one list, kept on the one module every copy imports:
# ``warp._wp_rewrite_device_checks``, which ``check()`` of any copy reads whole.
COPIES = "_wp_rewrite_device_checks"
every_copy: list[DeviceChecks] = wp.__dict__.setdefault(COPIES, [])
every_copy.append(device_checks)


def check() -> None:
    """Raise the ``RewriteError`` of any rewritten launch the device refused that has not been reported yet.

    On the CPU refusals raise at once. On a GPU the device's checks reach the host without anyone waiting for
    them; they raise at the launch's next checkpoint (right after its forward, after each step of its backward)
    once the device has got there, and here, which waits for them. Call it after a captured graph's replay. It
    reads the checks of launches of every copy of the runtime loaded (``warp_rewrite.runtime``'s, and those beside
    emitted modules), and raises the first refusal found; the next call raises the next.
    """
    for checks in list(every_copy):
        checks.check()


def unbounded_chain(spec: KernelSpec, site: SiteSpec, instead: str) -> RewriteError:
    """The refusal, in a CUDA graph capture, of exact returns whose backward needs the host (see ``exact_rounds``)."""
    return RewriteError(
        spec.key,
        site.location,
        f"the values returned by wp.atomic_{site.op}() on '{site.target}' feed operands of float atomics on the "
        "same target (or their chain runs through a helper): how many adjoint launches the exact backward needs "
        "depends on the data and is found on the host, which a CUDA graph capture cannot wait for",
        f"Rewrite with detach_returns=True, or {instead} outside the capture",
    )


def trips_of(values: np.ndarray, loop: int) -> int:
    """The trips an execution of ``loop`` needed, as its status reports them (0: none beyond its room)."""
    return int(values[STATUS_TRIPS + loop])


def explain_status(
    spec: KernelSpec, capacities: dict[int, int], values: np.ndarray, in_backward: bool = False
) -> RewriteError | None:
    """The ``RewriteError`` a launch's status stands for (None: it was not refused). ``in_backward``: read during a
    backward pass, whose gradients the message then says are incomplete."""
    code, site_index = int(values[STATUS_CODE]), int(values[STATUS_SITE])
    if code == 0:
        return None
    withheld = ""
    if in_backward:
        if code == REPLAY_DIFFERS:
            withheld = (
                " (found in backward, where this launch's replay had added its local terms to the gradients "
                "and the rest was left out: this backward pass's gradients are wrong)"
            )
        elif code in (UNSETTLED, CANCELLED):
            withheld = (
                " (found in backward, after this launch's replay had added its local terms and part of the gradient "
                "through the returns to the gradients: this backward pass's gradients are wrong)"
            )
        else:
            withheld = (
                " (found in backward: none of this launch's gradients were written, so this backward "
                "pass's gradients are incomplete)"
            )
    if code == OVERFLOW:
        loop = next(loop for loop in spec.loops if loop.counted and trips_of(values, loop.id) > capacities[loop.id])
        needed = trips_of(values, loop.id)
        return RewriteError(
            spec.key,
            loop.location,
            f"this loop ran {needed} times in one execution but its records had room for {capacities[loop.id]}; "
            f"the launch's gradients would be wrong{withheld}",
            f"Pass max_records={needed} or more (to wp_rewrite, or to the generated launch function)",
        )
    if code == POOL:
        site = spec.sites[site_index]
        return RewriteError(
            spec.key,
            site.location,
            f"this reads '{site.target}', which the launch also writes, and an element this launch read it also "
            f"wrote: the value read is a float whose gradient through what the launch wrote there is not "
            f"supported{withheld}",
            f"Read only elements of '{site.target}' the launch does not write (below the count it started with, in "
            "an append pool), write the result into a separate array, or launch with nothing it is made of "
            "requiring grad",
        )
    exact = [site for site in spec.sites if site.exact]
    site = spec.sites[site_index] if 0 <= site_index < len(spec.sites) else exact[0]
    atomic = f"wp.atomic_{site.op}() on '{site.target}'"
    bug = "This is a bug in warp-rewrite (please report it); rewrite with detach_returns=True meanwhile"
    problems = {
        ORDER: (
            f"the tickets of the float atomics on '{site.target}' are not a permutation of each address's "
            "operations: two operations took one place, or one a place beyond the count",
            bug,
        ),
        MISSING: (f"an operation on '{site.target}' took a ticket but left no record", bug),
        CHAIN: (
            f"the value an operation of {atomic} returned does not follow from the operation before it on "
            "the same address: its records changed after the record kernel",
            bug,
        ),
        FINAL: (
            f"the last operation on an address of '{site.target}' ({atomic}) does not give the value the "
            "target held after the launch",
            bug,
        ),
        REPLAY_DIFFERS: (
            f"the replay kernel recomputed the operand of {atomic} differently from the forward: it "
            "reads memory this launch changes (an array the kernel also writes, or an argument "
            "sharing memory with another)",
            "Compute the operand from arrays the launch does not write, or rewrite with detach_returns=True",
        ),
        UNSETTLED: (
            f"the gradient through the float returns of {atomic} did not settle in "
            f"{spec.exact_rounds or 'as many'} adjoint launches (as operations): an operand depends on "
            "returned values through more links than expected",
            bug,
        ),
        CANCELLED: (
            f"the gradient through the float returns of {atomic} cannot be computed to its type's precision: "
            "its returned values feed operands of atomics on the same target, through factors near -1, and the "
            "terms of the gradient, one per length of those chains, cancel to far less than their size (more than "
            "half its digits lost)",
            "Rewrite with detach_returns=True (the returns' gradients are then dropped), or accumulate the values "
            "that feed back into a separate array",
        ),
    }
    problem, advice = problems[code]
    return RewriteError(spec.key, site.location, problem + withheld, advice)
