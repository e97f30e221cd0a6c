"""The ``@wp.func_replay`` twins of cloned helpers' replays.

Warp's backward runs a called helper's forward again, side effects included, unless the helper has a
``@wp.func_replay``: then it runs that instead. So a helper's replay that keeps a write into memory (a float atomic
or store, for its adjoint) gets a twin that writes nothing, registered as its replay (``passes.two_phase`` makes the
twin, the replay phase written with every write left out). A replay that writes nothing is its own twin: the twin is
made all the same, and left out where it is the same code (``same_code``); its callers then call the replay.
"""

from __future__ import annotations

import ast
import copy

from warp_rewrite.passes.syntax import walk


def registration(twin: ast.FunctionDef, replay_name: str, warp: str) -> ast.FunctionDef:
    """``@wp.func_replay(f_replay) def f_replay_replayed(...): return f_replay_forward(...)``.

    Its own function, rather than the twin itself, because Warp does not let code call a function registered
    as a replay; and without a return annotation, which Warp 1.19's ``func_replay`` cannot match.
    """
    params = [a.arg for a in twin.args.args]
    returns = any(isinstance(n, ast.Return) and n.value is not None for n in walk(twin))
    call = f"{twin.name}({', '.join(params)})"
    function = ast.parse(f"def {replay_name}_replayed():\n    {'return ' if returns else ''}{call}").body[0]
    assert isinstance(function, ast.FunctionDef)
    function.args.args = copy.deepcopy(twin.args.args)
    function.decorator_list = [ast.parse(f"{warp}.func_replay({replay_name})", mode="eval").body]
    return function


def is_registration(function: ast.FunctionDef) -> bool:
    """Is ``function`` a twin's ``@wp.func_replay`` registration (``registration``)? It only hands on what it takes."""
    return any(
        isinstance(d, ast.Call) and getattr(d.func, "attr", None) == "func_replay" for d in function.decorator_list
    )


def same_code(one: ast.FunctionDef, other: ast.FunctionDef) -> bool:
    """Do two functions take the same parameters and run the same statements (whatever their names)?"""

    def code(function: ast.FunctionDef) -> str:
        return ast.dump(function.args) + "".join(ast.dump(statement) for statement in function.body)

    return code(one) == code(other)
