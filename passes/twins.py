"""The twins of cloned helpers' replays, which Warp's backward runs in their place.

Warp's backward runs a called helper's forward again, side effects included, unless the helper has a replay of its
own (``wp.func_replay``): then it runs that instead. So a helper's replay that keeps a write into memory (a float
atomic or store, for its adjoint) gets a twin that writes nothing, registered as its replay by the runtime's
``replays`` (``passes.two_phase`` makes the twin, the replay phase written with every write left out). A replay that
writes nothing is its own twin: the twin is made all the same, and left out where it is the same code
(``same_code``); its callers then call the replay.
"""

from __future__ import annotations

import ast
import copy


def registered(twin: ast.FunctionDef, replay_name: str, replays: str) -> ast.FunctionDef:
    """The twin, decorated ``@<runtime>.replays(f_replay)`` above its ``@wp.func``: Warp's backward runs it in place
    of ``f_replay`` (the runtime's ``replays``), and the twins of ``f_replay``'s callers still call it."""
    twin = copy.copy(twin)
    twin.decorator_list = [ast.parse(f"{replays}({replay_name})", mode="eval").body, *twin.decorator_list]
    return twin


def same_code(one: ast.FunctionDef, other: ast.FunctionDef) -> bool:
    """Do two functions take the same parameters and run the same statements (whatever their names)?"""

    def code(function: ast.FunctionDef) -> str:
        return ast.dump(function.args) + "".join(ast.dump(statement) for statement in function.body)

    return code(one) == code(other)
