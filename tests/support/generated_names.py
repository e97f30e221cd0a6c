"""Checkers of the contract between generated code and the runtime: the generated kernels name only runtime
names of the ABI's table (``warp_rewrite.runtime.abi``), and the readers; their replays call none of the device
functions only the record and count kernels may call (``FORWARD_ONLY``).

``tests/conftest.py`` runs it on every kernel the suite generates, through the API or the command line.
"""

from __future__ import annotations

import ast

from tests.support.replay_reads import REPLAY_PHASES
from warp_rewrite.pipeline import Frontend, GeneratedKernel
from warp_rewrite.runtime.abi import FORWARD_ONLY, GENERATED, reader_of


def unlisted_runtime_names(frontend: Frontend, generated: GeneratedKernel) -> list[str]:
    """Each use, in the generated source, of the runtime's name other than to name one of the ABI's names."""
    alias = frontend.module.runtime.alias
    module = ast.parse(generated.source)
    named = {id(n.value) for n in ast.walk(module) if isinstance(n, ast.Attribute) and _is(n.value, alias)}
    problems = []
    for node in ast.walk(module):
        if isinstance(node, ast.Attribute) and _is(node.value, alias) and not _listed(node.attr):
            problems.append(f"line {node.lineno}: {ast.unparse(node)} is not in the ABI's table")
        elif _is(node, alias) and id(node) not in named:
            problems.append(f"line {node.lineno}: the runtime '{alias}' itself is used as a value")
    return problems


def _is(node: ast.AST, alias: str) -> bool:
    return isinstance(node, ast.Name) and node.id == alias


def _listed(name: str) -> bool:
    return name in GENERATED or reader_of(name) is not None


def forward_calls_in_replays(frontend: Frontend, generated: GeneratedKernel) -> list[str]:
    """Each call, in a replay function (the kernel's, its clones' and their twins), of a device function only the
    forward may call: a trip check, a record's store, an exact atomic (``FORWARD_ONLY``)."""
    alias = frontend.module.runtime.alias
    module = ast.parse(generated.source)
    replays = {f"{plan.name}_{phase}" for plan in generated.plan.root.walk() for phase in REPLAY_PHASES}
    problems = []
    for function in module.body:
        if not isinstance(function, ast.FunctionDef) or function.name not in replays:
            continue
        for node in ast.walk(function):
            called = node.func if isinstance(node, ast.Call) else None
            if isinstance(called, ast.Attribute) and _is(called.value, alias) and called.attr in FORWARD_ONLY:
                problems.append(f"line {node.lineno}: '{function.name}' calls {ast.unparse(called)}")
    return problems
