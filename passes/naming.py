"""Fresh names for generated parameters, locals and helpers that cannot clash with the user's."""

from __future__ import annotations

import ast
from collections.abc import Set

from warp_rewrite.passes.syntax import walk

RUNTIME_NAME = "wp_rewrite_runtime"  # the name generated code gives the runtime, unless the user's module uses it
RUNTIME_FOLDER = RUNTIME_NAME  # the folder the runtime package is copied into, beside the emitted modules


class Namer:
    """Hands out readable names, adding a numeric suffix only when a name is already taken."""

    def __init__(self, taken: set[str]):
        self.taken = set(taken)
        self.issued: set[str] = set()  # names handed out (and reserved) so far

    @classmethod
    def for_tree(cls, tree: ast.AST, extra: Set[str] = frozenset()) -> Namer:
        used = set(extra)
        for node in walk(tree):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.arg):
                used.add(node.arg)
            elif isinstance(node, ast.FunctionDef):
                used.add(node.name)
        return cls(used)

    def fresh(self, base: str) -> str:
        name, suffix = base, 1
        while name in self.taken:
            name = f"{base}_{suffix}"
            suffix += 1
        self.taken.add(name)
        self.issued.add(name)
        return name

    def fresh_base(self, base: str, suffixes: tuple[str, ...] = ("_record", "_replay")) -> str:
        """A base name such that ``base + suffix`` is fresh for every suffix (reserving them all)."""
        candidate, number = base, 1
        while any(candidate + suffix in self.taken for suffix in suffixes):
            candidate = f"{base}_{number}"
            number += 1
        reserved = {candidate + suffix for suffix in suffixes}
        self.taken |= reserved
        self.issued |= reserved
        return candidate
