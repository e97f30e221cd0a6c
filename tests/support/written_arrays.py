"""A checker of what the planner says a launch writes, against Warp's own account: every array argument Warp's
code generator marks written (``Var.is_write``: stores, atomics, through locals, views and helper calls) must be in
the launch spec's ``written``, or the replay could read what the launch changed without a record.

Independent of ``passes.read_back`` (which computes ``written``), so a write through a view or a helper that the
planner misses shows here. Not one through a plain alias: Warp makes ``buf = a`` a variable of its own and marks
``a`` unwritten by ``buf[tid] = v`` (that miss, now fixed, was found by the fuzzer's ``local bound to memory``).
Known through the API only (the command line has no Warp objects); ``tests/conftest.py`` runs it on every kernel
the suite rewrites.
"""

from __future__ import annotations

from warp._src.types import is_array

from warp_rewrite.live_frontend import LiveFrontend
from warp_rewrite.pipeline import Frontend, GeneratedKernel


def unseen_writes(frontend: Frontend, generated: GeneratedKernel) -> list[str]:
    """The array arguments Warp sees the kernel write that the spec does not list as written."""
    if not isinstance(frontend, LiveFrontend) or (adjoint := frontend.built_adjoint) is None:
        return []
    written = set(generated.spec.written)
    return [
        f"Warp writes '{arg.label}', which the plan does not list as written ({sorted(written)})"
        for arg in adjoint.args
        if is_array(arg.type) and arg.is_write and arg.label not in written
    ]
