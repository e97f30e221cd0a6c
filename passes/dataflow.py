"""Where a kernel's values come from: which kernel arguments flow into an expression.

Used for three questions: which argument an atomic's target array is (so the launch can allocate records
of its dtype), whether a consumed floating-point return depends on anything that may carry a gradient
(treating the recorded value as a constant is exact only when it does not), and how long a chain of exact
float returns feeding other exact atomics' operands can be (``exact_chain_links``).
"""

from __future__ import annotations

import ast

from warp_rewrite.passes.atomics import PLAIN, AtomicCall, WarpNames
from warp_rewrite.passes.builtins import written_arguments
from warp_rewrite.passes.memory import path_parts, stored_arrays
from warp_rewrite.passes.syntax import walk

# Casts and tests whose result carries no derivative, whatever their operands.
_NON_DIFFERENTIABLE_CALLS = frozenset(
    {"int", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "tid", "len"}
)


def single_assignments(
    func: ast.FunctionDef, nodes: list[ast.AST] | None = None, names: WarpNames = PLAIN
) -> dict[str, ast.expr]:
    """Locals assigned exactly once, with their value: candidates for aliases of argument arrays. A builtin that
    writes a local (``passes.builtins.written_arguments``) assigns it too.

    ``nodes``: ``walk(func)``, if known; ``names``: how the function spells Warp.
    """
    counts: dict[str, int] = {}
    values: dict[str, ast.expr | None] = {}
    for node in walk(func) if nodes is None else nodes:
        targets: list[tuple[ast.expr, ast.expr | None]] = []
        if isinstance(node, ast.Assign):
            targets = [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [(node.target, node.value)]
        elif isinstance(node, ast.For):
            targets = [(node.target, None)]
        elif isinstance(node, ast.Call):
            targets = [(local, None) for local in written_arguments(node, names)]
        for target, value in targets:
            for name in _bound_names(target):
                counts[name.id] = counts.get(name.id, 0) + 1
                values[name.id] = value if isinstance(target, ast.Name) else None
    return {name: value for name, value in values.items() if counts[name] == 1 and value is not None}


def rebound_locals(
    func: ast.FunctionDef, nodes: list[ast.AST] | None = None, names: WarpNames = PLAIN
) -> dict[str, list[ast.expr]]:
    """Locals assigned more than once, each with the values assigned to it by name (``polygon = trim_poly``, then
    ``polygon = loop`` under a branch): which of them the local holds depends on the path taken. A builtin that
    writes a local assigns it too, with no value by name."""
    bindings: dict[str, list[ast.expr | None]] = {}
    for node in walk(func) if nodes is None else nodes:
        if isinstance(node, ast.Call):
            for local in written_arguments(node, names):
                bindings.setdefault(local.id, []).append(None)
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            whole = None if isinstance(node, ast.AugAssign) else node.value
            for target in targets:
                for name in _bound_names(target):
                    bindings.setdefault(name.id, []).append(whole if target is name else None)
        elif isinstance(node, ast.For):
            for name in _bound_names(node.target):
                bindings.setdefault(name.id, []).append(None)
    return {name: [v for v in values if v is not None] for name, values in bindings.items() if len(values) > 1}


def _bound_names(target: ast.expr) -> list[ast.Name]:
    """The names an assignment target binds: ``v`` in ``v = x`` and ``a, v = t``, none in ``buf[i] = x`` or
    ``p.x = 1.0`` (a store through ``buf``, which still names what it was bound to)."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, ast.Tuple | ast.List):
        return [name for element in target.elts for name in _bound_names(element)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []


def argument_path(expr: ast.expr, params: list[str], aliases: dict[str, ast.expr]) -> str | None:
    """The kernel argument (``total``) or struct field (``w.count``) that ``expr`` views, or None."""
    seen = set()
    parts = path_parts(expr)
    while parts is not None and parts[0] not in params and parts[0] in aliases and parts[0] not in seen:
        seen.add(parts[0])
        root = path_parts(aliases[parts[0]])
        parts = None if root is None else root + parts[1:]
    if parts is None or parts[0] not in params:
        return None
    return ".".join(parts)


def is_view(expr: ast.expr, aliases: dict[str, ast.expr], views: frozenset[str] = frozenset()) -> bool:
    """Does ``expr`` index into an array (``arr[i]``, or a local or a parameter in ``views`` bound to such)
    rather than name a whole one?"""
    seen = set()
    while not isinstance(expr, ast.Subscript):
        root = expr
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id in seen:
            return False
        if root.id in views:
            return True
        if root.id not in aliases:
            return False
        seen.add(root.id)
        expr = aliases[root.id]
    return True


class _Dependencies:
    """Fixpoint of 'local name -> argument paths its value may derive from' over the whole kernel."""

    def __init__(self, func: ast.FunctionDef, params: list[str], names: WarpNames):
        self.params = params
        self.names = names
        nodes = walk(func)
        self.aliases = single_assignments(func, nodes, names)
        self.locals: dict[str, frozenset[str]] = {}
        # What each assignment assigns, and from what: a builtin that writes locals may write into them from any of
        # its arguments (``mesh_query_point(id, p, d, inside, face, u, v)``).
        assigned: list[tuple[list[str], list[ast.expr]]] = []
        for node in nodes:
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                kept = [target for target in targets if not isinstance(target, ast.Subscript)]
                assigned.append(([n.id for t in kept for n in walk(t) if isinstance(n, ast.Name)], [node.value]))
            elif isinstance(node, ast.Call) and (written := written_arguments(node, names)):
                arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
                assigned.append(([local.id for local in written], arguments))
        changed = True
        while changed:
            changed = False
            for bound, values in assigned:
                sources = self._union(values)
                for name in bound:
                    merged = self.locals.get(name, frozenset()) | sources
                    if merged != self.locals.get(name):
                        self.locals[name] = merged
                        changed = True

    def of(self, expr: ast.expr) -> frozenset[str]:
        """Argument paths whose values may flow (differentiably) into ``expr``."""
        if isinstance(expr, ast.Constant | ast.Compare | ast.BoolOp):
            return frozenset()
        if isinstance(expr, ast.Name | ast.Attribute | ast.Subscript):
            path = argument_path(expr, self.params, {})
            if path is not None:
                return frozenset({path})
            if isinstance(expr, ast.Name):
                return self.locals.get(expr.id, frozenset())
            return self.of(expr.value)
        if isinstance(expr, ast.Call):
            func = expr.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in _NON_DIFFERENTIABLE_CALLS:
                return frozenset()
            op = self.names.atomic_op(expr)
            if op is not None:
                call = AtomicCall(expr, op, consumed=True)
                target = argument_path(call.target, self.params, self.aliases)
                return frozenset({target} if target else ()) | self._union(call.value_args)
            return self._union([*expr.args, *(k.value for k in expr.keywords)])
        return self._union([c for c in ast.iter_child_nodes(expr) if isinstance(c, ast.expr)])

    def _union(self, exprs: list[ast.expr]) -> frozenset[str]:
        return frozenset().union(*(self.of(e) for e in exprs))


def gradient_sources(
    func: ast.FunctionDef, params: list[str], names: WarpNames, targets: dict[ast.AST, str]
) -> dict[ast.AST, frozenset[str]]:
    """For each recorded value (an atomic's return, or a read), by node: the argument paths it may be
    differentiable in, given the path of the array it comes from (``targets``).

    That is the array itself (its initial values) plus everything written into it by any atomic, augmented
    assignment or store in the function.
    """
    deps = _Dependencies(func, params, names)
    written: dict[str, frozenset[str]] = {}

    def note_write(target: ast.expr, values: list[ast.expr]) -> None:
        path = argument_path(target, params, deps.aliases)
        if path is not None:
            written[path] = written.get(path, frozenset()) | deps._union(values)

    for node in walk(func):
        if isinstance(node, ast.Call) and (op := names.atomic_op(node)) is not None:
            call = AtomicCall(node, op, consumed=False)
            note_write(call.target, call.value_args)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value is not None:
            for array in stored_arrays(node):
                note_write(array, [node.value])
    return {node: frozenset({path}) | written.get(path, frozenset()) for node, path in targets.items()}


def exact_chain_links(
    func: ast.FunctionDef, params: list[str], names: WarpNames, calls: list[AtomicCall], targets: list[str]
) -> int | None:
    """The most links in a chain of exact float returns feeding operands of exact atomics (``calls``, on argument
    paths ``targets``, one each): 0 when no return feeds an operand. None when a chain can lead back to a target
    it started from: each link then runs through earlier operations on that target, so its length depends on
    the data.
    """
    deps = _Dependencies(func, params, names)
    feeds: dict[str, set[str]] = {target: set() for target in targets}  # target -> targets whose returns feed it
    for call, target in zip(calls, targets, strict=True):
        sources = deps._union(call.value_args)
        # A struct passed whole stands for its fields: "state" feeds whatever "state.acc" holds.
        feeds[target] |= {t for t in feeds if any(t == s or t.startswith(f"{s}.") for s in sources)}
    links: dict[str, int] = {}

    def longest(target: str, path: tuple[str, ...]) -> int | None:
        if target in path:
            return None
        if target not in links:
            lengths = [longest(source, (*path, target)) for source in feeds[target]]
            known = [length for length in lengths if length is not None]
            if len(known) < len(lengths):
                return None
            links[target] = max((length + 1 for length in known), default=0)
        return links[target]

    lengths = [longest(target, ()) for target in feeds]
    known = [length for length in lengths if length is not None]
    return None if len(known) < len(lengths) else max(known, default=0)
