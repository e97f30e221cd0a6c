"""What a name in a file refers to where it is used: the functions and classes around a node, and the binding each
scope (innermost first, then the module) makes of a name, as Python resolves it when the code runs."""

from __future__ import annotations

import ast
import bisect
import builtins
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from warp_rewrite.cli.source_file import Imported, SourceModule, imported_names
from warp_rewrite.passes.syntax import Located, child_nodes, parent_map, walk, walk_with_owners

Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)  # what decorators start
_POSITIONED = (ast.stmt, ast.expr, ast.excepthandler, ast.arg, ast.keyword, ast.alias, ast.pattern)  # lineno & end
PYTHON_BUILTINS = frozenset(dir(builtins))  # what a name no scope binds refers to


@dataclass
class ScopedModule(SourceModule):
    """A file whose names can be looked up by scope."""

    @cached_property
    def _parents(self) -> dict[ast.AST, ast.AST]:
        return parent_map(self.nodes)

    def scopes(self, node: ast.AST) -> list[Scope]:
        """The functions and classes around ``node``, innermost first (``node`` itself not included).

        Found by following positions down from the top-level statement ``node`` starts in (and checked: the path
        must reach ``node`` itself), as most of a file is never asked about; from a walk of the whole file where
        positions do not lead to it.
        """
        lineno, column = getattr(node, "lineno", None), getattr(node, "col_offset", None)
        if lineno is not None and column is not None:
            position = (lineno, column)
            index = bisect.bisect_right(self._statement_starts, position) - 1
            statement = self.tree.body[index] if index >= 0 else None
            if statement is node:
                return []
            try:
                path = _path(statement, node, position) if statement is not None else None
            except RecursionError:
                path = None
            if path is not None:
                return [scope for scope in reversed(path) if isinstance(scope, _SCOPES)]
        found: list[Scope] = []
        current = self._file_owners.get(node)
        while current is not None:
            found.append(current)  # type: ignore[arg-type]  # walk_with_owners gives only _SCOPES
            current = self._file_owners.get(current)
        return found

    def scopes_in(self, function: ast.FunctionDef, nodes: list[ast.AST]) -> list[Scope] | None:
        """``scopes(node)`` of every node of ``function`` (``nodes``: ``walk(function)``) where it defines no function,
        class or lambda inside (a kernel or helper): the function and the scopes around it. None otherwise."""
        if any(isinstance(node, _SCOPES) for node in nodes[1:]):
            return None
        return [function, *self.scopes(function)]

    @cached_property
    def _statement_starts(self) -> list[tuple[int, int]]:
        """Where each top-level statement begins, in order."""
        return [_start(node) for node in self.tree.body]

    @cached_property
    def _file_owners(self) -> dict[ast.AST, ast.AST | None]:
        return walk_with_owners(self.tree, _SCOPES)

    @cached_property
    def postponed_annotations(self) -> bool:
        """True under ``from __future__ import annotations``: the file's annotations are strings, evaluated later."""
        return any(
            isinstance(node, ast.ImportFrom) and node.module == "__future__" and alias.name == "annotations"
            for node in self.tree.body
            for alias in getattr(node, "names", [])
        )

    def bound_around(self, name: str, node: ast.AST) -> bool:
        """True if a function around ``node`` binds ``name``: code there sees it as a closure variable."""
        functions = [scope for scope in self.scopes(node) if not isinstance(scope, ast.ClassDef)]
        return any(self.scope_binding(scope, name) is not None for scope in functions)

    def scope_binding(self, scope: Scope | ast.Module, name: str) -> ast.AST | Imported | None:
        """The last binding of ``name`` directly in ``scope`` (``scope_bindings``), the scope's bindings listed once
        a run: a file's module scope is asked about thousands of names."""
        return self._scope_bindings(scope).last.get(name)

    def alternatives(self, scope: Scope | ast.Module, name: str) -> list[ast.AST | Imported]:
        """Each binding of ``name`` directly in ``scope`` that may be the one left when the scope has run, where
        that is more than one (``ScopeBindings.alternatives``); else none."""
        return self._scope_bindings(scope).alternatives.get(name, [])

    def _scope_bindings(self, scope: Scope | ast.Module) -> ScopeBindings:
        bindings = self._bindings.get(id(scope))
        if bindings is None:
            bindings = self._bindings[id(scope)] = scope_bindings(scope, self.generated)
        return bindings

    @cached_property
    def _bindings(self) -> dict[int, ScopeBindings]:
        return {}

    def binding(self, name: str, scopes: list[Scope]) -> ast.AST | Imported | None:
        """What ``name`` is bound to where ``scopes`` (innermost first) surround the code: a definition, an
        ``Imported``, an ``ast.arg`` (a parameter), the value assigned to it, or None if nothing in the file binds
        it. The last binding of a scope wins: Warp reads closures and globals when it builds the kernel, after
        the function ran."""
        found = self._lookup(name, scopes)
        return found[1] if found is not None else None

    def binding_scope(self, name: str, scopes: list[Scope]) -> Scope | ast.Module | None:
        """The function (or the module) whose binding of ``name`` ``binding`` finds."""
        found = self._lookup(name, scopes)
        return found[0] if found is not None else None

    def _lookup(self, name: str, scopes: list[Scope]) -> tuple[Scope | ast.Module, ast.AST | Imported] | None:
        for scope in [s for s in scopes if not isinstance(s, ast.ClassDef)] + [self.tree]:
            found = self.scope_binding(scope, name)
            if found is not None:
                return scope, found
        return None


def _start(node: Located) -> tuple[int, int]:
    """Where ``node``'s text begins: a definition's at its first decorator."""
    if isinstance(node, _DEFINITIONS) and node.decorator_list:
        node = node.decorator_list[0]
    return node.lineno, node.col_offset


def _path(current: ast.AST, node: ast.AST, position: tuple[int, int]) -> list[ast.AST] | None:
    """The nodes from ``current`` down to the parent of ``node`` (which starts at ``position``), following the
    children whose text holds that position (and those without a position: parameters, comprehensions); None if
    ``node`` is not found so."""
    for child in child_nodes(current):
        if child is node:
            return [current]
        if isinstance(child, _POSITIONED):
            if (child.end_lineno, child.end_col_offset) < position:
                continue
            decorated = isinstance(child, _DEFINITIONS) and child.decorator_list
            if (child.lineno, child.col_offset) > position and (not decorated or _start(child) > position):
                continue
        found = _path(child, node, position)
        if found is not None:
            return [current, *found]
    return None


@dataclass
class ScopeBindings:
    """The names a scope binds: each with its last binding; and, for a name bound in a branch (under an ``if``, a
    loop, a ``try`` or a ``match``) and elsewhere too, each of its bindings, since which one is left depends on how
    the code ran (``if FAST: put = put_fast`` then ``else: put = put_exact``)."""

    last: dict[str, ast.AST | Imported] = field(default_factory=dict)
    alternatives: dict[str, list[ast.AST | Imported]] = field(default_factory=dict)


# The statements whose bodies may run or not (or in part): a binding in one is one of several a name may be left with
_BRANCHING = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.Try,
    ast.Match,
    *([ast.TryStar] if hasattr(ast, "TryStar") else []),
)


def scope_bindings(scope: Scope | ast.Module, generated: Callable[[ast.stmt], bool]) -> ScopeBindings:
    """Every name bound directly in ``scope`` (not inside the functions it defines), not counting the statements of
    ``generated`` blocks, with its bindings: a parameter, a definition, an ``Imported``, the value assigned (an
    annotation without one: the statement), or the statement that stores it (a loop, ``with ... as``, ``x += 1``)."""
    every: dict[str, list[tuple[ast.AST | Imported, bool]]] = {}  # name -> (binding, made in a branch)

    def bind(names: Mapping[str, ast.AST | Imported], branch: bool) -> None:
        for name, binding in names.items():
            every.setdefault(name, []).append((binding, branch))

    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        arguments = scope.args
        for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]:
            if arg is not None:
                bind({arg.arg: arg}, False)
    pending = [(node, False) for node in scope.body] if isinstance(scope.body, list) else []
    while pending:
        node, branch = pending.pop(0)
        if generated(node):
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bind({node.name: node}, branch)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            first: dict[str, Imported] = {}
            for local, source in imported_names(node):
                first.setdefault(local, source)  # the first alias of a name in one statement
            bind(first, branch)
        elif isinstance(node, ast.Assign):
            bind({target.id: node.value for target in node.targets if isinstance(target, ast.Name)}, branch)
        elif isinstance(node, ast.AnnAssign):
            bind(dict.fromkeys(_stored(node.target), node.value if node.value is not None else node), branch)
        else:
            bind(dict.fromkeys((name for target in _targets(node) for name in _stored(target)), node), branch)
        if isinstance(node, ast.stmt) and not isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            inner = branch or isinstance(node, _BRANCHING)
            pending.extend((child, inner) for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
            pending.extend(
                (statement, inner) for handler in getattr(node, "handlers", []) for statement in handler.body
            )
            pending.extend((statement, inner) for case in getattr(node, "cases", []) for statement in case.body)
    found = ScopeBindings()
    for name, bindings in every.items():
        found.last[name] = bindings[-1][0]
        if len(bindings) > 1 and any(branch for _, branch in bindings):
            found.alternatives[name] = [binding for binding, _ in bindings]
    return found


def _targets(node: ast.AST) -> list[ast.expr]:
    """What a statement other than an assignment binds: a loop's target, ``with ... as``, ``x += 1``."""
    if isinstance(node, ast.For | ast.AsyncFor | ast.AugAssign):
        return [node.target]
    if isinstance(node, ast.With | ast.AsyncWith):
        return [item.optional_vars for item in node.items if item.optional_vars is not None]
    return []


def _stored(target: ast.expr) -> list[str]:
    """The names in an assignment's target (as it reads them: also those of ``a[i]``'s subscript)."""
    return [n.id for n in walk(target) if isinstance(n, ast.Name)]


def own_statements(function: ast.FunctionDef) -> Iterator[ast.stmt]:
    """The statements of ``function`` itself, at any depth, not those of the functions and classes it defines."""
    pending = list(function.body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            pending.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)


def own_returns(function: ast.FunctionDef) -> Iterator[ast.Return]:
    """The ``return`` statements of ``function`` itself, not of the functions it defines."""
    return (node for node in own_statements(function) if isinstance(node, ast.Return))
