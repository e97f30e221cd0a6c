"""A checker of the property that makes forwards right: the record kernel is the original plus record stores.

``record_kernel_differences`` takes each record function as printed (the kernel's and its clones') back to the
original it was made from, less its docstring (generated functions do not repeat it): record calls unwrapped to the
value they record, exact atomics to the atomic they stand for, clone calls to the helper's name, and the statements
the rewrite adds (its own locals, record stores, trip checks) removed. What is left must equal the desugared original
statement for statement. Separately, no record call may stand for the memory an assignment stores into
(``record(bodies[b]).mass += m`` would update a temporary and lose the update).

``count_kernel_differences`` checks the count kernel (the dry run that counts loop trips) against the record
kernel: the same writes into memory, but for those into arrays the dry run does not copy; ``dropped_reads``, that
the count functions read none of those arrays indeed.
``tests/conftest.py`` runs both on every kernel the suite rewrites.
"""

from __future__ import annotations

import ast
import copy
from collections import Counter
from collections.abc import Callable
from typing import Any

from warp_rewrite.passes.atomics import WarpNames, positional_arguments
from warp_rewrite.passes.dataflow import argument_path, single_assignments
from warp_rewrite.passes.dtypes import array_info, field_type
from warp_rewrite.passes.memory import depth, stored_arrays
from warp_rewrite.passes.syntax import walk
from warp_rewrite.pipeline import Frontend, GeneratedKernel

RECORD, COUNT = "record", "count"
_BODIES = ("body", "orelse", "finalbody")


def record_kernel_differences(frontend: Frontend, generated: GeneratedKernel) -> list[str]:
    """What makes a record function more than its original plus record stores, one line each (none if sound)."""
    runtime = frontend.module.runtime.alias
    module = ast.parse(generated.source)
    functions = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
    problems: list[str] = []
    plans = list(generated.plan.root.walk())
    clones = {f"{plan.name}_{RECORD}": len(plan.unit.tree.args.args) for plan in plans}  # by the helper's arity
    for plan in plans:
        function = functions.get(f"{plan.name}_{RECORD}")
        if function is None:
            continue
        problems += _stored_through_records(function, runtime)
        original = copy.deepcopy(plan.unit.tree)
        for call, clone in plan.clones.items():  # the original's call, found again in its copy by position
            for node in walk(original):
                if isinstance(node, ast.Call) and _same_place(node, call):
                    node.func = ast.Name(f"{clone.plan.name}_{RECORD}", ast.Load())
                    node.args, node.keywords = _every_argument(node, clone.plan.unit.tree), []
        known = {n.id for n in walk(original) if isinstance(n, ast.Name)} | {a.arg for a in original.args.args}
        warp = frontend.warp_names(plan.unit).modules
        body = original.body[1:] if ast.get_docstring(original) is not None else original.body  # (not repeated)
        expected = _Canonical(warp, runtime, known, clones).body(body)
        actual = _Canonical(warp, runtime, known, clones).body(function.body)
        expected_text, actual_text = [ast.unparse(s) for s in expected], [ast.unparse(s) for s in actual]
        if expected_text != actual_text:
            problems.append(
                f"{function.name}: is not its original plus record stores:\n  original: {expected_text}\n"
                f"  record:   {actual_text}"
            )
    return problems


def _every_argument(call: ast.Call, helper: ast.FunctionDef) -> list[ast.expr]:
    """The call's arguments in the helper's parameter order, defaults filled in: how a clone's call passes them."""
    params = [a.arg for a in helper.args.args]
    defaults = dict(zip(params[len(params) - len(helper.args.defaults) :], helper.args.defaults, strict=True))
    bound = {**defaults, **dict(zip(params, call.args, strict=False))}
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    return [bound[p] for p in params if p in bound]


def _same_place(a: ast.AST, b: ast.AST) -> bool:
    return (a.lineno, a.col_offset, a.end_lineno, a.end_col_offset) == (
        b.lineno,
        b.col_offset,
        b.end_lineno,
        b.end_col_offset,
    )


def _stored_through_records(function: ast.FunctionDef, runtime: str) -> list[str]:
    """Assignments whose target stores into what a record call returns rather than into memory."""
    problems = []
    for node in walk(function):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        )
        for target in targets:
            while isinstance(target, ast.Subscript | ast.Attribute):
                target = target.value
                if _runtime_call(target, runtime) is not None:
                    problems.append(f"{function.name}:{node.lineno}: stores into a record call: {ast.unparse(node)}")
    return problems


def _exact_target(node: ast.AST, runtime: str) -> ast.expr | None:
    """The target of an exact atomic (``exact_add(flat_index(acc, 0), v, ...)``: ``acc``); None for any other."""
    called = _runtime_call(node, runtime)
    if called is None or not called.startswith("exact_") or called == "exact_returned":
        return None
    flat = node.args[0]
    return flat.args[0] if _runtime_call(flat, runtime) == "flat_index" else flat


def _runtime_call(node: ast.AST, runtime: str) -> str | None:
    """The runtime function ``node`` calls, if it calls one."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
        return node.func.attr if node.func.value.id == runtime else None
    return None


def _bound_as_written(bound: ast.expr) -> ast.expr:
    """A loop bound without the ``int(...)`` the rewrite puts around a constant one inside a dynamic loop."""
    wrapped = isinstance(bound, ast.Call) and isinstance(bound.func, ast.Name) and bound.func.id == "int"
    return bound.args[0] if wrapped and len(bound.args) == 1 and not bound.keywords else bound


class _Canonical(ast.NodeTransformer):
    """One spelling for what the rewrite may spell differently without changing what runs."""

    def __init__(self, warp: frozenset[str], runtime: str, known: set[str], clones: dict[str, int] | None = None):
        self.warps, self.warp = warp, min(warp)  # the module's names of warp, and the one spelling used here
        self.clones = clones or {}  # each clone's name, and how many parameters its helper has
        self.runtime, self.known = runtime, known | set(self.clones)
        self.inlined: dict[str, ast.expr] = {}  # the rewrite's locals bound once to a user expression

    def body(self, statements: list[ast.stmt]) -> list[ast.stmt]:
        kept = []
        for statement in statements:
            kept += self._statement(statement)
        return kept

    def _statement(self, statement: ast.stmt) -> list[ast.stmt]:
        stored = isinstance(statement, ast.Expr) and _runtime_call(statement.value, self.runtime) is not None
        if stored and _exact_target(statement.value, self.runtime) is None:
            return []  # a record store, a report of too many trips
        checks_room = isinstance(statement, ast.If) and self._mentions_rewrite(statement.test)
        if not any(isinstance(getattr(statement, name, None), list) for name in _BODIES):
            statement = self.visit(copy.deepcopy(statement))
        else:  # its header here, its statements one by one below
            statement = copy.copy(statement)
            for name, value in ast.iter_fields(statement):
                if name not in _BODIES and isinstance(value, ast.AST):
                    setattr(statement, name, self.visit(copy.deepcopy(value)))
        if isinstance(statement, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names = [n for t in targets for n in (t.elts if isinstance(t, ast.Tuple) else [t])]
            if all(isinstance(n, ast.Name) and n.id not in self.known for n in names):
                single = isinstance(statement, ast.Assign) and len(names) == 1 and targets[0] is names[0]
                if single and self._user_expression(statement.value):
                    self.inlined[names[0].id] = statement.value
                return []  # the rewrite's own bookkeeping: coordinates, trip counts, range bounds
        if checks_room and not self.body(statement.body) and not self.body(statement.orelse):
            return []  # a check of the room for records
        for name in _BODIES:
            inner = getattr(statement, name, None)
            if isinstance(inner, list):
                setattr(statement, name, self.body(inner))
        return [statement]

    def _user_expression(self, value: ast.expr) -> bool:
        return not self._mentions_rewrite(_bound_as_written(value))

    def _mentions_rewrite(self, node: ast.AST) -> bool:
        names = {n.id for n in walk(node) if isinstance(n, ast.Name)}
        return bool(names - self.known) or self.runtime in names

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if isinstance(node.ctx, ast.Load) and node.id in self.inlined:
            return copy.deepcopy(self.inlined[node.id])
        return node

    def visit_Call(self, node: ast.Call) -> ast.expr:
        if isinstance(node.func, ast.Name) and node.func.id in self.clones:
            # what a clone's call adds after the helper's arguments: records, trip room, loop numbers, coordinate
            node.args = node.args[: self.clones[node.func.id]]
        called = _runtime_call(node, self.runtime)
        if _exact_target(node, self.runtime) is not None:
            flat = node.args[0]  # flat_index(target, *indices), then the value (exact_cas: the compare, the value)
            target = flat.args if _runtime_call(flat, self.runtime) == "flat_index" else [flat]
            operands = node.args[1:3] if called == "exact_cas" else node.args[1:2]
            atomic = ast.Attribute(ast.Name(self.warp, ast.Load()), f"atomic_{called.removeprefix('exact_')}")
            return ast.Call(atomic, [self.visit(a) for a in [*target, *operands]], [])
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.warps:
            node.func = ast.Attribute(ast.Name(self.warp, ast.Load()), func.attr)
        if called is not None and node.args:
            return node.args[0]  # a record call: the value it records
        if isinstance(node.func, ast.Name) and node.func.id == "range":
            bounds = node.args
            if len(bounds) == 1:
                bounds = [ast.Constant(0), bounds[0]]
            if len(bounds) == 2:
                bounds = [*bounds, ast.Constant(1)]
            node.args = [_bound_as_written(bound) for bound in bounds]
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.stmt:
        """``arr[i] += v`` as the ``wp.atomic_add(arr, i, v)`` Warp lowers it to (exact sites are spelled so)."""
        self.generic_visit(node)
        target = node.target
        if _element(target) and isinstance(node.op, ast.Add | ast.Sub):
            op = "add" if isinstance(node.op, ast.Add) else "sub"
            indices = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
            atomic = ast.Attribute(ast.Name(self.warp, ast.Load()), f"atomic_{op}")
            return ast.Expr(ast.Call(atomic, [target.value, *indices, node.value], []))
        return node


def count_kernel_differences(frontend: Frontend, generated: GeneratedKernel) -> list[str]:
    """Writes the count functions add to the record functions', or leave out though the dry run copies them; and
    trip counts the record functions check and the count functions do not (a clone the count phase leaves out, with
    nothing left to do, has none of either)."""
    if not generated.count_kernel:
        return []
    runtime = frontend.module.runtime.alias
    module = ast.parse(generated.source)
    functions = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
    dropped = generated.plan.written - generated.plan.copied
    problems = []
    for plan in generated.plan.root.walk():
        record, count = functions.get(f"{plan.name}_{RECORD}"), functions.get(f"{plan.name}_{COUNT}")
        if record is None:
            continue
        names = frontend.warp_names(plan.unit)
        kept = Counter(w for w, path in _writes(record, plan.paths, names, runtime) if path not in dropped)
        counted = Counter(w for w, _ in _writes(count, plan.paths, names, runtime)) if count else Counter()
        if kept != counted:
            problems.append(
                f"{plan.name}_{COUNT}: writes {sorted(counted - kept)} the record kernel does not, and leaves out "
                f"{sorted(kept - counted)} that the dry run copies"
            )
        checked, counts = _trip_reports(record, runtime), _trip_reports(count, runtime) if count else Counter()
        if checked != counts:
            problems.append(f"{plan.name}_{COUNT}: reports the trips of loops {sorted(counts)}, not {sorted(checked)}")
    return problems


def _trip_reports(function: ast.FunctionDef, runtime: str) -> Counter[str]:
    """The loops whose trips the function reports (``check_trips``'s loop argument), as often as it does."""
    calls = [node for node in walk(function) if isinstance(node, ast.Call)]
    reports = [call for call in calls if ast.unparse(call.func) == f"{runtime}.check_trips"]
    return Counter(ast.unparse(call.args[1]) for call in reports)


def dropped_reads(frontend: Frontend, generated: GeneratedKernel) -> list[str]:
    """Reads the count functions make of arrays the launch writes but the dry run does not copy (``written`` less
    ``copied``): the count kernel leaves out its writes into them, so such a read would count trips on values the
    forward never reads."""
    if not generated.count_kernel:
        return []
    module = ast.parse(generated.source)
    functions = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
    uncopied = generated.plan.written - generated.plan.copied
    kernel_types = frontend.parameter_types(frontend.kernel)
    problems = []
    for plan in generated.plan.root.walk():
        function = functions.get(f"{plan.name}_{COUNT}")
        if function is None:
            continue
        names = frontend.warp_names(plan.unit)
        for read, path in _element_reads(function, plan.paths, names, kernel_types):
            if path in uncopied:
                problems.append(
                    f"{function.name}: reads '{path}' ({ast.unparse(read)}), whose writes the count kernel leaves out"
                )
    return problems


def _kernel_paths(
    function: ast.FunctionDef, paths: dict, aliases: dict[str, ast.expr]
) -> Callable[[ast.expr], str | None]:
    """The kernel path of the memory an expression of a generated function names (through ``paths``, the kernel path
    each parameter names), None for what names none."""
    params = [a.arg for a in function.args.args]

    def kernel_path(expr: ast.expr) -> str | None:
        local = argument_path(expr, params, aliases)
        if local is None:
            return None
        root, _, rest = local.partition(".")
        mapped = paths.get(root, root)
        return None if mapped is None else f"{mapped}.{rest}" if rest else mapped

    return kernel_path


def _element_reads(
    function: ast.FunctionDef, paths: dict, names: WarpNames, kernel_types: dict[str, Any]
) -> list[tuple[ast.expr, str]]:
    """Each read of an argument array's element in a generated function, with its kernel path: a subscript as deep
    as the array (not a view, nor one a store or an update goes through), or an atomic whose value is used."""
    aliases = single_assignments(function)
    kernel_path = _kernel_paths(function, paths, aliases)

    def ndim(path: str) -> int | None:
        root, *fields = path.split(".")
        annotation = kernel_types.get(root)
        for name in fields:
            annotation = field_type(annotation, name) if annotation is not None else None
        info = array_info(annotation) if annotation is not None else None
        return info.ndim if info is not None else None

    written_through: set[int] = set()  # the subscripts a store, an update or an atomic goes through
    discarded: set[int] = set()  # atomics whose value nothing uses
    for node in walk(function):
        values = [node.value] if isinstance(node, ast.Expr) else []
        while values:  # a statement's value, and the branches of a conditional expression that is one
            value = values.pop()
            discarded.add(id(value))
            values += [value.body, value.orelse] if isinstance(value, ast.IfExp) else []
        if isinstance(node, ast.Call) and names.atomic_op(node):
            written_through.add(id(positional_arguments(node)[0]))
        stored = node.targets if isinstance(node, ast.Assign) else []
        stored += [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for target in stored:
            while isinstance(target, ast.Subscript | ast.Attribute):
                written_through.add(id(target))
                target = target.value
    found: list[tuple[ast.expr, str]] = []
    for node in walk(function):
        if isinstance(node, ast.Call) and names.atomic_op(node) and id(node) not in discarded:
            path = kernel_path(positional_arguments(node)[0])
        elif isinstance(node, ast.Subscript) and id(node) not in written_through:
            path = kernel_path(node.value)
            dims = ndim(path) if path is not None else None
            if dims is None or not depth(node, aliases) >= dims > depth(node.value, aliases):
                continue
        else:
            continue
        if path is not None:
            found.append((node, path))
    return found


def _writes(function: ast.FunctionDef, paths: dict, names: WarpNames, runtime: str) -> list[tuple[str, str | None]]:
    """Each write into memory of a generated function, canonical (record calls unwrapped), with its kernel path."""
    aliases = single_assignments(function)
    kernel_path = _kernel_paths(function, paths, aliases)

    canonical = _Canonical(names.modules, runtime, {n.id for n in walk(function) if isinstance(n, ast.Name)})
    found = []
    for node in walk(function):  # atomics wherever they stand (their value may be discarded), and stores
        if isinstance(node, ast.Call) and names.atomic_op(node):
            found.append((node, kernel_path(positional_arguments(node)[0])))
        elif (target := _exact_target(node, runtime)) is not None:
            found.append((node, kernel_path(target)))
        elif isinstance(node, ast.AugAssign) and _element(node.target):  # the atomic Warp lowers it to
            found.append((node, kernel_path(node.target.value)))
        else:  # stores, and updates of a field or a component of an element
            found += [(node, kernel_path(array)) for array in stored_arrays(node)]
    return [(ast.unparse(canonical.visit(copy.deepcopy(node))), path) for node, path in found]


def _element(target: ast.expr) -> bool:
    """Is ``target`` an element of an array (``arr[i]``, ``s.arr[i, j]``), rather than a part of one (``arr[i][k]``,
    ``bodies[b].com[1]``)?"""
    return isinstance(target, ast.Subscript) and not any(isinstance(n, ast.Subscript) for n in walk(target.value))
