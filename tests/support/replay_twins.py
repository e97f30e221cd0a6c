"""A checker of what Warp's backward runs again: a helper's replay with no ``@wp.func_replay`` twin writes no memory.

Warp's backward runs a called helper's forward again, side effects included, unless the helper has a
``@wp.func_replay``. So a helper's replay clone that keeps a write into memory (an atomic, a store through a
parameter) needs its twin, which writes nothing; one left without (``passes.two_phase`` leaves out a twin that reads
as its replay does) must have nothing to redo. Read off the generated source as printed;
``tests/support/invariants.py`` runs it on every kernel the suite and the fuzzer rewrite.
"""

from __future__ import annotations

import ast

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.dataflow import argument_path, single_assignments
from warp_rewrite.passes.syntax import walk
from warp_rewrite.pipeline import Frontend, GeneratedKernel


def rerun_writes(frontend: Frontend, generated: GeneratedKernel) -> list[str]:
    """Each write into memory of a helper's replay that has no twin registered (none, if sound)."""
    module = ast.parse(generated.source)
    functions = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
    # the replays a twin is registered for: ``@<runtime>.replays(f_replay)`` (the runtime's ``replays``)
    twinned = {
        argument.id
        for function in functions.values()
        for decorator in function.decorator_list
        if isinstance(decorator, ast.Call) and ast.unparse(decorator.func).endswith(".replays")
        for argument in decorator.args
        if isinstance(argument, ast.Name)
    }
    names = frontend.warp_names(generated.plan.root.unit)
    problems = []
    for plan in generated.plan.root.walk():
        replay = functions.get(f"{plan.name}_replay")
        if plan is generated.plan.root or replay is None or replay.name in twinned:
            continue
        types = frontend.parameter_types(plan.unit)  # (a clone's parameters are its original's, then records)
        memory = [a.arg for a in replay.args.args if not dtypes.is_value_type(types.get(a.arg))]
        aliases = single_assignments(replay)
        for node in walk(replay):
            if isinstance(node, ast.Call) and names.atomic_op(node) is not None:
                problems.append(f"{replay.name}:{node.lineno}: '{ast.unparse(node)}' runs again in backward")
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                stored = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in (t for t in stored if isinstance(t, ast.Subscript)):
                    if argument_path(target.value, memory, aliases) is not None:
                        problems.append(f"{replay.name}:{node.lineno}: '{ast.unparse(target)}' is stored again")
    return problems
