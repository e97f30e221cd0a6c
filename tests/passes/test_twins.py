"""passes/twins.py: the registration of a helper replay's twin (the runtime's ``replays``), and when a twin is the
same code as its replay (then left out: tests/passes/test_two_phase.py, tests/api/test_replay_twins.py)."""

import ast

from tests.support.pass_sources import parse
from warp_rewrite.passes.twins import registered, same_code


def test_the_twin_is_registered_by_a_decorator_above_its_own():
    twin = parse("""
        @wp.func
        def emit_replay_forward(count: wp.array[int], out: wp.array[float], slot_records: wp.array(dtype=wp.int32),
                                coordinate: int) -> int:
            return slot_records[coordinate]
    """)
    assert ast.unparse(registered(twin, "emit_replay", "rt.replays")) == ast.unparse(
        parse("""
        @rt.replays(emit_replay)
        @wp.func
        def emit_replay_forward(count: wp.array[int], out: wp.array[float], slot_records: wp.array(dtype=wp.int32),
                                coordinate: int) -> int:
            return slot_records[coordinate]
        """)
    )
    assert len(twin.decorator_list) == 1  # (the pipeline's function is left as it was)


def test_the_same_code_whatever_the_functions_names():
    replay = parse("def f_replay(a: int) -> int:\n    return g_replay(a)")
    assert same_code(replay, parse("def f_replay_forward(a: int) -> int:\n    return g_replay(a)"))
    assert not same_code(replay, parse("def f_replay_forward(a: int) -> int:\n    return g_replay_forward(a)"))
    assert not same_code(replay, parse("def f_replay_forward(b: int) -> int:\n    return g_replay(b)"))
