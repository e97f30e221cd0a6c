"""The ``wp.launch`` hook's launch path under ``rewrite_launches()``: a launch without a tape asks nothing more; on a
tape, what to run is decided once per kernel object and kept, until the kernel is defined again (a notebook cell run
again: another object under the same name) or Warp marks its module modified; no signature is bound per launch
(``bench/launch_cost.py`` measures what it costs). Gradients are checked against finite differences of the original
forward."""

from __future__ import annotations

import inspect
import linecache
import sys

import numpy as np
import pytest
import warp as wp

import warp_rewrite
from tests.support.harness import Case, check, f64, i32
from warp_rewrite.runtime import hook

N = 4
X = np.array([0.5, -1.5, 2.0, 0.25])


@wp.kernel
def doubled(x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    out[tid] = x[tid] * wp.float64(2.0)


@wp.kernel
def compacted(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    out[wp.atomic_add(count, 0, 1)] = x[tid] * x[tid]


@pytest.fixture
def counted(monkeypatch):
    """``rewrite_launches()`` on, with the calls of its rewrite counted (kernel keys), and no signature bound by the
    hook."""
    warp_rewrite.rewrite_launches()
    made = hook.AUTO_REWRITE
    calls: list[str] = []

    def counting(kernel):
        calls.append(kernel.key)
        return made(kernel)

    signature = inspect.signature

    def not_from_the_hook(*args, **kwargs):
        if sys._getframe(1).f_globals.get("__name__") == hook.__name__:
            pytest.fail("the hook bound a signature at a launch")
        return signature(*args, **kwargs)

    monkeypatch.setattr(hook, "AUTO_REWRITE", counting)
    monkeypatch.setattr(inspect, "signature", not_from_the_hook)
    yield calls
    warp_rewrite.rewrite_launches(False)


def zeros() -> wp.array:
    return wp.zeros(N, dtype=wp.float64, requires_grad=True, device="cpu")


def test_without_a_tape_nothing_is_decided(counted):
    x, out = f64(X, True), zeros()
    for _ in range(20):
        wp.launch(doubled, N, inputs=[x, out], device="cpu")
        wp.launch(compacted, N, inputs=[x, i32([0]), zeros()], device="cpu")
    assert counted == []
    np.testing.assert_array_equal(out.numpy(), 2 * X)


def test_on_a_tape_each_kernel_is_decided_once(counted):
    x = f64(X, True)
    tape = wp.Tape()
    with tape:
        for _ in range(20):
            wp.launch(doubled, N, inputs=[x, zeros()], device="cpu")
            wp.launch(compacted, N, inputs=[x, i32([0]), zeros()], device="cpu")
    assert sorted(counted) == ["compacted", "doubled"]
    launched = {launch[0].key for launch in tape.launches}
    assert launched == {"doubled", warp_rewrite.wp_rewrite(compacted).key}  # the replay kernel's key
    tape.reset()


class StandIn:
    """What ``AUTO_REWRITE`` makes of a kernel, for the launches that must not run it."""

    pair, refusal = object(), None

    def __init__(self):
        self.launched = 0

    def launch(self, *args, **kwargs):
        self.launched += 1


@pytest.mark.parametrize(
    "given",
    [{"adjoint": True}, {"record_tape": False}, "adjoint positional", "record_tape positional", "forward"],
    ids=str,
)
def test_only_forward_launches_the_tape_records_run_the_rewrite(monkeypatch, given):
    stand_in = StandIn()
    warp_rewrite.rewrite_launches()
    monkeypatch.setattr(hook, "AUTO_REWRITE", lambda kernel: stand_in)
    x, out = f64(X, True), zeros()
    inputs = [x, i32([0]), out]
    adjoints = [x.grad, None, out.grad]
    try:
        with wp.Tape():
            if given == "adjoint positional":
                wp.launch(compacted, N, inputs, [], adjoints, [], "cpu", None, True)
            elif given == "record_tape positional":
                wp.launch(compacted, N, inputs, [], [], [], "cpu", None, False, False)
            elif given == "forward":
                wp.launch(compacted, N, inputs, device="cpu")
            else:
                wp.launch(compacted, N, inputs=inputs, adj_inputs=adjoints, device="cpu", **given)
    finally:
        delattr(compacted, hook._DECISION)  # the stand-in's decision goes with the test
        warp_rewrite.rewrite_launches(False)
    assert stand_in.launched == (given == "forward")


def notebook_cell(source: str, cell: int, namespace: dict) -> None:
    """Run ``source`` as Jupyter runs a cell: registered in ``linecache`` under a file name of its own, in one
    namespace for every cell (the notebook's ``__main__``)."""
    name = f"<ipython-input-{cell}-hook>"
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    exec(compile(source, name, "exec"), namespace)


CELL = """
import warp as wp


@wp.kernel
def cell_kernel(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    BODY
"""


def test_a_kernel_defined_again_under_the_same_name_is_decided_again(counted):
    """The first cell's kernel needs nothing; run again with a body that consumes an atomic's return, the kernel
    of the same name is rewritten at its next launch, and its gradients are right."""
    namespace = {"__name__": "hook_notebook"}
    notebook_cell(CELL.replace("BODY", "out[tid] = x[tid] * x[tid]"), 1, namespace)
    first = namespace["cell_kernel"]

    def program(args, launcher):
        wp.launch(namespace["cell_kernel"], N, inputs=args, device="cpu")

    make = lambda: [f64(X, True), i32([0]), zeros()]  # noqa: E731
    check(Case(None, N, make, [2], [0], program=program))
    notebook_cell(CELL.replace("BODY", "out[wp.atomic_add(count, 0, 1)] = x[tid] * x[tid]"), 2, namespace)
    assert namespace["cell_kernel"] is not first and namespace["cell_kernel"].key == first.key
    check(Case(None, N, make, [2], [0], program=program))
    assert counted == ["cell_kernel", "cell_kernel"]


def test_a_module_marked_modified_is_decided_again(counted):
    """A helper defined again in the kernel's module (Warp then marks it modified) makes the next launch decide
    again; launches in between keep the decision."""
    namespace = {"__name__": "hook_notebook_helpers"}
    notebook_cell(
        "import warp as wp\n\n\n@wp.func\ndef twice(v: wp.float64) -> wp.float64:\n    return v * wp.float64(2.0)\n"
        + CELL.replace("BODY", "out[tid] = twice(x[tid])"),
        1,
        namespace,
    )
    for cell in (2, 3):
        with wp.Tape():
            for _ in range(3):
                wp.launch(namespace["cell_kernel"], N, inputs=[f64(X, True), i32([0]), zeros()], device="cpu")
        notebook_cell(
            "import warp as wp\n\n\n@wp.func\ndef twice(v: wp.float64) -> wp.float64:\n    return v + v\n",
            cell,
            namespace,
        )
    assert counted == ["cell_kernel", "cell_kernel"]


@wp.kernel
def compacted_tiled(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid, _lane = wp.tid()
    out[wp.atomic_add(count, 0, 1)] = x[tid] * x[tid]


def tiled_gradient(kernel) -> np.ndarray:
    """x.grad of sum(out) after ``wp.launch_tiled`` of ``kernel`` on a tape (each thread one lane: the CPU's block)."""
    x, out = f64(X, True), zeros()
    with wp.Tape() as tape:
        wp.launch_tiled(kernel, dim=[N], inputs=[x, i32([0]), out], block_dim=1, device="cpu")
    tape.backward(grads={out: wp.ones(N, dtype=wp.float64, device="cpu")})
    return x.grad.numpy()


def test_launch_tiled_takes_a_rewritten_kernel():
    """Warp's ``launch_tiled`` calls its own launch, which knows no rewritten kernel (a KeyError from inside Warp): the
    hook's ``launch_tiled`` hands it the same dimensions instead."""
    np.testing.assert_allclose(tiled_gradient(warp_rewrite.wp_rewrite(compacted_tiled)), 2 * X)


def test_launch_tiled_of_a_plain_kernel_on_a_tape_is_rewritten_under_rewrite_launches(counted):
    np.testing.assert_allclose(tiled_gradient(compacted_tiled), 2 * X)
    assert counted == ["compacted_tiled"]
