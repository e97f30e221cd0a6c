"""A real differentiable pipeline end to end: Newton's soft contacts under a ``wp.Tape``, on the CPU.

Newton's ``create_soft_contacts`` takes each contact's slot from ``counter_increment``, an ``atomic_add`` whose
hand-written ``@wp.func_replay`` reads the slot back in backward. Here that replay is removed (the kernel is built
again from its own code, with a ``counter_increment`` of the same contract and no replay: Warp's backward then
runs the atomic again and sends gradients to the wrong contacts) and the kernel is rewritten by ``wp_rewrite``.
``CollisionPipeline`` launches it with ``wp.launch``, which takes rewritten kernels: the module's name is bound to
the rewritten kernel, or ``rewrite_launches()`` rewrites the plain kernel at its launch.

The scene: four particles above a ground plane, one falling onto a static sphere (a plane's contact point and
normal carry no first-order gradient; a sphere's turn with the particle), 20 steps of ``collide`` +
``SolverSemiImplicit``. The loss weighs the final positions and velocities. Forward must be bit-identical to
Newton's own, gradients equal to Newton's hand-written replay (to float32 rounding) and to central finite
differences: Newton is float32 throughout, where a step of 1e-3 and a 1e-2 relative tolerance work (larger
steps cross contact onsets, smaller ones drown in rounding).
"""

from __future__ import annotations

import contextlib
import itertools
import types
from dataclasses import dataclass

import numpy as np
import pytest
import warp as wp

from warp_rewrite import rewrite_launches, wp_rewrite

newton = pytest.importorskip("newton")
collide = pytest.importorskip("newton._src.sim.collide")
geometry_kernels = pytest.importorskip("newton._src.geometry.kernels")

STEPS = 20
DT = 1.0 / 240.0
START_POSITIONS = np.array([[0.0, 0.0, 0.12], [0.5, 0.1, 0.08], [-0.4, 0.3, 0.15], [1.6, 0.08, 0.4]])
START_VELOCITIES = np.array([[0.3, 0.0, -1.5], [0.0, 0.2, -1.0], [-0.2, 0.1, -0.5], [0.1, 0.0, -2.0]])
POSITION_WEIGHTS = np.array([[0.3, -0.2, 1.0], [0.1, 0.4, 0.7], [-0.5, 0.2, 0.9], [0.2, 0.3, 1.1]])
VELOCITY_WEIGHTS = 0.1 * np.array([[1.0, 0.5, -0.3], [0.2, -0.1, 0.8], [0.6, 0.3, 0.1], [-0.4, 0.2, 0.5]])
FD_STEP, FD_RTOL = 1e-3, 1e-2


@wp.func
def counter_increment(counter: wp.array[int], counter_index: int, tids: wp.array[int], tid: int, index_limit: int = -1):
    """Newton's contract without its replay: a slot from the counter (-1 at or past a non-negative limit),
    remembered per thread in ``tids``."""
    slot = wp.atomic_add(counter, counter_index, 1)
    if index_limit >= 0 and slot >= index_limit:
        slot = -1
    if tid < tids.shape[0]:
        tids[tid] = slot
    return slot


@wp.kernel
def weighted_sum(
    q: wp.array[wp.vec3], qd: wp.array[wp.vec3], wq: wp.array[wp.vec3], wqd: wp.array[wp.vec3], loss: wp.array[float]
):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.dot(q[i], wq[i]) + wp.dot(qd[i], wqd[i]))


def without_replay(kernel: wp.Kernel) -> wp.Kernel:
    """Newton's kernel built again from its own code, its ``counter_increment`` being the one above."""
    original = kernel.func
    scope = {**original.__globals__, "counter_increment": counter_increment}
    func = types.FunctionType(original.__code__, scope, original.__name__, original.__defaults__, original.__closure__)
    func.__qualname__, func.__module__ = original.__qualname__, __name__
    func.__annotations__ = dict(original.__annotations__)
    return wp.Kernel(func, key="create_soft_contacts_without_replay")


@dataclass
class Run:
    loss: float
    trajectory: list[np.ndarray]  # particle_q and particle_qd of every state
    contacts: list[np.ndarray]  # every step's soft contact arrays, counts first
    grad_q: np.ndarray | None = None
    grad_qd: np.ndarray | None = None
    contacts_after_backward: list[np.ndarray] | None = None  # as ``contacts``, read again after tape.backward()


class Scene:
    def __init__(self):
        builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
        shape = newton.ModelBuilder.ShapeConfig(ke=2.0e3, kd=10.0, kf=50.0, mu=0.5)
        builder.add_ground_plane(cfg=shape)
        sphere_at = wp.transform(wp.vec3(1.5, 0.0, 0.0), wp.quat_identity())
        builder.add_shape_sphere(body=-1, xform=sphere_at, radius=0.3, cfg=shape)
        for position, velocity in zip(START_POSITIONS, START_VELOCITIES, strict=True):
            builder.add_particle(wp.vec3(*position), wp.vec3(*velocity), 1.0, radius=0.05)
        self.model = builder.finalize(device="cpu", requires_grad=True)
        model = self.model
        model.soft_contact_ke, model.soft_contact_kd, model.soft_contact_kf, model.soft_contact_mu = (
            2.0e3,
            10.0,
            50.0,
            0.5,
        )
        model.particle_grid = None  # no particle-particle contacts, as SolverSemiImplicit advises for gradients
        self.pipeline = newton.CollisionPipeline(
            model, broad_phase="explicit", soft_contact_gap=0.5, requires_grad=True
        )
        self.solver = newton.solvers.SolverSemiImplicit(model)

    def run(self, positions: np.ndarray, velocities: np.ndarray, differentiate: bool) -> Run:
        states = [self.model.state(requires_grad=differentiate) for _ in range(STEPS + 1)]
        states[0].particle_q.assign(positions.astype(np.float32))
        states[0].particle_qd.assign(velocities.astype(np.float32))
        control = self.model.control()
        loss = wp.zeros(1, dtype=float, requires_grad=differentiate)
        weights = [wp.array(POSITION_WEIGHTS, dtype=wp.vec3), wp.array(VELOCITY_WEIGHTS, dtype=wp.vec3)]
        tape = wp.Tape()
        every_contacts = []
        with tape if differentiate else contextlib.nullcontext():
            for before, after in itertools.pairwise(states):
                before.clear_forces()
                contacts = self.pipeline.contacts()  # one per step: the tape keeps each step's
                self.pipeline.collide(before, contacts)
                self.solver.step(before, after, control, contacts, DT)
                every_contacts.append(contacts)
            wp.launch(
                weighted_sum,
                len(START_POSITIONS),
                inputs=[states[-1].particle_q, states[-1].particle_qd, *weights],
                outputs=[loss],
            )
        run = Run(
            float(loss.numpy()[0]),
            [array.numpy().copy() for state in states for array in (state.particle_q, state.particle_qd)],
            [_soft_contact_arrays(contacts) for contacts in every_contacts],
        )
        if differentiate:
            tape.backward(loss=loss)
            run.grad_q = states[0].particle_q.grad.numpy().astype(np.float64)
            run.grad_qd = states[0].particle_qd.grad.numpy().astype(np.float64)
            run.contacts_after_backward = [_soft_contact_arrays(contacts) for contacts in every_contacts]
        return run


def _soft_contact_arrays(contacts) -> np.ndarray:
    count = int(contacts.soft_contact_count.numpy()[0])
    parts = [contacts.soft_contact_count.numpy().astype(np.float64)]
    for array in (
        contacts.soft_contact_particle,
        contacts.soft_contact_shape,
        contacts.soft_contact_body_pos,
        contacts.soft_contact_body_vel,
        contacts.soft_contact_normal,
    ):
        parts.append(array.numpy()[:count].astype(np.float64).ravel())
    return np.concatenate(parts)


@pytest.fixture(scope="module")
def scene():
    return Scene()


@pytest.fixture(scope="module")
def without_newtons_replay():
    return without_replay(geometry_kernels.create_soft_contacts)


@pytest.fixture(scope="module")
def newtons_own(scene):
    return scene.run(START_POSITIONS, START_VELOCITIES, differentiate=True)


@pytest.fixture(scope="module")
def finite_differences(scene):
    """Central differences of Newton's own forward (no tape), for every start position and velocity component."""
    grads = []
    for which in (0, 1):
        grad = np.zeros_like(START_POSITIONS)
        for index in np.ndindex(grad.shape):
            losses = []
            for sign in (1.0, -1.0):
                start = [START_POSITIONS.copy(), START_VELOCITIES.copy()]
                start[which][index] += sign * FD_STEP
                losses.append(scene.run(*start, differentiate=False).loss)
            grad[index] = (losses[0] - losses[1]) / (2.0 * FD_STEP)
        grads.append(grad)
    return grads


def assert_close_to_finite_differences(run: Run, finite_differences) -> None:
    for grad, fd in zip((run.grad_q, run.grad_qd), finite_differences, strict=True):
        assert np.abs(grad - fd).max() <= FD_RTOL * np.abs(fd).max(), f"tape {grad.ravel()}\nFD   {fd.ravel()}"


def test_the_scene_makes_contacts_with_the_sphere_and_the_plane(newtons_own):
    counts = [int(arrays[0]) for arrays in newtons_own.contacts]
    assert len(counts) == STEPS and all(count == 5 for count in counts), counts  # 4 particle-plane, 1 particle-sphere


def test_newtons_hand_written_replay_matches_finite_differences(newtons_own, finite_differences):
    assert_close_to_finite_differences(newtons_own, finite_differences)


def test_without_the_replay_gradients_are_wrong(
    scene, newtons_own, finite_differences, without_newtons_replay, monkeypatch
):
    """The control: with the replay removed and no rewrite, Warp's backward takes new slots (the counter runs
    again) and the gradients through the sphere contact are off."""
    monkeypatch.setattr(collide, "create_soft_contacts", without_newtons_replay)
    plain = scene.run(START_POSITIONS, START_VELOCITIES, differentiate=True)
    assert plain.loss == newtons_own.loss
    assert any(int(a[0]) != int(b[0]) for a, b in zip(plain.contacts, plain.contacts_after_backward, strict=True))
    with pytest.raises(AssertionError):
        assert_close_to_finite_differences(plain, finite_differences)


@pytest.mark.parametrize("substitution", ["module attribute", "rewrite_launches"])
def test_the_rewritten_kernel_is_newtons_forward_with_its_gradients(
    scene, newtons_own, finite_differences, without_newtons_replay, monkeypatch, substitution
):
    plain = without_newtons_replay
    rewritten = wp_rewrite(plain)
    assert rewritten.pair is not None
    if substitution == "module attribute":
        monkeypatch.setattr(collide, "create_soft_contacts", rewritten)
        run = scene.run(START_POSITIONS, START_VELOCITIES, differentiate=True)
    else:
        monkeypatch.setattr(collide, "create_soft_contacts", plain)
        rewrite_launches()
        try:
            run = scene.run(START_POSITIONS, START_VELOCITIES, differentiate=True)
        finally:
            rewrite_launches(False)
    assert run.loss == newtons_own.loss
    for ours, theirs in zip(run.trajectory + run.contacts, newtons_own.trajectory + newtons_own.contacts, strict=True):
        np.testing.assert_array_equal(ours, theirs)
    for ours, theirs in zip(run.contacts_after_backward, run.contacts, strict=True):
        np.testing.assert_array_equal(ours, theirs)  # backward ran no atomic
    np.testing.assert_allclose(run.grad_q, newtons_own.grad_q, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run.grad_qd, newtons_own.grad_qd, rtol=1e-5, atol=1e-6)
    assert_close_to_finite_differences(run, finite_differences)
