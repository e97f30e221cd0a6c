"""Ground truth for gradient tests: central finite differences of the ORIGINAL kernel's forward.

Warp runs CPU kernels thread by thread in order, so the original kernel's forward is deterministic and
correct on the CPU; its float64 finite differences are the exact gradient the rewrite must reproduce.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import warp as wp

from warp_rewrite import launch, wp_rewrite
from warp_rewrite.runtime.arguments import argument_arrays

EPSILON = 1e-6
RTOL = 1e-5
ATOL = 1e-7


@dataclass(frozen=True)
class Tolerance:
    """The finite-difference step and how close the tape's gradients must come to it."""

    epsilon: float = EPSILON
    rtol: float = RTOL
    atol: float = ATOL


FLOAT64 = Tolerance()
# Real code is float32 throughout (Newton, Warp's examples): a step of 1e-3 keeps float32 rounding (about 1e-7
# relative) below the differences, and the gradients agree to about 1e-3 relative (docs/realcode.md).
FLOAT32 = Tolerance(epsilon=1e-3, rtol=2e-2, atol=2e-3)


Launcher = Callable[[wp.Kernel, Any, list[Any]], None]
Program = Callable[[list[Any], Launcher], None]


def launch_original(kernel: wp.Kernel, dim: Any, inputs: list[Any]) -> None:
    wp.launch(kernel, dim, inputs=inputs, device="cpu")


def rewritten_launcher(max_records: int | None = None) -> Launcher:
    """Launches through ``wp_rewrite(kernel, max_records=max_records)``."""

    def launch_rewritten(kernel: wp.Kernel, dim: Any, inputs: list[Any]) -> None:
        launch(wp_rewrite(kernel, max_records=max_records), dim, inputs=inputs, device="cpu")

    return launch_rewritten


def original_or(original: wp.Kernel, dim: Any, rewritten: Callable[[list[Any]], None]) -> Program:
    """A ``Case.program`` for code that launches the rewrite itself (an emitted module's driver, a launch of its
    rewritten kernel): ``original`` is launched for ground truth, ``rewritten(args)`` for the runs checked."""

    def program(args: list[Any], launcher: Launcher) -> None:
        if launcher is launch_original:
            launch_original(original, dim, args)
        else:
            rewritten(args)

    return program


@dataclass
class Case:
    """A program to check: ``make_args`` builds fresh arguments on the CPU each call.

    By default the program is one launch of ``kernel`` over all arguments; ``program`` replaces that with
    any sequence of launches made through the launcher it is given (original or rewritten).
    """

    kernel: wp.Kernel | None
    dim: int | tuple[int, ...]
    make_args: Callable[[], list[Any]]
    loss_outputs: Sequence[int]  # argument indices whose weighted sum is the loss
    wrt: Sequence[int]  # argument indices to differentiate with respect to
    program: Program | None = None
    weights: dict[int, np.ndarray] = field(default_factory=dict)
    max_records: int | None = None  # wp_rewrite's option for the rewritten runs

    def run(self, args: list[Any], launcher: Launcher) -> None:
        if self.program is None:
            launcher(self.kernel, self.dim, args)
        else:
            self.program(args, launcher)

    def weight(self, index: int, array: wp.array) -> np.ndarray:
        if index not in self.weights:
            rng = np.random.default_rng(1234 + index)
            self.weights[index] = rng.uniform(0.5, 1.5, size=array.numpy().shape)
        return self.weights[index]

    def loss_difference(self, after: list[Any], before: list[Any]) -> float:
        """The change of the loss (the weighted sum of the loss outputs) from ``before`` to ``after``, taken output
        by output: summed first, a large loss (~1e4 carries ~1e-12 of rounding) would drown a 1e-6 step's change."""
        return sum(
            float(np.sum(self.weight(i, after[i]) * (after[i].numpy() - before[i].numpy()))) for i in self.loss_outputs
        )


def run_original(case: Case) -> list[Any]:
    args = case.make_args()
    case.run(args, launch_original)
    return args


def run_rewritten(case: Case) -> tuple[list[Any], wp.Tape]:
    args = case.make_args()
    tape = wp.Tape()
    with tape:
        case.run(args, rewritten_launcher(case.max_records))
    return args, tape


def arrays_of(args: list[Any]) -> dict[str, np.ndarray]:
    """Every array among the arguments (of any of Warp's array kinds, struct fields included), by its path."""
    return {str(path): array.numpy().copy() for path, array in argument_arrays(range(len(args)), args)}


def assert_same_forward(case: Case) -> list[Any]:
    """Every array (outputs and atomic targets) after the rewritten forward equals the original's exactly."""
    expected = arrays_of(run_original(case))
    args, _ = run_rewritten(case)
    actual = arrays_of(args)
    for i, value in expected.items():
        np.testing.assert_array_equal(actual[i], value, err_msg=f"argument {i} differs after forward")
    return args


def tape_gradients(case: Case) -> dict[int, np.ndarray]:
    """Tape gradients of the rewritten program; its backward must leave every forward result as it was.

    The program runs three times on the same arrays, restored in place in between, so that the later runs
    take the launches prepared by the first (``warp_rewrite.runtime.PreparedLaunch``): the second while the
    first tape still holds its records, the third after both tapes are gone. All three must agree exactly, and
    so must a second backward on the first tape after zeroing only the arguments' gradients (what
    ``wp.autograd.jacobian`` does): no hidden state may survive a backward pass.
    """
    args = case.make_args()
    arrays = [array for _, array in argument_arrays(range(len(args)), args)]  # struct fields included
    initial = [array.numpy().copy() for array in arrays]
    runs, held = [], []  # held: the first run's tape, kept through the second run
    for repeat in range(3):
        for array, values in zip(arrays, initial, strict=True):
            array.assign(values)
            if getattr(array, "grad", None) is not None:
                array.grad.zero_()
        tape = wp.Tape()
        with tape:
            case.run(args, rewritten_launcher(case.max_records))
        after_forward = arrays_of(args)
        weights = {i: case.weight(i, args[i]) for i in case.loss_outputs}
        tape.backward(grads={args[i]: wp.array(w, dtype=args[i].dtype, device="cpu") for i, w in weights.items()})
        for i, value in arrays_of(args).items():
            np.testing.assert_array_equal(value, after_forward[i], err_msg=f"backward changed argument {i}")
        runs.append((after_forward, {i: args[i].grad.numpy().copy() for i in case.wrt}))
        if repeat == 0:  # backward again on the same tape, after zeroing only the arguments' own gradients
            for array in arrays:
                if array.grad is not None:
                    array.grad.zero_()
            tape.backward(grads={args[i]: wp.array(w, dtype=args[i].dtype, device="cpu") for i, w in weights.items()})
            for i, expected in runs[0][1].items():
                np.testing.assert_array_equal(
                    args[i].grad.numpy(),
                    expected,
                    err_msg=f"gradient of argument {i} differs in a second backward pass on the same tape",
                )
        held[:] = [tape] if repeat == 0 else []
        del tape
    for later in runs[1:]:
        for (i, expected), actual in zip(runs[0][0].items(), later[0].values(), strict=True):
            np.testing.assert_array_equal(actual, expected, err_msg=f"argument {i} differs after a repeated forward")
        for i, expected in runs[0][1].items():
            np.testing.assert_array_equal(later[1][i], expected, err_msg=f"gradient of argument {i} differs on repeat")
    return runs[0][1]


def plain_warp_gradients(case: Case) -> dict[int, np.ndarray]:
    """What plain Warp's tape gives for the original program (no rewrite): the gradient the rewrite replaces."""
    args = case.make_args()
    with wp.Tape() as tape:
        case.run(args, launch_original)
    tape.backward(grads={args[i]: wp.array(case.weight(i, args[i]), dtype=args[i].dtype) for i in case.loss_outputs})
    return {i: args[i].grad.numpy().copy() for i in case.wrt}


def finite_difference_gradients(case: Case, epsilon: float = EPSILON) -> dict[int, np.ndarray]:
    shapes = {i: case.make_args()[i].numpy().shape for i in case.wrt}
    result = {}
    for i in case.wrt:
        grad = np.zeros(shapes[i]).reshape(-1)
        for j in range(grad.size):
            runs = []
            for sign in (1.0, -1.0):
                args = case.make_args()
                args[i].numpy().reshape(-1)[j] += sign * epsilon  # CPU arrays: numpy() is a writable view
                case.run(args, launch_original)
                runs.append(args)
            grad[j] = case.loss_difference(*runs) / (2 * epsilon)
        result[i] = grad.reshape(shapes[i])
    return result


def assert_gradients_match(case: Case, tolerance: Tolerance = FLOAT64) -> dict[int, np.ndarray]:
    actual = tape_gradients(case)
    expected = finite_difference_gradients(case, tolerance.epsilon)
    assert any(np.any(g != 0) for g in expected.values()), "vacuous case: every finite-difference gradient is zero"
    for i in case.wrt:
        np.testing.assert_allclose(
            actual[i], expected[i], rtol=tolerance.rtol, atol=tolerance.atol, err_msg=f"gradient of argument {i}"
        )
    return actual


def check(case: Case, tolerance: Tolerance = FLOAT64) -> None:
    """Forward equality plus tape gradients against finite differences."""
    assert_same_forward(case)
    assert_gradients_match(case, tolerance)


# --- CPU arrays for test cases ------------------------------------------------------------------------------


def f64(values, grad: bool = False) -> wp.array:
    return wp.array(np.asarray(values, dtype=np.float64), dtype=wp.float64, requires_grad=grad, device="cpu")


def i32(values) -> wp.array:
    return wp.array(np.asarray(values, dtype=np.int32), dtype=wp.int32, device="cpu")


def u64(values) -> wp.array:
    return wp.array(np.asarray(values, dtype=np.uint64), dtype=wp.uint64, device="cpu")


def empty_keys(n: int) -> wp.array:
    """A hash table's keys, every slot empty (Newton's ``HASHTABLE_EMPTY_KEY``, all bits set)."""
    return u64(np.full(n, np.iinfo(np.uint64).max, dtype=np.uint64))


def vec3d(values, grad: bool = False) -> wp.array:
    return wp.array(np.asarray(values, dtype=np.float64), dtype=wp.vec3d, requires_grad=grad, device="cpu")
