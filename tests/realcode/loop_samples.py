"""A sample of the loops ``--check`` reports as WR008 (or leaves out) in real kernels with a backward pass, each with
inputs to launch it on: what ``test_loop_sample.py`` checks against finite differences of the original forward.

Every kernel is the real one, imported from Newton, ``warp/examples`` or ``warp/tests``; the inputs are small, and
away from the thresholds of the kernels' branches (a running minimum's ties, a neighbour at the edge of a query's
radius), so that finite differences see one smooth piece of the forward.
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp

from tests.support.harness import FLOAT32, Tolerance


class Kind(enum.Enum):
    """Which kind of loop hazard the sample stands for (docs/realcode.md counts them)."""

    CARRIED_FLOAT = "a float carried out of the loop"
    CARRIED_INT = "an int (an index, a flag) carried out of the loop"
    WHILE = "a while loop"
    JUMPS = "a loop that breaks or continues"
    HELPER = "a loop in a helper the kernel calls"


@dataclass(frozen=True)
class Sample:
    """One real kernel and a launch of it.

    ``reported``: whether ``--check`` reports it (WR008); False where the hazard's precision leaves it out
    (``passes.loop_hazards``: no gradient depends on the loop, a sum used only linearly, a hand-written gradient).
    ``plain_warp_right``: whether plain Warp's tape gives finite differences' gradient (what the sample showed:
    a reported kernel where it does is no real hazard there). ``left``: part of the ``RewriteWarning`` that
    leaves the kernel as plain Warp, where the rewrite cannot replay its loop (when rewritten, or at a launch).
    """

    where: str  # "module:kernel"
    tree: str  # "newton", "warp/examples" or "warp/tests"
    kind: Kind
    dim: int | tuple[int, ...]
    make_args: Callable[[], list[Any]] = field(repr=False)
    loss: tuple[int, ...]
    wrt: tuple[int, ...]
    reported: bool
    plain_warp_right: bool
    left: str = ""
    note: str = ""  # what the sample showed, for the table of docs/realcode.md
    tolerance: Tolerance = FLOAT32
    keep: list[Any] = field(default_factory=list, repr=False)  # what the arguments need alive (a hash grid)

    @property
    def name(self) -> str:
        return self.where.split(":")[1]

    @property
    def kernel(self) -> wp.Kernel:
        module, name = self.where.split(":")
        return getattr(importlib.import_module(module), name)

    @property
    def file(self) -> str:
        """The kernel's file, relative to site-packages (as ``--check`` findings name it)."""
        return self.where.split(":")[0].replace(".", "/") + ".py"


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def f32(values: Any, grad: bool = True, dtype: Any = wp.float32) -> wp.array:
    return wp.array(np.asarray(values, dtype=np.float32), dtype=dtype, requires_grad=grad, device="cpu")


def ints(values: Any) -> wp.array:
    return wp.array(np.asarray(values, dtype=np.int32), dtype=wp.int32, device="cpu")


def zeros(shape: Any, dtype: Any = wp.float32) -> wp.array:
    return wp.zeros(shape, dtype=dtype, requires_grad=True, device="cpu")


def _uniform(seed: int, shape: tuple[int, ...], low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return _rng(seed).uniform(low, high, size=shape)


def _transforms(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """Rigid transforms (p, q) with unit quaternions, as Warp lays them out (px, py, pz, qx, qy, qz, qw)."""
    rng = _rng(seed)
    p = rng.uniform(-0.5, 0.5, size=(*shape, 3))
    q = rng.normal(size=(*shape, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return np.concatenate([p, q], axis=-1)


# --- Newton ---------------------------------------------------------------------------------------------------


def _qd_from_singular_basis() -> list[Any]:
    return [
        f32(_uniform(1, (2, 3, 3))),  # v
        f32(_uniform(2, (2, 3))),  # qd_in_singular_basis
        f32(_uniform(3, (5,), 0.5, 1.5)),  # bandwidth
        ints([0, 0, 0, 1, 1]),  # robot_of_dof
        ints([0, 1, 2, 0, 1]),  # slot_of_dof
        ints([3, 2]),  # dof_count
        zeros(5),  # joint_qd_target
    ]


def _dampratio() -> list[Any]:
    from newton._src.solvers.mujoco.kernels import vec10

    gains = np.zeros((3, 2, 10))
    gains[..., 0] = _uniform(4, (3, 2), 2.0, 4.0)  # kp
    return [
        1,  # actuator
        f32(_uniform(5, (3, 2), 0.5, 1.0)),  # dampratio
        f32(gains, dtype=vec10),  # actuator_gainprm
        f32(_uniform(6, (3, 4), 0.2, 1.0)),  # moment
        f32(_uniform(7, (3, 4), 0.2, 1.0)),  # inv_mass_moment
        wp.zeros((3, 2), dtype=vec10, device="cpu"),  # actuator_biasprm: read and written, so no grad
    ]


def _fk_accum() -> list[Any]:
    return [
        ints([-1, 0, 1]),  # joint_parent (the root's parent is the world)
        ints([0, 1, 2]),  # joint_child
        ints([-1, 0, 1]),  # joint_ancestor: a chain
        ints([0, 0, 0]),  # joint_articulation
        f32(_transforms(8, (2, 3)), dtype=wp.transform),  # X_local
        zeros((2, 3), wp.transform),  # body_q
    ]


def _weld_reference() -> list[Any]:
    from newton._src.solvers.mujoco.kernels import vec12

    worlds, joints = 2, 3
    quats = _rng(9).normal(size=(worlds, 1, 4))
    quats /= np.linalg.norm(quats, axis=-1, keepdims=True)
    axes = _rng(10).normal(size=(worlds, joints, 3))
    axes /= np.linalg.norm(axes, axis=-1, keepdims=True)
    return [
        ints([0]),  # weld_eq
        wp.array([0], dtype=int, device="cpu"),  # eq_obj1id
        wp.array(np.ones((worlds, 1), dtype=bool), dtype=wp.bool, device="cpu"),  # eq_active
        wp.array([0], dtype=int, device="cpu"),  # body_jntadr
        wp.array([joints], dtype=int, device="cpu"),  # body_jntnum
        f32(_uniform(11, (worlds, 1, 3)), dtype=wp.vec3),  # body_pos
        f32(quats, dtype=wp.quat),  # body_quat (wxyz, as MuJoCo stores it)
        wp.array([3, 2, 1], dtype=int, device="cpu"),  # jnt_type: hinge, slide, ball
        wp.array([0, 1, 2], dtype=int, device="cpu"),  # jnt_qposadr
        f32(_uniform(12, (worlds, joints, 3), -0.3, 0.3), dtype=wp.vec3),  # jnt_pos
        f32(axes, dtype=wp.vec3),  # jnt_axis
        f32(_uniform(13, (worlds, 6), -0.2, 0.2)),  # qpos0
        f32(_uniform(14, (worlds, 6), -0.8, 0.8)),  # qpos
        zeros((worlds, 1), vec12),  # eq_data
    ]


def _particles(seed: int, count: int) -> np.ndarray:
    """Particles on a jittered grid, 0.3 apart: with a query radius of 0.4 each has neighbours, none near it."""
    side = int(np.ceil(count ** (1 / 3)))
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)[:count] * 0.3
    return grid + _rng(seed).uniform(-0.02, 0.02, size=grid.shape)


def _hash_grid(sample_keep: list[Any], points: wp.array, radius: float) -> wp.uint64:
    grid = wp.HashGrid(4, 4, 4, device="cpu")
    grid.build(points, radius)
    sample_keep.append(grid)
    return grid.id


def _particle_contact(keep: list[Any]) -> Callable[[], list[Any]]:
    def make() -> list[Any]:
        positions = f32(_particles(15, 8), dtype=wp.vec3)
        return [
            _hash_grid(keep, positions, 0.4),
            positions,  # particle_x
            f32(_uniform(16, (8, 3), -0.5, 0.5), dtype=wp.vec3),  # particle_v
            f32(np.full(8, 0.17)),  # particle_radius: 0.34 apart at contact, 0.3 apart here
            ints(np.ones(8)),  # particle_flags: ACTIVE
            1.0e3,  # k_contact
            10.0,  # k_damp
            2.0,  # k_friction
            0.5,  # k_mu
            0.0,  # k_cohesion
            0.17,  # max_radius
            zeros(8, wp.vec3),  # particle_f
        ]

    return make


def _particle_particle_contacts(keep: list[Any]) -> Callable[[], list[Any]]:
    def make() -> list[Any]:
        positions = f32(_particles(17, 8), dtype=wp.vec3)
        return [
            _hash_grid(keep, positions, 0.4),
            positions,  # particle_x
            f32(_uniform(18, (8, 3), -0.5, 0.5), dtype=wp.vec3),  # particle_v
            f32(_uniform(19, (8,), 0.5, 1.5)),  # particle_invmass
            f32(np.full(8, 0.17)),  # particle_radius
            ints(np.ones(8)),  # particle_flags: ACTIVE
            0.5,  # k_mu
            0.0,  # k_cohesion
            0.17,  # max_radius
            0.01,  # dt
            1.0,  # relaxation
            zeros(8, wp.vec3),  # deltas
        ]

    return make


def _compute_costs() -> list[Any]:
    return [f32(_uniform(20, (3, 5))), 5, zeros(3)]


def _block_matvec() -> list[Any]:
    return [
        f32(_uniform(21, (2, 3, 3))),  # block_matrix
        f32(_uniform(22, (5,))),  # vec
        ints([0, 0, 0, 1, 1]),  # robot_of_dof
        ints([0, 1, 2, 0, 1]),  # slot_of_dof
        ints([0, 3]),  # dof_offsets
        ints([3, 2]),  # controlled_dofs_per_robot
        zeros(5),  # out
    ]


def _best_seed() -> list[Any]:
    costs = np.array([[0.9, 0.2, 0.7], [0.1, 0.5, 0.8]])  # distinct: the argmin stays under a step of 1e-3
    return [f32(costs.reshape(-1)), 3, wp.zeros(2, dtype=wp.int32, device="cpu")]


def _rejection_samples() -> list[Any]:
    """Newton's differentiable drone example draws controls by rejection: [-1, 1] rejects about a third of them."""
    return [
        f32(_uniform(32, (1, 4, 2), -0.2, 0.2)),  # mean_trajectory
        1.0,  # noise_scale
        4,  # num_control_points
        2,  # control_dim
        f32([[-1.0, 1.0], [-1.0, 1.0]], grad=False),  # control_limits
        wp.array([7], dtype=int, device="cpu"),  # seed
        zeros((3, 4, 2)),  # rollout_trajectories
    ]


def _vertex_triangle_contacts() -> list[Any]:
    """Two vertices within the thickness of a triangle, inside it by a margin."""
    positions = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.2, 0.25, 0.03], [0.3, 0.1, -0.04]]
    phase = np.zeros((2, 5), dtype=np.int32)
    phase[:, 3:] = [[1, 1], [0, 0]]  # vertices 3 and 4: one candidate face, face 0
    return [
        0.1,  # thickness
        1.0,  # stiff_factor
        f32(positions, dtype=wp.vec3),  # pos
        wp.array([[0, 1, 2]], dtype=int, device="cpu"),  # tri_indices
        wp.array(phase, dtype=int, device="cpu"),  # broad_phase_vf
        f32(_uniform(33, (5,), 1.0, 2.0)),  # static_diags
        zeros(5, wp.vec3),  # forces
        zeros(5, wp.mat33),  # hessian_diags
    ]


def _normalized_eigenvalues() -> list[Any]:
    from newton._src.solvers.kamino._src.core.types import mat66f, vec6f

    basis, _ = np.linalg.qr(_rng(34).normal(size=(6, 6)))
    matrix = basis @ np.diag([3.1, 2.2, 1.4, 0.9, 0.5, 0.2]) @ basis.T  # distinct eigenvalues, one largest entry
    return [f32(matrix[None], dtype=mat66f), zeros(1, vec6f)]


# --- warp/examples ----------------------------------------------------------------------------------------------


def _sph_density(keep: list[Any]) -> Callable[[], list[Any]]:
    def make() -> list[Any]:
        positions = f32(_particles(23, 8), dtype=wp.vec3)
        return [_hash_grid(keep, positions, 0.4), positions, zeros(8), 2.5, 0.4]

    return make


def _sph_acceleration(keep: list[Any]) -> Callable[[], list[Any]]:
    def make() -> list[Any]:
        positions = f32(_particles(24, 8), dtype=wp.vec3)
        return [
            _hash_grid(keep, positions, 0.4),
            positions,  # particle_x
            f32(_uniform(25, (8, 3), -0.5, 0.5), dtype=wp.vec3),  # particle_v
            f32(_uniform(26, (8,), 0.8, 1.2)),  # particle_rho
            zeros(8, wp.vec3),  # particle_a
            1.5,  # isotropic_exp
            1.0,  # base_density
            -9.8,  # gravity
            2.0,  # pressure_normalization
            0.5,  # viscous_normalization
            0.4,  # smoothing_length
        ]

    return make


# --- warp/tests -------------------------------------------------------------------------------------------------


def _continue_nested() -> list[Any]:
    return [f32([2.0, 1.3]), 3, zeros(2), wp.zeros(2, dtype=int, device="cpu")]


def _curlnoise() -> list[Any]:
    positions = np.array([[0.17, 0.23], [1.33, 2.77], [-0.43, 0.61]])
    return [42, f32(positions, dtype=wp.vec2), 3, 2.0, 0.5, wp.vec2(1.0, -0.5), zeros(1)]


def _closest_neighbour(keep: list[Any]) -> Callable[[], list[Any]]:
    def make() -> list[Any]:
        points = f32(_particles(27, 8), dtype=wp.vec3)
        queries = f32(_particles(28, 4) + 0.05, dtype=wp.vec3)
        return [_hash_grid(keep, points, 0.4), queries, points, 0.4, wp.zeros(4, dtype=int, device="cpu")]

    return make


def _mesh_brute() -> list[Any]:
    points = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float64) + 0.01 * _uniform(29, (4, 3))
    triangles = [0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3]
    queries = np.array([[0.2, 0.3, 0.9], [0.8, 0.6, 0.1], [-0.4, 0.2, 0.3]])  # each nearest one face, by a margin
    return [
        f32(points, dtype=wp.vec3),  # tri_points
        wp.array(triangles, dtype=int, device="cpu"),  # tri_indices
        4,  # tri_count
        f32(queries, dtype=wp.vec3),  # query_points
        wp.zeros(3, dtype=int, device="cpu"),  # query_faces
        zeros(3),  # query_signs
        zeros(3),  # query_dist
    ]


def _furthest_brute() -> list[Any]:
    points = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float64) + 0.01 * _uniform(30, (4, 3))
    queries = [[0.3, 0.2, 0.1], [0.1, 0.7, 0.2]]  # each furthest from one point, by a margin
    return [f32(points, dtype=wp.vec3), f32(queries, dtype=wp.vec3), zeros(2)]


def _for_loop_grad() -> list[Any]:
    return [6, f32(_uniform(31, (6,))), zeros(1)]


def samples() -> list[Sample]:
    """The sample, built afresh (each holds the hash grids its launches make)."""
    keep: list[Any] = []
    newton, examples, tests = "newton", "warp/examples", "warp/tests"
    differential_ik = "newton._src.controllers.impl.differential_ik._common"
    mujoco = "newton._src.solvers.mujoco.kernels"
    return [
        Sample(
            f"{differential_ik}:_qd_from_singular_basis_kernel",
            newton,
            Kind.CARRIED_FLOAT,
            5,
            _qd_from_singular_basis,
            (6,),
            (0, 1, 2),
            reported=True,
            plain_warp_right=False,
            note="a sum scaled by `bandwidth[dof]` after the loop: plain Warp gives `bandwidth` no gradient",
        ),
        Sample(
            f"{mujoco}:resolve_actuator_dampratio_kernel",
            newton,
            Kind.CARRIED_FLOAT,
            3,
            _dampratio,
            (5,),
            (2, 3, 4),
            reported=True,
            plain_warp_right=False,
            left="reads 'actuator_biasprm', which the launch also writes",
            note=(
                "a sum under a square root; left as plain Warp at a launch with grad: it reads the element of "
                "`actuator_biasprm` it then writes (a read of what the launch writes)"
            ),
        ),
        Sample(
            f"{mujoco}:update_kinematic_weld_reference_kernel",
            newton,
            Kind.CARRIED_FLOAT,
            (2, 1),
            _weld_reference,
            (13,),
            (5, 9, 12),
            reported=True,
            plain_warp_right=False,
            left="reads 'eq_data', which the launch also writes",
            note=(
                "a pose composed joint by joint; left as plain Warp at a launch with grad: it reads the element of "
                "`eq_data` it then writes"
            ),
        ),
        Sample(
            "newton._src.sim.ik.ik_common:fk_accum",
            newton,
            Kind.WHILE,
            (2, 3),
            _fk_accum,
            (5,),
            (4,),
            reported=True,
            plain_warp_right=False,
            left="reads 'body_q', which the launch also writes",
            note=(
                "a transform composed up a chain; left as plain Warp at a launch with grad: it reads `body_q` of a "
                "parent body, which other threads of the launch write"
            ),
        ),
        Sample(
            "newton._src.solvers.semi_implicit.kernels_contact:eval_particle_contact",
            newton,
            Kind.WHILE,
            8,
            _particle_contact(keep),
            (11,),
            (1, 2),
            reported=True,
            plain_warp_right=True,
            keep=keep,
            note=(
                "forces summed over a hash-grid query: Warp's backward runs the query again from its start, each trip"
                " before its adjoint, which is right for a sum"
            ),
        ),
        Sample(
            "newton._src.solvers.xpbd.kernels:solve_particle_particle_contacts",
            newton,
            Kind.WHILE,
            8,
            _particle_particle_contacts(keep),
            (11,),
            (1, 2, 3),
            reported=True,
            plain_warp_right=False,
            keep=keep,
            note="a sum scaled by the particle's inverse mass after the loop",
        ),
        Sample(
            "newton.examples.diffsim.example_diffsim_drone:sample_gaussian",
            newton,
            Kind.JUMPS,
            (3, 4, 2),
            _rejection_samples,
            (6,),
            (0,),
            reported=True,
            plain_warp_right=False,
            note=(
                "Newton's differentiable drone example draws by rejection: where a draw is rejected, plain Warp loses"
                " the gradient of the one kept"
            ),
        ),
        Sample(
            "newton._src.solvers.style3d.collision.kernels:handle_vertex_triangle_contacts_kernel",
            newton,
            Kind.CARRIED_INT,
            5,
            _vertex_triangle_contacts,
            (6, 7),
            (2, 5),
            reported=True,
            plain_warp_right=False,
            note=(
                "a contact flag set in the loop decides whether the summed force is added: plain Warp's replay sees "
                "the flag unset"
            ),
        ),
        Sample(
            "newton.tests.kamino.test_kamino_lox_kernels:_compute_normalized_eigenvalues",
            newton,
            Kind.HELPER,
            1,
            _normalized_eigenvalues,
            (1,),
            (0,),
            reported=True,
            plain_warp_right=False,
            left="'_dtype_epsilon' has 4 definitions (overloads), and 4 of them fit this call's arguments",
            note=(
                "a running maximum divides the matrix; left as plain Warp when rewritten: `warp.fem`'s eigenvalue "
                "helper calls the overloaded `_dtype_epsilon` with an argument whose type the source does not tell"
            ),
        ),
        Sample(
            "newton._src.sim.ik.ik_common:compute_costs",
            newton,
            Kind.CARRIED_FLOAT,
            3,
            _compute_costs,
            (2,),
            (0,),
            reported=False,
            plain_warp_right=True,
            note="a sum of squares, stored",
        ),
        Sample(
            "newton._src.controllers.impl._common:_block_matrix_vector_multiply_kernel",
            newton,
            Kind.CARRIED_FLOAT,
            5,
            _block_matvec,
            (6,),
            (0, 1),
            reported=False,
            plain_warp_right=True,
            note="a dot product, stored",
        ),
        Sample(
            "newton._src.sim.ik.ik_solver:_select_best_seed_indices",
            newton,
            Kind.CARRIED_INT,
            2,
            _best_seed,
            (),
            (0,),
            reported=False,
            plain_warp_right=True,
            note="an argmin into an int array: no gradient",
        ),
        Sample(
            "warp.examples.core.example_sph:compute_density",
            examples,
            Kind.CARRIED_FLOAT,
            8,
            _sph_density(keep),
            (2,),
            (1,),
            reported=False,
            plain_warp_right=True,
            keep=keep,
            note="a density summed over a hash-grid query, scaled by a value parameter",
        ),
        Sample(
            "warp.examples.core.example_sph:get_acceleration",
            examples,
            Kind.CARRIED_FLOAT,
            8,
            _sph_acceleration(keep),
            (4,),
            (1, 2, 3),
            reported=True,
            plain_warp_right=False,
            keep=keep,
            note="summed forces divided by the density read after the loop",
        ),
        Sample(
            "warp.tests.test_codegen_continue:continue_nested",
            tests,
            Kind.JUMPS,
            2,
            _continue_nested,
            (2,),
            (0,),
            reported=False,
            plain_warp_right=True,
            note="sums in nested loops with a `continue` before each trip's work",
        ),
        Sample(
            "warp.tests.test_noise:curlnoise_2d_reimpl_loss",
            tests,
            Kind.CARRIED_FLOAT,
            3,
            _curlnoise,
            (6,),
            (1,),
            reported=True,
            plain_warp_right=True,
            note="octaves scaled by carried products: plain Warp matched finite differences on these inputs",
        ),
        Sample(
            "warp.tests.geometry.test_hash_grid:closest_hashgrid_neighbor_kernel_float32",
            tests,
            Kind.HELPER,
            4,
            _closest_neighbour(keep),
            (),
            (1, 2),
            reported=True,
            plain_warp_right=True,
            keep=keep,
            note=(
                "a nearest neighbour's index into an int array, through a helper whose int return is not annotated: "
                "no gradient"
            ),
        ),
        Sample(
            "warp.tests.geometry.test_mesh_query_point:sample_mesh_brute",
            tests,
            Kind.CARRIED_INT,
            3,
            _mesh_brute,
            (5, 6),
            (0, 3),
            reported=True,
            plain_warp_right=False,
            note="the nearest face's index and distance, a running minimum",
        ),
        Sample(
            "warp.tests.geometry.test_mesh_query_point:sample_furthest_points_brute",
            tests,
            Kind.CARRIED_FLOAT,
            2,
            _furthest_brute,
            (2,),
            (0, 1),
            reported=True,
            plain_warp_right=False,
            note="a running maximum: plain Warp sends the gradient to the last point",
        ),
        Sample(
            "warp.tests.test_grad:for_loop_grad",
            tests,
            Kind.CARRIED_FLOAT,
            1,
            _for_loop_grad,
            (2,),
            (1,),
            reported=False,
            plain_warp_right=True,
            note="Warp's own test of a sum over a dynamic range",
        ),
    ]


def render(sampled: list[Sample]) -> str:
    """The table of docs/realcode.md: each sampled kernel, what ``--check`` says, plain Warp and the rewrite."""
    lines = [
        "| tree | kernel | loop | `--check` | plain Warp | rewrite | what the sample showed |",
        "|---|---|---|---|---|---|---|",
    ]
    for sample in sampled:
        check = "WR008" if sample.reported else "left out"
        plain = "right" if sample.plain_warp_right else "**wrong**"
        if not sample.reported:
            rewrite = "unchanged"
        elif sample.left:
            rewrite = "left as plain Warp"
        else:
            rewrite = "right"
        cells = [sample.tree, f"`{sample.name}`", sample.kind.value, check, plain, rewrite, sample.note]
        lines.append("| " + " | ".join(cells) + " |")
    reported = [sample for sample in sampled if sample.reported]
    real = [sample for sample in reported if not sample.plain_warp_right]
    left = [sample for sample in real if sample.left]
    lines += [
        "",
        f"{len(sampled)} kernels sampled: {len(reported)} reported, {len(real)} of them real hazards (plain Warp "
        f"wrong), the rewrite right on {len(real) - len(left)} and leaving {len(left)} as plain Warp; "
        f"{len(reported) - len(real)} reported with plain Warp right; {len(sampled) - len(reported)} left out by "
        "the hazard's precision, plain Warp right on each.",
    ]
    return "\n".join(lines) + "\n"


DOCUMENT = Path(__file__).parents[2] / "docs" / "realcode.md"
BEGIN, END = "<!-- loop_samples.render() -->\n", "<!-- /loop_samples.render() -->\n"


def shown(text: str) -> str:
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)]


if __name__ == "__main__":
    text = DOCUMENT.read_text()
    DOCUMENT.write_text(text.replace(BEGIN + shown(text) + END, BEGIN + render(samples()) + END))
