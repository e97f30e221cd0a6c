"""Kernel discovery in a file the command line reads: its kernels and helpers (also those defined inside functions,
the factories, and plain functions made kernels by a call), the Warp module each belongs to and its options, and
the blocks an earlier ``wp-rewrite`` run generated for each kernel."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TypeGuard

from warp_rewrite.cli.elision import ElidedBody, Elision, elide
from warp_rewrite.cli.markers import has_markers
from warp_rewrite.cli.scopes import Scope, ScopedModule, own_returns, own_statements
from warp_rewrite.cli.source_file import Region, module_level, position, read_imports
from warp_rewrite.passes.atomics import AtomicCall, find_atomic_calls, find_consumed_tile_atomics
from warp_rewrite.passes.builtin_names import written_by_name
from warp_rewrite.passes.loop_carried import LoopFlow
from warp_rewrite.passes.loop_hazards import Callees, HelperWrites, LoopHazard, loop_hazards
from warp_rewrite.passes.syntax import end_line, walk

_REWRITE = "KernelRewrite"  # the runtime's class that a constructed kernel's block binds (warp_rewrite.runtime)


def _literal_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _disables_backward(options: ast.expr | None) -> bool:
    """True for a dict display ``{"enable_backward": False, ...}``."""
    if not isinstance(options, ast.Dict):
        return False
    return any(
        isinstance(key, ast.Constant) and key.value == "enable_backward" and _literal_false(value)
        for key, value in zip(options.keys, options.values, strict=True)
    )


ModuleKey = tuple[str, ...] | tuple[str, int]  # which Warp module: see StaticModule._module_key
FILE_MODULE: ModuleKey = ("file",)  # the file's own (the default of kernels defined in it)


@dataclass(frozen=True)
class Maker:
    """A function of the file that makes a kernel of the function it is given as ``parameter``."""

    function: ast.FunctionDef
    parameter: str
    made: Construction  # the call inside it that makes the kernel (of ``parameter``)

    @property
    def options(self) -> ast.Call:
        """The Warp call (``wp.Kernel(func=...)``) whose keywords are the kernel's options."""
        return self.made.options


@dataclass(frozen=True)
class Construction:
    """A call that makes a kernel of a function: ``wp.Kernel(func=f)``, ``wp.kernel(f)``, ``wp.kernel(...)(f)``, or
    one of the file's ``Maker``s (``getkernel(f)``)."""

    site: ast.Call  # the whole call, which gives the kernel
    function: ast.expr  # the argument that is the function
    options: ast.Call  # the Warp call whose keywords are the kernel's options (``site``, or one inside ``maker``)
    maker: Maker | None = None


def _argument(call: ast.Call, function: ast.FunctionDef, parameter: str) -> ast.expr | None:
    """What ``call`` passes to ``function``'s ``parameter``, by position or keyword; None if it cannot tell."""
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    index = positional.index(parameter) if parameter in positional else None
    return _argument_at(call, index, parameter)


def _argument_at(call: ast.Call, index: int | None, keyword: str) -> ast.expr | None:
    """The argument at position ``index`` or given as ``keyword``; None if there is none or a ``*args`` comes
    first."""
    if index is not None and index < len(call.args):
        before = call.args[: index + 1]
        return None if any(isinstance(a, ast.Starred) for a in before) else call.args[index]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _is_placeholder(definition: ast.FunctionDef, body: ElidedBody) -> bool:
    """True if ``definition``'s body is the ``...`` the scanner put in place of ``body``."""
    if len(definition.body) != 1 or not isinstance(definition.body[0], ast.Expr):
        return False
    value = definition.body[0].value
    return (
        isinstance(value, ast.Constant)
        and value.value is Ellipsis
        and (value.lineno, value.col_offset) == (body.first, body.placeholder_column)
    )


def _is_options(expr: ast.expr) -> TypeGuard[ast.Attribute]:
    """``m.options`` for a name or call ``m``."""
    return isinstance(expr, ast.Attribute) and expr.attr == "options" and isinstance(expr.value, ast.Name | ast.Call)


@dataclass
class StaticModule(ScopedModule):
    """One Python file, parsed but never imported, with its kernels and helpers."""

    @classmethod
    def parse_for_check(
        cls, path: Path, display: str, text: str, encoding: str = "utf-8", needs: tuple[str, ...] = ()
    ) -> StaticModule | None:
        """The file parsed without the bodies no check reads (``warp_rewrite.cli.elision``) where the tree confirms it,
        else in full. A file with generated blocks is parsed in full (their staleness reads every line). None,
        not parsed, where ``needs`` is given and the code (strings and comments masked) has none of its words."""
        elision = None if has_markers(text) else elide(text)
        if elision is not None and needs and not elision.mentions(needs):
            return None
        if elision is not None:
            try:
                tree = ast.parse(elision.text, filename=display)
            except (SyntaxError, ValueError, RecursionError):
                tree = None  # the full parse tells what is wrong
            if tree is not None:
                warp, imported = read_imports(tree)
                elided = {body.definition: body for body in elision.bodies}
                module = cls(path, display, text, tree, warp, imported, [], encoding, elided)
                if module._elision_holds(elision):
                    return module
        return cls.parse(path, display, text, encoding)

    def _elision_holds(self, elision: Elision) -> bool:
        """True if the left-out bodies are what the scanner meant and nothing a check reads: each is the whole body
        of a ``def`` with no Warp decorator, made a kernel by no call, and names none of the file's names for a
        Warp member, a kernel maker or a plain function made a kernel."""
        by_line = {node.lineno: node for node in self.definitions if isinstance(node, ast.FunctionDef)}
        left_out = []
        for body in elision.bodies:
            node = by_line.get(body.definition)
            if node is None or not _is_placeholder(node, body):
                return False
            if any(self.warp.is_warp_expr(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list):
                return False
            left_out.append(id(node))
        if not self._constructed.keys().isdisjoint(left_out):
            return False
        constructed = {node.name for node in self.definitions if id(node) in self._constructed}
        makers = {maker.function.name for maker in self._makers.values()}
        return not elision.names_any(set(self.warp.members) | makers | constructed)

    def full_body(self, definition: ast.FunctionDef) -> ast.FunctionDef:
        """``definition`` with its body parsed where ``--check`` left it out: a helper factory's ``return``
        statements are read. Its lines and columns are those of the file."""
        body = self.elided.get(definition.lineno)
        if body is None or definition.col_offset != body.indent:
            return definition
        del self.elided[definition.lineno]
        source = "".join(self.lines[body.definition - 1 : body.last])
        if body.indent:  # parsed where its indentation is valid: in an ``if`` block
            source, offset = "if 1:\n" + source, body.definition - 2
        else:
            offset = body.definition - 1
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError):
            return definition  # a syntax error there is ruff's E999, as in the files --check does not parse
        ast.increment_lineno(tree, offset)
        parsed = tree.body[0]
        if isinstance(parsed, ast.If):
            parsed = parsed.body[0]
        if not isinstance(parsed, ast.FunctionDef):
            return definition
        definition.body = parsed.body
        self._bindings.pop(id(definition), None)  # listed from the placeholder, if asked before
        self.restored.append(definition)
        return definition

    @cached_property
    def restored(self) -> list[ast.FunctionDef]:
        """The definitions ``full_body`` parsed the body of: their nodes are not in ``nodes`` and ``calls``."""
        return []

    def elided_definitions(self) -> list[tuple[ElidedBody, ast.FunctionDef]]:
        """The bodies left out and not parsed since, each with its ``def``."""
        if not self.elided:
            return []
        by_line = {n.lineno: n for n in self.definitions if isinstance(n, ast.FunctionDef) and n.lineno in self.elided}
        return [(body, by_line[line]) for line, body in self.elided.items()]

    def _made_kernel(self, call: ast.Call, makers: dict[int, Maker]) -> Construction | None:
        """What ``call`` is if it makes a kernel of a function: ``wp.Kernel(f)``, ``wp.Kernel(func=f)``,
        ``wp.kernel(f, ...)``, ``wp.kernel(...)(f)`` or a call of one of ``makers``, the file's functions that hand a
        parameter on to one of those."""
        if self.warp.is_warp(call.func, "Kernel"):
            func = next((k.value for k in call.keywords if k.arg == "func"), call.args[0] if call.args else None)
            return Construction(call, func, call) if func is not None else None
        if self.warp.is_warp(call.func, "kernel"):  # ``@wp.kernel(...)`` decorators have no positional argument
            return Construction(call, call.args[0], call) if call.args else None
        if isinstance(call.func, ast.Call) and self.warp.is_warp(call.func.func, "kernel") and call.args:
            return Construction(call, call.args[0], call.func)
        if (
            makers
            and isinstance(call.func, ast.Name)
            and call.func.id in {maker.function.name for maker in makers.values()}
        ):
            function = self.binding(call.func.id, self.scopes(call))
            maker = makers.get(id(function))
            if maker is None:
                return None
            argument = _argument(call, maker.function, maker.parameter)
            return Construction(call, argument, maker.options, maker) if argument is not None else None
        return None

    def _may_make_kernels(self, makers: dict[int, Maker]) -> list[ast.Call]:
        """The file's calls but those ``_made_kernel`` tells at once make no kernel (most of them): only a call of an
        attribute ``Kernel`` or ``kernel``, of a call, or of a name (imported from Warp, or a maker) can."""
        names = frozenset(self.warp.members) | {maker.function.name for maker in makers.values()}
        found = self._kernel_call_candidates.get(names)
        if found is None:
            found = self._kernel_call_candidates[names] = [
                call
                for call in self.calls
                if (isinstance(call.func, ast.Attribute) and call.func.attr in ("Kernel", "kernel"))
                or isinstance(call.func, ast.Call)
                or (isinstance(call.func, ast.Name) and call.func.id in names)
            ]
        return found

    @cached_property
    def _kernel_call_candidates(self) -> dict[frozenset[str], list[ast.Call]]:
        return {}  # by the names a kernel-making call may call: the same for both passes where the file has no maker

    @cached_property
    def _makers(self) -> dict[int, Maker]:
        """The file's functions that make a kernel of a function they are given (Warp's tests:
        ``def getkernel(func): return wp.Kernel(func=func)``), also through one another, by id of their
        definition."""
        makers: dict[int, Maker] = {}
        while True:
            found: dict[int, Maker] = {}
            for call in self._may_make_kernels(makers):
                made = self._made_kernel(call, makers)
                if made is None or not isinstance(made.function, ast.Name):
                    continue
                scopes = self.scopes(call)
                parameter = self.binding(made.function.id, scopes)
                if isinstance(parameter, ast.arg):
                    owner = next(s for s in scopes if not isinstance(s, ast.ClassDef) and parameter in walk(s.args))
                    if isinstance(owner, ast.FunctionDef) and id(owner) not in makers:
                        found.setdefault(id(owner), Maker(owner, parameter.arg, made))
            if not found:
                return makers
            makers |= found

    @cached_property
    def _constructed(self) -> dict[int, list[Construction]]:
        """Plain functions made kernels by a call (``wp.Kernel(func)``, as Warp's tests do, or a maker of the
        file), by id of their definition: the calls that do, in source order (none in generated blocks)."""
        found: dict[int, list[Construction]] = {}
        for call in self._may_make_kernels(self._makers):
            made = self._made_kernel(call, self._makers)
            if made is not None and isinstance(made.function, ast.Name) and not self.generated(call):
                definition = self.binding(made.function.id, self.scopes(call))
                if isinstance(definition, ast.FunctionDef):
                    found.setdefault(id(definition), []).append(made)
        return {key: sorted(made, key=lambda c: position(c.site)) for key, made in found.items()}

    def constructions(self, kernel: ast.FunctionDef) -> list[Construction]:
        """The calls that make a kernel of the plain function ``kernel``, in source order (none for a
        ``@wp.kernel``)."""
        return self._constructed.get(id(kernel), []) if self.constructed(kernel) else []

    def other_uses(self, kernel: ast.FunctionDef) -> list[ast.Name]:
        """Where the plain function ``kernel`` is named other than as what a construction makes a kernel of (or
        the object of an attribute, ``f.__name__``): a kernel made of it through there is not found."""
        handed = {id(made.function) for made in self.constructions(kernel)}
        return [
            node
            for node in self.nodes
            if isinstance(node, ast.Name)
            and node.id == kernel.name
            and isinstance(node.ctx, ast.Load)
            and id(node) not in handed
            and not isinstance(self._parents.get(node), ast.Attribute)
            and not self.generated(node)
            and self.binding(node.id, self.scopes(node)) is kernel
        ]

    def returns_kernel(self, maker: Maker, depth: int = 0) -> bool:
        """True if every ``return`` of the maker gives the kernel it makes: the making call itself, a name or
        subscript it was assigned to (``cache[key] = wp.Kernel(...)`` ... ``return cache[key]``), or the call of
        another maker that does."""
        made = maker.made
        holders = {
            ast.unparse(target)
            for node in own_statements(maker.function)
            if isinstance(node, ast.Assign) and node.value is made.site
            for target in node.targets
        }
        returns = list(own_returns(maker.function))
        if not returns or depth > 20:
            return False
        inner_returns = made.maker is None or self.returns_kernel(made.maker, depth + 1)
        return inner_returns and all(
            r.value is not None and (r.value is made.site or ast.unparse(r.value) in holders) for r in returns
        )

    def kernels(self) -> list[ast.FunctionDef]:
        """Every kernel the user wrote in the file, at any depth, in source order: ``@wp.kernel`` functions and
        functions passed to ``wp.Kernel(...)``."""
        kernels = [
            node
            for node in self.definitions
            if isinstance(node, ast.FunctionDef) and self.is_kernel(node) and not self.generated(node)
        ]
        return sorted(kernels, key=position)

    def is_kernel(self, definition: ast.FunctionDef) -> bool:
        return self.warp.decorated(definition, "kernel") or id(definition) in self._constructed

    def constructed(self, kernel: ast.FunctionDef) -> bool:
        """True for a function made a kernel by ``wp.Kernel(func)`` rather than by ``@wp.kernel``."""
        return id(kernel) in self._constructed and not self.warp.decorated(kernel, "kernel")

    def helpers(self) -> dict[str, ast.FunctionDef]:
        """``@wp.func`` helpers defined when the module is imported (also under a top-level ``if``)."""
        return {
            node.name: node
            for node in module_level(self.tree)
            if isinstance(node, ast.FunctionDef) and self.warp.decorated(node, "func") and not self.generated(node)
        }

    @cached_property
    def star_imports(self) -> list[ast.ImportFrom]:
        """The module's ``from ... import *`` statements run at import time, in order."""
        return [
            node
            for node in module_level(self.tree)
            if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names)
        ]

    def exports(self, name: str) -> bool:
        """Does ``from <this module> import *`` bind ``name``: it is in the module's ``__all__`` where that is a
        literal list or tuple of strings, else it does not start with an underscore?"""
        for node in module_level(self.tree):
            if not isinstance(node, ast.Assign):
                continue
            if any(isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets):
                try:
                    listed = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    break
                if isinstance(listed, list | tuple) and all(isinstance(item, str) for item in listed):
                    return name in listed
        return not name.startswith("_")

    def all_helpers(self) -> list[ast.FunctionDef]:
        """Every ``@wp.func`` the user wrote in the file, at any depth."""
        return [
            n
            for n in self.definitions
            if isinstance(n, ast.FunctionDef) and self.warp.decorated(n, "func") and not self.generated(n)
        ]

    def _twinned(self, kind: str) -> set[int]:
        """Helpers the file gives a hand-written ``@wp.<kind>(helper)`` twin, by id of their definition."""
        found = set()
        for node in self.definitions:
            decorator = self.warp.decorator(node, kind)
            if isinstance(decorator, ast.Call) and decorator.args and isinstance(decorator.args[0], ast.Name):
                helper = self.binding(decorator.args[0].id, self.scopes(node))
                if isinstance(helper, ast.FunctionDef):
                    found.add(id(helper))
        return found

    @cached_property
    def _replayed(self) -> set[int]:
        return self._twinned("func_replay")

    @cached_property
    def _with_gradient(self) -> set[int]:
        return self._twinned("func_grad")

    def has_replay(self, helper: ast.FunctionDef) -> bool:
        """True if the file gives ``helper`` a ``@wp.func_replay``: Warp's backward then calls that instead, so
        the atomics inside do not run again and their returns are what the replay makes them."""
        return id(helper) in self._replayed

    def has_gradient(self, helper: ast.FunctionDef) -> bool:
        """True if the file gives ``helper`` a ``@wp.func_grad``: Warp's backward then calls that for its adjoint
        and never replays its body, so no loop of it (or of what it calls) is replayed wrong."""
        return id(helper) in self._with_gradient

    # --- which kernels have a backward pass ------------------------------------------------------------------

    def module_of(self, kernel: ast.FunctionDef, depth: int = 0) -> ModuleKey | None:
        """The Warp module the kernel joins (``@wp.kernel(module=...)``, ``wp.Kernel(module=...)``): the file's
        own by default, one of its own for ``module="unique"``; None where the source does not tell."""
        keywords = self.kernel_keywords(kernel)
        module = keywords.get("module")
        if module is None or (isinstance(module, ast.Constant) and module.value is None):
            return FILE_MODULE
        if isinstance(module, ast.Constant) and module.value == "unique":
            return ("unique", id(kernel))
        call = self._options_call(kernel)
        scopes = self.scopes(call) if call is not None else []
        return self._module_key(module, [s for s in scopes if s is not kernel], depth + 1)

    def _module_key(self, expr: ast.expr, scopes: list[Scope], depth: int = 0) -> ModuleKey | None:
        """Which Warp module ``expr`` names: ``__name__`` or ``wp.get_module(__name__)`` the file's own, another
        name's, the module object a ``wp.get_module(...)``/``wp.Module(...)`` call made (through the variables
        holding it), a kernel's ``k.module``; None for anything else."""
        if depth > 20:
            return None
        if isinstance(expr, ast.Name) and expr.id == "__name__":
            return FILE_MODULE
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str) and expr.value != "unique":
            return ("named", expr.value)
        if isinstance(expr, ast.Name):
            bound = self.binding(expr.id, scopes)
            if isinstance(bound, ast.expr):
                return self._module_key(bound, self.scopes(bound), depth + 1)
            return None
        if isinstance(expr, ast.Call) and self.warp.is_warp(expr.func, "get_module") and len(expr.args) == 1:
            name = expr.args[0]
            if isinstance(name, ast.Name) and name.id == "__name__":
                return FILE_MODULE
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                return ("named", name.value)
            return ("object", id(expr))
        if isinstance(expr, ast.Call) and self.warp.is_warp(expr.func, "Module"):
            return ("object", id(expr))
        if isinstance(expr, ast.Attribute) and expr.attr == "module" and isinstance(expr.value, ast.Name):
            kernel = self.binding(expr.value.id, scopes)
            if isinstance(kernel, ast.FunctionDef) and self.is_kernel(kernel):
                return self.module_of(kernel, depth + 1)
        return None

    def _disabling(self, node: ast.AST) -> ModuleKey | None:
        """The module a statement sets up without a backward pass: ``wp.set_module_options({"enable_backward":
        False}, module=m)`` (the file's own without ``module``, at module level only: in a function it may never
        run), ``m.options.update({...})`` or ``m.options.update(enable_backward=False)``, ``m.options[
        "enable_backward"] = False``."""
        if isinstance(node, ast.Call) and self.warp.is_warp(node.func, "set_module_options"):
            if not _disables_backward(_argument_at(node, 0, "options")):
                return None
            module = _argument_at(node, 1, "module")
            if module is None:
                return None if self.scopes(node) else FILE_MODULE
            return self._module_key(module, self.scopes(node))
        func = node.func if isinstance(node, ast.Call) else None
        if (
            isinstance(node, ast.Call)
            and isinstance(func, ast.Attribute)
            and func.attr == "update"
            and _is_options(func.value)
        ):
            keyword = next((k.value for k in node.keywords if k.arg == "enable_backward"), None)
            if _literal_false(keyword) or (len(node.args) == 1 and _disables_backward(node.args[0])):
                return self._options_owner(node, func.value.value)
        if isinstance(node, ast.Assign) and _literal_false(node.value):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.slice, ast.Constant)
                    and target.slice.value == "enable_backward"
                    and _is_options(target.value)
                ):
                    return self._options_owner(node, target.value.value)
        return None

    def _options_owner(self, statement: ast.AST, expr: ast.expr) -> ModuleKey | None:
        """The module whose ``.options`` ``statement`` changes; the file's own only at module level."""
        scopes = self.scopes(statement)
        key = self._module_key(expr, scopes)
        return None if key == FILE_MODULE and scopes else key

    @cached_property
    def module_options(self) -> dict:
        """What ``wp.set_module_options({...})`` calls at module level set, where their dict is a literal."""
        options = {}
        for node in module_level(self.tree):
            value = node.value if isinstance(node, ast.Expr) else None
            if isinstance(value, ast.Call) and self.warp.is_warp(value.func, "set_module_options") and value.args:
                try:
                    literal = ast.literal_eval(value.args[0])
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    continue
                options.update(literal if isinstance(literal, dict) else {})
        return options

    @cached_property
    def _backward_off(self) -> dict[ModuleKey, str]:
        """The Warp modules the file sets up without a backward pass, and why."""
        found: dict[ModuleKey, str] = {}
        members = self.warp.members
        calls = [
            call
            for call in self.calls
            if (isinstance(call.func, ast.Attribute) and call.func.attr in ("set_module_options", "update"))
            or (isinstance(call.func, ast.Name) and call.func.id in members)
        ]
        assignments = [node for node in self.assignments if _literal_false(node.value)]
        for node in calls + assignments:  # what _disabling can count: the order is that of their finding only
            if not self.generated(node) and id(node) not in self._run_as_program:
                key = self._disabling(node)
                if key is not None:
                    found.setdefault(key, "its module is set up with enable_backward=False")
        return found

    @cached_property
    def _run_as_program(self) -> set[int]:
        """The nodes under ``if __name__ == "__main__":``, which run only when the file is the program: a kernel
        imported from it keeps the backward pass such a block turns off (Warp's examples do)."""
        return {
            id(node)
            for statement in module_level(self.tree)
            if isinstance(statement, ast.If) and _is_main_guard(statement.test)
            for node in walk(statement)
        }

    @cached_property
    def _config_backward_off(self) -> str | None:
        """``wp.config.enable_backward = False`` at module level: modules made from then on have no backward pass."""
        for node in module_level(self.tree):
            if isinstance(node, ast.Assign) and _literal_false(node.value) and id(node) not in self._run_as_program:
                for target in node.targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and target.attr == "enable_backward"
                        and self.warp.is_warp(target.value, "config")
                    ):
                        return "the module sets wp.config.enable_backward = False"
        return None

    def module_backward_disabled(self) -> str | None:
        """Why the file's own Warp module has no backward pass, or None if it has one."""
        return self._backward_off.get(FILE_MODULE) or self._config_backward_off

    def backward_disabled(self, kernel: ast.FunctionDef) -> str | None:
        """Why the kernel has no backward pass (its own option or its module's), or None if it has one."""
        options = self.kernel_keywords(kernel)
        if "enable_backward" in options:
            return "it is built with enable_backward=False" if _literal_false(options["enable_backward"]) else None
        if _disables_backward(options.get("module_options")):
            return "its module_options disable the backward pass"
        module = self.module_of(kernel)
        return (self._backward_off.get(module) if module is not None else None) or self._config_backward_off

    def _options_call(self, kernel: ast.FunctionDef) -> ast.Call | None:
        """The call whose keywords are the kernel's options: its ``@wp.kernel(...)`` decorator, or the Warp call
        that makes it a kernel."""
        decorator = self.warp.decorator(kernel, "kernel")
        if isinstance(decorator, ast.Call):
            return decorator
        constructions = self.constructions(kernel) if decorator is None else []
        return constructions[0].options if constructions else None

    def kernel_keywords(self, kernel: ast.FunctionDef) -> dict[str | None, ast.expr]:
        """The keyword arguments of ``@wp.kernel(...)`` (or of the ``wp.Kernel(...)`` call, whose ``options=``
        dict is read as keywords), unevaluated; ``**options`` under the key None."""
        call = self._options_call(kernel)
        keywords = {k.arg: k.value for k in call.keywords} if call is not None else {}
        if call is not None and self.warp.is_warp(call.func, "Kernel"):
            module = _argument_at(call, 2, "module")
            keywords |= {"module": module} if module is not None else {}
            options = _argument_at(call, 3, "options")
            if isinstance(options, ast.Dict):
                for key, value in zip(options.keys, options.values, strict=True):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        keywords[key.value] = value
        return keywords

    def consumed(self, function: ast.FunctionDef) -> list[AtomicCall]:
        return [c for c in find_atomic_calls(function, self.warp.names(), self.function_nodes(function)) if c.consumed]

    def loop_hazards(
        self, function: ast.FunctionDef, helper_writes: HelperWrites = lambda call: True
    ) -> list[LoopHazard]:
        """The loops of ``function`` Warp's backward replays wrong (``passes.loop_hazards``), read off the source: a
        name holds memory, not a value, where it is a parameter annotated as an array or a local bound to one.
        ``helper_writes``: whether a call of a helper may write memory a gradient flows through (the project's
        ``HazardFinder`` follows it; on its own, the module assumes every helper may)."""
        arrays = {a.arg for a in function.args.args if a.annotation is not None and _names_an_array(a.annotation)}
        for node in self.function_nodes(function):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                root = node.value
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in arrays:
                    arrays.add(node.targets[0].id)
        max_unroll = self.module_options.get("max_unroll", WARP_MAX_UNROLL)
        names = self.warp.names()
        flow = LoopFlow(function, lambda name: name not in arrays, lambda call: written_by_name(call, names))
        unroll = max_unroll if isinstance(max_unroll, int) else WARP_MAX_UNROLL
        callees = Callees(names, helper_writes, kernel=self.is_kernel(function))
        return loop_hazards(function, flow, unroll, callees)

    def consumed_tiles(self, function: ast.FunctionDef) -> list[ast.Call]:
        """The tile atomics whose returned tile ``function`` uses."""
        return find_consumed_tile_atomics(function, self.warp.names(), self.function_nodes(function))

    # --- generated blocks ------------------------------------------------------------------------------------

    def definition_end(self, kernel: ast.FunctionDef) -> int:
        """The last line of the kernel's definition with the overloads declared right after it (``@wp.overload``
        stubs, ``wp.overload(kernel, types)`` statements): where its block goes. A stub's decorator rebinds the
        kernel's name to the original kernel (``wp.overload`` returns what it found in Warp's module), so the block's
        own rebinding of the name must come after the stubs."""
        body = next(
            (
                statements
                for node in [self.tree, *self.nodes]
                for name in ("body", "orelse", "finalbody")
                if isinstance(statements := getattr(node, name, None), list) and kernel in statements
            ),
            [kernel],
        )
        end = end_line(kernel)
        for statement in body[body.index(kernel) + 1 :]:
            if not self._declares_overload(statement, kernel.name):
                break
            end = end_line(statement)
        return self._comments_after(end, kernel.col_offset)

    def _comments_after(self, end: int, indent: int) -> int:
        """The last line of the comments indented deeper than ``indent`` right after line ``end`` (blank lines
        between them): ``inspect.getsource``, whose text the block's fingerprint is of, counts them in the definition
        (Newton's XPBD ``solve_tetrahedra`` ends with such comments), so the block goes after them."""
        lines = self.lines
        last = end
        for number in range(end + 1, len(lines) + 1):
            text = lines[number - 1]
            code = text.lstrip()
            if not code.strip():
                continue
            if not code.startswith("#") or len(text) - len(code) <= indent:
                break
            last = number
        return last

    def _declares_overload(self, statement: ast.stmt, kernel: str) -> bool:
        if isinstance(statement, ast.FunctionDef):  # @wp.overload def kernel(...): ...
            return statement.name == kernel and self.warp.decorated(statement, "overload")
        call = statement.value if isinstance(statement, ast.Expr) else None  # wp.overload(kernel, types)
        return (
            isinstance(call, ast.Call)
            and self.warp.is_warp(call.func, "overload")
            and bool(call.args)
            and isinstance(call.args[0], ast.Name)
            and call.args[0].id == kernel
        )

    def region_of(self, kernel: ast.FunctionDef) -> Region | None:
        """The block an earlier run generated for this kernel: the next one after it and its ``@wp.overload`` stubs
        (``definition_end``), with only blank lines and comments in between."""
        end = self.definition_end(kernel)
        for region in self.regions:
            if region.first <= end:
                continue
            between = self.lines[end : region.first - 1]
            if region.kernel == kernel.name and all(
                not line.strip() or line.lstrip().startswith("#") for line in between
            ):
                return region
            return None
        return None

    def rewritten(self, kernel: ast.FunctionDef) -> bool:
        """True if an earlier run already generated this kernel's phases into the file."""
        return self.region_of(kernel) is not None

    @cached_property
    def _region_assignments(self) -> dict[Region, list[tuple[str, ast.Assign]]]:
        """The assignments to a name in each generated block, with that name."""
        found: dict[Region, list[tuple[str, ast.Assign]]] = {region: [] for region in self.regions}
        for node in self.nodes if self.regions else ():
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                region = next((r for r in self.regions if r.first <= node.lineno <= r.last), None)
                if region is not None:
                    found[region].append((node.targets[0].id, node))
        return found

    def _block_assignments(self, kernel: ast.FunctionDef) -> list[tuple[str, ast.Assign]]:
        region = self.region_of(kernel)
        return self._region_assignments[region] if region is not None else []

    def launch_name(self, kernel: ast.FunctionDef) -> str | None:
        """What an earlier run made the kernel's launch: ``launch_k`` (``launch_k = k_rewritten.launch``) at
        module level, ``k.launch`` in a function (where ``k = k_rewritten`` hands on the rewritten kernel)."""
        for target, node in self._block_assignments(kernel):
            if target == kernel.name:
                return f"{kernel.name}.launch"
            if isinstance(node.value, ast.Attribute) and node.value.attr == "launch":
                return target
        return None

    def rebinds(self, kernel: ast.FunctionDef) -> bool:
        """True if the kernel's block binds the kernel's name to its ``RewrittenKernel`` (``k = k_rewritten``), as
        every block does but those earlier versions generated at module level."""
        return any(target == kernel.name for target, _ in self._block_assignments(kernel))

    def rewrite_name(self, kernel: ast.FunctionDef) -> str | None:
        """What an earlier run named the ``KernelRewrite`` of a plain function made a kernel of (``rewrite_k =
        runtime.KernelRewrite(...)``), which the calls making the kernel are wrapped in."""
        for target, node in self._block_assignments(kernel):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == _REWRITE:
                return target
        return None

    def wrapper(self, construction: Construction) -> str | None:
        """The name of the call the construction is the only argument of (``rewrite_k(wp.Kernel(func=k))``)."""
        parent = self._parents.get(construction.site)
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.args == [construction.site]:
            return parent.func.id if not parent.keywords else None
        return None


# wp.config.max_unroll's default: the command line reads source without importing Warp (a module's own
# wp.set_module_options({"max_unroll": N}) wins).
WARP_MAX_UNROLL = 16


def _names_an_array(annotation: ast.expr) -> bool:
    """Does a parameter's annotation name one of Warp's array types (``wp.array(...)``, ``wp.array2d[...]``,
    ``wp.indexedarray``, ``wp.fabricarray``)?"""
    return any(
        "array" in (n.attr if isinstance(n, ast.Attribute) else n.id)
        for n in walk(annotation)
        if isinstance(n, ast.Attribute | ast.Name)
    )


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"``, either way round."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = {ast.unparse(test.left), ast.unparse(test.comparators[0])}
    return sides in ({"__name__", "'__main__'"}, {"__name__", '"__main__"'})
