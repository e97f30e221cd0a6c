"""Helpers no kernel calls by name, but passed as function values to kernel factories (Newton's contact writers:
``create_narrow_phase_primitive_kernel(write_contact_simple)``, whose kernels call their ``writer_func``
parameter): where every factory a helper reaches builds only kernels without a backward pass, the helper's consumed
atomics are no hazard (``--check``: WR101, not WR002).

Followed from the source alone, as far as it can be sure, and no further. The helper's value is followed through
the names that hold it: its own, the names it is imported under, locals bound to an expression that may give it
(``writer = a if fast else write_contact``), and the parameters of the functions of the project it is passed to
(``NarrowPhase(contact_writer_warp_func=write_contact)`` passes it on to ``NarrowPhase.__init__``). A function it is
passed to that defines kernels is a factory, which qualifies where every kernel it defines has no backward pass,
it returns nothing but those kernels, and its own code (outside the kernels and helpers it defines) uses the
parameter only to read an attribute (``writer.__name__``) or to hand it to a call whose result only those kernels
and helpers use. Any other use of the value (stored in an attribute or a container, returned, handed to a method or
to something not found) leaves the helper a hazard.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from warp_rewrite.cli.project import Project
from warp_rewrite.cli.scopes import own_returns, own_statements
from warp_rewrite.cli.source_file import Imported
from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.passes.syntax import walk

_DEEPEST = 8  # functions a value is followed through, at most


@dataclass(frozen=True)
class Holder:
    """A name that holds the helper's value: in ``scope`` of ``module`` (None: a module-level name), after passing
    through ``depth`` functions."""

    module: StaticModule
    scope: ast.FunctionDef | None
    name: str
    depth: int = 0


def only_to_kernels_without_backward(project: Project, owner: StaticModule, helper: ast.FunctionDef) -> str | None:
    """Why the helper ``helper`` of ``owner`` is no hazard, for WR101's message, where it is passed as a function
    value only to factories that build kernels without a backward pass (in the files ``project`` has read); None
    where it is not, or something else is done with it."""
    pending = [Holder(owner, _scope_of(owner, helper), helper.name)] if helper.name in owner.text else []
    pending += [
        Holder(module, None, name)
        for module in [m for m in project.modules.values() if m is not None and m is not owner]
        for name in _names_imported(project, module, owner, helper)
    ]
    seen: set[tuple[int, int, str]] = set()
    factories: set[str] = set()
    while pending:
        holder = pending.pop()
        key = (id(holder.module), id(holder.scope), holder.name)
        if key in seen:
            continue
        seen.add(key)
        passed = _passed(project, holder)
        if passed is None:
            return None
        for target in passed:
            if target.depth > holder.depth and _without_backward(target):
                factories.add(f"{target.scope.name}()" if target.scope else "")
            elif (target.depth > holder.depth and _defines_kernels(target)) or target.depth > _DEEPEST:
                return None
            else:
                pending.append(target)
    if not factories:
        return None
    named = sorted(factories)
    through = ", ".join(named[:2]) + (f" and {len(named) - 2} more" if len(named) > 2 else "")
    return f"it is passed as a function value only to kernels built without a backward pass ({through})"


def _names_imported(project: Project, module: StaticModule, owner: StaticModule, helper: ast.FunctionDef) -> set[str]:
    """The names ``module`` imports ``helper`` of ``owner`` under (``from .narrow_phase import write_contact_simple
    as writer``)."""
    return {
        local
        for local, source in module.imported.items()
        if source.name == helper.name and local in module.text and _imports_from(project, module, source, owner)
    }


def _imports_from(project: Project, module: StaticModule, source: Imported, owner: StaticModule) -> bool:
    found = project.module_file(module, source.level, source.module)
    return found is not None and project.real(found) == project.real(owner.path)


def _passed(project: Project, holder: Holder) -> list[Holder] | None:
    """Where the value ``holder`` holds goes: the locals it is bound to and the parameters of the functions it is
    passed to (each a ``Holder`` there, the parameters one function deeper); None where it goes anywhere else."""
    module = holder.module
    for body, definition in module.elided_definitions():
        if holder.name in "".join(module.lines[body.first - 1 : body.last]):
            module.full_body(definition)
    root: ast.AST = holder.scope if holder.scope is not None else module.tree
    parents = {child: node for node in walk(root) for child in ast.iter_child_nodes(node)}
    passed = []
    for use in _loads(module, holder.scope, holder.name, root):
        value = _value_around(use, parents)
        parent = parents.get(value)
        if isinstance(parent, ast.keyword):  # f(writer=value): the call's
            parent = parents.get(parent)
        if isinstance(parent, ast.Attribute | ast.Compare) or (isinstance(parent, ast.Call) and value is parent.func):
            continue  # writer.__name__, writer is None; a call of it is a call, which the kernels' findings follow
        if isinstance(parent, ast.Call):
            target = _parameter(project, module, parent, value)
            if target is None:
                return None
            passed.append(Holder(target[0], target[1], target[2], holder.depth + 1))
        elif isinstance(parent, ast.arguments):  # def make(writer=write): a default of the function's parameter
            function = parents.get(parent)
            parameter = _defaulted(parent, value)
            if not isinstance(function, ast.FunctionDef) or parameter is None:
                return None
            passed.append(Holder(module, function, parameter, holder.depth))
        elif isinstance(parent, ast.Assign) and all(isinstance(t, ast.Name) for t in parent.targets):
            local = _scope_of(module, parent)
            passed += [Holder(module, local, t.id, holder.depth) for t in parent.targets if isinstance(t, ast.Name)]
        else:
            return None
    return passed


def _defaulted(arguments: ast.arguments, default: ast.expr) -> str | None:
    """The parameter whose default ``default`` is."""
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = list(zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults, strict=True))
    pairs += [(arg, value) for arg, value in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if value]
    return next((arg.arg for arg, value in pairs if value is default), None)


def _scope_of(module: StaticModule, node: ast.AST) -> ast.FunctionDef | None:
    around = [scope for scope in module.scopes(node) if not isinstance(scope, ast.ClassDef)]
    return around[0] if around and isinstance(around[0], ast.FunctionDef) else None


def _loads(module: StaticModule, scope: ast.FunctionDef | None, name: str, root: ast.AST) -> list[ast.Name]:
    """The reads of ``name`` where it is ``scope``'s (or a module-level name, with ``scope`` None), in the code that
    sees that binding: not in functions that bind the name themselves, nor in generated blocks."""
    return [
        node
        for node in walk(root)
        if isinstance(node, ast.Name)
        and node.id == name
        and isinstance(node.ctx, ast.Load)
        and not module.generated(node)
        and not _rebound_between(module, node, scope, name)
    ]


def _rebound_between(module: StaticModule, node: ast.Name, scope: ast.FunctionDef | None, name: str) -> bool:
    for around in module.scopes(node):
        if around is scope:
            return False
        if not isinstance(around, ast.ClassDef) and module.scope_binding(around, name) is not None:
            return True
    return False


def _value_around(node: ast.expr, parents: dict[ast.AST, ast.AST]) -> ast.expr:
    """The largest expression around ``node`` whose value may be ``node``'s: the branches of ``a if c else b`` and
    the operands of ``a or b``."""
    while True:
        parent = parents.get(node)
        if (isinstance(parent, ast.IfExp) and node is not parent.test) or isinstance(parent, ast.BoolOp):
            node = parent
        else:
            return node


def _parameter(
    project: Project, module: StaticModule, call: ast.Call, argument: ast.expr
) -> tuple[StaticModule, ast.FunctionDef, str] | None:
    """The function ``call`` calls (a class: its ``__init__``; ``Class.make``: that class or static method) and the
    parameter ``argument`` becomes there; None where it cannot be told."""
    method: str | None = None  # ``Class(...)``: its ``__init__``; ``Class.make(...)``: its class or static method
    callee = call.func
    if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name):
        method, callee = callee.attr, callee.value
    found = _own_class(module, callee, call) or project.definition_named(module, callee, module.scopes(call))
    if found is None or (method is not None and not isinstance(found[1], ast.ClassDef)):
        return None
    owner, definition = found
    function: ast.FunctionDef | None = definition if isinstance(definition, ast.FunctionDef) else None
    bound = False  # whether the call passes the first parameter itself (self, cls)
    if isinstance(definition, ast.ClassDef):
        name = method or "__init__"
        function = next((n for n in definition.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        decorators = {d.id for d in function.decorator_list if isinstance(d, ast.Name)} if function else set()
        if function is None or (method is not None and not decorators & {"classmethod", "staticmethod"}):
            return None
        function, bound = owner.full_body(function), "staticmethod" not in decorators
    if function is None:
        return None
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)][int(bound) :]
    if argument in call.args:
        index = call.args.index(argument)
        if any(isinstance(a, ast.Starred) for a in call.args[: index + 1]) or index >= len(positional):
            return None
        return owner, function, positional[index]
    keyword = next((k.arg for k in call.keywords if k.value is argument), None)
    if keyword is None or keyword not in positional + [a.arg for a in function.args.kwonlyargs]:
        return None
    return owner, function, keyword


def _own_class(module: StaticModule, callee: ast.expr, call: ast.Call) -> tuple[StaticModule, ast.ClassDef] | None:
    """The class ``cls`` is, where ``callee`` is the first parameter of the class method ``call`` is in."""
    scopes = module.scopes(call)
    for index, scope in enumerate(scopes[:-1]):
        if isinstance(scope, ast.FunctionDef) and isinstance(scopes[index + 1], ast.ClassDef):
            first = scope.args.posonlyargs + scope.args.args
            classmethod = any(isinstance(d, ast.Name) and d.id == "classmethod" for d in scope.decorator_list)
            named = isinstance(callee, ast.Name) and bool(first) and first[0].arg == callee.id
            return (module, scopes[index + 1]) if classmethod and named else None  # type: ignore[return-value]
    return None


def _kernels_in(holder: Holder) -> list[ast.FunctionDef]:
    module, factory = holder.module, holder.scope
    return [k for k in module.kernels() if factory is not None and factory in module.scopes(k)]


def _defines_kernels(holder: Holder) -> bool:
    return bool(_kernels_in(holder))


def _without_backward(holder: Holder) -> bool:
    """True if ``holder`` is the parameter of a factory that builds only kernels without a backward pass, returns
    nothing else, and whose own code uses the parameter only for an attribute or in a call whose result only the
    functions it defines use."""
    module, factory = holder.module, holder.scope
    kernels = _kernels_in(holder)
    if factory is None or not kernels or not all(module.backward_disabled(k) for k in kernels):
        return False
    inner = [node for node in walk(factory) if isinstance(node, ast.FunctionDef) and node is not factory]
    if not _returns_only(factory, _kernel_names(factory, {k.name for k in kernels}, inner)):
        return False
    inside = {id(node) for function in inner for node in walk(function)}
    parents = {child: node for node in walk(factory) for child in ast.iter_child_nodes(node)}
    for statement in own_statements(factory):
        for node in walk(statement):
            if id(node) in inside or not (isinstance(node, ast.Name) and node.id == holder.name):
                continue
            parent = parents.get(node)
            if isinstance(parent, ast.Attribute):
                continue  # writer.__name__
            if not (
                isinstance(parent, ast.Call)
                and node in parent.args
                and _used_only_inside(parent, parents, factory, inside)
            ):
                return False
    return True


def _kernel_names(factory: ast.FunctionDef, kernels: set[str], inner: list[ast.FunctionDef]) -> set[str]:
    """The factory's names for its kernels: theirs, and the locals it binds to what a function it defines returns
    where that returns only its kernels (``gjk = create_distance_kernel(False)``)."""
    makers = {function.name for function in inner if _returns_only(function, kernels)}
    names = set(kernels)
    for statement in own_statements(factory):
        if not isinstance(statement, ast.Assign):
            continue
        value = statement.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in makers:
            names |= {target.id for target in statement.targets if isinstance(target, ast.Name)}
    return names


def _returns_only(function: ast.FunctionDef, names: set[str]) -> bool:
    """True if every ``return`` of ``function`` itself gives nothing, or names among ``names`` (one or a tuple)."""
    for returned in own_returns(function):
        value = returned.value
        values = value.elts if isinstance(value, ast.Tuple) else [value]
        if not all(v is None or _none(v) or (isinstance(v, ast.Name) and v.id in names) for v in values):
            return False
    return True


def _none(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and value.value is None


def _used_only_inside(
    call: ast.Call, parents: dict[ast.AST, ast.AST], factory: ast.FunctionDef, inside: set[int]
) -> bool:
    """True if the value of ``call`` is bound to locals that only the functions the factory defines read."""
    statement = parents.get(call)
    if not (isinstance(statement, ast.Assign) and all(isinstance(t, ast.Name) for t in statement.targets)):
        return False
    targets = {t.id for t in statement.targets if isinstance(t, ast.Name)}
    return all(
        id(node) in inside
        for node in walk(factory)
        if isinstance(node, ast.Name) and node.id in targets and isinstance(node.ctx, ast.Load)
    )
