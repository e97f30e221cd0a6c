"""Updates of one field or component of an element of a written array (``bodies[b].mass += m``,
``bodies[b].com[1] += v``, ``tally[c][1] += w``, ``stats[c][0, 1] += w``), in the kernel and in a helper, beside a
consumed atomic: the forward equals the original's and the gradients equal finite differences of the original,
through the API and through the command line. Such an update once lost its increment in the record kernel."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from tests.support import component_updates
from tests.support.emitted import emitted_fixture
from tests.support.harness import Case, check, f64, i32

N = 6
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6, 1.1])


def zeros(n, dtype=wp.float64):
    return wp.zeros(n, dtype=dtype, requires_grad=True, device="cpu")


# kernel name -> its arguments (with the module's struct type), then (for kernels updating bodies) the masses
# ``masses_of`` reads out of them
KERNELS = {
    "add_mass": lambda m: [f64(X, True), i32([0]), zeros(2, m.Body), zeros(N), zeros(2)],
    "tally_components": lambda m: [f64(X, True), i32([0]), zeros(2, wp.vec3d), zeros(3, wp.mat22d), zeros(N)],
    "deposit_through_helper": lambda m: [
        f64(X, True),
        i32([0]),
        zeros(2, m.Body),
        zeros(2, wp.vec3d),
        zeros(N),
        zeros(2),
    ],
    "tally_through_helper": lambda m: [f64(X, True), i32([0]), zeros(2), i32([0, 0]), zeros(N)],
}
# kernel name -> the indices of the float arrays the loss weighs
LOSS = {
    "add_mass": [3, 4],
    "tally_components": [2, 3, 4],
    "deposit_through_helper": [3, 4, 5],
    "tally_through_helper": [2, 4],
}


def case(module, name: str, launch_rewritten) -> Case:
    """The kernel, then ``masses_of`` over its bodies if it has some (the loss cannot weigh structs)."""
    kernel = getattr(module, name)
    has_bodies = name in ("add_mass", "deposit_through_helper")

    def program(args, launcher):
        inputs = args[:-1] if has_bodies else args
        if launcher.__name__ == "launch_original":
            wp.launch(kernel, N, inputs=inputs, device="cpu")
        else:
            launch_rewritten(inputs)
        if has_bodies:
            wp.launch(module.masses_of, 2, inputs=[args[2], args[-1]], device="cpu")

    return Case(None, N, lambda: KERNELS[name](module), LOSS[name], [0], program=program)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_through_the_api(name):
    from warp_rewrite import launch, wp_rewrite

    rewritten = wp_rewrite(getattr(component_updates, name))
    check(case(component_updates, name, lambda inputs: launch(rewritten, N, inputs=inputs, device="cpu")))


emitted = emitted_fixture(component_updates)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_through_the_command_line(emitted, name):
    launch_emitted = getattr(emitted, f"launch_{name}")
    check(case(emitted, name, lambda inputs: launch_emitted(N, inputs=inputs, device="cpu")))


P = np.array([[0.3, 0.5, -0.2], [1.0, 0.4, 0.2], [-0.5, 0.8, 0.1], [0.6, -0.9, 0.7], [0.2, 0.3, -1.1], [0.9, 0.1, 0.4]])


def weigh_bodies_case(module, launch_rewritten) -> Case:
    """``weigh_bodies``, then ``masses_of`` over its bodies; differentiated with respect to the masses, the
    positions and the accumulator's initial value."""

    def make():
        vectors = lambda values: wp.array(values, dtype=wp.vec3d, requires_grad=True, device="cpu")  # noqa: E731
        return [f64(X, True), vectors(P), vectors([[0.1, 0.2, 0.3]]), zeros(2, module.Body), zeros(N), zeros(2)]

    def program(args, launcher):
        if launcher.__name__ == "launch_original":
            wp.launch(module.weigh_bodies, N, inputs=args[:5], device="cpu")
        else:
            launch_rewritten(args[:5])
        wp.launch(module.masses_of, 2, inputs=[args[3], args[5]], device="cpu")

    return Case(None, N, make, [2, 4, 5], [0, 1, 2], program=program)


def running_moment_case(module, launch_rewritten) -> Case:
    """``fill_bodies`` from plain floats, then ``running_moment``: nothing but the bodies carries a gradient into
    the float return."""

    def make():
        return [f64(X, True), zeros(N, module.Body), f64([0.3]), zeros(N)]

    def program(args, launcher):
        wp.launch(module.fill_bodies, N, inputs=args[:2], device="cpu")
        if launcher.__name__ == "launch_original":
            wp.launch(module.running_moment, N, inputs=args[1:], device="cpu")
        else:
            launch_rewritten(args[1:])

    return Case(None, N, make, [3], [0], program=program)


COMBINED = {"weigh_bodies": weigh_bodies_case, "running_moment": running_moment_case}


@pytest.mark.parametrize("name", sorted(COMBINED))
def test_with_an_exact_return_through_the_api(name):
    from warp_rewrite import launch, wp_rewrite

    rewritten = wp_rewrite(getattr(component_updates, name))
    check(COMBINED[name](component_updates, lambda inputs: launch(rewritten, N, inputs=inputs, device="cpu")))


@pytest.mark.parametrize("name", sorted(COMBINED))
def test_with_an_exact_return_through_the_command_line(emitted, name):
    launch_emitted = getattr(emitted, f"launch_{name}")
    check(COMBINED[name](emitted, lambda inputs: launch_emitted(N, inputs=inputs, device="cpu")))
