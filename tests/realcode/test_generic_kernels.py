"""How ``through_api`` compiles a generic kernel (a parameter annotated ``Any``): Warp compiles such a kernel only
per overload, which a launch makes from its arguments, so the suite makes the overloads its callers' types make
(``RealKernel.launch_types``) for the original and the generated kernels; without them it says so."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import warp as wp
from outcomes import GENERIC, REWRITTEN
from through_api import RealKernel, rewrite_and_compile

from warp_rewrite import wp_rewrite


@wp.struct
class Sink:
    count: wp.array(dtype=wp.int32)
    values: wp.array(dtype=float)


@wp.func
def put(sink: Sink, value: float):
    slot = wp.atomic_add(sink.count, 0, 1)
    sink.values[slot] = value


@wp.kernel
def emit_squares(x: wp.array(dtype=float), sink: Any):
    i = wp.tid()
    put(sink, x[i] * x[i])


@dataclass(frozen=True)
class HereTree:
    """The part of a ``trees.Tree`` outcomes use: this file is its real code."""

    name: str = "here"
    site_packages: Path = Path(__file__).parent


def outcome_of(real: RealKernel):
    (outcome,) = rewrite_and_compile(HereTree(), [real])
    return outcome


def test_a_generic_kernel_compiles_with_the_types_its_callers_pass():
    real = RealKernel("emit_squares", emit_squares, {"sink": Sink})
    outcome = outcome_of(real)
    assert (outcome.result, outcome.detail) == (REWRITTEN, "")
    assert emit_squares.get_overload([wp.array(dtype=float), Sink]) is not None
    # The overload a launch with a Sink makes now runs from the compiled module, through the record kernel too.
    x = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
    sink = Sink()
    sink.count = wp.zeros(1, dtype=wp.int32)
    sink.values = wp.zeros(3, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        wp_rewrite(emit_squares).launch(3, inputs=[x, sink])
    tape.backward(grads={sink.values: wp.ones(3, dtype=float)})
    assert sorted(sink.values.numpy()) == [1.0, 4.0, 9.0]
    assert list(x.grad.numpy()) == [2.0, 4.0, 6.0]


def test_a_generic_kernel_without_known_launch_types_is_not_counted_as_compiled():
    outcome = outcome_of(RealKernel("emit_squares", emit_squares))
    assert outcome.result == GENERIC
    assert "sink" in outcome.detail
