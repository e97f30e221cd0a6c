"""The spatial structures the fuzzer's query loops walk (``tests/fuzz/loops.py``): a hash grid over points, a BVH
over boxes and a mesh of triangles, built by the runner for each batch (``runner.make_arguments``) and handed to its
kernels by id, as contact generation hands them.

Their geometry is fixed (a function of nothing), so that a kernel checks the same way in any batch: what varies is
where each kernel's threads query. Nothing a kernel differentiates moves them: the query finds the same elements at
every step of the finite differences, and the gradient flows through float64 values the kernel reads at the indices
the query visited.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import warp as wp

from tests.fuzz.generator import ArraySpec

GRID_POINTS = 12  # points in the hash grid: a query visits each at most once
BOXES = 10  # boxes in the BVH
MESH_SIDE = 3  # vertices per side of the mesh's square grid of vertices: (MESH_SIDE - 1) ** 2 * 2 faces
FACES = (MESH_SIDE - 1) ** 2 * 2
GRID_CELL = 0.3  # the hash grid's cell size
KINDS = ("grid", "bvh", "mesh")  # the kernel arguments' names, each a wp.uint64 id


def _points() -> np.ndarray:
    rng = random.Random("fuzz: hash grid")
    return np.array([[rng.uniform(0.0, 1.0) for _ in range(3)] for _ in range(GRID_POINTS)], dtype=np.float32)


def _boxes() -> tuple[np.ndarray, np.ndarray]:
    rng = random.Random("fuzz: bvh")
    centers = np.array([[rng.uniform(0.0, 1.0) for _ in range(3)] for _ in range(BOXES)])
    half = np.array([[rng.uniform(0.05, 0.25) for _ in range(3)] for _ in range(BOXES)])
    return (centers - half).astype(np.float32), (centers + half).astype(np.float32)


def _mesh() -> tuple[np.ndarray, np.ndarray]:
    """A square grid of vertices over [0, 1]^2 at heights 0 to 0.2, two triangles per square."""
    step = 1.0 / (MESH_SIDE - 1)
    vertices = [[i * step, j * step, 0.1 * ((i + 2 * j) % 3)] for j in range(MESH_SIDE) for i in range(MESH_SIDE)]
    corner = [(j * MESH_SIDE + i) for j in range(MESH_SIDE - 1) for i in range(MESH_SIDE - 1)]
    triangles = [[c, c + 1, c + MESH_SIDE + 1] for c in corner] + [
        [c, c + MESH_SIDE + 1, c + MESH_SIDE] for c in corner
    ]
    return np.array(vertices, dtype=np.float32), np.array(triangles, dtype=np.int32).reshape(-1)


class StructureArgument(ArraySpec):
    """A kernel argument holding the id (a ``wp.uint64``) of the batch's structure its name names: "grid", "bvh" or
    "mesh" (``KINDS``)."""

    def annotation(self) -> str:
        return "wp.uint64"


@dataclass
class Structures:
    """One batch's structures, and the arrays they were built from (kept alive with them)."""

    grid: wp.HashGrid
    bvh: wp.Bvh
    mesh: wp.Mesh
    arrays: list[wp.array]

    def id(self, kind: str) -> int:
        return getattr(self, kind).id


def build() -> Structures:
    points = wp.array(_points(), dtype=wp.vec3, device="cpu")
    grid = wp.HashGrid(4, 4, 4, device="cpu")
    grid.build(points, GRID_CELL)
    lowers, uppers = (wp.array(a, dtype=wp.vec3, device="cpu") for a in _boxes())
    vertices, triangles = _mesh()
    mesh_points = wp.array(vertices, dtype=wp.vec3, device="cpu")
    mesh = wp.Mesh(points=mesh_points, indices=wp.array(triangles, dtype=wp.int32, device="cpu"))
    return Structures(grid, wp.Bvh(lowers, uppers), mesh, [points, lowers, uppers, mesh_points])


_built: dict[str, Structures] = {}


def structure_id(kind: str, module: ModuleType) -> Any:
    """The id of the batch's structure of ``kind`` ("grid", "bvh" or "mesh"): built at the batch's first launch. A
    ``wp.uint64``: a generic kernel (an argument of any dtype) takes a plain int for an int32."""
    if module.__name__ not in _built:
        _built[module.__name__] = build()
    return wp.uint64(_built[module.__name__].id(kind))
