"""passes/twins.py: the ``@wp.func_replay`` registration of a helper replay's twin, and when a twin is the same code
as its replay (then left out: tests/passes/test_two_phase.py, tests/api/test_replay_twins.py)."""

import ast

from tests.support.pass_sources import parse
from warp_rewrite.passes.twins import is_registration, registration, same_code


def test_the_registration_hands_every_parameter_to_the_twin_and_returns_what_it_returns():
    twin = parse("""
        def emit_replay_forward(count: wp.array[int], out: wp.array[float], slot_records: wp.array(dtype=wp.int32),
                                coordinate: int) -> int:
            return slot_records[coordinate]
    """)
    assert ast.unparse(registration(twin, "emit_replay", "wp")) == ast.unparse(
        parse("""
        @wp.func_replay(emit_replay)
        def emit_replay_replayed(count: wp.array[int], out: wp.array[float], slot_records: wp.array(dtype=wp.int32),
                                 coordinate: int):
            return emit_replay_forward(count, out, slot_records, coordinate)
        """)
    )


def test_the_same_code_whatever_the_functions_names():
    replay = parse("def f_replay(a: int) -> int:\n    return g_replay(a)")
    assert same_code(replay, parse("def f_replay_forward(a: int) -> int:\n    return g_replay(a)"))
    assert not same_code(replay, parse("def f_replay_forward(a: int) -> int:\n    return g_replay_forward(a)"))
    assert not same_code(replay, parse("def f_replay_forward(b: int) -> int:\n    return g_replay(b)"))


def test_a_registration_is_told_from_the_functions_it_stands_beside():
    twin = parse("def f_replay_forward(a: int) -> int:\n    return a")
    assert is_registration(registration(twin, "f_replay", "wp")) and not is_registration(twin)
