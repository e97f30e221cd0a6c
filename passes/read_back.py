"""What a launch reads and writes: which argument arrays it writes, which of those it may read back (what the replay
must read from records, and what a dry run must copy), the types helpers declare for memory under generic
arguments, and what the planner reads off each function's tree (``Analysis``)."""

from __future__ import annotations

import ast
import functools
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from warp_rewrite.passes import dtypes, memory
from warp_rewrite.passes.atomics import AtomicCall, WarpNames, find_atomic_calls, find_augmented_writes
from warp_rewrite.passes.builtins import (
    BuiltinEffect,
    Effect,
    call_effect,
    called_builtin,
    warp_builtin,
    written_arguments,
)
from warp_rewrite.passes.constant_ranges import is_known_int, is_static
from warp_rewrite.passes.dataflow import argument_path, is_view, rebound_locals, single_assignments
from warp_rewrite.passes.int_types import IntLocals
from warp_rewrite.passes.loop_carried import LoopFlow
from warp_rewrite.passes.loop_hazards import (
    Callees,
    LoopHazard,
    loop_hazards,
    reads_overwritten,
    values_needed,
    writes_gradient_memory,
)
from warp_rewrite.passes.memory import path_parts
from warp_rewrite.passes.overloads import Ambiguous
from warp_rewrite.passes.plan_types import Frontend, FunctionPlan, ReadPlace, Unit, array_at, is_int_path
from warp_rewrite.passes.refusals import Refusal
from warp_rewrite.passes.syntax import called_name, function_locals, parent_map, walk
from warp_rewrite.passes.value_types import ValueTypes

# What a helper with no return annotation returns, told from its body, by its tree (held: an id is not reused
# while its tree lives); a helper being told is in it with None, so that a recursive one tells nothing of itself.
_TOLD_RETURNS: dict[int, tuple[ast.FunctionDef, Any]] = {}


def _told_return(helper: Unit, frontend: Frontend) -> Any:
    known = _TOLD_RETURNS.get(id(helper.tree))
    if known is not None and known[0] is helper.tree:
        return known[1]
    _TOLD_RETURNS[id(helper.tree)] = (helper.tree, None)
    told = Analysis(helper, frontend).typing.returned(helper.tree)
    _TOLD_RETURNS[id(helper.tree)] = (helper.tree, told)
    return told


class Analysis:
    """What the planner reads off one function's tree, computed once per rewrite and only when asked for.

    Most helpers a kernel calls are only asked whether they consume an atomic's return (``atomics``, ``calls``).
    """

    def __init__(self, unit: Unit, frontend: Frontend):
        self.unit, self.frontend, self.tree = unit, frontend, unit.tree
        self.names = frontend.warp_names(unit)
        self.parameter_types = frontend.parameter_types(unit)

    @functools.cached_property
    def nodes(self) -> list[ast.AST]:
        return walk(self.tree)

    @functools.cached_property
    def parents(self) -> dict[ast.AST, ast.AST]:
        return parent_map(self.nodes)

    @functools.cached_property
    def calls(self) -> list[ast.Call]:
        return [node for node in self.nodes if isinstance(node, ast.Call)]

    @functools.cached_property
    def aliases(self) -> dict[str, ast.expr]:
        return single_assignments(self.tree, self.nodes, self.names)

    @functools.cached_property
    def rebound(self) -> dict[str, list[ast.expr]]:
        return rebound_locals(self.tree, self.nodes, self.names)

    @functools.cached_property
    def atomics(self) -> list[AtomicCall]:
        return find_atomic_calls(self.tree, self.names, self.nodes)

    @functools.cached_property
    def writes(self) -> list[ast.AugAssign]:
        """``arr[i] += v`` into memory (not ``p[0] += v`` into a local ``p = pos[i]``)."""
        writes = find_augmented_writes(self.tree, self.nodes)
        return [write for write in writes if not any(map(self.stores_into_value, memory.stored_arrays(write)))]

    def stored_memory(self, node: ast.AST) -> list[ast.expr]:
        """The array expressions the statement ``node`` stores into (``memory.stored_arrays``), less stores into a
        component of a local value."""
        return [array for array in memory.stored_arrays(node) if not self.stores_into_value(array)]

    def stores_into_value(self, stored: ast.expr) -> bool:
        """Is ``stored`` (what a statement stores through) a local bound once to an element's value (``p = pos[i]``,
        then ``p[0] = v``), which the store changes, rather than to memory (``buf = a``, ``row = grid[i]``), which
        it writes?"""
        return isinstance(stored, ast.Name) and stored.id in self.aliases and self.holds_a_value(stored.id)

    @functools.cached_property
    def kinds(self) -> dict[str, str]:
        local_types = self.frontend.local_types(self.unit)
        helpers = ((call, self._told_helper(call)) for call in self.calls)
        call_types = {call: self.frontend.return_type(helper) for call, helper in helpers if helper is not None}
        return IntLocals(self.tree, self.parameter_types, self.nodes, local_types, call_types, self.names).locals

    @functools.cached_property
    def typing(self) -> ValueTypes:
        """The Warp types of the function's locals and expressions, where they can be told (``passes.value_types``)."""
        local_types = self.frontend.local_types(self.unit)

        def declared(call: ast.Call) -> Any:
            helper = self._told_helper(call)
            if helper is None:
                return None
            declared = self.frontend.return_type(helper)
            return declared if declared is not None else _told_return(helper, self.frontend)

        def named_type(expr: ast.expr) -> Any:
            return self.frontend.named_type(self.unit, expr)

        return ValueTypes(self.tree, self.names, self.parameter_types, self.nodes, local_types, declared, named_type)

    @property
    def value_types(self) -> dict[str, Any]:
        """The Warp types of the function's locals, where they can be told."""
        return self.typing.locals

    @functools.cached_property
    def flow(self) -> LoopFlow:
        return LoopFlow(self.tree, self.holds_a_value, lambda call: written_arguments(call, self.names))

    @functools.cached_property
    def loop_hazards(self) -> list[LoopHazard]:
        """The loops of the function Warp's backward replays wrong and some gradient depends on
        (``passes.loop_hazards``)."""
        if self.unit is not self.frontend.kernel and self.frontend.has_custom_gradient(self.unit):
            return []  # Warp's backward calls the hand-written gradient, never this body
        return loop_hazards(self.tree, self.flow, self.frontend.max_unroll, self.callees)

    @functools.cached_property
    def callees(self) -> Callees:
        """What the function's calls write, for ``passes.loop_hazards``: a helper the front end resolves is read
        (``writes_gradient_memory``), anything else it calls is no ``@wp.func`` (builtins, structs, constructors)."""
        return Callees(self.names, self._helper_writes, kernel=self.unit is self.frontend.kernel)

    def _helper_writes(self, call: ast.Call) -> bool:
        try:
            helper = self.frontend.resolve_helper(self.unit, call)
        except Ambiguous as ambiguous:  # any of the overloads it may run
            return any(_writes_gradient(candidate, self.frontend) for candidate in ambiguous.candidates)
        return helper is not None and _writes_gradient(helper, self.frontend)

    def computes_only(self, call: ast.Call) -> bool:
        """Does the call only compute a value (or print), itself and in every helper it runs: no store into memory,
        no atomic, no write into the locals it is handed? The count phase leaves such a call out where nothing reads
        its value (``passes.count_slice``): what it computes is then thrown away, and the record kernel prints."""
        if not isinstance(call.func, ast.Name | ast.Attribute):  # ``wp.static(f)(x)``: f is known only to Warp
            return False
        if is_static(call) or is_known_int(call):  # (run when Warp builds the kernel, never in it)
            return True
        if warp_builtin(call, self.names) is None:  # (spelled through Warp: the table says, whatever the front end)
            try:
                helper = self.frontend.resolve_helper(self.unit, call)
            except (Ambiguous, Refusal):  # (any overload it may run; a source not read is kept, unknown)
                return False
            if helper is not None:
                return _computes_only(helper, self.frontend)
            if not self.frontend.is_builtin(self.unit, call):
                return self._opaque_on_values(call)
        effect = builtin_effect_of(call, self.names)
        return effect is not None and not effect.written and not effect.effects & _SIDE_EFFECTS

    def _opaque_on_values(self, call: ast.Call) -> bool:
        """Is the call one the rewrite cannot read (``@wp.func_native``), of a function named at module level,
        handed no memory? The fence accepts it as writing nothing (its form "opaque call"); a local naming a function
        is not one (``op = wp.randf`` writes the state it is handed)."""
        if not isinstance(call.func, ast.Name) or call.func.id in function_locals(self.tree):
            return False
        return not any(self._names_memory(argument) for argument in [*call.args, *(k.value for k in call.keywords)])

    def _told_helper(self, call: ast.Call) -> Unit | None:
        """The helper the call runs, None where it is no helper or the source does not tell which overload (its
        return type is then not told: ``passes.fence`` refuses the call where the kernel needs a rewrite)."""
        try:
            return self.frontend.resolve_helper(self.unit, call)
        except Ambiguous:
            return None

    def holds_a_value(self, name: str) -> bool:
        """Does ``name`` hold a value (a vector, matrix or struct the function makes or reads), which a store into a
        component changes, rather than memory (an array, a view of one), which such a store writes? Where the
        types do not tell, memory."""
        params = [a.arg for a in self.tree.args.args]
        if name in params:
            return dtypes.is_value_type(self.parameter_types.get(name))
        local = ast.Name(name, ast.Load())
        path = argument_path(local, params, self.aliases)
        if path is None:  # made in the function, unless one of the values it is assigned names memory
            return not any(self._names_memory(value) for value in self.rebound.get(name, []))
        return self._held(local, path)

    def _names_memory(self, value: ast.expr) -> bool:
        """Does ``value`` name an argument's array or a view of one (not an element of it)?"""
        path = argument_path(value, [a.arg for a in self.tree.args.args], self.aliases)
        return path is not None and not self._held(value, path)

    def _held(self, expr: ast.expr, path: str) -> bool:
        """Is ``expr``, which reaches the argument at ``path``, a value (an element or a field) rather than memory?"""
        root, *fields = path.split(".")
        annotation: Any = self.parameter_types.get(root)
        for field_name in fields:
            annotation = dtypes.field_type(annotation, field_name)
        if dtypes.is_array(annotation):
            return memory.depth(expr, self.aliases) >= annotation.ndim  # an element read, or a view
        return dtypes.is_value_type(annotation)


class MemoryAccesses:
    """The reads and writes of one kernel's launch, through every helper it calls (the planner builds on them).

    ``analyses``: what an earlier planner of the same kernel read off its functions, to be read again rather than
    recomputed.
    """

    def __init__(self, frontend: Frontend, analyses: dict[int, Analysis] | None = None):
        self.frontend = frontend
        self.kernel = frontend.kernel
        self.params = [a.arg for a in self.kernel.tree.args.args]
        self.resolve_helper = frontend.resolve_helper
        self._analyses = {} if analyses is None else analyses
        self.written: frozenset[str] = frozenset()  # argument paths of the arrays the launch writes
        self._read_back: dict[str | None, set[ReadPlace]] = {}  # see _written_paths
        self._updated: set[str | None] = set()  # see _written_paths
        self._replayed_reads: set[str | None] = set()  # see _written_paths
        # the element reads Warp's backward replays, with the function and the path: see _written_paths
        self._replayed_elements: list[tuple[Unit, ast.expr, str | None]] = []
        self._plain_stores: list[tuple[Unit, ast.Subscript, str | None]] = []  # ``a[i] = v`` stores, with the path
        self._writers: dict[str | None, set[int | None]] = {}
        self._reading: dict[tuple, bool] = {}
        self._updating: dict[tuple, bool] = {}
        self.narrowed: dict[str, Any] = {}  # see _narrowed_types

    def array(self, path: str) -> dtypes.ArrayInfo | None:
        return array_at(self.frontend, self.narrowed, path)

    def is_int_path(self, path: str) -> bool:
        return is_int_path(self.frontend, path, self.narrowed)

    def analysis(self, unit: Unit) -> Analysis:
        if id(unit.tree) not in self._analyses:
            self._analyses[id(unit.tree)] = Analysis(unit, self.frontend)
        return self._analyses[id(unit.tree)]

    def _path_of(self, unit: Unit, paths: dict[str, str | None]) -> Callable[[ast.expr], str | None]:
        """The kernel argument path an expression of ``unit`` names (an array, a view of one, a struct field)."""
        params, aliases = [a.arg for a in unit.tree.args.args], self.analysis(unit).aliases
        return lambda expr: self._kernel_path(argument_path(expr, params, aliases), paths)

    def _ndim(self, unit: Unit, expr: ast.expr, path: str | None) -> int | None:
        """The number of dimensions of the array ``expr`` indexes (``path`` in the kernel), as the function sees it:
        a helper's array parameter may be a view of the kernel's array, so its own annotation counts first."""
        facts = self.analysis(unit)
        local = argument_path(expr, [a.arg for a in unit.tree.args.args], facts.aliases)
        declared: Any = facts.parameter_types.get(local) if local is not None else None
        if dtypes.is_array(declared):
            return declared.ndim
        array = self.array(path) if path is not None else None
        return (array.ndim or 1) if array is not None else None

    def _names_memory(self, unit: Unit, expr: ast.expr, path: str | None) -> bool:
        """Does ``expr`` (naming ``path``) stand for memory: an array or a view of one, or a struct that may hold
        arrays, rather than an element's value?"""
        if path is None:
            return False
        ndim = self._ndim(unit, expr, path)
        if ndim is not None:
            return memory.depth(expr, self.analysis(unit).aliases) < ndim
        root, _, field = path.partition(".")
        root_type = self.frontend.parameter_types(self.kernel).get(root)
        if field and dtypes.is_array(root_type):
            return False  # a field of an element of an array of structs (the fence refuses arrays held there)
        return not dtypes.is_value_type(root_type)

    def _is_element_read(self, unit: Unit, node: ast.Subscript, path: str | None) -> bool:
        """Does the load ``node`` read an element of the argument array at ``path`` (not a view, not a component
        of a value already read)?"""
        if path is None or self.array(path) is None:
            return False
        aliases = self.analysis(unit).aliases
        ndim = self._ndim(unit, node, path)  # known: the path is an array's
        return ndim is not None and memory.depth(node, aliases) >= ndim > memory.depth(node.value, aliases)

    def _bind(self, unit: Unit, call: ast.Call, helper: Unit, path_of: Callable) -> dict[str, str | None]:
        """The kernel path each of the helper's parameters names at this call: the memory it is handed (arrays,
        views, structs), None for values."""
        paths: dict[str, str | None] = {}
        for param, arg in bound_arguments(call, helper).items():
            path = path_of(arg)
            paths[param] = path if self._names_memory(unit, arg, path) else None
        return paths

    def _narrowed_types(self) -> dict[str, Any]:
        """The types helpers declare for memory under the kernel's generic arguments, by kernel path: a struct the
        kernel takes as ``Any`` and hands whole to a helper taking a ``ContactWriterData`` is one (Warp compiles the
        call for no other type). Paths helpers declare different types for stay unknown."""
        params = self.frontend.parameter_types(self.kernel)
        generic = {name for name in self.params if dtypes.is_generic(params.get(name))}
        if not generic:
            return {}
        declared: dict[str, list[Any]] = {}
        seen: set[tuple[int, tuple[tuple[str, str | None], ...], frozenset[str]]] = set()
        pending: list[tuple[Unit, dict[str, str | None], frozenset[str]]] = [
            (self.kernel, {p: p for p in self.params}, frozenset())
        ]
        while pending:
            unit, paths, views = pending.pop()
            key = (id(unit.tree), tuple(sorted(paths.items(), key=repr)), views)
            if key in seen:
                continue
            seen.add(key)
            facts = self.analysis(unit)
            path_of = self._path_of(unit, paths)
            for call in facts.calls:
                helper = self.resolve_helper(unit, call) if facts.names.atomic_op(call) is None else None
                if helper is None:
                    continue
                bound = self._bind(unit, call, helper, path_of)
                arguments = bound_arguments(call, helper)
                handed_views = frozenset(p for p, arg in arguments.items() if is_view(arg, facts.aliases, views))
                types = self.frontend.parameter_types(helper)
                for param, path in bound.items():
                    typed = types.get(param)
                    if path is None or path.partition(".")[0] not in generic or param in handed_views:
                        continue  # a view's type is not its array's
                    if typed is not None and not dtypes.is_generic(typed):
                        declared.setdefault(path, []).append(typed)
                pending.append((helper, bound, handed_views))
        return {path: types[0] for path, types in declared.items() if all(dtypes.same_type(t, types[0]) for t in types)}

    def _written_paths(self) -> frozenset[str]:
        """Argument paths of the arrays this launch writes: with atomics, stores and augmented assignments, in the
        kernel and in every helper it calls (through the paths each call binds), and any array handed to a Warp
        builtin that might write it. A call the planner cannot see into, handed memory, is refused.

        Also notes (``self._read_back``) the arrays the launch may read back, with a consumed atomic, an element read
        or a builtin, (``self._writers``) which functions write each array: what a dry run must copy, and
        (``self._updated``, ``self._replayed_reads``) the arrays it updates, with an atomic or an augmented assignment,
        and those it reads (an element, or through a builtin), where Warp's backward replays them: not in a helper with
        a hand-written gradient.

        A local assigned memory more than once (``_choices``) writes every array it may name; any other use of it
        is refused where one of them is written (``_check_choices``). Refuses a write into memory under an argument
        of a generic type that no helper declares (``_untyped``)."""
        written: set[str | None] = set()
        seen: set[tuple[int, tuple[tuple[str, str | None], ...], bool]] = set()
        untyped: dict[str, tuple[Unit, ast.expr | ast.stmt]] = {}
        consumed: set[str | None] = set()  # the targets of consumed atomics
        uses: list[ChoiceUse] = []
        # each function with the paths its parameters name, and whether Warp's backward replays it (not where a
        # helper with a hand-written gradient calls it)
        pending: list[tuple[Unit, dict[str, str | None], bool]] = [(self.kernel, {p: p for p in self.params}, True)]
        while pending:
            unit, paths, caller_replayed = pending.pop()
            key = (id(unit.tree), tuple(sorted(paths.items(), key=repr)), caller_replayed)
            if key in seen:
                continue
            seen.add(key)
            facts = self.analysis(unit)
            path_of = self._path_of(unit, paths)
            choices = self._choices(unit, path_of)
            paths_of = functools.partial(_paths_through, path_of=path_of, choices=choices)

            writes: list[tuple[ast.expr | ast.stmt, str | None]] = [
                (call.node, path) for call in facts.atomics for path in paths_of(call.target)
            ]
            statements = [node for node in facts.nodes if isinstance(node, ast.stmt)]  # the nodes that store
            stored = [(node, array) for node in statements for array in facts.stored_memory(node)]
            writes += [(node, path) for node, array in stored for path in paths_of(array)]
            for statement, array in stored:
                target = facts.parents.get(array)
                if isinstance(statement, ast.Assign | ast.AnnAssign) and isinstance(target, ast.Subscript):
                    self._plain_stores += [(unit, target, path) for path in paths_of(array)]
            for node, path in writes:
                self._writers.setdefault(path, set()).add(id(unit.tree))
                if path is not None and self._untyped(path):
                    untyped.setdefault(path, (unit, node))
            written.update(path for _, path in writes)
            replayed = caller_replayed and (unit is self.kernel or not self.frontend.has_custom_gradient(unit))
            if replayed:
                self._updated.update(path for call in facts.atomics for path in paths_of(call.target))
                augmented = [a for node, a in stored if isinstance(node, ast.AugAssign)]
                self._updated.update(path for array in augmented for path in paths_of(array))
            note_read = functools.partial(self._note_read, unit, replayed=replayed)
            for atomic in facts.atomics:
                if atomic.consumed:
                    consumed.add(path := path_of(atomic.target))
                    note_read([path], atomic.node, only_its_value=True)
            for node in memory.loads(facts.nodes, facts.parents, facts.names):
                if (name := _root_name(node)) in choices:
                    uses.append(ChoiceUse(unit, node, name, choices[name], "read"))
                    note_read(choices[name], node)
                elif self._is_element_read(unit, node, path := path_of(node)):
                    note_read([path], node)
            for call in facts.calls:
                if facts.names.atomic_op(call) is not None:
                    continue
                helper = self.resolve_helper(unit, call)
                arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
                chosen = [name for a in arguments if (name := _root_name(a)) in choices]
                if chosen and called_name(call) != "len":
                    handed_to = f"handed to '{called_name(call)}'"
                    uses.append(ChoiceUse(unit, call, chosen[0], choices[chosen[0]], handed_to))
                handed = [path for a in arguments for path in paths_of(a) if self._names_memory(unit, a, path)]
                if helper is not None:
                    bound = self._bind(unit, call, helper, path_of)
                    pending.append((helper, bound, replayed))
                    for param, arg in bound_arguments(call, helper).items():  # each array a choice may name
                        if (name := _root_name(arg)) in choices:
                            pending += [(helper, {**bound, param: path}, replayed) for path in paths_of(arg)]
                elif not handed:
                    continue
                elif not self.frontend.is_builtin(unit, call):
                    path = handed[0]
                    raise Refusal(
                        unit,
                        call,
                        f"'{ast.unparse(call.func)}' is handed '{path}' but the rewrite cannot see what it does with "
                        "it (it might write it, or read what this launch wrote)",
                        "Call a @wp.func the rewrite can read (defined in a .py file), or pass it values, not arrays",
                    )
                else:
                    effect = builtin_effect_of(call, facts.names)
                    if effect is None or Effect.READS_ARRAYS in effect.effects:
                        note_read(handed, call)
                    if effect is None or Effect.WRITES_ARRAYS in effect.effects:
                        written.update(handed)  # it writes them (a builtin the table lacks: it might)
                        for path in handed:
                            self._writers.setdefault(path, set()).add(None)  # by no function of the plan
        _check_choices(uses, written)
        # The targets of consumed atomics are sites: their records follow the type at launch, and plain accesses of
        # them are refused where their returns may be floats (passes.plan.Planner._check_exact_accesses).
        for path, (unit, node) in untyped.items():
            if path not in consumed:
                root = path.partition(".")[0]
                raise Refusal(
                    unit,
                    node,
                    f"this writes '{path}', memory of '{root}', whose type is generic: the rewrite cannot tell which "
                    "arrays it holds, so it cannot record what the launch reads back from them",
                    f"Annotate '{root}' with its type, or hand '{root}' whole to a @wp.func that declares it",
                )
        return frozenset(path for path in written if path is not None and self.array(path) is not None)

    def reads_written(self) -> frozenset[str]:
        """The arrays the launch writes whose reads Warp's backward gets wrong, whatever else the kernel does
        (``passes.fence.Fence.needs_rewrite``): it replays each read against the launch's final memory.

        - Those it updates (an atomic, an augmented assignment, in the kernel or a helper it runs) and also reads (an
          element, or through a builtin): a sum read while it accumulates, whose adjoint reaches only the updates its
          own thread made before it, however the value read is used.
        - Those it stores into plainly at the index a read reads, after the read (``loop_hazards.reads_overwritten``),
          where the value read is needed (``loop_hazards.values_needed``: used other than linearly; ``y[tid] =
          wp.sin(x)``, then ``y[tid] = y[tid] * y[tid] + x``).

        Raises ``Refusal`` where the launch hands memory to a call the rewrite cannot read, as ``_written_paths``
        does."""
        self.narrowed = self._narrowed_types()
        self.written = self._written_paths()
        updated = self._updated & self._replayed_reads
        grouped: dict[tuple[int, str], tuple[Unit, list[ast.Subscript]]] = {}
        for unit, node, path in self._replayed_elements:
            if path is not None and path in self.written and path not in updated and isinstance(node, ast.Subscript):
                grouped.setdefault((id(unit.tree), path), (unit, []))[1].append(node)
        needed = set()
        for (tree, path), (unit, reads) in grouped.items():
            stores = [store for u, store, p in self._plain_stores if id(u.tree) == tree and p == path]
            overwritten = reads_overwritten(unit.tree, reads, stores)
            if values_needed(unit.tree, overwritten, self.analysis(unit).names, unit is self.kernel):
                needed.add(path)
        return frozenset(path for path in updated | needed if path in self.written)

    def _choices(self, unit: Unit, path_of: Callable[[ast.expr], str | None]) -> dict[str, frozenset[str]]:
        """The function's locals assigned memory more than once (``polygon = trim_poly``, then ``polygon = loop``),
        with the kernel paths of what each may name."""
        choices = {}
        for name, values in self.analysis(unit).rebound.items():
            paths = [(value, path_of(value)) for value in values]
            named = frozenset(
                path for value, path in paths if path is not None and self._names_memory(unit, value, path)
            )
            if named:
                choices[name] = named
        return choices

    def _untyped(self, path: str | None) -> bool:
        """Is ``path`` memory under an argument of a generic type (``Any``) whose arrays the planner cannot tell?"""
        if path is None or self.array(path) is not None:
            return False
        return dtypes.is_generic(self.frontend.parameter_types(self.kernel).get(path.partition(".")[0]))

    def _note_read(
        self,
        unit: Unit,
        paths: Iterable[str | None],
        node: ast.expr,
        only_its_value: bool = False,
        *,
        replayed: bool,
    ) -> None:
        """``paths`` read at ``node`` (an atomic's target: ``only_its_value``), in a function Warp's backward replays
        or not (a helper with a hand-written gradient)."""
        for path in paths:
            self._read_back.setdefault(path, set()).add(ReadPlace.of(unit.tree, node, only_its_value))
            if replayed and not only_its_value:
                self._replayed_reads.add(path)
                self._replayed_elements.append((unit, node, path))

    def _copied(self, root: FunctionPlan) -> dict[str, frozenset[ReadPlace]]:
        """The written arrays a dry run needs copies of (read back by the launch, or written by a function the plan
        does not clone, whose writes the count phase cannot leave out), each with the places the functions the
        plan clones read it (none where a copy is needed whatever the count phase keeps: ``KernelPlan.read_at``)."""
        cloned = {id(function.unit.tree) for function in root.walk()}
        copied: dict[str, frozenset[ReadPlace]] = {}
        for path in self.written:
            places = self._read_back.get(path, set())
            if not self._writers.get(path, set()) <= cloned or any(place.tree not in cloned for place in places):
                copied[path] = frozenset()
            elif places:
                copied[path] = frozenset(places)
        return copied

    def _reads(self, unit: Unit, path_of: Callable[[ast.expr], str | None]) -> list[tuple[ast.Subscript, str]]:
        """The function's reads of elements of arrays the launch writes, with their paths."""
        facts = self.analysis(unit)
        found = []
        for node in memory.loads(facts.nodes, facts.parents, facts.names):
            path = path_of(node)
            if path in self.written and self._is_element_read(unit, node, path):
                found.append((node, path))
        return found

    def _reads_written(self, unit: Unit, paths: dict[str, str | None], seen: set[tuple]) -> bool:
        """Does the function read an element of an array the launch writes, itself or in a helper it calls?"""
        key = (id(unit.tree), tuple(sorted(paths.items(), key=repr)))
        if key in self._reading:
            return self._reading[key]
        if key in seen:
            return False
        seen.add(key)
        path_of = self._path_of(unit, paths)
        callees = ((call, self.resolve_helper(unit, call)) for call in self.analysis(unit).calls)
        reads = bool(self._reads(unit, path_of)) or any(
            self._reads_written(helper, self._bind(unit, call, helper, path_of), seen)
            for call, helper in callees
            if helper is not None
        )
        self._reading[key] = reads
        return reads

    def _updates_written(self, unit: Unit, paths: dict[str, str | None], seen: set[tuple]) -> bool:
        """Does the function update an array the launch writes (an atomic, an augmented assignment), itself or in a
        helper it calls? Warp's backward runs a called helper's forward again, updates included, which would then
        apply twice; a plain store would only write the same value again."""
        key = (id(unit.tree), tuple(sorted(paths.items(), key=repr)))
        if key in self._updating:
            return self._updating[key]
        if key in seen:
            return False
        seen.add(key)
        facts = self.analysis(unit)
        path_of = self._path_of(unit, paths)
        targets = [call.target for call in facts.atomics]
        targets += [
            array for node in facts.nodes if isinstance(node, ast.AugAssign) for array in facts.stored_memory(node)
        ]
        callees = ((call, self.resolve_helper(unit, call)) for call in facts.calls)
        writes = any(path_of(target) in self.written for target in targets) or any(
            self._updates_written(helper, self._bind(unit, call, helper, path_of), seen)
            for call, helper in callees
            if helper is not None
        )
        self._updating[key] = writes
        return writes

    def _check_builtin_reads(self, unit: Unit, path_of: Callable[[ast.expr], str | None]) -> None:
        """Refuse a Warp builtin that reads the elements of an array the launch writes (``passes.builtins``: one
        that reads arrays, or one the table lacks): it would read it in the replay, after the forward changed it
        (an element read with ``arr[i]`` is recorded instead)."""
        facts = self.analysis(unit)
        for call in facts.calls:
            if facts.names.atomic_op(call) is not None:
                continue
            if self.resolve_helper(unit, call) is not None or not self.frontend.is_builtin(unit, call):
                continue
            effect = builtin_effect_of(call, facts.names)
            if effect is not None and Effect.READS_ARRAYS not in effect.effects:
                continue  # reads a shape (len), or writes only (tile_store)
            for arg in [*call.args, *(keyword.value for keyword in call.keywords)]:
                path = path_of(arg)
                if path in self.written and self._names_memory(unit, arg, path):
                    raise Refusal(
                        unit,
                        call,
                        f"'{ast.unparse(call.func)}' reads '{path}', which this launch also writes: the replay would "
                        "read it after the forward changed it",
                        f"Read the elements you need with {path}[i] (those reads are recorded), or pass an array "
                        "this launch does not write",
                    )

    @staticmethod
    def _kernel_path(local: str | None, paths: dict[str, str | None]) -> str | None:
        if local is None:
            return None
        root, _, rest = local.partition(".")
        mapped = paths.get(root)
        if mapped is None:
            return None
        return f"{mapped}.{rest}" if rest else mapped


def builtin_effect_of(call: ast.Call, names: WarpNames) -> BuiltinEffect | None:
    """What a call of a builtin does: a constructor makes a value; None for a builtin the table lacks."""
    if called_builtin(call, names) is None:
        return BuiltinEffect(frozenset({Effect.PURE}), (), "a constructor: a value of its arguments")
    return call_effect(call, names)


def bound_arguments(call: ast.Call, helper: Unit) -> dict[str, ast.expr]:
    """The argument expression each of the helper's parameters gets at this call."""
    bound = dict(zip([a.arg for a in helper.tree.args.args], call.args, strict=False))
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    return bound


@dataclass(frozen=True)
class ChoiceUse:
    """A use, other than a store, of a local that may name one of several arrays (``MemoryAccesses._choices``)."""

    unit: Unit
    node: ast.expr
    local: str
    choices: frozenset[str]  # the kernel paths it may name
    how: str  # "read", "handed to 'f'", ...


def _check_choices(uses: list[ChoiceUse], written: set[str | None]) -> None:
    """Refuse a use of a local that may name one of several arrays where the launch writes one of them: which one
    it reads is known only at run time, so the planner can neither record the read nor follow it into a helper.
    (The planner refuses consumed atomics on such a local whatever they target: their records belong to one
    array.)"""
    for use in uses:
        hit = sorted(use.choices & written)
        if hit:
            names = " or ".join(f"'{path}'" for path in sorted(use.choices))
            raise Refusal(
                use.unit,
                use.node,
                f"'{use.local}' is assigned more than one array ({names}) and is {use.how} here, while this launch "
                f"writes '{hit[0]}': the rewrite cannot tell which array this reaches, so it cannot record it",
                f"Use each array by its own name (under the same condition that picks it), or assign '{use.local}' "
                "one array only",
            )


def _paths_through(
    expr: ast.expr, path_of: Callable[[ast.expr], str | None], choices: dict[str, frozenset[str]]
) -> list[str | None]:
    """The kernel paths ``expr`` may name: its one path, or one for each array the choice it goes through names."""
    parts = path_parts(expr)
    if parts is None or parts[0] not in choices:
        return [path_of(expr)]
    return [".".join([choice, *parts[1:]]) for choice in sorted(choices[parts[0]])]


def _root_name(expr: ast.expr) -> str | None:
    """The local an expression reaches memory through: ``buf`` in ``buf``, ``buf[i]`` or ``buf.f[i]``."""
    parts = path_parts(expr)
    return parts[0] if parts else None


# What a builtin may do that a dry run needs done: write memory or the locals it is handed (``computes_only``).
_SIDE_EFFECTS = frozenset({Effect.WRITES_ARGUMENTS, Effect.WRITES_ARRAYS, Effect.REFUSED})
# A helper's tree -> does it only compute a value (``Analysis.computes_only``).
_COMPUTES_ONLY: weakref.WeakKeyDictionary[ast.FunctionDef, bool] = weakref.WeakKeyDictionary()


def _computes_only(helper: Unit, frontend: Frontend) -> bool:
    if helper.tree not in _COMPUTES_ONLY:
        _COMPUTES_ONLY[helper.tree] = False  # a recursive call (Warp compiles none) computes nothing known
        facts = Analysis(helper, frontend)
        stores = any(facts.stored_memory(node) for node in facts.nodes if isinstance(node, ast.stmt))
        _COMPUTES_ONLY[helper.tree] = not stores and all(map(facts.computes_only, facts.calls))
    return _COMPUTES_ONLY[helper.tree]


# A helper's tree (each front end reads its own) -> may it write memory a gradient flows through.
_WRITES_GRADIENT: weakref.WeakKeyDictionary[ast.FunctionDef, bool] = weakref.WeakKeyDictionary()


def _writes_gradient(helper: Unit, frontend: Frontend) -> bool:
    """``passes.loop_hazards.writes_gradient_memory`` of a helper, its own calls resolved by ``frontend``."""
    if helper.tree not in _WRITES_GRADIENT:
        _WRITES_GRADIENT[helper.tree] = False  # a recursive call adds nothing (Warp compiles none)
        _WRITES_GRADIENT[helper.tree] = writes_gradient_memory(helper.tree, Analysis(helper, frontend).callees)
    return _WRITES_GRADIENT[helper.tree]
