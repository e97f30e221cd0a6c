"""Spatial queries as contact generation uses them (issue 34, item 2): hash-grid neighbour lists in both spellings,
a BVH broad phase with box and ray queries, mesh queries by point, ray and box, each with a consumed contact slot (in
the loop's body, or in a writer helper with an early return). Each scene runs three steps on one tape, the structure
rebuilt from the moved positions before each step (in place: the hash grid built again, the BVH rebuilt, the mesh
refit; a mesh queried by point or ray is made anew, see ``mesh_query_inputs``), and its gradients equal finite
differences of the original forward, through the API and through the command line (``tests/support/queries.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import warp as wp

from tests.support import harness, queries
from tests.support.emitted import emitted_fixture
from tests.support.harness import Case, check

STEPS = 3
N = 6
RADIUS = 0.5
# Pairwise distances keep at least 0.02 away from RADIUS, and a step moves each particle by less.
X0 = np.array(
    [[0.0, 0.0, 0.3], [0.31, 0.05, 0.35], [0.12, 0.36, 0.32], [0.93, 0.02, 0.31], [0.61, 0.55, 0.42], [0.2, 0.9, 0.3]]
)


@wp.kernel
def advance(x: wp.array[wp.vec3d], energy: wp.array[wp.float64], moved: wp.array[wp.vec3d]):
    """A step: each particle moves by its energy, so that every later query depends on the earlier gradients."""
    i = wp.tid()
    moved[i] = x[i] + wp.vec3d(0.004, 0.002, 0.0) + wp.vec3d(0.0, 0.0, 0.01) * energy[i]


def vec3(values: np.ndarray) -> wp.array:
    return wp.array(values.astype(np.float32), dtype=wp.vec3, device="cpu")


# A mesh of 2 x 2 squares (8 triangles) below the particles, shifted in x by half a square each step, so that
# the face under a particle changes from step to step.
SQUARE = 0.5


def mesh_points(step: int) -> np.ndarray:
    grid = [[i * SQUARE - 0.25 + step * SQUARE / 2, j * SQUARE - 0.25, 0.0] for j in range(3) for i in range(3)]
    return np.array(grid)


TRIANGLES = np.array(
    [[j * 3 + i, j * 3 + i + 1, (j + 1) * 3 + i + 1] for j in range(2) for i in range(2)]
    + [[j * 3 + i, (j + 1) * 3 + i + 1, (j + 1) * 3 + i] for j in range(2) for i in range(2)]
).reshape(-1)


def face_data(points: np.ndarray) -> tuple[wp.array, wp.array]:
    """Each face's center and unit normal, in float64, from the mesh's points."""
    corners = points[TRIANGLES.reshape(-1, 3)]
    normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    return (
        wp.array(corners.mean(axis=1), dtype=wp.vec3d, device="cpu"),
        wp.array(normals, dtype=wp.vec3d, device="cpu"),
    )


@dataclass
class Scene:
    """A query kernel and how to build its structure and inputs from the current positions before each step."""

    kernel: str
    inputs: Callable[[np.ndarray, int, dict[str, Any]], list[Any]]  # positions, step, structures -> leading inputs


def structure(kept: dict[str, Any], key: str, make: Callable[[], Any], update: Callable[[Any], None]) -> Any:
    """The scene's one structure of this kind: made at the first step, updated in place (rebuilt, refit) at the
    next ones, as a simulator does; the replay of an earlier step then runs against the structure as the last step
    left it."""
    if key not in kept:
        kept[key] = make()
    else:
        update(kept[key])
    return kept[key]


def grid_inputs(x: np.ndarray, step: int, kept: dict[str, Any]) -> list[Any]:
    points = kept.setdefault("points", vec3(x))
    points.assign(x.astype(np.float32))
    grid = structure(kept, "grid", lambda: wp.HashGrid(8, 8, 8, device="cpu"), lambda grid: None)
    grid.build(points, RADIUS)
    return [grid.id, points]


def grid_radius(x: np.ndarray, step: int, kept: dict[str, Any]) -> list[Any]:
    return [RADIUS]


def boxes(kept: dict[str, Any], lowers: np.ndarray, uppers: np.ndarray) -> wp.Bvh:
    def refit(bvh: wp.Bvh) -> None:
        bvh.lowers.assign(lowers.astype(np.float32))
        bvh.uppers.assign(uppers.astype(np.float32))
        bvh.rebuild()

    return structure(kept, "bvh", lambda: wp.Bvh(vec3(lowers), vec3(uppers)), refit)


def bvh_inputs(x: np.ndarray, step: int, kept: dict[str, Any]) -> list[Any]:
    bvh = boxes(kept, x - 0.3, x + 0.3)
    return [bvh.id, bvh.lowers, bvh.uppers]


def ray_inputs(x: np.ndarray, step: int, kept: dict[str, Any]) -> list[Any]:
    bvh = boxes(kept, x - 0.1, x + 0.1)
    starts = kept.setdefault("starts", vec3(x))
    starts.assign((x - np.array([0.5, 0.0, 0.0])).astype(np.float32))
    return [bvh.id, starts]


def mesh(step: int, kept: dict[str, Any]) -> wp.Mesh:
    def make() -> wp.Mesh:
        return wp.Mesh(vec3(mesh_points(step)), wp.array(TRIANGLES, dtype=wp.int32, device="cpu"))

    def refit(made: wp.Mesh) -> None:
        made.points.assign(mesh_points(step).astype(np.float32))
        made.refit()

    return structure(kept, "mesh", make, refit)


def mesh_box_inputs(x: np.ndarray, step: int, kept: dict[str, Any]) -> list[Any]:
    made = mesh(step, kept)
    lowers = kept.setdefault("lowers", vec3(x))
    uppers = kept.setdefault("uppers", vec3(x))
    lowers.assign((x - np.array([0.17, 0.17, 1.0])).astype(np.float32))
    uppers.assign((x + np.array([0.17, 0.17, 0.0])).astype(np.float32))
    return [made.id, lowers, uppers]


def mesh_box_centers(x: np.ndarray, step: int, kept: dict[str, Any]) -> list[Any]:
    centers, _ = face_data(mesh_points(step))
    return [centers]


def mesh_query_inputs(x: np.ndarray, step: int, kept: dict[str, Any]) -> list[Any]:
    """A mesh made anew at each step: a point or ray query outside a loop runs again in the replay, through the
    handle, and so reads the mesh as backward finds it (as Warp's own backward does); a mesh refit in place between
    the steps of one tape would give it the last step's faces (docs/user-guide.md)."""
    made = kept.setdefault(
        f"mesh{step}", wp.Mesh(vec3(mesh_points(step)), wp.array(TRIANGLES, dtype=wp.int32, device="cpu"))
    )
    query_points = kept.setdefault("query_points", vec3(x))
    query_points.assign(x.astype(np.float32))
    return [made.id, query_points]


def mesh_face_data(x: np.ndarray, step: int, kept: dict[str, Any]) -> list[Any]:
    centers, normals = face_data(mesh_points(step))
    return [centers, normals]


# Each scene's inputs around the positions x (kernel signature order): before x, after x, then count/depths/energy.
SCENES: dict[str, tuple[Callable, Callable | None, Callable | None]] = {
    "grid_neighbours": (grid_inputs, grid_radius, None),
    "grid_neighbours_for": (grid_inputs, grid_radius, None),
    "box_pairs": (bvh_inputs, None, None),
    "ray_hits": (ray_inputs, lambda x, step, kept: [wp.vec3(1.0, 0.0, 0.0)], None),
    "mesh_boxes": (mesh_box_inputs, mesh_box_centers, None),
    "mesh_points": (mesh_query_inputs, mesh_face_data, None),
    "mesh_rays": (mesh_query_inputs, mesh_face_data, None),
}


def make_args() -> list[Any]:
    """x_0 .. x_STEPS, then per step: count, depths, energy."""
    positions = [wp.array(X0, dtype=wp.vec3d, requires_grad=True, device="cpu")]
    positions += [wp.zeros(N, dtype=wp.vec3d, requires_grad=True, device="cpu") for _ in range(STEPS)]
    per_step = []
    for _ in range(STEPS):
        per_step += [
            wp.zeros(1, dtype=wp.int32, device="cpu"),
            wp.zeros(queries.CAPACITY, dtype=wp.float64, requires_grad=True, device="cpu"),
            wp.zeros(N, dtype=wp.float64, requires_grad=True, device="cpu"),
        ]
    return positions + per_step


LOSS = [STEPS] + [STEPS + 1 + 3 * s + k for s in range(STEPS) for k in (1, 2)]  # the last positions, depths, energies


def program(name: str, launch_query: Callable[[list[Any]], None] | None = None) -> harness.Program:
    """STEPS steps of the scene: its structure rebuilt from the current positions, the query kernel, ``advance``.
    ``launch_query(inputs)``: how the rewritten runs launch the query kernel (the command line's launch); the
    harness's launcher otherwise."""
    before, after, _ = SCENES[name]
    kernel = getattr(queries, name)

    def run(args: list[Any], launcher: harness.Launcher) -> None:
        kept: dict[str, Any] = {}  # the scene's structures and the arrays they are built from, updated in place
        run.kept = kept  # type: ignore[attr-defined]  (they outlive the launches, and the tape)
        for step in range(STEPS):
            x = args[step]
            positions = x.numpy()
            count, depths, energy = args[STEPS + 1 + 3 * step : STEPS + 4 + 3 * step]
            inputs = [*before(positions, step, kept), x]
            inputs += after(positions, step, kept) if after is not None else []
            inputs += [count, depths, energy]
            if launch_query is None or launcher is harness.launch_original:
                launcher(kernel, N, inputs)
            else:
                launch_query(inputs)
            launcher(advance, N, [x, energy, args[step + 1]])

    return run


@pytest.mark.parametrize("name", sorted(SCENES))
def test_through_the_api(name):
    check(Case(None, N, make_args, LOSS, [0], program=program(name)))


emitted = emitted_fixture(queries)


@pytest.mark.parametrize("name", sorted(SCENES))
def test_through_the_command_line(emitted, name):
    launch = getattr(emitted, f"launch_{name}")
    check(
        Case(
            None, N, make_args, LOSS, [0], program=program(name, lambda inputs: launch(N, inputs=inputs, device="cpu"))
        )
    )
