"""The table of Warp's builtins (passes/builtins.py), against the registry of the installed Warp: every builtin and
every overload has a class, the hand-kept facts agree with what the registry hints, and the parameters the table says
a builtin writes are written. The dataflow's view of those writes: loop-carried locals, single assignments, int
types, gradient sources."""

from __future__ import annotations

import ast
import importlib.util
import textwrap

import numpy as np
import pytest
import warp as wp
from warp._src import types as warp_types

from warp_rewrite.passes import builtins
from warp_rewrite.passes.atomics import PLAIN, WarpNames
from warp_rewrite.passes.builtins import (
    GROUPS,
    TABLE,
    Effect,
    builtin_effect,
    call_effect,
    registry,
    returned_type,
    written_arguments,
)
from warp_rewrite.passes.dataflow import gradient_sources, rebound_locals, single_assignments
from warp_rewrite.passes.int_types import IntLocals
from warp_rewrite.passes.loop_carried import LoopFlow

# What the registry says of an overload that only the hand-kept classes can say what it does with.
_MEMORY = {Effect.READS_ARRAYS, Effect.WRITES_ARRAYS, Effect.SHAPE, Effect.REFUSED}


def _overloads():
    return [(name, overload) for name, found in TABLE.items() for overload in found]


def test_every_builtin_and_overload_of_the_installed_warp_has_a_class():
    """A Warp upgrade that adds a builtin (or an overload to one the table has not) fails here, not silently."""
    installed = registry()
    assert sorted(set(installed) - set(TABLE)) == []
    for name, function in installed.items():
        overloads = getattr(function, "overloads", None) or [function]
        assert len(TABLE[name]) == len(overloads), name
        assert all(overload.effect.effects for overload in TABLE[name]), name
    assert len(_overloads()) >= 3000  # Warp 1.19: 356 builtins, 3,460 overloads


def test_each_builtin_of_the_groups_is_one_this_warp_has_in_one_group():
    listed = [name for group in GROUPS for name in group.builtins()]
    assert len(listed) == len(set(listed))
    assert sorted(set(listed) - set(registry())) == []
    assert all(group.reason and (group.instead or Effect.REFUSED not in group.effects) for group in GROUPS)


def test_the_special_forms_are_warp_s_and_outside_its_registry():
    assert all(callable(getattr(wp, name, None)) and name not in registry() for name in builtins.SPECIAL_FORMS)
    assert builtin_effect("address_of") is builtins.SPECIAL_FORMS["address_of"]


def test_the_hand_kept_classes_agree_with_what_the_registry_hints():
    for name, overload in _overloads():
        effects, types = overload.effect.effects, overload.function.input_types.values()
        if any(warp_types.is_array(t) for t in types):
            assert effects & _MEMORY, f"{name} takes an array: say what it does with it"
        if overload.function.skip_replay:
            assert effects & {Effect.WRITES_ARRAYS, Effect.REFUSED}, f"{name} is skipped by the replay"
        if getattr(overload.function, "missing_grad", False):  # none in Warp 1.19; a later Warp may mark some
            assert effects & {Effect.NO_ADJOINT, Effect.REFUSED}, f"{name} has no gradient in Warp's registry"
        if Effect.PURE in effects:
            assert not effects & (_MEMORY | {Effect.HANDLE_READ, Effect.WRITES_ARGUMENTS, Effect.OUTPUT}), name


def test_what_the_groups_call_warp_s_code_generator_s_own_is_hidden_in_its_registry():
    """Registry: ``hidden``, left out of Warp's documentation: what Warp's code generator calls, not its users."""
    internal = [
        name for group in GROUPS if group.reason.startswith("Warp's code generator's") for name in group.builtins()
    ]
    assert len(internal) == 13
    assert all(overload.function.hidden for name in internal for overload in TABLE[name])


def test_the_atomics_warp_compiles_for_int_targets_only_are_asked_of_warp():
    """Warp's bitwise atomics refuse a float array (their value function says so); the others take one. A target whose
    return such an atomic uses holds ints, whatever its annotation (``pipeline.known_ints``)."""
    assert builtins.int_only_atomics() == {"and", "or", "xor"}


def test_each_written_parameter_is_one_of_the_builtin():
    for group in GROUPS:
        for name, written in group.builtins().items():
            parameters = {p for overload in TABLE[name] for p in overload.signature.parameters}
            assert set(written) <= parameters, f"{name} has no parameter {set(written) - parameters}"


@pytest.mark.parametrize(
    ("name", "arity", "written", "effects"),
    [
        ("hash_grid_query_next", 2, (0, 1), {Effect.ITERATOR, Effect.HANDLE_READ, Effect.WRITES_ARGUMENTS}),
        ("bvh_query_next", 2, (0, 1), {Effect.ITERATOR, Effect.HANDLE_READ}),
        ("mesh_query_aabb_next", 2, (0, 1), {Effect.ITERATOR}),
        ("mesh_query_point", 7, (3, 4, 5, 6), {Effect.HANDLE_READ, Effect.WRITES_ARGUMENTS}),
        ("mesh_query_point", 3, (), {Effect.HANDLE_READ}),
        ("mesh_query_ray", 4, (), {Effect.HANDLE_READ}),
        ("mesh_query_ray", 10, (4, 5, 6, 7, 8, 9), {Effect.HANDLE_READ}),
        ("randf", 1, (0,), {Effect.RANDOM, Effect.NO_ADJOINT}),
        ("rand_init", 2, (), {Effect.RANDOM, Effect.PURE}),
        ("svd3", 1, (), {Effect.PURE}),
        ("svd3", 4, (1, 2, 3), {Effect.WRITES_ARGUMENTS}),
        ("atomic_add", 3, (), {Effect.WRITES_ARRAYS, Effect.SKIPPED_IN_REPLAY}),
        ("tile_load", 2, (), {Effect.READS_ARRAYS, Effect.TILE}),
        ("tile_matmul", 3, (2,), {Effect.TILE}),
        ("tile_matmul", 2, (), {Effect.TILE, Effect.PURE}),
        ("len", 1, (), {Effect.SHAPE}),
        ("div_approx", 2, (), {Effect.DEVICE_DEPENDENT, Effect.PURE}),
        ("zeros", 2, (), {Effect.REFUSED}),
        ("norm_l2", 1, (), {Effect.PURE}),
    ],
)
def test_the_effect_of_an_overload(name, arity, written, effects):
    effect = builtin_effect(name, arity)
    assert effect is not None and effect.written == written and effects <= effect.effects, effect
    assert builtin_effect("not_a_builtin") is None


def _call(text: str) -> ast.Call:
    node = ast.parse(text, mode="eval").body
    assert isinstance(node, ast.Call)
    return node


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("wp.hash_grid_query_next(query, j)", ["query", "j"]),
        ("wp.mesh_query_point(mesh, p, 1.0, inside, face, u, v)", ["inside", "face", "u", "v"]),
        ("wp.mesh_query_point(mesh, p, 1.0)", []),
        ("wp.svd3(a, U=u, sigma=s, V=v)", ["u", "s", "v"]),  # by keyword
        ("wp.randf(state, 0.0, 1.0)", ["state"]),
        ("wp.randf(states[i])", []),  # an element: Warp writes a temporary, and the write is lost
        ("wp.sin(x)", []),
        ("other.randf(state)", []),  # not Warp's
        ("randf(state)", []),  # a bare name not imported from Warp
        ("draw(state)", ["state"]),  # ``from warp import randf as draw``
        ("wp.hash_grid_query_next(query)", []),  # binds to no overload: Warp refuses it, the dataflow need not
    ],
)
def test_written_arguments(text, written):
    names = WarpNames(frozenset({"wp"}), (("draw", "randf"),))
    assert [local.id for local in written_arguments(_call(text), names)] == written


def test_a_call_s_effect_binds_its_keywords():
    effect = call_effect(
        _call("wp.mesh_query_point(id=m, point=p, max_dist=d, inside=a, face=f, bary_u=u, bary_v=v)"), PLAIN
    )
    assert effect is not None and effect.written == (3, 4, 5, 6)
    assert builtins.called_builtin(_call("wp.vec3(1.0, 2.0, 3.0)"), PLAIN) is None  # a constructor
    assert builtins.called_builtin(_call("min(a, b)"), PLAIN) == "min"  # Python's, which Warp reads as its own


WRITERS = """
@wp.kernel
def writers(grid: wp.uint64, q: wp.array(dtype=wp.quat), out: wp.array(dtype=float), ints: wp.array(dtype=int)):
    state = wp.rand_init(7)
    first = wp.randf(state)
    axis = wp.vec3()
    angle = float(0.0)
    wp.quat_to_axis_angle(q[0], axis, angle)
    xform = wp.transform_identity()
    wp.transform_set_translation(xform, wp.vec3(1.0, 2.0, 3.0))
    query = wp.hash_grid_query(grid, wp.vec3(0.0), 10.0)
    j = int(-1)
    wp.hash_grid_query_next(query, j)
    out[0] = wp.randf(state) - first
    out[1] = angle
    out[2] = axis[2]
    out[3] = xform.p[1]
    ints[0] = j
"""


def test_the_parameters_the_table_says_a_builtin_writes_are_written_by_warp(tmp_path):
    """A sample of writers, one of each kind, run by Warp: each local handed to a written parameter changes."""
    path = tmp_path / "writers.py"
    path.write_text("import warp as wp\n" + WRITERS)
    spec = importlib.util.spec_from_file_location("writers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    grid = wp.HashGrid(1, 1, 1, device="cpu")
    grid.build(wp.array([[0.5, 0.5, 0.5]], dtype=wp.vec3, device="cpu"), 1.0)
    q = wp.array([wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.5)], dtype=wp.quat, device="cpu")
    out, ints = wp.zeros(4, dtype=float, device="cpu"), wp.zeros(1, dtype=int, device="cpu")
    wp.launch(module.writers, 1, inputs=[grid.id, q, out, ints], device="cpu")
    different_draws, angle, axis_z, translation = out.numpy()
    assert different_draws != 0.0 and np.isclose(angle, 0.5) and np.isclose(axis_z, 1.0) and translation == 2.0
    assert ints.numpy()[0] == 0
    tree = ast.parse(WRITERS).body[0]
    written = {n.id for call in ast.walk(tree) if isinstance(call, ast.Call) for n in written_arguments(call, PLAIN)}
    assert written == {"state", "axis", "angle", "xform", "query", "j"}


def _function(source: str) -> ast.FunctionDef:
    node = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


QUERY_LOOP = _function(
    """
    def k(grid: wp.uint64, p: wp.vec3, x: wp.array(dtype=float), out: wp.array(dtype=float)):
        query = wp.hash_grid_query(grid, p, 1.0)
        j = int(0)
        total = float(0.0)
        while wp.hash_grid_query_next(query, j):
            total += x[j]
        state = wp.rand_init(3)
        for k in range(4):
            out[k] = wp.randf(state) * total
        last = j
    """
)


def test_the_dataflow_sees_the_locals_a_builtin_writes():
    """``j`` after ``wp.hash_grid_query_next(query, j)`` is assigned by that call: the loops carry ``query``, ``j``
    and ``state``, none of which any assignment statement changes."""
    flow = LoopFlow(
        QUERY_LOOP, lambda name: name not in ("x", "out"), lambda call: written_arguments(call, WarpNames())
    )
    query_loop, draws = (node for node in ast.walk(QUERY_LOOP) if isinstance(node, ast.While | ast.For))
    carried = flow.carried(query_loop)
    assert {"query", "j", "total"} <= carried.into_iterations and {"j", "total"} <= carried.out_of_loop
    assert flow.carried(draws).into_iterations == {"state"}
    assert {"j", "query", "state"}.isdisjoint(single_assignments(QUERY_LOOP))
    assert "j" in rebound_locals(QUERY_LOOP)
    kinds = IntLocals(QUERY_LOOP, {"grid": wp.uint64}).locals
    assert kinds["j"] is wp.int32 and kinds["state"] is wp.uint32 and kinds["last"] is wp.int32
    assert returned_type(_call("wp.rand_init(3)"), PLAIN) is wp.uint32


def test_a_local_a_builtin_writes_takes_the_gradient_sources_of_its_arguments():
    function = _function(
        """
        def k(mesh: wp.uint64, p: wp.array(dtype=wp.vec3), count: wp.array(dtype=float)):
            u = float(0.0)
            wp.mesh_query_point_no_sign(mesh, p[0], 1.0, face, u, v)
            r = wp.atomic_add(count, 0, u)
        """
    )
    call = next(node for node in ast.walk(function) if isinstance(node, ast.Call) and "atomic" in ast.unparse(node))
    sources = gradient_sources(function, ["mesh", "p", "count"], PLAIN, {call: "count"})
    assert sources[call] == {"count", "mesh", "p"}
