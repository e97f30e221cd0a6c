"""Which locals a loop carries: into its next iteration, or out of it to the code after it.

Warp's backward replays a dynamic loop's body with every local the loop changes at another trip's value: the value
the whole loop left it, whether or not a later trip of the forward saw the change. So a local the loop changes
anywhere, and an iteration may read before assigning it, is carried into the iterations (an update right before a
``break`` included: no later trip sees it, but each replayed trip does); the rewrite records and restores it at each
trip's start. Which reads see what is a question of reaching definitions, answered here over the function's
statements as a control-flow graph (with break, continue and return): a local is carried out of the loop when a
read outside it (later in the function, or in the next iteration of a loop around it) can see an assignment the
loop made. A local assigned before it is read, on every path through an iteration, carries nothing into it,
whatever it held before the loop. A store into a
component of a local value (``v[0] = x``, ``contact.depth = d``) reads the rest of it and assigns it; so does a
builtin that writes a local it is handed (``wp.hash_grid_query_next(query, j)`` assigns ``query`` and ``j``:
``passes.builtins.written_arguments``, handed in: the command line's ``--check`` reads loops without importing Warp,
and names them by ``passes.builtin_names``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Set
from dataclasses import dataclass, field

from warp_rewrite.passes.syntax import walk

# What the builtins a call makes write among the locals they are handed (``passes.builtins.written_arguments``).
WrittenBy = Callable[[ast.Call], list[ast.Name]]


@dataclass(frozen=True)
class CarriedLocals:
    """The locals a loop changes whose values cross its iterations' boundaries."""

    # changed by the loop and read by an iteration before it assigns them (and set before the loop)
    into_iterations: frozenset[str]
    out_of_loop: frozenset[str]  # read, where the loop's value reaches them, after the loop
    updated_only: frozenset[str]  # of those, the ones the loop changes only one component at a time
    assigned_in_loop_only: frozenset[str]  # of those carried out, the ones no assignment before the loop reaches


@dataclass
class _Loop:
    """Where a loop's points are: its head (each iteration's start: a while loop's condition, a for loop's next
    value) and every point of its body, numbered from the head on."""

    head: int
    points: range = range(0)
    breaks: list[int] = field(default_factory=list)


class LoopFlow:
    """Reaching definitions over one function's statements, for the loops in it (``carried``).

    Every simple statement, condition, for loop's range and loop head is a point that reads (``uses``) and assigns
    (``defines``) locals; point 0 assigns the parameters.
    """

    def __init__(
        self, function: ast.FunctionDef, holds_value: Callable[[str], bool], written_by: WrittenBy = lambda call: []
    ):
        """``holds_value``: does a local (or parameter) of this name hold a value (a vector, a matrix, a struct),
        which a store into a component changes, rather than memory (an array, a view), which such a store writes?
        ``written_by``: the locals a call's builtins write."""
        self.holds_value = holds_value
        self.written_by = written_by
        self.uses: list[frozenset[str]] = []
        self.defines: list[frozenset[str]] = []
        self.updates: list[frozenset[str]] = []  # of the locals a point defines, those it stores a component of
        self.successors: list[list[int]] = []
        self.loops: dict[ast.AST, _Loop] = {}
        self._point([], defines={a.arg for a in function.args.args})
        self._body(function.body, [0], None)
        # A bit per definition (a point and a local it assigns), and each local's definitions.
        self._bit_of: dict[tuple[int, str], int] = {}
        self._bits: dict[str, int] = {}
        for point, defined in enumerate(self.defines):
            for name in sorted(defined):
                bit = 1 << len(self._bit_of)
                self._bit_of[point, name] = bit
                self._bits[name] = self._bits.get(name, 0) | bit
        self._reaching = self._reaching_definitions()

    def carried(self, loop: ast.For | ast.While) -> CarriedLocals:
        """The locals ``loop`` (a loop of the function) carries. A for loop's variable (its own, or an inner loop's)
        is set before any read in an iteration, so it is never carried into one; read after the loop (Python keeps
        its last value, and so does Warp's forward), it is carried out."""
        where = self.loops[loop]
        inside = self._definitions_at(where.points)
        changed = {name for p in where.points for name in self.defines[p]}
        at_head = self._reaching[where.head]
        exposed = self._read_before_assigned(where)
        # Changed by the loop and read before assigned, with a value from before the loop (Warp carries only locals
        # that exist when the loop starts): whether or not an earlier iteration's value reaches the read, Warp's
        # backward replays each trip with the value the whole loop left it.
        into = {name for name in changed & exposed if at_head & ~inside & self._bits[name]}
        out = {
            name
            for p, uses in enumerate(self.uses)
            if p not in where.points
            for name in uses & changed
            if self._reaching[p] & inside & self._bits[name]
        }
        whole = {name for p in where.points for name in self.defines[p] - self.updates[p]}  # assigned whole somewhere
        inside_only = {name for name in out if not at_head & ~inside & self._bits[name]}
        return CarriedLocals(frozenset(into), frozenset(out), frozenset((into | out) - whole), frozenset(inside_only))

    # --- the graph ------------------------------------------------------------------------------------

    def _point(
        self,
        predecessors: list[int],
        uses: Set[str] = frozenset(),
        defines: Set[str] = frozenset(),
        updates: Set[str] = frozenset(),
    ) -> int:
        index = len(self.uses)
        self.uses.append(frozenset(uses))
        self.defines.append(frozenset(defines | updates))
        self.updates.append(frozenset(updates - defines))
        self.successors.append([])
        self._link(predecessors, index)
        return index

    def _link(self, sources: list[int], target: int) -> None:
        for source in sources:
            self.successors[source].append(target)

    def _body(self, statements: list[ast.stmt], ends: list[int], loop: _Loop | None) -> list[int]:
        """Add the statements after the points ``ends``; returns the points control leaves them from."""
        for statement in statements:
            ends = self._statement(statement, ends, loop)
        return ends

    def _statement(self, node: ast.stmt, ends: list[int], loop: _Loop | None) -> list[int]:
        if isinstance(node, ast.If):
            test = self._point(ends, *self._evaluated(node.test))
            return self._body(node.body, [test], loop) + self._body(node.orelse, [test], loop)
        if isinstance(node, ast.While):  # (while wp.hash_grid_query_next(query, j): assigns query and j)
            head = self._point(ends, *self._evaluated(node.test))
            return self._loop(node, head, loop)
        if isinstance(node, ast.For):
            start = self._point(ends, *self._evaluated(node.iter))  # the range, evaluated once
            head = self._point([start], defines=_assigned(node.target))
            return self._loop(node, head, loop)
        if isinstance(node, ast.Break | ast.Continue) and loop is not None:  # (outside a loop, Warp refuses them)
            jump = self._point(ends)
            if isinstance(node, ast.Break):
                loop.breaks.append(jump)
            else:
                self._link([jump], loop.head)
            return []
        if isinstance(node, ast.Return):
            self._point(ends, _reads(node.value) if node.value is not None else set())
            return []
        reads, assigned = self._evaluated(node)
        assigned |= _assigned(node)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            reads.add(node.target.id)  # x += v reads x
        updated = {name for name in _component_stores(node) if self.holds_value(name)}
        return [self._point(ends, reads | updated, assigned, updated)]

    def _evaluated(self, node: ast.AST) -> tuple[set[str], set[str]]:
        """The locals evaluating ``node`` reads, and those the builtins it calls write (each also read: a builtin may
        leave it as it was, as a query's step does at its end)."""
        written = {local.id for call in walk(node) if isinstance(call, ast.Call) for local in self.written_by(call)}
        return _reads(node) | written, written

    def _loop(self, node: ast.For | ast.While, head: int, outer: _Loop | None) -> list[int]:
        loop = _Loop(head)
        self._link(self._body(node.body, [head], loop), head)
        loop.points = range(head, len(self.uses))
        self.loops[node] = loop
        return self._body(node.orelse, [head], outer) + loop.breaks

    # --- the analyses ---------------------------------------------------------------------------------

    def _reaching_definitions(self) -> list[int]:
        """For each point, the definitions reaching it."""
        generated = [self._definitions_at([p]) for p in range(len(self.defines))]
        killed = [sum(self._bits[name] for name in names) for names in self.defines]
        predecessors: list[list[int]] = [[] for _ in self.successors]
        for point, successors in enumerate(self.successors):
            for successor in successors:
                predecessors[successor].append(point)
        reaching, leaving = [0] * len(self.uses), [0] * len(self.uses)
        changed = True
        while changed:
            changed = False
            for point in range(len(self.uses)):
                arriving = 0
                for predecessor in predecessors[point]:
                    arriving |= leaving[predecessor]
                out = generated[point] | (arriving & ~killed[point])
                if arriving != reaching[point] or out != leaving[point]:
                    reaching[point], leaving[point] = arriving, out
                    changed = True
        return reaching

    def _definitions_at(self, points) -> int:
        bits = 0
        for point in points:
            for name in self.defines[point]:
                bits |= self._bit_of[point, name]
        return bits

    def _read_before_assigned(self, loop: _Loop) -> frozenset[str]:
        """Locals an iteration may read before assigning them: live at its start, following paths that stay in
        the iteration (not back to its head, not out of the loop)."""
        live: dict[int, frozenset[str]] = {point: frozenset() for point in loop.points}
        changed = True
        while changed:
            changed = False
            for point in reversed(loop.points):
                after: set[str] = set()
                for successor in self.successors[point]:
                    if successor in loop.points and successor != loop.head:
                        after |= live[successor]
                before = self.uses[point] | (after - self.defines[point])
                if before != live[point]:
                    live[point] = before
                    changed = True
        return live[loop.head]


def _reads(node: ast.AST) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _component_stores(node: ast.stmt) -> set[str]:
    """The names whose components a statement stores into: ``v`` for ``v[0] = x``, ``v.x += y`` or ``m[i][j] = z``."""
    if isinstance(node, ast.Assign):
        targets: list[ast.expr] = [
            t for target in node.targets for t in walk(target) if isinstance(t, ast.Subscript | ast.Attribute)
        ]
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    else:
        return set()
    names = set()
    for target in targets:
        if isinstance(target, ast.Subscript | ast.Attribute) and isinstance(target.ctx, ast.Store):
            while isinstance(target, ast.Subscript | ast.Attribute):
                target = target.value
            if isinstance(target, ast.Name):
                names.add(target.id)
    return names


def _assigned(node: ast.AST) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
