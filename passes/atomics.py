"""Find Warp atomic calls in a kernel's AST and tell which ones have their returned value consumed.

Warp's backward pass skips every atomic when it replays the forward code, so only an atomic whose
return value is *used* is a hazard. A bare call statement (``wp.atomic_add(...)``) and an augmented
assignment (``arr[i] += v``) discard the value and are safe.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

ATOMIC_OPS = ("add", "sub", "min", "max", "cas", "exch", "and", "or", "xor")


@dataclass(frozen=True)
class WarpNames:
    """How the kernel's module spells Warp: module aliases (``wp``) and bare imported atomics."""

    modules: frozenset[str] = frozenset({"wp"})
    bare_atomics: tuple[tuple[str, str], ...] = ()  # (local name, op), e.g. ("atomic_add", "add")

    def atomic_op(self, call: ast.Call) -> str | None:
        """The op ("add", "cas", ...) if ``call`` calls a Warp atomic, else None."""
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.modules:
            name = func.attr
        elif isinstance(func, ast.Name):
            return dict(self.bare_atomics).get(func.id)
        else:
            return None
        op = name.removeprefix("atomic_")
        return op if name.startswith("atomic_") and op in ATOMIC_OPS else None


@dataclass(frozen=True)
class AtomicCall:
    """One call of a Warp array atomic in the kernel source."""

    node: ast.Call
    op: str
    consumed: bool
    statement: ast.AugAssign | None = None  # set when the call stands for ``arr[i] += v``

    @property
    def target(self) -> ast.expr:
        return self.node.args[0]

    @property
    def value_args(self) -> list[ast.expr]:
        """The operands written into the target (cas: compare and value)."""
        return self.node.args[-2:] if self.op == "cas" else self.node.args[-1:]

    @property
    def index_args(self) -> list[ast.expr]:
        return self.node.args[1 : len(self.node.args) - len(self.value_args)]


def parent_map(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def find_atomic_calls(
    tree: ast.AST, names: WarpNames, parents: dict[ast.AST, ast.AST] | None = None
) -> list[AtomicCall]:
    """Every Warp atomic call under ``tree``, in source order (``parents``: ``parent_map(tree)``, if known)."""
    parents = parent_map(tree) if parents is None else parents
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            op = names.atomic_op(node)
            if op is not None:
                consumed = not isinstance(parents.get(node), ast.Expr)
                calls.append(AtomicCall(node, op, consumed))
    return sorted(calls, key=lambda c: (c.node.lineno, c.node.col_offset))


def find_augmented_writes(tree: ast.AST) -> list[ast.AugAssign]:
    """``arr[i] += v`` and friends: Warp lowers them to atomics whose value is discarded."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Subscript)]
