"""What Warp's builtins write, and which adjoints read their result, by name, for the code that reads loops without
importing Warp (``--check``).

``passes.builtins`` reads these facts off the installed Warp's registry; ``--check`` must not import Warp, so the
tables it needs are named here, and tests/passes/test_builtin_names.py keeps them equal to what the registry says.
"""

from __future__ import annotations

import ast

from warp_rewrite.passes.atomics import WarpNames

# Warp's builtins that write the arrays they are handed, atomics aside (``passes.builtins``: those of the class
# "writes arrays").
ARRAY_WRITERS = frozenset(
    {
        *("address", "array_store", "view"),
        *("dense_chol", "dense_chol_batched", "dense_gemm", "dense_gemm_batched"),
        *("dense_solve", "dense_solve_batched", "dense_subs"),
        *("tile_atomic_add", "tile_atomic_add_indexed", "tile_store", "tile_store_indexed"),
    }
)
# Warp's builtins whose adjoint reads the value they returned, in one overload or more (``passes.builtins``: the class
# "adjoint reads its result"), which a loop Warp does not unroll may overwrite first (``loop_hazards``)
RESULT_READERS = frozenset(
    {
        *("cbrt", "cw_div", "div", "div_approx", "eig3", "erfcinv", "erfinv", "exp", "inverse", "inverse_approx"),
        *("length", "normalize", "pow", "qr3", "quat_slerp", "quat_to_axis_angle", "sqrt", "svd2", "svd3", "tanh"),
        *("mesh_query_furthest_point_no_sign", "mesh_query_point", "mesh_query_point_no_sign"),
        *("mesh_query_point_sign_normal", "mesh_query_point_sign_parity", "mesh_query_point_sign_winding_number"),
        "mesh_query_ray",
    }
)
# Warp's builtins that write locals they are handed (``passes.builtins.written_locals``): by name, each parameter
# written, with its position.
ARGUMENT_WRITERS: dict[str, tuple[tuple[int, str], ...]] = {
    "add_inplace": ((0, "a"),),
    "assign": ((0, "dest"), (0, "dst")),
    "assign_inplace": ((0, "a"),),
    "bit_and_inplace": ((0, "a"),),
    "bit_or_inplace": ((0, "a"),),
    "bit_xor_inplace": ((0, "a"),),
    "bvh_query_next": ((0, "query"), (1, "index")),
    "bvh_query_next_tiled": ((0, "query"),),
    "eig3": ((1, "Q"), (2, "d")),
    "hash_grid_query_next": ((0, "query"), (1, "index")),
    "iter_next": ((0, "query"), (0, "range")),
    "mesh_query_aabb_next": ((0, "query"), (1, "index")),
    "mesh_query_aabb_next_tiled": ((0, "query"),),
    "mesh_query_furthest_point_no_sign": ((3, "face"), (4, "bary_u"), (5, "bary_v")),
    "mesh_query_next": ((0, "query"), (1, "index")),
    "mesh_query_point": ((3, "inside"), (4, "face"), (5, "bary_u"), (6, "bary_v")),
    "mesh_query_point_no_sign": ((3, "face"), (4, "bary_u"), (5, "bary_v")),
    "mesh_query_point_sign_normal": ((3, "inside"), (4, "face"), (5, "bary_u"), (6, "bary_v")),
    "mesh_query_point_sign_parity": ((3, "inside"), (4, "face"), (5, "bary_u"), (6, "bary_v")),
    "mesh_query_point_sign_winding_number": ((3, "inside"), (4, "face"), (5, "bary_u"), (6, "bary_v")),
    "mesh_query_ray": ((4, "t"), (5, "bary_u"), (6, "bary_v"), (7, "sign"), (8, "normal"), (9, "face")),
    "poisson": ((0, "state"),),
    "qr3": ((1, "Q"), (2, "R")),
    "quat_to_axis_angle": ((1, "axis"), (2, "angle")),
    "randf": ((0, "state"),),
    "randi": ((0, "state"),),
    "randn": ((0, "state"),),
    "randu": ((0, "state"),),
    "sample_cdf": ((0, "state"),),
    "sample_triangle": ((0, "state"),),
    "sample_unit_cube": ((0, "state"),),
    "sample_unit_disk": ((0, "state"),),
    "sample_unit_hemisphere": ((0, "state"),),
    "sample_unit_hemisphere_surface": ((0, "state"),),
    "sample_unit_ring": ((0, "state"),),
    "sample_unit_sphere": ((0, "state"),),
    "sample_unit_sphere_surface": ((0, "state"),),
    "sample_unit_square": ((0, "state"),),
    "sub_inplace": ((0, "a"),),
    "svd2": ((1, "U"), (2, "sigma"), (3, "V")),
    "svd3": ((1, "U"), (2, "sigma"), (3, "V")),
    "tile_add_inplace": ((0, "a"),),
    "tile_assign": ((0, "dst"),),
    "tile_axpy": ((2, "dest"),),
    "tile_bit_and_inplace": ((0, "a"),),
    "tile_bit_or_inplace": ((0, "a"),),
    "tile_bit_xor_inplace": ((0, "a"),),
    "tile_bvh_query_next": ((0, "query"),),
    "tile_cholesky_inplace": ((0, "A"),),
    "tile_cholesky_solve_inplace": ((1, "y"),),
    "tile_fft": ((0, "inout"),),
    "tile_ifft": ((0, "inout"),),
    "tile_lower_solve_inplace": ((1, "y"),),
    "tile_matmul": ((2, "out"),),
    "tile_mesh_query_aabb_next": ((0, "query"),),
    "tile_scatter_add": ((0, "a"),),
    "tile_scatter_masked": ((0, "a"),),
    "tile_sort": ((0, "keys"), (1, "values")),
    "tile_stack_clear": ((0, "s"),),
    "tile_stack_pop": ((0, "s"),),
    "tile_stack_push": ((0, "s"),),
    "tile_sub_inplace": ((0, "a"),),
    "tile_upper_solve_inplace": ((1, "z"),),
    "transform_add_inplace": ((0, "a"),),
    "transform_set_rotation": ((0, "xform"),),
    "transform_set_translation": ((0, "xform"),),
    "transform_sub_inplace": ((0, "a"),),
    "volume_sample_grad": ((3, "grad"),),
    "volume_sample_grad_f": ((3, "grad"),),
    "volume_sample_grad_index": ((5, "grad"),),
}


def _spelled_builtin(call: ast.Call, names: WarpNames) -> str | None:
    """The name of the builtin a call spells through Warp (``wp.X(...)``, or ``X(...)`` imported from Warp)."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names.modules:
        return func.attr
    return names.member(func.id) if isinstance(func, ast.Name) else None


def reads_its_result(value: ast.expr, names: WarpNames) -> bool:
    """Is ``value`` a call of a builtin whose adjoint reads the value it returns (``RESULT_READERS``), or an operator
    Warp calls one for (``/``, ``**``)?"""
    if isinstance(value, ast.BinOp):
        return isinstance(value.op, ast.Div | ast.Pow)
    return isinstance(value, ast.Call) and _spelled_builtin(value, names) in RESULT_READERS


def written_by_name(call: ast.Call, names: WarpNames) -> list[ast.Name]:
    """The locals a call of a builtin spelled through Warp writes (``passes.builtins.written_arguments``, read off
    ``ARGUMENT_WRITERS``): the arguments at the parameters it writes, where they are a local's name."""
    name = _spelled_builtin(call, names)
    keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
    found: dict[str, ast.Name] = {}
    for position, parameter in ARGUMENT_WRITERS.get(name or "", ()):
        argument = call.args[position] if position < len(call.args) else keywords.get(parameter)
        if isinstance(argument, ast.Name):
            found.setdefault(argument.id, argument)
    return list(found.values())
