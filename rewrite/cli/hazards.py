"""Which helpers a kernel's calls reach that consume an atomic's return or hold a loop Warp's backward replays wrong,
and which calls cannot be followed: what
``--check`` reports (``warp_rewrite.cli.lint``) and what the rewrite mode decides which kernels to rewrite by
(``warp_rewrite.cli.emit``). Found across the project's files without importing them."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from warp_rewrite.cli.module_ints import module_int
from warp_rewrite.cli.project import Project, Unfollowed, Unresolved, callee_expression
from warp_rewrite.cli.source_file import position
from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.passes import memory
from warp_rewrite.passes.constant_ranges import known_bounds
from warp_rewrite.passes.loop_hazards import (
    Callees,
    LoopHazard,
    reads_overwritten,
    values_needed,
    writes_gradient_memory,
)
from warp_rewrite.passes.naming import RUNTIME_NAME
from warp_rewrite.passes.syntax import parent_map


@dataclass(frozen=True)
class HelperHazard:
    """A helper, called from a kernel, that consumes an atomic's return (itself or through other helpers)."""

    call: ast.Call  # the call in the kernel
    helper: str  # the name the kernel calls
    consumer: str  # the function that consumes the return
    where: str  # path:line:col of the consumed atomic
    op: str


@dataclass(frozen=True)
class HelperLoop:
    """A helper, called from a kernel, that holds a loop Warp's backward replays wrong (``passes.loop_hazards``),
    itself or through other helpers."""

    call: ast.Call  # the call in the kernel
    helper: str  # the name the kernel calls
    holder: str  # the function holding the loop
    where: str  # path:line:col of the loop


@dataclass(frozen=True)
class Unknown:
    """A call in a kernel that may reach a helper the check cannot follow (``via``: the helper in between)."""

    call: ast.Call
    miss: Unfollowed | Unresolved
    via: str | None


@dataclass(frozen=True)
class ReachedHelper:
    """A helper a kernel's calls reach, and the file it is defined in."""

    module: StaticModule
    definition: ast.FunctionDef


@dataclass
class KernelCalls:
    """What a kernel's calls reach: consuming helpers, and calls that could not be followed."""

    hazards: list[HelperHazard] = field(default_factory=list)
    loops: list[HelperLoop] = field(default_factory=list)
    unknown: list[Unknown] = field(default_factory=list)
    # calls of a helper known only at run time, each of whose candidates consumes an atomic's return: a hazard (in
    # ``hazards`` too) whichever runs, but the source does not say which one to rewrite
    undecided: list[Unknown] = field(default_factory=list)
    reached: dict[int, ReachedHelper] = field(default_factory=dict)  # every helper called, at any depth, by id
    # the names the kernel calls a helper through that are not the helper's own (``put = put_square``), with it
    aliases: dict[str, ReachedHelper] = field(default_factory=dict)


@dataclass
class _Scan:
    """One helper, scanned once: its first consumed atomic and its first loop Warp's backward replays wrong (its own
    or its callees'), the misses below it and the helpers it reaches (itself included)."""

    consumer: tuple[str, str, str] | None  # (name, where, op)
    loop: tuple[str, str] | None  # (name, where)
    misses: list[Unfollowed | Unresolved]
    reached: dict[int, ReachedHelper]


class HazardFinder:
    """Follows the calls of kernels into helpers across the project, each helper scanned once."""

    def __init__(self, project: Project):
        self.project = project
        self._scans: dict[int, _Scan] = {}
        self._writes: dict[int, bool] = {}  # helper -> may it write memory a gradient flows through

    def reads_written(self, module: StaticModule, kernel: ast.FunctionDef) -> frozenset[str]:
        """The argument paths of the arrays the kernel's launch writes whose reads Warp's backward replays wrong: those
        it updates (an atomic, an augmented assignment into an element or a field) and reads (an element), and those
        it stores into at the index a read reads, after the read, where the value read is needed
        (``loop_hazards.reads_overwritten``, ``values_needed``), in the kernel and the
        helpers it calls, each helper's parameters bound to the paths its call hands it by name: the question
        ``passes.fence.Fence.reads_written`` asks the rewrite, read off the source as ``--check`` reads it, without
        Warp. A helper with a hand-written gradient counts for nothing: Warp's backward never replays its body."""
        updated: set[str | None] = set()
        read: set[str | None] = set()
        reads: list[tuple[StaticModule, ast.FunctionDef, ast.Subscript, str | None]] = []
        stores: list[tuple[ast.FunctionDef, ast.Subscript, str | None]] = []  # ``a[i] = v``
        seen: set[tuple] = set()
        pending: list[tuple[StaticModule, ast.FunctionDef, dict[str, str | None]]] = [
            (module, kernel, {a.arg: a.arg for a in kernel.args.args})
        ]
        while pending:
            owner, function, paths = pending.pop()
            key = (id(function), tuple(sorted(paths.items(), key=repr)))
            if key in seen:
                continue
            seen.add(key)
            names = owner.warp.names()
            nodes = owner.function_nodes(function)
            scopes = owner.scopes_in(function, nodes)
            paths = paths | _aliases(nodes, paths)
            for load in memory.loads(nodes, parent_map(nodes), names):
                reads.append((owner, function, load, path := _argument_path(load, paths)))
                read.add(path)
            for node in nodes:
                if isinstance(node, ast.AugAssign):
                    updated |= {_argument_path(array, paths) for array in memory.stored_arrays(node)}
                elif isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    stores += [
                        (function, target, _argument_path(target.value, paths))
                        for target in (t for top in targets for t in ast.walk(top))
                        if isinstance(target, ast.Subscript) and isinstance(target.ctx, ast.Store)
                    ]
                elif isinstance(node, ast.Call) and names.atomic_op(node) is not None and node.args:
                    updated.add(_argument_path(node.args[0], paths))
                elif isinstance(node, ast.Call):
                    found = self.project.resolve(owner, node, scopes)
                    if isinstance(found, tuple) and not found[0].has_gradient(found[1]):
                        pending.append((*found, _bound(node, found[1], paths)))
        grouped: dict[tuple[int, str], tuple[StaticModule, ast.FunctionDef, list[ast.Subscript]]] = {}
        for owner, function, load, path in reads:
            if path is not None and path not in updated:
                grouped.setdefault((id(function), path), (owner, function, []))[2].append(load)
        needed = set()
        for (_, path), (owner, function, loads) in grouped.items():
            stored = [store for f, store, p in stores if f is function and p == path]
            if values_needed(
                function, reads_overwritten(function, loads, stored), owner.warp.names(), function is kernel
            ):
                needed.add(path)
        return frozenset(path for path in (updated & read) | needed if path is not None)

    def loop_hazards(self, module: StaticModule, function: ast.FunctionDef) -> list[LoopHazard]:
        """The loops of ``function`` (in ``module``) Warp's backward replays wrong and some gradient depends on
        (``passes.loop_hazards``), with the helpers its calls reach followed across the project."""
        if module.has_gradient(function):
            return []  # Warp's backward calls the hand-written gradient, never this body

        def value_of(name: str) -> int | None:
            return module_int(self.project, module, function, name)

        # Range bounds read as int constants, as the rewrite reads them (``pipeline.with_known_bounds``)
        read = known_bounds(function, value_of, min(module.warp.names().modules), RUNTIME_NAME) or function
        return module.loop_hazards(read, self._helper_writes(module, function))

    def _helper_writes(self, module: StaticModule, function: ast.FunctionDef) -> Callable[[ast.Call], bool]:
        """Whether a call in ``function`` of a helper may write memory a gradient flows through: True where the
        call cannot be followed; False for what is no ``@wp.func`` (Warp's builtins, structs, constructors)."""
        scopes = module.scopes_in(function, module.function_nodes(function))

        def writes(call: ast.Call) -> bool:
            found = self.project.resolve(module, call, scopes)
            if isinstance(found, Unfollowed | Unresolved):
                return True
            return found is not None and self._writes_gradient(*found)

        return writes

    def _writes_gradient(self, owner: StaticModule, helper: ast.FunctionDef) -> bool:
        if id(helper) not in self._writes:
            self._writes[id(helper)] = False  # a recursive call adds nothing (Warp compiles none)
            callees = Callees(owner.warp.names(), self._helper_writes(owner, helper))
            self._writes[id(helper)] = writes_gradient_memory(helper, callees)
        return self._writes[id(helper)]

    def kernel_calls(self, module: StaticModule, function: ast.FunctionDef) -> KernelCalls:
        """Each call in ``function`` of a helper that consumes an atomic's return (at any depth), in source
        order, and the calls that could not be followed."""
        result = KernelCalls()
        nodes = module.function_nodes(function)
        scopes = module.scopes_in(function, nodes)
        for call in sorted((n for n in nodes if isinstance(n, ast.Call)), key=position):
            found = self.project.resolve(module, call, scopes)
            consumer = self._every_candidate_consumes(found) if isinstance(found, Unresolved) else None
            if consumer is not None and isinstance(found, Unresolved):
                result.hazards.append(HelperHazard(call, found.helper, *consumer))
                result.undecided.append(Unknown(call, found, None))
            elif isinstance(found, Unfollowed | Unresolved):
                result.unknown.append(Unknown(call, found, None))
            elif found is not None:
                scan = self._scan(*found)
                name = found[1].name
                result.reached |= scan.reached
                called, _ = callee_expression(module, call)
                if isinstance(called, ast.Name) and called.id != name:
                    result.aliases.setdefault(called.id, ReachedHelper(*found))
                if scan.consumer is not None:
                    result.hazards.append(HelperHazard(call, name, *scan.consumer))
                if scan.loop is not None:
                    result.loops.append(HelperLoop(call, name, *scan.loop))
                result.unknown += [Unknown(call, miss, name) for miss in scan.misses]
        return result

    def _every_candidate_consumes(self, miss: Unresolved) -> tuple[str, str, str] | None:
        """Where the first helper ``miss`` may be consumes an atomic's return (``_Scan.consumer``), where every one
        of them does; else None."""
        consumers = [self._scan(*candidate).consumer for candidate in miss.candidates]
        return consumers[0] if consumers and all(consumers) else None

    @staticmethod
    def _merge(misses: list[Unfollowed | Unresolved], more: list[Unfollowed | Unresolved]) -> None:
        """Add to ``misses`` those of ``more`` that say something new: a helper that calls the same unknown callee
        twice (or reaches it along two paths) is one finding for the kernel, not one per call."""
        seen = {_miss_key(miss) for miss in misses}
        for miss in more:
            if _miss_key(miss) not in seen:
                seen.add(_miss_key(miss))
                misses.append(miss)

    def _scan(self, owner: StaticModule, helper: ast.FunctionDef) -> _Scan:
        if id(helper) in self._scans:
            return self._scans[id(helper)]
        scan = self._scans[id(helper)] = _Scan(
            None, None, [], {id(helper): ReachedHelper(owner, helper)}
        )  # a recursive call finds nothing more
        if owner.has_replay(helper):  # Warp's backward calls the hand-written replay instead
            return scan
        consumed = owner.consumed(helper)
        if consumed:
            scan.consumer = (helper.name, owner.location(consumed[0].node), consumed[0].op)
        loops = self.loop_hazards(owner, helper)
        if loops:
            scan.loop = (helper.name, owner.location(loops[0].loop))
        nodes = owner.function_nodes(helper)
        scopes = owner.scopes_in(helper, nodes)
        for call in sorted((n for n in nodes if isinstance(n, ast.Call)), key=position):
            found = self.project.resolve(owner, call, scopes)
            if isinstance(found, Unfollowed | Unresolved):
                self._merge(scan.misses, [found])
            elif found is not None:
                inner = self._scan(*found)
                scan.consumer = scan.consumer or inner.consumer
                scan.loop = scan.loop or (None if owner.has_gradient(helper) else inner.loop)
                self._merge(scan.misses, inner.misses)
                scan.reached |= inner.reached
        return scan


def _miss_key(miss: Unfollowed | Unresolved) -> tuple[str, str]:
    """What a miss says: the callee and why it cannot be followed (not where it is called)."""
    return miss.helper, miss.module if isinstance(miss, Unfollowed) else miss.reason


def launched_kernel(call: ast.Call) -> ast.expr | None:
    """The kernel argument of a ``wp.launch`` call: the first positional one or ``kernel=``."""
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "kernel"), None)


def _argument_path(expr: ast.expr, paths: dict[str, str | None]) -> str | None:
    """The kernel argument path of the array ``expr`` indexes or names (``s.arr`` for ``s.arr[i][0]``), where the
    function's ``paths`` tell it."""
    parts = memory.path_parts(expr)
    root = paths.get(parts[0]) if parts is not None else None
    return None if root is None or parts is None else ".".join([root, *parts[1:]])


def _bound(call: ast.Call, helper: ast.FunctionDef, paths: dict[str, str | None]) -> dict[str, str | None]:
    """The kernel argument path each parameter of ``helper`` is handed by ``call`` (None: none, or a view)."""
    parameters = [a.arg for a in helper.args.args]
    handed = dict(zip(parameters, call.args, strict=False))
    handed |= {k.arg: k.value for k in call.keywords if k.arg in parameters}
    return {
        name: None if isinstance(value, ast.Subscript) else _argument_path(value, paths)
        for name, value in handed.items()
    }


def _aliases(nodes: list[ast.AST], paths: dict[str, str | None]) -> dict[str, str | None]:
    """Locals bound once to memory the function's ``paths`` tell (``values = holder.values``), with its path."""
    bound: dict[str, list[ast.expr]] = {}
    for node in nodes:
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id not in paths:
                    bound.setdefault(target.id, []).append(node.value if node.value is not None else target)
    return {
        name: _argument_path(values[0], paths)
        for name, values in bound.items()
        if len(values) == 1 and isinstance(values[0], ast.Name | ast.Attribute)
    }
