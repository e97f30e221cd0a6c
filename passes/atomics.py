"""Find Warp atomic calls in a kernel's AST and tell which ones have their returned value consumed.

Warp's backward pass skips every atomic when it replays the forward code, so only an atomic whose
return value is *used* is a hazard. A bare call statement (``wp.atomic_add(...)``) and an augmented
assignment (``arr[i] += v``) discard the value and are safe.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from warp_rewrite.passes.syntax import walk

ATOMIC_OPS = ("add", "sub", "min", "max", "cas", "exch", "and", "or", "xor")
# The keywords Warp's atomics take, in the order of their parameters: atomic_op(arr, i[, j[, k[, l]]], value) and
# atomic_cas(arr, i..., compare, value).
_PARAMETERS = ("arr", "i", "j", "k", "l", "compare", "value")
# Tile atomics: wp.tile_atomic_add, wp.tile_atomic_add_indexed. The fence refuses a use of their return, and
# --check reports one (WR007), for this reason and with this fix:
TILE_ATOMIC_PREFIX = "tile_atomic_"
TILE_ATOMIC_RETURN = (
    "a tile atomic returns a tile of the values before it, which Warp's backward does not replay: use the tile "
    "atomic as a statement, or load the tile before the atomic"
)


def positional_arguments(call: ast.Call) -> list[ast.expr]:
    """An atomic call's arguments in parameter order, however they were passed (``wp.atomic_add(arr=c, i=0,
    value=1)`` is ``wp.atomic_add(c, 0, 1)``)."""
    named = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
    return [*call.args, *(named[name] for name in _PARAMETERS if name in named)]


@dataclass(frozen=True)
class WarpNames:
    """How the kernel's module spells Warp: module aliases (``wp``) and the builtins imported by a bare name."""

    modules: frozenset[str] = frozenset({"wp"})
    members: tuple[tuple[str, str], ...] = ()  # (local name, Warp's name), e.g. ("add", "atomic_add")

    def member(self, local: str) -> str | None:
        """Warp's name of the builtin a bare name was imported as (``from warp import atomic_add as add``)."""
        return next((name for bound, name in self.members if bound == local), None)

    def atomic_op(self, call: ast.Call) -> str | None:
        """The op ("add", "cas", ...) if ``call`` calls a Warp atomic, else None."""
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.modules:
            name: str | None = func.attr
        elif isinstance(func, ast.Name):
            name = self.member(func.id)
        else:
            return None
        op = (name or "").removeprefix("atomic_")
        return op if name is not None and name.startswith("atomic_") and op in ATOMIC_OPS else None

    def tile_atomic(self, call: ast.Call) -> str | None:
        """The builtin's name (``tile_atomic_add``) if ``call`` calls a Warp tile atomic through Warp's module."""
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.modules:
            return func.attr if func.attr.startswith(TILE_ATOMIC_PREFIX) else None
        return None


PLAIN = WarpNames()  # Warp imported as ``wp``, no builtin bound to a bare name: for passes asked without a front end


@dataclass(frozen=True)
class AtomicCall:
    """One call of a Warp array atomic in the kernel source."""

    node: ast.Call
    op: str
    consumed: bool
    statement: ast.AugAssign | None = None  # set when the call stands for ``arr[i] += v``

    @property
    def arguments(self) -> list[ast.expr]:
        return positional_arguments(self.node)

    @property
    def target(self) -> ast.expr:
        return self.arguments[0]

    @property
    def value_args(self) -> list[ast.expr]:
        """The operands written into the target (cas: compare and value)."""
        return self.arguments[-2:] if self.op == "cas" else self.arguments[-1:]

    @property
    def index_args(self) -> list[ast.expr]:
        arguments = self.arguments
        return arguments[1 : len(arguments) - len(self.value_args)]


def find_atomic_calls(tree: ast.AST, names: WarpNames, nodes: list[ast.AST] | None = None) -> list[AtomicCall]:
    """Every Warp atomic call under ``tree``, in source order (``nodes``: ``walk(tree)``, if known).

    An atomic is consumed unless it is a statement of its own (``wp.atomic_add(a, i, v)``), also as a branch of
    a conditional expression that is one (``wp.atomic_add(a, 0, 1) if c else wp.atomic_sub(a, 0, 1)``).
    """
    nodes = walk(tree) if nodes is None else nodes
    found = [(node, op) for node in nodes if isinstance(node, ast.Call) and (op := names.atomic_op(node)) is not None]
    discarded = _discarded(nodes) if found else set()  # (most functions have no atomic)
    calls = [AtomicCall(node, op, id(node) not in discarded) for node, op in found]
    return sorted(calls, key=lambda c: (c.node.lineno, c.node.col_offset))


def find_consumed_tile_atomics(tree: ast.AST, names: WarpNames, nodes: list[ast.AST] | None = None) -> list[ast.Call]:
    """Every Warp tile atomic under ``tree`` whose returned tile is used, in source order (``nodes``:
    ``walk(tree)``, if known)."""
    nodes = walk(tree) if nodes is None else nodes
    found = [n for n in nodes if isinstance(n, ast.Call) and names.tile_atomic(n)]
    discarded = _discarded(nodes) if found else set()
    return sorted((n for n in found if id(n) not in discarded), key=lambda call: (call.lineno, call.col_offset))


def _discarded(nodes: list[ast.AST]) -> set[int]:
    """The ids of the values used as statements of their own, also as a branch of a conditional expression that
    is one: what they return is not used."""
    discarded, pending = set(), [node.value for node in nodes if isinstance(node, ast.Expr)]
    while pending:
        value = pending.pop()
        discarded.add(id(value))
        if isinstance(value, ast.IfExp):
            pending += [value.body, value.orelse]
    return discarded


def find_augmented_writes(tree: ast.AST, nodes: list[ast.AST] | None = None) -> list[ast.AugAssign]:
    """``arr[i] += v`` and friends: Warp lowers them to atomics whose value is discarded."""
    nodes = walk(tree) if nodes is None else nodes
    return [n for n in nodes if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Subscript)]
