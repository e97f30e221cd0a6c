"""Forward what a thread stored into its own element to its later reads of that element:
``y[tid] = a`` ... ``y[tid] * b`` becomes ``y_own = a; y[tid] = y_own`` ... ``y_own * b``.

The replay runs after the forward, against memory in its final state, so a read of an array the launch writes
must come from a record, and a float record is a constant: the gradient through ``y[tid] * b`` back into ``a``
would be lost (plain Warp's replay reads the final value, wrong on ``y[tid] = y[tid] * y[tid]``). When only this
thread can write the element, the value read is the local the thread stored, so the read becomes that local and
the gradient flows through it.

Forwarded, in the kernel: reads ``y[tid]`` of a 1-D array argument ``y`` that the kernel writes only with plain
stores ``y[tid] = v`` at the thread's index (``tid = wp.tid()``, assigned once), where a store reaches the read on
every path, and no store sits in a loop around the read or between them. Anything else that could write ``y``
(an atomic, ``+=``, a store at another index, ``y`` handed to a call or bound to a local) leaves ``y`` alone.
The tree given is never changed: what changes is new, every statement left as it was is shared.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, cast

from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.syntax import walk

_BODIES = ("body", "orelse")


@dataclass(frozen=True)
class OwnArray:
    """A 1-D array argument whose element ``tid`` only this thread writes, with the local that holds it."""

    name: str
    local: str
    cast: str | None  # how the stored value is converted to the array's dtype (``wp.float64``), if it needs to be


def forward_own_writes(
    function: ast.FunctionDef, thread_index: str | None, candidates: dict[str, str | None]
) -> ast.FunctionDef | None:
    """``function`` with reads of elements it stored itself replaced by the stored values; None if there is none.

    ``thread_index``: the local bound once to ``wp.tid()``; ``candidates``: the 1-D array parameters, each with the
    spelling of its dtype's constructor (None where stored values need no conversion)."""
    if thread_index is None:
        return None
    namer = Namer.for_tree(function)
    arrays = {
        name: OwnArray(name, namer.fresh(f"{name}_own"), cast)
        for name, cast in candidates.items()
        if _written_only_at(function, name, thread_index)
    }
    forwarded: set[int] = set()
    _Forwarding(arrays, thread_index, forwarded, rewrite=False).body(function.body, frozenset())
    if not forwarded:
        return None
    used = {name: own for name, own in arrays.items() if any(r in forwarded for r in _reads_of(function, name))}
    body = _Forwarding(used, thread_index, forwarded, rewrite=True).body(function.body, frozenset())
    result = copy.copy(function)
    result.body = body
    return result


def thread_index(function: ast.FunctionDef, is_tid: Callable[[ast.expr], bool]) -> str | None:
    """The local the kernel binds once, at its top level, to ``wp.tid()``; None if there is none."""
    found = [
        s.targets[0].id
        for s in function.body
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) and is_tid(s.value)
    ]
    if len(found) != 1:
        return None
    stores = [
        n for n in walk(function) if isinstance(n, ast.Name) and n.id == found[0] and not isinstance(n.ctx, ast.Load)
    ]
    return found[0] if len(stores) == 1 else None


def _is_own(node: ast.AST, array: str, index: str) -> bool:
    """Is ``node`` ``array[index]``?"""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == array
        and isinstance(node.slice, ast.Name)
        and node.slice.id == index
    )


def _own_store(statement: ast.stmt, array: str, index: str) -> bool:
    return (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and _is_own(statement.targets[0], array, index)
    )


def _written_only_at(function: ast.FunctionDef, array: str, index: str) -> bool:
    """Is every use of ``array`` an element read or a plain store ``array[index] = v``, nothing else that could
    write it (and ``.shape``)?"""
    nodes = walk(function)
    parents = {id(child): node for node in nodes for child in ast.iter_child_nodes(node)}
    stores = {id(s.targets[0]) for s in nodes if isinstance(s, ast.Assign) and _own_store(s, array, index)}
    for node in nodes:
        if not (isinstance(node, ast.Name) and node.id == array):
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.attr == "shape":
            continue
        if not (isinstance(parent, ast.Subscript) and parent.value is node):
            return False  # handed to a call, bound to a local, a target of its own
        if isinstance(parent.ctx, ast.Store) and id(parent) not in stores:
            return False  # a store at another index, or into a component
        grand = parents.get(id(parent))
        if isinstance(grand, ast.AugAssign) and grand.target is parent:
            return False  # ``y[i] += v``
        if isinstance(grand, ast.Attribute | ast.Subscript) and isinstance(grand.ctx, ast.Store):
            return False  # ``y[i].x = v``, ``y[i][0] = v``
    return True


def _reads_of(function: ast.FunctionDef, array: str) -> list[int]:
    return [
        id(n)
        for n in walk(function)
        if isinstance(n, ast.Subscript)
        and isinstance(n.ctx, ast.Load)
        and isinstance(n.value, ast.Name)
        and n.value.id == array
    ]


_Tree = TypeVar("_Tree", ast.expr, ast.stmt)


class _Forwarding:
    """One walk over the statements, knowing which arrays have a stored value on every path so far (``valid``).

    Without ``rewrite`` it only notes the reads it can forward; with it, it makes the new statements."""

    def __init__(self, arrays: dict[str, OwnArray], index: str, forwarded: set[int], rewrite: bool):
        self.arrays, self.index, self.forwarded, self.rewrite = arrays, index, forwarded, rewrite

    def body(self, statements: list[ast.stmt], valid: frozenset[str]) -> list[ast.stmt]:
        result = []
        for statement in statements:
            new, valid = self.statement(statement, valid)
            result += new
        unchanged = len(result) == len(statements) and all(a is b for a, b in zip(result, statements, strict=True))
        return statements if unchanged else result

    def statement(self, statement: ast.stmt, valid: frozenset[str]) -> tuple[list[ast.stmt], frozenset[str]]:
        stored = next((a for a in self.arrays.values() if _own_store(statement, a.name, self.index)), None)
        if stored is not None and isinstance(statement, ast.Assign):  # (_own_store: an Assign)
            value = self.expression(statement.value, valid)
            if not self.rewrite:
                return [statement], valid | {stored.name}
            cast = ast.Call(_dotted(stored.cast), [value], []) if stored.cast else value
            local = ast.copy_location(ast.Assign([ast.Name(stored.local, ast.Store())], cast), statement)
            store = ast.Assign([copy.deepcopy(statement.targets[0])], ast.Name(stored.local, ast.Load()))
            # the new nodes at the store's place (the passes sort and report by position)
            placed: list[ast.stmt] = [
                ast.fix_missing_locations(local),
                ast.fix_missing_locations(ast.copy_location(store, statement)),
            ]
            return placed, valid | {stored.name}
        if isinstance(statement, ast.If):
            test = self.expression(statement.test, valid)
            body, after_body = self._block(statement.body, valid)
            orelse, after_else = self._block(statement.orelse, valid)
            changed = test is not statement.test or body is not statement.body or orelse is not statement.orelse
            new = copy.copy(statement) if changed else statement
            new.test, new.body, new.orelse = test, body, orelse
            return [new], after_body & after_else
        if isinstance(statement, ast.For | ast.While):
            stores_inside = {a for a in self.arrays if _stores(statement, a, self.index)}
            inside = valid - stores_inside  # a store inside reaches the next iteration's reads only on some paths
            header = "iter" if isinstance(statement, ast.For) else "test"
            head = self.expression(getattr(statement, header), valid)
            body, _ = self._block(statement.body, inside)
            orelse, _ = self._block(statement.orelse, inside)
            changed = (
                head is not getattr(statement, header) or body is not statement.body or orelse is not statement.orelse
            )
            loop = copy.copy(statement) if changed else statement
            setattr(loop, header, head)
            loop.body, loop.orelse = body, orelse
            return [loop], valid - stores_inside
        return [self.expression(statement, valid)], valid

    def _block(self, statements: list[ast.stmt], valid: frozenset[str]) -> tuple[list[ast.stmt], frozenset[str]]:
        result = []
        for statement in statements:
            new, valid = self.statement(statement, valid)
            result += new
        unchanged = len(result) == len(statements) and all(a is b for a, b in zip(result, statements, strict=True))
        return (statements if unchanged else result), valid

    def expression(self, node: _Tree, valid: frozenset[str]) -> _Tree:
        """``node`` with its forwardable reads replaced (a copy, where any is)."""
        reads = {  # the id of each read -> its array
            id(n): n.value.id
            for n in walk(node)
            if isinstance(n, ast.Subscript)
            and isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Name)
            and any(_is_own(n, a, self.index) for a in valid)
        }
        if not reads:
            return node
        self.forwarded.update(reads)
        if not self.rewrite:
            return node
        replaced = _Replace({read: self.arrays[array].local for read, array in reads.items()})
        # cast: replacing reads (subscripts) by locals leaves an expression an expression, a statement a statement.
        return cast(_Tree, replaced.visit(copy.deepcopy(node), node))


def _stores(loop: ast.stmt, array: str, index: str) -> bool:
    return any(isinstance(s, ast.stmt) and _own_store(s, array, index) for s in walk(loop))


def _dotted(spelling: str) -> ast.expr:
    return ast.parse(spelling, mode="eval").body


class _Replace:
    """Replace the subscripts whose originals' ids are given by locals, in a deep copy of the original."""

    def __init__(self, locals_by_id: dict[int, str]):
        self.locals_by_id = locals_by_id

    def visit(self, copied: ast.AST, original: ast.AST) -> ast.AST:
        if id(original) in self.locals_by_id:
            return ast.copy_location(ast.Name(self.locals_by_id[id(original)], ast.Load()), original)
        for (name, new_value), (_, old_value) in zip(ast.iter_fields(copied), ast.iter_fields(original), strict=True):
            if isinstance(old_value, ast.AST):
                setattr(copied, name, self.visit(new_value, old_value))
            elif isinstance(old_value, list):
                setattr(
                    copied,
                    name,
                    [
                        self.visit(n, o) if isinstance(o, ast.AST) else n
                        for n, o in zip(new_value, old_value, strict=True)
                    ],
                )
        return copied
