"""A checker of the contract between generated code and the runtime: the generated kernels name only runtime
names of the ABI's table (``warp_rewrite.runtime.abi``), and the readers.

``tests/conftest.py`` runs it on every kernel the suite generates, through the API or the command line.
"""

from __future__ import annotations

import ast

from warp_rewrite.pipeline import Frontend, GeneratedKernel
from warp_rewrite.runtime.abi import GENERATED, reader_of


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
