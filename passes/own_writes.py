"""Forward what a thread stored into its own element to its later reads of that element:
``y[tid] = a`` ... ``y[tid] * b`` becomes ``y_own = a; y[tid] = y_own`` ... ``y_own * b``.

The replay runs after the forward, against memory in its final state, so a read of an array the launch writes
must come from a record, and a float record is a constant: the gradient through ``y[tid] * b`` back into ``a``
would be lost (plain Warp's replay reads the final value, wrong on ``y[tid] = y[tid] * y[tid]``). When only this
thread can write the element, the value read is the local the thread stored, so the read becomes that local and
the gradient flows through it.

Forwarded, in the kernel: reads ``y[i]`` of a 1-D array argument ``y`` that the kernel writes only with plain
stores ``y[i] = v`` at *own indices* of one family, where a store at the same index reaches the read on every path,
and no store at it sits in a loop around the read or between them. Anything else that could write ``y`` (an
atomic, ``+=``, a store at another index, ``y`` handed to a call or bound to a local) leaves ``y`` alone. The
families of own indices, each a set of locals no two threads share a value of:

- the thread's index: ``tid = wp.tid()``, assigned once at the top level;
- the slots of one counter: locals each assigned once, outside every loop, to ``wp.atomic_add(count, c..., k)`` on
  the same element of an int array argument ``count`` (constant indices ``c...``) with a positive int constant
  ``k``, where ``count`` is used otherwise only in such atomics and in reads (``counter_slots``). Proof that no
  other thread writes ``y[s]``: every write into ``count`` in the launch is one of those atomic adds (the kernel
  hands ``count`` to no call and no local, and the launch refuses arguments that share memory with one it writes),
  so the counter only grows, by at least one per add, and each add returns the value before its own increment: no
  two adds of the launch, in one thread or in two, return the same slot. ``y`` is written only at slots of that
  counter, so the element ``y[s]`` is written by the thread that took ``s`` alone, and within it only by the stores
  at ``s`` (two slot locals of the family never hold the same value either: a store at ``t`` leaves ``y[s]`` as it
  was). A store at ``s`` that reaches the read on every path, ``s`` unchanged in between (it is assigned once,
  outside loops), therefore wrote what the read sees.

The tree given is never changed: what changes is new, every statement left as it was is shared.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, cast

from warp_rewrite.passes.atomics import WarpNames, positional_arguments
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.syntax import walk


@dataclass(frozen=True)
class OwnArray:
    """A 1-D array argument whose elements at one family of own indices only this thread writes."""

    name: str
    family: frozenset[str]  # the own indices it is stored at (see the module's docstring)
    cast: str | None  # how the stored value is converted to the array's dtype (``wp.float64``), if it needs to be


def forward_own_writes(
    function: ast.FunctionDef,
    thread_index: str | None,
    candidates: dict[str, str | None],
    slots: dict[str, tuple] | None = None,
) -> ast.FunctionDef | None:
    """``function`` with reads of elements it stored itself replaced by the stored values; None if there is none.

    ``thread_index``: the local bound once to ``wp.tid()``; ``candidates``: the 1-D array parameters, each with the
    spelling of its dtype's constructor (None where stored values need no conversion); ``slots``: the slot locals of
    counters (``counter_slots``), each with its counter."""
    families = [frozenset({thread_index})] if thread_index is not None else []
    by_counter: dict[tuple, set[str]] = {}
    for local, counter in (slots or {}).items():
        by_counter.setdefault(counter, set()).add(local)
    families += [frozenset(locals_) for locals_ in by_counter.values()]
    arrays = {}
    for name, conversion in candidates.items():
        family = next((f for f in families if _written_only_at(function, name, f)), None)
        if family is not None:
            arrays[name] = OwnArray(name, family, conversion)
    if not arrays:
        return None
    forwarded: set[int] = set()
    _Forwarding(arrays, {}, forwarded).body(function.body, frozenset())
    if not forwarded:
        return None
    namer = Namer.for_tree(function)
    stored = [pair for node in walk(function) if isinstance(node, ast.stmt) and (pair := _store_pair(node, arrays))]
    pairs = list(dict.fromkeys(stored))  # in the order first stored
    used = {pair: namer.fresh(f"{pair[0]}_own") for pair in pairs if _reads_at(function, *pair) & forwarded}
    body = _Forwarding(arrays, used, forwarded).body(function.body, frozenset())
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
    return found[0] if _assigned_once(function, found[0]) else None


def leading_thread_index(function: ast.FunctionDef, is_tid: Callable[[ast.expr], bool]) -> str | None:
    """The thread's index (``thread_index``) where the kernel's first statement (after its docstring) binds it: the
    generated kernels index their records by it rather than by a ``wp.tid()`` of their own. None if there is none."""
    local = thread_index(function, is_tid)
    body = function.body[1:] if ast.get_docstring(function) is not None else function.body
    first = body[0] if body else None
    binds = isinstance(first, ast.Assign) and isinstance(first.targets[0], ast.Name) and first.targets[0].id == local
    return local if binds else None


def counter_slots(function: ast.FunctionDef, names: WarpNames, int_arrays: frozenset[str]) -> dict[str, tuple]:
    """The slot locals of the function's counters (see the module's docstring), each with its counter: the int array
    argument's name and the constant indices of its element."""
    nodes = walk(function)
    parents = {id(child): node for node in nodes for child in ast.iter_child_nodes(node)}
    adds: dict[int, tuple] = {}  # atomic adds of a positive constant on a constant element, by id: their counter
    for node in nodes:
        if isinstance(node, ast.Call) and names.atomic_op(node) == "add":
            target, *indices, value = positional_arguments(node)
            constant = all(isinstance(i, ast.Constant) and type(i.value) is int for i in indices)
            positive = isinstance(value, ast.Constant) and type(value.value) is int and value.value > 0
            if isinstance(target, ast.Name) and target.id in int_arrays and constant and positive:
                adds[id(node)] = (target.id, *(cast(ast.Constant, i).value for i in indices))
    counted = {counter[0] for counter in adds.values()}
    for node in nodes:
        if isinstance(node, ast.Name) and node.id in counted:
            parent = parents.get(id(node))
            read = isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, ast.Load)
            read = read and not isinstance(parents.get(id(parent)), ast.AugAssign | ast.Attribute | ast.Subscript)
            if not (read or (isinstance(parent, ast.Call) and id(parent) in adds)):
                counted.discard(node.id)  # written some other way, or handed on: not proven
    slots = {}
    for node in nodes:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        counter = adds.get(id(node.value))
        local = node.targets[0].id
        if counter is None or counter[0] not in counted or not _assigned_once(function, local):
            continue
        if not _in_loop(node, parents):
            slots[local] = counter
    return slots


def _assigned_once(function: ast.FunctionDef, local: str) -> bool:
    stores = [
        n for n in walk(function) if isinstance(n, ast.Name) and n.id == local and not isinstance(n.ctx, ast.Load)
    ]
    return len(stores) == 1 and local not in {a.arg for a in function.args.args}


def _in_loop(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    current = parents.get(id(node))
    while current is not None:
        if isinstance(current, ast.For | ast.While):
            return True
        current = parents.get(id(current))
    return False


def _is_own(node: ast.AST, array: str, index: str) -> bool:
    """Is ``node`` ``array[index]``?"""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == array
        and isinstance(node.slice, ast.Name)
        and node.slice.id == index
    )


def _own_store(statement: ast.stmt, array: str, family: frozenset[str]) -> str | None:
    """The own index of ``statement`` if it is a plain store ``array[i] = v`` at one of ``family``."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        found = next((index for index in family if _is_own(target, array, index)), None)
        if found is not None:
            return found
    return None


def _store_pair(statement: ast.stmt, arrays: dict[str, OwnArray]) -> tuple[str, str] | None:
    """(array, own index) if ``statement`` is a plain store into one of ``arrays`` at an own index of its family."""
    for array in arrays.values():
        index = _own_store(statement, array.name, array.family)
        if index is not None:
            return array.name, index
    return None


def _written_only_at(function: ast.FunctionDef, array: str, family: frozenset[str]) -> bool:
    """Is every use of ``array`` an element read or a plain store ``array[i] = v`` at an index of ``family``, nothing
    else that could write it (and ``.shape``)?"""
    nodes = walk(function)
    parents = {id(child): node for node in nodes for child in ast.iter_child_nodes(node)}
    stores = {id(s.targets[0]) for s in nodes if isinstance(s, ast.Assign) and _own_store(s, array, family)}
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


def _reads_at(function: ast.FunctionDef, array: str, index: str) -> set[int]:
    return {
        id(n)
        for n in walk(function)
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and _is_own(n, array, index)
    }


_Tree = TypeVar("_Tree", ast.expr, ast.stmt)


class _Forwarding:
    """One walk over the statements, knowing which (array, own index) pairs have a stored value on every path so
    far (``valid``).

    With no ``locals_`` it only notes the reads it can forward; with them (a local per pair whose reads it
    forwards), it makes the new statements."""

    def __init__(self, arrays: dict[str, OwnArray], locals_: dict[tuple[str, str], str], forwarded: set[int]):
        self.arrays, self.locals, self.forwarded, self.rewrite = arrays, locals_, forwarded, bool(locals_)

    def body(self, statements: list[ast.stmt], valid: frozenset[tuple[str, str]]) -> list[ast.stmt]:
        return self._block(statements, valid)[0]

    def statement(
        self, statement: ast.stmt, valid: frozenset[tuple[str, str]]
    ) -> tuple[list[ast.stmt], frozenset[tuple[str, str]]]:
        stored = _store_pair(statement, self.arrays)
        if stored is not None and isinstance(statement, ast.Assign):  # (_store_pair: an Assign)
            value = self.expression(statement.value, valid)
            local = self.locals.get(stored)
            if local is None:  # a pair none of whose reads is forwarded keeps its store
                kept = statement if value is statement.value else ast.copy_location(copy.copy(statement), statement)
                kept.value = value
                return [kept], valid | {stored}
            cast = self.arrays[stored[0]].cast
            converted = ast.Call(_dotted(cast), [value], []) if cast else value
            assign = ast.copy_location(ast.Assign([ast.Name(local, ast.Store())], converted), statement)
            store = ast.Assign([copy.deepcopy(statement.targets[0])], ast.Name(local, ast.Load()))
            # the new nodes at the store's place (the passes sort and report by position)
            placed: list[ast.stmt] = [
                ast.fix_missing_locations(assign),
                ast.fix_missing_locations(ast.copy_location(store, statement)),
            ]
            return placed, valid | {stored}
        if isinstance(statement, ast.If):
            test = self.expression(statement.test, valid)
            body, after_body = self._block(statement.body, valid)
            orelse, after_else = self._block(statement.orelse, valid)
            changed = test is not statement.test or body is not statement.body or orelse is not statement.orelse
            branch = copy.copy(statement) if changed else statement
            branch.test, branch.body, branch.orelse = test, body, orelse
            return [branch], after_body & after_else
        if isinstance(statement, ast.For | ast.While):
            stores_inside = {_store_pair(s, self.arrays) for s in walk(statement) if isinstance(s, ast.stmt)} - {None}
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

    def _block(
        self, statements: list[ast.stmt], valid: frozenset[tuple[str, str]]
    ) -> tuple[list[ast.stmt], frozenset[tuple[str, str]]]:
        result: list[ast.stmt] = []
        for statement in statements:
            new, valid = self.statement(statement, valid)
            result += new
        unchanged = len(result) == len(statements) and all(a is b for a, b in zip(result, statements, strict=True))
        return (statements if unchanged else result), valid

    def expression(self, node: _Tree, valid: frozenset[tuple[str, str]]) -> _Tree:
        """``node`` with its forwardable reads replaced (a copy, where any is)."""
        reads = {
            id(n): pair
            for n in walk(node)
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load)
            for pair in valid
            if _is_own(n, *pair)
        }
        if not reads:
            return node
        self.forwarded.update(reads)
        replaced = {read: self.locals[pair] for read, pair in reads.items() if pair in self.locals}
        if not self.rewrite or not replaced:
            return node
        return cast(_Tree, _Replace(replaced).visit(copy.deepcopy(node), node))


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
                pairs = zip(new_value, old_value, strict=True)
                setattr(copied, name, [self.visit(n, o) if isinstance(o, ast.AST) else n for n, o in pairs])
        return copied
