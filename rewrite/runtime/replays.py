# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""``replays``: what Warp's backward runs in place of a helper's replay clone, its twin that writes nothing.

Warp's backward runs a called helper's forward again, side effects included, unless the helper has a replay of its
own (``wp.func_replay``). ``wp.func_replay`` leaves the name it decorates bound to a plain Python function, which
Warp code cannot call, so a twin it decorated could not be called by its callers' twins. ``replays`` registers the
twin and leaves it a ``wp.func``: one decorator line in generated code, where a function of its own, taking and
handing on every parameter, took two lines a parameter.
"""

import types
from collections.abc import Callable

import warp as wp


def replays(replay: wp.Function) -> Callable[[wp.Function], wp.Function]:
    """``@replays(f_replay)`` above ``@wp.func def f_replay_forward(...)``: Warp's backward runs the twin where it
    would run ``f_replay`` again; code still calls the twin as a ``wp.func``."""

    def register(twin: wp.Function) -> wp.Function:
        python = twin.func
        assert isinstance(python, types.FunctionType)  # (a wp.func made from a Python function)
        registered = types.FunctionType(
            python.__code__, python.__globals__, python.__name__, python.__defaults__, python.__closure__
        )
        registered.__qualname__ = python.__qualname__
        # wp.func_replay matches every annotation against the replay's parameters, the return's too
        registered.__annotations__ = {k: v for k, v in python.__annotations__.items() if k != "return"}
        wp.func_replay(replay)(registered)
        # Warp's backward calls ``replay_<the replay's native name>``, while the function it made is named after
        # its own key: the two agree only where each is the first function of its key, which the functions a
        # factory makes once per phase (``f_phases``, one key for all) are not.
        registered_replay = replay.custom_replay_func
        assert registered_replay is not None  # (``wp.func_replay`` set it)
        registered_replay.native_func = f"replay_{replay.native_func}"
        return twin

    return register
