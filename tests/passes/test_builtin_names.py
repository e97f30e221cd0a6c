"""``passes.builtin_names`` (what ``--check`` knows of Warp's builtins without importing Warp) says what the
installed Warp's registry says (``passes.builtins``), so that a Warp upgrade that changes it fails here."""

import ast

import warp as wp

from warp_rewrite.passes import builtins
from warp_rewrite.passes.atomics import PLAIN
from warp_rewrite.passes.builtin_names import ARGUMENT_WRITERS, ARRAY_WRITERS, RESULT_READERS, written_by_name
from warp_rewrite.passes.loop_hazards import INT_TYPES


def of_class(effect: builtins.Effect) -> set[str]:
    """The builtins of the installed Warp with an overload of ``effect``'s class."""
    table, _ = builtins._table()
    return {name for name, overloads in table.items() if any(effect in o.effect.effects for o in overloads)}


def test_the_builtins_writing_arrays_are_warps():
    writers = of_class(builtins.Effect.WRITES_ARRAYS)
    assert {name for name in writers if not name.startswith("atomic_")} == ARRAY_WRITERS


def test_the_builtins_whose_adjoint_reads_their_result_are_warps():
    assert of_class(builtins.Effect.ADJOINT_READS_RESULT) == RESULT_READERS


def test_the_builtins_writing_their_arguments_are_warps():
    table, _ = builtins._table()
    written = {}
    for name, overloads in table.items():
        pairs = {
            (list(overload.signature.parameters).index(parameter), parameter)
            for overload in overloads
            for parameter in overload.written
        }
        if pairs:
            written[name] = tuple(sorted(pairs))
    assert written == ARGUMENT_WRITERS


def test_the_int_types_are_warps():
    for name in INT_TYPES - {"int", "bool"}:
        kind = getattr(wp, name)
        assert kind in wp._src.types.int_types or getattr(kind, "_wp_scalar_type_", None) in wp._src.types.int_types


def test_a_call_writes_the_locals_warps_table_says():
    """By position and by keyword; an element or a field handed in is no local (Warp writes a temporary)."""
    calls = {
        "wp.hash_grid_query_next(query, j)": ["query", "j"],
        "wp.tile_matmul(a, b, out=acc)": ["acc"],
        "wp.mesh_query_point(mesh, p, d, inside, face, u, v)": ["inside", "face", "u", "v"],
        "wp.randf(state[0])": [],
        "wp.sin(x)": [],
    }
    for source, locals_ in calls.items():
        call = ast.parse(source, mode="eval").body
        assert isinstance(call, ast.Call)
        assert [name.id for name in written_by_name(call, PLAIN)] == locals_
        assert [name.id for name in builtins.written_arguments(call, PLAIN)] == locals_
