"""A kernel that consumes an atomic's return and calls a builtin of each class the rewrite accepts
(``warp_rewrite.passes.builtins``): pure values, reads through a mesh's and a hash grid's ids, out-arguments (Warp's
older mesh query, ``wp.quat_to_axis_angle``), a random state a loop around the atomic carries, array reads and
shapes, tiles, builtins without an adjoint, output and device-dependent arithmetic. Through the API and the
command line, against finite differences of the original forward."""

from __future__ import annotations

import numpy as np
import warp as wp

from tests.support import builtin_classes
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import f64, i32

N = builtin_classes.N
X = np.array([0.7, -1.3, 1.9, 0.4])
# The structures the handles name, built once: the kernels read them and never write them.
MESH = wp.Mesh(
    wp.array(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0.5]]), dtype=wp.vec3, device="cpu"),
    wp.array(np.array([0, 1, 2, 1, 3, 2]), dtype=wp.int32, device="cpu"),
)
GRID = wp.HashGrid(2, 2, 2, device="cpu")
POINTS = np.array([[0.9, 0, 0], [0.1, 0, 0], [0.5, 0.5, 0], [0, 0.9, 0.9]])
GRID.build(wp.array(POINTS, dtype=wp.vec3, device="cpu"), 0.5)
TRIPS = 3


def zeros(shape=N):
    return wp.zeros(shape, dtype=wp.float64, requires_grad=True, device="cpu")


def rotations():
    angles = (0.3, 0.6, 0.9, 1.2)
    quats = [[0.0, np.sin(a / 2), np.sin(a / 3), np.cos(a / 2)] for a in angles]
    return wp.array(np.array(quats) / np.linalg.norm(quats, axis=1, keepdims=True), dtype=wp.quatd, device="cpu")


KERNELS = {
    "pure_value": Pattern(lambda: [i32([0]), f64(X, True), zeros()], [2], [1]),
    "handle_reads": Pattern(lambda: [i32([0]), MESH.id, GRID.id, f64(X, True), zeros()], [4], [3]),
    "out_arguments": Pattern(lambda: [i32([0]), MESH.id, rotations(), f64(X, True), zeros()], [4], [3]),
    "random_state_in_a_loop": Pattern(lambda: [i32([0]), i32([TRIPS]), f64(X, True), zeros(TRIPS * N)], [3], [2]),
    "arrays_and_shapes": Pattern(
        lambda: [i32([0]), wp.array([0.0, 1.0, 2.0, 3.0], dtype=float, device="cpu"), f64(X, True), zeros()], [3], [2]
    ),
    "no_adjoint_output_and_devices": Pattern(lambda: [i32([0]), f64(X, True), zeros()], [2], [1]),
    "tiles": Pattern(lambda: [i32([0]), f64(X, True), zeros()], [2], [1]),
}
emitted = emitted_fixture(builtin_classes)
test_through_the_api, test_through_the_command_line = end_to_end_tests(builtin_classes, N, KERNELS)
