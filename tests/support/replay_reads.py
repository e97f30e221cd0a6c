"""A checker of the property that makes replays sound: every array element the replay reads is of an array the
launch never writes, or of a record.

``unrecorded_reads`` reads the generated source as printed (not the planner's notes): each replay function (the
kernel's and its clones', with their ``@wp.func_replay`` twins) and every user helper they call, followed with the
kernel paths its parameters are handed. ``tests/conftest.py`` runs it on every kernel the suite rewrites, the fuzz
slice's included.
"""

from __future__ import annotations

import ast

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.dataflow import argument_path, single_assignments
from warp_rewrite.passes.memory import depth, loads
from warp_rewrite.passes.syntax import parent_map, walk
from warp_rewrite.passes.two_phase import REPLAY, REPLAY_FORWARD
from warp_rewrite.pipeline import Frontend, GeneratedKernel

REPLAY_PHASES = (REPLAY, REPLAY_FORWARD)


def unrecorded_reads(frontend: Frontend, generated: GeneratedKernel) -> list[str]:
    """``file:line:col`` of each read, in the replay kernel or a function it calls, of an element of an array the
    launch writes that does not come from a record (none, if the rewrite is sound)."""
    spec = generated.spec
    records, written = {record.name for record in spec.records}, set(spec.written)
    module = ast.parse(generated.source)
    functions = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
    problems: list[str] = []
    for plan in generated.plan.root.walk():
        for phase in REPLAY_PHASES:
            function = functions.get(f"{plan.name}_{phase}")
            if function is not None:
                paths = {**plan.paths, **{name: name for name in records}}
                _check(frontend, plan.unit, function, paths, records, written, functions, problems, set())
    return problems


def _check(frontend, unit, function, paths, records, written, generated, problems, seen) -> None:
    """Flag ``function``'s unrecorded reads of written arrays; follow the user helpers it hands memory to."""
    key = (id(function), tuple(sorted(paths.items(), key=repr)))
    if key in seen:
        return
    seen.add(key)
    params = [a.arg for a in function.args.args]
    aliases = single_assignments(function)
    declared = frontend.parameter_types(unit)  # a clone's parameters are its original's, then its records
    names = frontend.warp_names(unit)

    def kernel_path(expr: ast.expr) -> str | None:
        local = argument_path(expr, params, aliases)
        if local is None:
            return None
        root, _, rest = local.partition(".")
        mapped = paths.get(root)
        return None if mapped is None else f"{mapped}.{rest}" if rest else mapped

    def ndim(expr: ast.expr, path: str) -> int:
        own = declared.get(argument_path(expr, params, aliases))
        if dtypes.is_array(own):
            return own.ndim
        array = frontend.array(path)
        return (array.ndim or 1) if array is not None else 1

    nodes = walk(function)
    # an append pool's read, which the launch checks on the device against its writes (the runtime's pool_read)
    checked = {id(n.args[0]) for n in nodes if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "pool_value"}
    for node in loads(nodes, parent_map(nodes), names):
        path = kernel_path(node)
        if path is None or path in records or path not in written or id(node) in checked:
            continue
        if depth(node, aliases) >= ndim(node, path) > depth(node.value, aliases):
            where = unit.location(node) if function is unit.tree else f"{function.name}:{node.lineno}"
            problems.append(f"{where}: the replay reads '{ast.unparse(node)}' of '{path}', which the launch writes")
    for call in (n for n in nodes if isinstance(n, ast.Call)):
        callee = call.func.id if isinstance(call.func, ast.Name) else None
        helper = None if callee in generated else frontend.resolve_helper(unit, call)
        if helper is None:
            continue
        bound = dict(zip([a.arg for a in helper.tree.args.args], call.args, strict=False))
        bound.update({k.arg: k.value for k in call.keywords if k.arg})
        types = frontend.parameter_types(helper)
        handed = {p: kernel_path(a) if not dtypes.is_value_type(types.get(p)) else None for p, a in bound.items()}
        _check(frontend, helper, helper.tree, handed, records, written, generated, problems, seen)
