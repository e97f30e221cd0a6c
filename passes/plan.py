"""Plan the rewrite of one kernel: which atomics get records, in which loops and helper calls, under which names.

Records are laid out by *coordinates*: a consumed atomic's record index is built from the thread index and the
iteration number of every loop around it (across helper calls), ``((thread * cap1 + t1) * cap2 + t2)...``.
Coordinates, unlike a per-thread counter, survive Warp's backward: its reverse pass replays each iteration of
a dynamic loop with the loop variable restored but every loop-carried local at its final value.

A helper (``@wp.func``) that consumes an atomic's return, directly or deeper, is cloned for each call path,
so every call site gets records of its own.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

from warp_rewrite.passes import builtins, dtypes, memory
from warp_rewrite.passes.atomics import AtomicCall, WarpNames, positional_arguments
from warp_rewrite.passes.constant_ranges import bound_value
from warp_rewrite.passes.dataflow import argument_path, is_view
from warp_rewrite.passes.launch_trips import argument_range
from warp_rewrite.passes.layout import only_compared
from warp_rewrite.passes.loop_hazards import overwritten_results, own_jumps, unrolled_by_warp
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.plan_types import (
    Carried,
    Clone,
    Frontend,
    FunctionPlan,
    HelperCall,
    KernelPlan,
    Loop,
    Site,
    Unit,
    overlap,
)
from warp_rewrite.passes.read_back import Analysis, MemoryAccesses, bound_arguments
from warp_rewrite.passes.refusals import EXACT_OPS, Refusal, check_exact_families, check_loop
from warp_rewrite.passes.syntax import walk


class Planner(MemoryAccesses):
    """Builds the plan of one kernel, with names fresh in ``namer``.

    ``exact_targets``: argument paths of the targets whose float returns get exact gradients; ``analyses``: what
    an earlier planner of the same kernel read off its functions, to be read again rather than recomputed.
    """

    def __init__(
        self,
        frontend: Frontend,
        namer: Namer,
        exact_targets: frozenset[str] = frozenset(),
        analyses: dict[int, Analysis] | None = None,
    ):
        super().__init__(frontend, analyses)
        self.namer = namer
        self.exact_targets = exact_targets
        self.shadows: dict[str, str] = {}
        self.marks: dict[str, str] = {}
        self.pools: frozenset[str] = frozenset()
        self._consuming: dict[int, bool] = {}
        self._replayed_wrong: dict[int, bool] = {}
        self.loop_ids = itertools.count()
        self.loops: list[Loop] = []
        self.sites: list[Site] = []

    def plan(self) -> KernelPlan:
        namer = self.namer
        hazards = self._consumes(self.kernel, set()) or self._has_loop_hazards(self.kernel, set())
        if not hazards and not self.reads_written():  # (which finds the arrays the launch writes)
            return KernelPlan(FunctionPlan(self.kernel, self.kernel.name), [], [], self.written)  # nothing to record
        identity = {p: p for p in self.params}
        if hazards:
            self.narrowed = self._narrowed_types()
            self.written = self._written_paths()
        self.pools = self._pools()
        root = self._plan(self.kernel, identity, (), namer.fresh_base(self.kernel.name))
        check_exact_families(self.kernel, self.sites)
        copied = self._copied(root)
        exact = {site.target for site in self.sites if site.exact or site.shadow}  # their atomics stay in a dry run
        read_at = {path: places for path, places in copied.items() if places and path not in exact}
        return KernelPlan(root, self.loops, self.sites, self.written, frozenset(copied), self.narrowed, read_at)

    def _plan(
        self,
        unit: Unit,
        paths: dict[str, str | None],
        outer: tuple[int, ...],
        name: str,
        views: frozenset[str] = frozenset(),
    ) -> FunctionPlan:
        """The plan of one function; ``paths``: the kernel path each parameter names, ``views``: the parameters
        bound to a view of an array (``arr[i]``) rather than a whole one."""
        facts = self.analysis(unit)
        names = facts.names
        parents, aliases = facts.parents, facts.aliases
        unconsumed: dict[ast.AST, str | None] = {}
        stores: dict[ast.stmt, str] = {}
        loops: dict[ast.AST, Loop] = {}
        unit_params = [a.arg for a in unit.tree.args.args]

        kernel_path = self._path_of(unit, paths)

        atomics = facts.atomics
        exact = [c for c in atomics if kernel_path(c.target) in self.exact_targets]
        exact += [_as_atomic_call(w, names) for w in facts.writes if kernel_path(w.target) in self.exact_targets]
        recorded = [c for c in atomics if c.consumed and c not in exact] + exact
        for call in atomics:
            if not call.consumed and call not in exact:
                unconsumed[parents[call.node]] = kernel_path(call.target)
        for write in facts.writes:
            # a component update of a local vector (``v[0] += a``) writes no memory: the replay keeps it
            if (path := kernel_path(write.target)) is not None and path not in self.exact_targets:
                unconsumed[write] = path
        for node in facts.nodes:
            if not isinstance(node, ast.stmt):
                continue  # (only statements store)
            stored = [path for array in facts.stored_memory(node) if (path := kernel_path(array)) in self.written]
            if stored and not isinstance(node, ast.AugAssign):
                stores[node] = stored[0]
            elif stored:  # a field of an element (``bodies[b].mass += m``): Warp's atomic on that one slot
                unconsumed.setdefault(node, stored[0])
        self._check_exact_accesses(unit, paths, unit_params, aliases)
        self._check_builtin_reads(unit, kernel_path)
        helper_calls = self._helper_calls(unit, [c for c in atomics if c.consumed], kernel_path)

        # A loop with nothing differentiable inside needs no replay: keep only what it hands on.
        opaque = sorted(self._opaque_loops(unit, atomics, kernel_path), key=lambda n: (n.lineno, n.col_offset))
        for loop in opaque:
            loops[loop] = self._new_opaque_loop(unit, loop)
        hidden = lambda node: any(loop in opaque for loop in _enclosing(node, parents, unit.tree))  # noqa: E731
        recorded = [c for c in recorded if not hidden(_statement_or_call(c))]
        reads = [(node, path) for node, path in self._reads(unit, kernel_path) if not hidden(node)]
        relevant: list[ast.expr | ast.stmt] = [_statement_or_call(c) for c in recorded]
        relevant += [helper_call.call for helper_call in helper_calls if helper_call.records]
        relevant += [node for node, _ in reads] + list(opaque)
        # Loops Warp's backward replays wrong on their own: each gets a Loop, as do the loops around it.
        relevant += [hazard.loop.body[0] for hazard in facts.loop_hazards if not hidden(hazard.loop)]
        for node in sorted(relevant, key=lambda n: (n.lineno, n.col_offset)):
            for loop in _enclosing(node, parents, unit.tree):
                if loop not in loops:
                    check_loop(unit, loop, names, self.frontend.max_unroll, iterates_query(loop, facts))
                    loops[loop] = self._new_loop(unit, loop, outer + self._ids(loops, loop, parents, unit))
        for loop in opaque:  # placed only now: the loops around it got their ids after it
            placed = dataclasses.replace(loops[loop], outer_loops=outer + self._ids(loops, loop, parents, unit))
            loops[loop] = self.loops[placed.id] = placed  # ids count self.loops

        sites = []

        for call in sorted(recorded, key=lambda c: (c.node.lineno, c.node.col_offset)):
            target = kernel_path(call.target)
            if target is None:
                raise Refusal(
                    unit,
                    call.target,
                    f"the target of wp.atomic_{call.op}() is not a kernel argument or a struct field of one",
                    "Pass the target array to the kernel as an argument and apply the atomic to it directly",
                )
            node = _statement_or_call(call)
            around = outer + tuple(loops[loop].id for loop in _enclosing(node, parents, unit.tree))
            records = self.namer.fresh(_records_base(call, parents))
            location, in_helper = unit.location(node), unit is not self.kernel
            exact_records = {}
            if target in self.exact_targets:
                exact_records = self._exact_records(unit, call, target, records, is_view(call.target, aliases, views))
            statement = node if isinstance(node, ast.AugAssign) else None
            site = Site(
                call.node,
                call.op,
                records,
                target,
                around,
                location,
                in_helper,
                len(call.index_args),
                call.consumed,
                statement,
                **exact_records,
            )
            sites.append(site)
            self.sites.append(site)

        for node, path in reads:
            around = outer + tuple(loops[loop].id for loop in _enclosing(node, parents, unit.tree))
            records = self.namer.fresh(f"{path.replace('.', '_')}_reads")
            location, in_helper = unit.location(node), unit is not self.kernel
            shadow = self._shadow(path) if path in self.exact_targets else ""  # a compared read (see above)
            marks = self._marks(path) if path in self.pools and not in_helper else ""
            indices = memory.index_count(node)
            site = Site(node, "read", records, path, around, location, in_helper, indices, shadow=shadow, marks=marks)
            sites.append(site)
            self.sites.append(site)
        sites.sort(key=lambda site: (site.node.lineno, site.node.col_offset))

        clones = {}
        for helper_call in helper_calls:
            called, helper = helper_call.call, helper_call.helper
            bound = bound_arguments(called, helper)
            helper_paths = self._bind(unit, called, helper, kernel_path)
            helper_views = frozenset(param for param, arg in bound.items() if is_view(arg, aliases, views))
            # a clone that records nothing may sit in loops the plan leaves alone
            enclosing = [loop for loop in _enclosing(called, parents, unit.tree) if loop in loops]
            around = outer + tuple(loops[loop].id for loop in enclosing)
            clone = self._plan(helper, helper_paths, around, self.namer.fresh_base(helper.name), helper_views)
            clones[called] = Clone(called, clone)
        computing = frozenset(call for call in facts.calls if call not in clones and facts.computes_only(call))
        return FunctionPlan(unit, name, parents, paths, sites, loops, clones, unconsumed, stores, computing)

    def _exact_records(self, unit: Unit, call: AtomicCall, target: str, records: str, on_view: bool) -> dict[str, str]:
        """The names of an exact site's records (``Site.values`` and the rest), and of its target's shadow."""
        if on_view:
            raise Refusal(
                unit,
                call.target,
                f"wp.atomic_{call.op}() on a view of '{target}' next to a consumed float return on it",
                "Index the whole array in the atomic: wp.atomic_add(arr, i, j, v), not wp.atomic_add(arr[i], j, v)",
            )
        if call.op not in EXACT_OPS:
            raise Refusal(unit, call.node, f"wp.atomic_{call.op}() on a float target", "Use an int target")
        fresh = self.namer.fresh
        base = records.removesuffix("_records")
        names = {"values": fresh(f"{base}_values"), "order": fresh(f"{base}_order")}
        names["addresses"] = fresh(f"{base}_addresses")
        if call.op == "cas":
            names["compares"] = fresh(f"{base}_compares")
        return {**names, "shadow": self._shadow(target)}

    def _check_exact_accesses(self, unit: Unit, paths: dict, unit_params: list[str], aliases: dict) -> None:
        """Exact float returns need every access to their target to be an atomic the rewrite records: while the
        record kernel runs, the target's values live in a shadow only those atomics see."""
        if not self.exact_targets:
            return
        for node in walk(unit.tree):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                path = self._kernel_path(argument_path(node, unit_params, aliases), paths)
                read = path in self.exact_targets and self._reads_element(node, path, aliases)
                if path is not None and read and not self._compared_shadow_read(unit, node, path):
                    raise Refusal(
                        unit,
                        node,
                        f"a plain read of '{path}', whose float atomic returns need exact gradients (while the "
                        "kernel runs, its values live in a shadow that only its atomics see)",
                        "Use the values its atomics return, or rewrite with detach_returns=True",
                    )
            if isinstance(node, ast.stmt) and self.analysis(unit).stored_memory(node):  # (only statements store)
                for target in _stored_into(node):
                    path = self._kernel_path(argument_path(target, unit_params, aliases), paths)
                    is_atomic = isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub)
                    if isinstance(target, ast.Subscript) and path in self.exact_targets and not is_atomic:
                        raise Refusal(
                            unit,
                            node,
                            f"a plain write into '{path}', whose float atomic returns need exact gradients",
                            "Write into it only with atomics in this kernel, or rewrite with detach_returns=True",
                        )
            if isinstance(node, ast.Call) and node.args:
                helper = self.resolve_helper(unit, node)
                handed = [self._kernel_path(argument_path(a, unit_params, aliases), paths) for a in node.args]
                exact = any(overlap(path, target) for path in handed if path for target in self.exact_targets)
                if helper is None or not exact or self._consumes(helper, set()):
                    continue
                if self._names_exact_target(helper, self._bind(unit, node, helper, self._path_of(unit, paths))):
                    raise Refusal(
                        unit,
                        node,
                        f"helper '{helper.name}' receives an array whose float atomic returns need exact gradients",
                        "Inline the helper, or rewrite with detach_returns=True",
                    )

    def _names_exact_target(self, unit: Unit, paths: dict[str, str | None], seen: frozenset[int] = frozenset()) -> bool:
        """Does the function name an exact target, itself or in a helper it calls: the target, an element of it but in
        a read only compared (read from the shadow), or the struct holding it used other than by reading another of
        its fields or handing it to a helper (a helper handed the struct only to read ``bank.rate`` leaves
        ``bank.balance`` alone)?"""
        if id(unit.tree) in seen:
            return False
        facts = self.analysis(unit)
        path_of = self._path_of(unit, paths)
        helpers = [(call, helper) for call in facts.calls if (helper := self.resolve_helper(unit, call)) is not None]
        handed = {id(arg) for call, helper in helpers for arg in bound_arguments(call, helper).values()}
        aliased = {id(value) for value in facts.aliases.values()}  # their uses name the same memory
        for node in facts.nodes:
            if not isinstance(node, ast.Name) or isinstance(node.ctx, ast.Store):
                continue
            named: ast.expr = node  # the whole chain of fields it starts: bank.balance, not bank
            while isinstance(parent := facts.parents.get(named), ast.Attribute) and parent.value is named:
                named = parent
            if id(named) in handed or id(named) in aliased:
                continue
            path = path_of(named)
            if path is None or not any(overlap(path, target) for target in self.exact_targets):
                continue
            read = facts.parents.get(named)
            if not (isinstance(read, ast.Subscript) and self._compared_shadow_read(unit, read, path)):
                return True
        inner = seen | {id(unit.tree)}
        return any(
            self._names_exact_target(helper, self._bind(unit, call, helper, path_of), inner) for call, helper in helpers
        )

    def _compared_shadow_read(self, unit: Unit, node: ast.Subscript, path: str) -> bool:
        """Is ``node`` a read of an element of an exact target that the record kernel can read from the target's
        shadow (``shadowed_read`` in the runtime) and whose value needs no gradient: with all of the target's
        indices on the whole target (in a helper too: a view handed to it has fewer dimensions), and only compared
        (``if d < zbuf[p]``)? A comparison has no gradient, so its record is the value read and nothing else
        (``passes.layout.site_gradient_sources``)."""
        facts = self.analysis(unit)
        array = self.array(path)
        if array is None or array.ndim is None or not isinstance(node.value, ast.Name | ast.Attribute):
            return False
        whole = memory.index_count(node) == array.ndim and memory.depth(node.value, facts.aliases) == 0
        return whole and only_compared(node, facts.nodes, facts.parents)

    def _pools(self) -> frozenset[str]:
        """The append pools of the launch (``memory.pool_arrays``) among the non-int arrays it writes: arrays the
        kernel alone reads and writes, element by element, and no atomic targets."""
        facts = self.analysis(self.kernel)
        ndims: dict[str, int] = {}
        for path in self.written - self.exact_targets:
            array = self.array(path)
            if array is None or array.ndim is None or array.dtype is None:
                continue
            if path in self.params and not dtypes.is_int(array.dtype):
                ndims[path] = array.ndim
        return memory.pool_arrays(self.kernel.tree, ndims, facts.names)

    def _marks(self, pool: str) -> str:
        """The name of an append pool's marks, shared by its reads."""
        if pool not in self.marks:
            self.marks[pool] = self.namer.fresh(f"{pool}_marks")
        return self.marks[pool]

    def _shadow(self, target: str) -> str:
        """The name of the shadow of an exact target, shared by its atomics and its compared reads."""
        if target not in self.shadows:
            self.shadows[target] = self.namer.fresh(target.replace(".", "_") + "_shadow")
        return self.shadows[target]

    def _reads_element(self, node: ast.Subscript, path: str, aliases: dict[str, ast.expr]) -> bool:
        """Does ``node`` read an element of the array at ``path`` (as many indices as it has dimensions, through
        locals bound to views of it), rather than make a view of it?"""
        indices, seen = 0, set()
        expr: ast.expr = node
        while True:
            if isinstance(expr, ast.Subscript):
                indices += len(expr.slice.elts) if isinstance(expr.slice, ast.Tuple) else 1
                expr = expr.value
            elif isinstance(expr, ast.Name) and expr.id in aliases and expr.id not in seen:
                seen.add(expr.id)
                expr = aliases[expr.id]
            else:
                break
        array = self.array(path)
        return array is None or array.ndim is None or indices >= array.ndim

    def _opaque_loops(self, unit: Unit, atomics: list[AtomicCall], kernel_path: Callable) -> set[ast.For | ast.While]:
        """Outermost loops around a consumed atomic with no differentiable work inside (e.g. a CAS probe).

        Inside: only atomics and stores on int targets, no helper calls, no return; everything read after
        the loop is an int. The replay then skips such a loop and restores those ints from records.
        """
        facts = self.analysis(unit)
        loops: set[ast.For | ast.While] = set()
        for call in atomics:
            if not call.consumed:
                continue
            for loop in _enclosing(call.node, facts.parents, unit.tree):
                if self._is_opaque(unit, loop, kernel_path, facts.kinds):
                    loops.add(loop)
                    break
        return loops

    def _is_opaque(self, unit: Unit, loop: ast.For | ast.While, kernel_path: Callable, kinds: dict[str, str]) -> bool:
        names = self.analysis(unit).names
        for node in walk(loop):
            if isinstance(node, ast.Return):
                return False
            if isinstance(node, ast.Call):
                op = names.atomic_op(node)
                if op is None and self.resolve_helper(unit, node) is not None:
                    return False
                if op is not None and not self._int_path(kernel_path(positional_arguments(node)[0])):
                    return False
            if any(isinstance(t, ast.Subscript) and not self._int_path(kernel_path(t)) for t in _stored_into(node)):
                return False
        try:
            _, carried_out = _carried(unit, loop, self.analysis(unit))
        except Refusal:
            return False
        return all(name in kinds for name, _ in carried_out)

    def _int_path(self, path: str | None) -> bool:
        return path is not None and path not in self.exact_targets and self.is_int_path(path)

    def _new_opaque_loop(self, unit: Unit, node: ast.For | ast.While) -> Loop:
        loop_id = next(self.loop_ids)
        fresh = self.namer.fresh
        _, carried_out = _carried(unit, node, self.analysis(unit))
        carried = tuple(Carried(name, fresh(f"{name}_after_loop{loop_id}"), dtype) for name, dtype in carried_out)
        loop = Loop(node, loop_id, None, unit.location(node), "", opaque=True, carried=carried)
        self.loops.append(loop)
        return loop

    def _ids(self, loops: dict[ast.AST, Loop], loop: ast.AST, parents: dict, unit: Unit) -> tuple[int, ...]:
        return tuple(loops[outer].id for outer in _enclosing(loop, parents, unit.tree))

    def _new_loop(self, unit: Unit, node: ast.For | ast.While, outer: tuple[int, ...]) -> Loop:
        loop_id = next(self.loop_ids)
        fresh = self.namer.fresh
        coordinate = fresh(f"coordinate{loop_id}")
        jumps = list(own_jumps(node.body))
        active = fresh(f"iteration{loop_id}_active") if jumps else ""
        static_trips, bounds = None, ("", "", "")
        facts = self.analysis(unit)
        iterated = iterates_query(node, facts)
        if isinstance(node, ast.For) and not iterated:
            static_trips = _static_trips(node)
            if static_trips is None:
                bounds = (fresh(f"start{loop_id}"), fresh(f"stop{loop_id}"), fresh(f"step{loop_id}"))
        counter = trips_records = ""
        if isinstance(node, ast.While) or iterated or any(isinstance(j, ast.Break) for j in jumps):
            counter, trips_records = fresh(f"trips{loop_id}"), fresh(f"trips{loop_id}_records")
        given = None
        if isinstance(node, ast.For) and not iterated and static_trips is None and unit is self.kernel:
            given = argument_range(unit.tree, node)
        unrolled = unrolled_by_warp(node, self.frontend.max_unroll)
        overwritten = () if unrolled else overwritten_results(unit.tree, node, facts.names)
        # Unrolled, the loop is straight code to Warp's backward, which replays each trip with the values it had then:
        # nothing it carries needs restoring (a loop the replay skips, ``_new_opaque_loop``, still restores what it
        # leaves behind).
        carried_in, carried_out = ([], []) if unrolled else _carried(unit, node, facts)
        if iterated:  # the index each trip's step gave, restored in the replay, which runs the trips without the query
            assert isinstance(node, ast.For) and isinstance(node.target, ast.Name)  # (refusals.check_loop)
            carried_in = [(node.target.id, dtypes.INT), *carried_in]
        loop = Loop(
            node,
            loop_id,
            static_trips,
            unit.location(node),
            coordinate,
            counter,
            bounds,
            trips_records,
            outer,
            bool(jumps),
            active=active,
            iterated=iterated,
            carried_in=tuple(Carried(name, fresh(f"{name}_in_loop{loop_id}"), dtype) for name, dtype in carried_in),
            carried=tuple(Carried(name, fresh(f"{name}_after_loop{loop_id}"), dtype) for name, dtype in carried_out),
            argument_range=given,
            fresh=overwritten,
        )
        self.loops.append(loop)
        return loop

    def _helper_calls(
        self, unit: Unit, consumed: list[AtomicCall], path_of: Callable[[ast.expr], str | None]
    ) -> list[HelperCall]:
        """Calls to helpers that need a clone: they consume an atomic's return, or read an array the launch writes
        (their replay must read records instead), somewhere inside; or they update such an array with an atomic or
        ``+=`` (their replay needs a twin that writes nothing, ``needs_forward_twin``: Warp's backward runs a helper's
        forward again)."""
        atomic_nodes = {c.node for c in consumed}
        found = []
        for node in self.analysis(unit).calls:
            if node not in atomic_nodes:
                helper = self.resolve_helper(unit, node)
                if helper is None:
                    continue
                paths = self._bind(unit, node, helper, path_of)
                records = self._consumes(helper, set()) or self._reads_written(helper, paths, set())
                records = records or self._has_loop_hazards(helper, set())
                if records or self._updates_written(helper, paths, set()):
                    found.append(HelperCall(node, helper, records))
        return sorted(found, key=lambda found: (found.call.lineno, found.call.col_offset))

    def _has_loop_hazards(self, unit: Unit, seen: set[int]) -> bool:
        """Does the function hold a loop Warp's backward replays wrong (``passes.loop_hazards``), itself or in a
        helper it calls?"""
        key = id(unit.tree)
        if key in self._replayed_wrong:
            return self._replayed_wrong[key]
        if key in seen or (unit is not self.kernel and self.frontend.has_custom_gradient(unit)):
            return False  # (a hand-written gradient: Warp never replays the helper's body, nor what it calls)
        seen.add(key)
        facts = self.analysis(unit)
        found = bool(facts.loop_hazards) or any(
            helper is not None and self._has_loop_hazards(helper, seen)
            for helper in (self.resolve_helper(unit, call) for call in facts.calls)
        )
        self._replayed_wrong[key] = found
        return found

    def _consumes(self, unit: Unit, seen: set[int]) -> bool:
        """Does the function consume an atomic's return, itself or in a helper it calls?"""
        key = id(unit.tree)
        if key in self._consuming:
            return self._consuming[key]
        if key in seen:
            return False
        seen.add(key)
        facts = self.analysis(unit)
        consumes = any(c.consumed for c in facts.atomics) or any(
            helper is not None and self._consumes(helper, seen)
            for helper in (self.resolve_helper(unit, call) for call in facts.calls)
        )
        self._consuming[key] = consumes
        return consumes


def _stored_into(node: ast.AST) -> list[ast.expr]:
    """What an assignment or augmented assignment stores into; nothing for any other node."""
    if isinstance(node, ast.Assign):
        return node.targets
    return [node.target] if isinstance(node, ast.AugAssign) else []


def _as_atomic_call(write: ast.AugAssign, names: WarpNames) -> AtomicCall:
    """``arr[i, j] += v`` as the ``wp.atomic_add(arr, i, j, v)`` Warp lowers it to, placed at the statement."""
    target = write.target
    assert isinstance(target, ast.Subscript)  # (find_augmented_writes: updates of elements)
    index = target.slice
    indices = index.elts if isinstance(index, ast.Tuple) else [index]
    op = "add" if isinstance(write.op, ast.Add) else "sub"
    func = ast.Attribute(ast.Name(min(names.modules), ast.Load()), f"atomic_{op}", ast.Load())
    call = ast.Call(func, [target.value, *indices, write.value], [])
    return AtomicCall(ast.copy_location(call, write), op, consumed=False, statement=write)


def _statement_or_call(call: AtomicCall) -> ast.AugAssign | ast.Call:
    return call.statement if call.statement is not None else call.node


def _records_base(call: AtomicCall, parents: dict[ast.AST, ast.AST]) -> str:
    parent = parents.get(call.node)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        return f"{parent.targets[0].id}_records"
    return f"atomic_{call.op}_records"


def _static_trips(loop: ast.For) -> int | None:
    assert isinstance(loop.iter, ast.Call)  # a range() loop (refusals.check_loop)
    args = loop.iter.args
    bounds = [bound for a in args if (bound := bound_value(a)) is not None]  # (constant_ranges)
    return len(range(*bounds)) if len(bounds) == len(args) else None


def _carried(
    unit: Unit, loop: ast.For | ast.While, facts: Analysis
) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """Locals the loop changes that later iterations read, and those code after the loop reads: (name, Warp type)."""
    carried = facts.flow.carried(loop)
    into, out = carried.into_iterations, carried.out_of_loop
    if unrolled_by_warp(loop, facts.frontend.max_unroll):
        # Unrolled, the loop is straight code to Warp's backward: a value changed one component at a time is then
        # no concern.
        into, out = into - carried.updated_only, out - carried.updated_only
    types = {**facts.value_types, **facts.kinds}
    # A spatial query's state lives in its query object, which only the loop's own step reads: the replay runs the
    # loop's recorded trips without it, restoring the index each step wrote instead.
    queries = {name for name in into | out if builtins.is_query_type(types.get(name))}
    for name in sorted(queries):
        if name in out or not query_loop(loop, facts) or _read_in(loop.body, name):
            raise Refusal(
                unit,
                loop,
                f"the spatial query '{name}' is used other than by its loop's own step (a while condition's "
                "*_query_next, or the for loop over it): the replay runs the loop's recorded trips without it",
                "Advance the query only in the loop's condition (while wp.hash_grid_query_next(query, j):) or loop "
                "over it (for j in query:), and read nothing else of it",
            )
    into, out = into - queries, out - queries
    written_in_place = {
        local.id: call
        for call in (node for node in walk(loop) if isinstance(node, ast.Call))
        for local in builtins.written_arguments(call, facts.names)
    }
    for name in sorted(into | out):
        kind = types.get(name)
        if kind is None:
            raise Refusal(
                unit,
                loop,
                f"the Warp type of '{name}', which this loop carries to later iterations or past its end, cannot be "
                "told from the source (the replay restores it from a record of that type)",
                f"Give '{name}' its type where it is first assigned, before the loop: {name} = wp.float32(...), "
                f"wp.vec3(...), int(...)",
            )
        if not ((dtypes.holds_no_gradient(kind) and dtypes.has_source(kind)) or dtypes.is_exported(kind)):
            raise Refusal(
                unit,
                loop,
                f"'{name}', which this loop carries to later iterations or past its end, is a "
                f"{getattr(kind, '__name__', kind)}: the replay restores carried locals of Warp's scalar, vector, "
                "matrix, quaternion and transform types",
                "Carry the struct's fields in locals of their own",
            )
        if name in written_in_place and not dtypes.holds_no_gradient(kind):
            builtin = ast.unparse(written_in_place[name].func)
            raise Refusal(
                unit,
                written_in_place[name],
                f"'{name}', which this loop carries, is written in place by {builtin}(): Warp's adjoint of that write "
                f"passes the gradient on to the value '{name}' held before the call, which the replay restores from "
                "another trip",
                f"Let the builtin write a fresh local and copy it: {name}_out = {dtypes.source(kind, 'wp')}(...); "
                f"{builtin}(..., {name}_out); {name} = {name}_out",
            )
        if name in out - into and name in carried.assigned_in_loop_only and not dtypes.holds_no_gradient(kind):
            raise Refusal(
                unit,
                loop,
                f"'{name}' is first assigned inside this loop and read after it: Warp's backward loses its gradient "
                "(it zeroes the adjoints of a loop's own locals at each replayed trip)",
                f"Assign '{name}' before the loop, with its type: {name} = {dtypes.source(kind, 'wp')}(...)",
            )
    return [(n, types[n]) for n in sorted(into)], [(n, types[n]) for n in sorted(out)]


def query_loop(loop: ast.For | ast.While, facts: Analysis) -> bool:
    """Is ``loop`` a spatial query's: a while loop whose condition advances a query (``*_query_next``), or a for loop
    over a query (``for j in wp.hash_grid_query(...)``, ``for j in query``)?"""
    if isinstance(loop, ast.While):
        return any(isinstance(n, ast.Call) and builtins.written_arguments(n, facts.names) for n in walk(loop.test))
    return iterates_query(loop, facts)


def iterates_query(loop: ast.For | ast.While, facts: Analysis) -> bool:
    """Is ``loop`` a for loop over a spatial query object (Warp's iterators besides ranges)?"""
    return isinstance(loop, ast.For) and builtins.is_query_type(facts.typing.of(loop.iter))


def _read_in(body: list[ast.stmt], name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for s in body for n in walk(s))


def _enclosing(node: ast.AST, parents: dict[ast.AST, ast.AST], root: ast.AST) -> list[ast.For | ast.While]:
    """Loops around ``node`` inside ``root``, outermost first."""
    loops: list[ast.For | ast.While] = []
    current = parents.get(node)
    while current is not None and current is not root:
        if isinstance(current, ast.For | ast.While):
            loops.append(current)
        current = parents.get(current)
    return loops[::-1]
