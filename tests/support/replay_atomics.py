"""A checker of the property that carries gradients into what atomics add: the replay keeps every float atomic
whose value may carry a gradient.

Warp's backward differentiates an atomic add, sub, min or max of the replay (``wp.atomic_add(total, 0, v)``,
``total[i] += v``): that is how ``v`` gets the gradient of what it added to. ``dropped_float_atomics`` counts, in
each function of the plan, the atomics whose target is a float array (or a struct field of one) and whose value
may carry a gradient, in the original and in its replay: each must still be there as an atomic on the same
target, or as the ``exact_returned(v, ...)`` the exact path replays it with. A value may carry a gradient unless,
through the locals it is computed from, it reads no memory and no parameter but ints (``wp.float64(tid) * 0.25``):
this checker's own judgement, independent of the planner's. ``tests/support/invariants.py`` runs it on every
kernel the suite and the fuzzer rewrite.
"""

from __future__ import annotations

import ast
from collections import Counter

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.atomics import find_atomic_calls, find_augmented_writes
from warp_rewrite.passes.dataflow import argument_path, single_assignments
from warp_rewrite.pipeline import Frontend, GeneratedKernel

EXACT_RETURN = "exact_returned"  # the exact path's replay of a float atomic whose return is used
# The atomics Warp differentiates: its adjoints of atomic_exch and atomic_cas are empty ("Not implemented" in
# warp/native/builtin.h), so a replay without them loses nothing Warp would give.
DIFFERENTIATED = ("add", "sub", "min", "max")


def dropped_float_atomics(frontend: Frontend, generated: GeneratedKernel) -> list[str]:
    """A line for each function whose replay has fewer float atomics than its original (none, if sound)."""
    runtime = frontend.module.runtime.alias
    functions = {f.name: f for f in ast.parse(generated.source).body if isinstance(f, ast.FunctionDef)}
    problems = []
    for plan in generated.plan.root.walk():
        replay = functions.get(f"{plan.name}_replay")
        if replay is None:
            continue
        expected = _float_atomic_targets(frontend, plan, plan.unit.tree)
        kept = _float_atomic_targets(frontend, plan, replay)
        exact = sum(1 for n in ast.walk(replay) if _calls_runtime(n, runtime, EXACT_RETURN))
        missing = expected - kept
        if sum(missing.values()) > exact or kept - expected:
            problems.append(
                f"{replay.name}: float atomics by target: original {dict(expected)}, replay {dict(kept)} "
                f"and {exact} {EXACT_RETURN}"
            )
    return problems


def _float_atomic_targets(frontend: Frontend, plan, function: ast.FunctionDef) -> Counter[str]:
    """How many atomics (calls and ``a[i] += v``) ``function`` has on each float array, by its kernel path."""
    params = [a.arg for a in function.args.args]
    aliases = single_assignments(function)
    names = frontend.warp_names(plan.unit)
    constant = _gradient_free(function, frontend.parameter_types(plan.unit), names.modules)
    calls = find_atomic_calls(function, names)
    atomics = [(call.arguments[0], call.arguments[-1]) for call in calls if call.op in DIFFERENTIATED]
    augmented = find_augmented_writes(function)
    atomics += [(node.target.value, node.value) for node in augmented if isinstance(node.op, ast.Add | ast.Sub)]
    found: Counter[str] = Counter()
    for target, value in atomics:
        if constant(value):
            continue
        local = argument_path(target, params, aliases)
        root, _, rest = (local or "").partition(".")
        path = plan.paths.get(root)
        kernel_path = f"{path}.{rest}" if path and rest else path
        info = frontend.array(kernel_path) if kernel_path else None
        if info is not None and info.dtype is not None and not dtypes.is_int(info.dtype):
            found[kernel_path] += 1
    return found


def _gradient_free(function: ast.FunctionDef, declared: dict, warp: frozenset[str]):
    """A test of whether a value reads, through the locals it is computed from, no memory and no parameter but
    ints."""
    int_params = {name for name, annotation in declared.items() if dtypes.is_int(dtypes.normalized(annotation))}
    params = {a.arg for a in function.args.args} - int_params
    sources: dict[str, list[ast.AST]] = {}  # each local: every expression assigned to it
    for node in ast.walk(function):
        if isinstance(node, ast.For):
            value, targets = node.iter, [node.target]
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value is not None:
            value, targets = node.value, node.targets if isinstance(node, ast.Assign) else [node.target]
        else:
            continue
        for target in targets:
            for name in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(name, ast.Name):  # a local bound, not memory stored into
                    sources.setdefault(name.id, []).append(value)

    def free(value: ast.AST, seen: frozenset[str] = frozenset()) -> bool:
        for node in ast.walk(value):
            module = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in warp
            if isinstance(node, ast.Subscript | ast.Attribute) and not module:  # wp.float64 is not memory
                return False
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in seen:
                if node.id in params:
                    return False
                if not all(free(source, seen | {node.id}) for source in sources.get(node.id, [])):
                    return False
        return True

    return free


def _calls_runtime(node: ast.AST, runtime: str, name: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == runtime
    )
