"""One definition per variant of a cloned helper in a rewritten file, not one per kernel (and call site).

The pipeline clones, for each kernel, every helper it reaches that holds a record (``take_record``, ``take_count``,
``take_replay`` and its ``@wp.func_replay`` twin), once per call site: a file whose kernels call the same helpers
gets the same clones again and again, under other names and with other names for their record parameters. Two
clones are one *variant* where they are the same function but for their own name, the names of their parameters
(every call of a clone passes its arguments by position) and locals, and the names of the clones they call,
themselves of one variant. Of each variant, the file keeps one definition:

- used by several blocks, it goes into one block of its own at module level (``SHARED``), before the first
  top-level statement that holds a block using it, where the clone does not depend on the functions around its
  kernels (a closure value, a helper defined in a factory) and the names its decorators and annotations need are
  bound by then;
- otherwise each block keeps one definition of it (the first), and its other clones call that one.

The clones keep the pipeline's text (each block is laid out afterwards).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.passes.syntax import walk


@dataclass
class Clone:
    """A helper clone of one block's generated source."""

    block: int  # which block (in file order)
    name: str
    node: ast.FunctionDef
    lines: list[str]  # its text, decorators first
    calls: set[str] = field(default_factory=set)  # the other clones of its block it names
    twinned: bool = False  # a decorator of another definition names it (``@wp.func_replay(it)``)
    variant: str = ""


@dataclass
class Sharing:
    """The blocks' sources with one definition per variant, and the module-level block of the shared ones."""

    sources: list[str]
    shared: str = ""  # the shared definitions (at column 0), "" where none is shared
    before: ast.stmt | None = None  # the top-level statement the shared block goes before


def top_statement(module: StaticModule, node: ast.AST) -> ast.stmt:
    """The statement of the module's body that holds ``node``."""
    line = getattr(node, "lineno", 0)
    return next(s for s in module.tree.body if s.lineno <= line <= (s.end_lineno or s.lineno))


def _start(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", [])
    return min([statement.lineno, *(d.lineno for d in decorators)])


def _definitions(source: str) -> tuple[list[tuple[str, ast.FunctionDef, int, int]], bool]:
    """Each top-level definition of a block's generated source: (name, node, first line, last line); and whether the
    source is nothing but definitions (else nothing of it is shared)."""
    tree = ast.parse(source)
    found = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            return [], False
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        found.append((node.name, node, first, node.end_lineno or node.lineno))
    return found, True


def _clones(index: int, source: str, kernels: set[str]) -> list[Clone] | None:
    definitions, whole = _definitions(source)
    if not whole:
        return None
    lines = source.splitlines(keepends=True)
    clones = []
    for name, node, first, last in definitions:
        if name in kernels:
            continue
        clones.append(Clone(index, name, node, lines[first - 1 : last]))
    names = {clone.name for clone in clones}
    for clone in clones:
        clone.calls = {n.id for n in walk(clone.node) if isinstance(n, ast.Name) and n.id in names} - {clone.name}
    # A function with a ``@wp.func_replay`` (or ``func_grad``) of its own is not the same as its plain twin of the same
    # text: the replay calls the twin, and calling the function itself there would run the replay again.
    twinned = {
        argument.id
        for _, node, _, _ in definitions
        for decorator in node.decorator_list
        if isinstance(decorator, ast.Call)
        for argument in decorator.args
        if isinstance(argument, ast.Name)
    }
    for clone in clones:
        clone.twinned = clone.name in twinned
    return clones


def _variant(clone: Clone, variants: dict[str, str], positional: bool) -> str:
    """What the clone is but for its own name, its parameters' (where every call passes them by position) and the
    names of the clones it calls (``variants``: their variants); and whether a replay or gradient is its own."""
    node = ast.parse("".join(clone.lines)).body[0]
    assert isinstance(node, ast.FunctionDef)  # (a clone's text is its definition)
    arguments = node.args
    parameters = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
    renamed = {clone.name: "<self>"} | {name: f"<{variant}>" for name, variant in variants.items()}
    if positional:
        renamed |= {name: f"<parameter {index}>" for index, name in enumerate(parameters)}
    stored = [n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    for name in dict.fromkeys(stored):  # its locals (``trips1``, ``coordinate1``), in the order they come
        renamed.setdefault(name, f"<local {len(renamed)}>")
    for inner in walk(node):
        if isinstance(inner, ast.Name) and inner.id in renamed:
            inner.id = renamed[inner.id]
        elif isinstance(inner, ast.arg) and inner.arg in renamed:
            inner.arg = renamed[inner.arg]
        elif isinstance(inner, ast.FunctionDef):
            inner.name = renamed.get(inner.name, inner.name)
    kind = "twinned " if clone.twinned else ""
    return hashlib.sha256((kind + ast.dump(node, include_attributes=False)).encode()).hexdigest()[:16]


def _in_dependency_order(clones: list[Clone], blocks: list[list[Clone]] | None = None) -> list[Clone]:
    """The clones, each after those it calls (its ``@wp.func_replay`` twin after the function): those of one block,
    or, given the ``blocks``, one clone per variant, ordered by the variants of what they call. The pipeline makes
    no recursive helpers (Warp has none)."""

    def key(clone: Clone) -> str:
        return clone.variant if blocks is not None else clone.name

    def called(clone: Clone) -> list[Clone]:
        block = {c.name: c for c in (blocks[clone.block] if blocks is not None else clones)}
        return [block[name] for name in sorted(clone.calls)]

    by_key = {key(clone): clone for clone in clones}
    ordered: list[Clone] = []
    placed: set[str] = set()

    def place(clone: Clone, seen: frozenset[str]) -> None:
        if key(clone) in placed or key(clone) in seen:
            return
        for inner in called(clone):
            if key(inner) in by_key:
                place(by_key[key(inner)], seen | {key(clone)})
        placed.add(key(clone))
        ordered.append(clone)

    for clone in clones:
        place(clone, frozenset())
    return ordered


def _called_by_keyword(sources: Iterable[str]) -> set[str]:
    """The names the generated sources call with keyword (or unpacked) arguments: their clones' parameters' names
    are part of what they are."""
    return {
        node.func.id
        for source in sources
        for node in walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and (node.keywords or any(isinstance(a, ast.Starred) for a in node.args))
    }


def share(
    module: StaticModule,
    kernels: list[ast.FunctionDef],
    sources: list[str],
    kernel_names: list[set[str]],
    bound: set[str],
) -> Sharing:
    """One definition per variant of the clones of the blocks of ``kernels`` (their generated ``sources``, whose
    kernels are named in ``kernel_names``), in file order. ``bound``: names generated code may use that the module
    binds before any of its statements (Warp's alias, the runtime's, the helpers' imports)."""
    pairs = enumerate(zip(sources, kernel_names, strict=True))
    per_block = [_clones(index, source, names) for index, (source, names) in pairs]
    if any(clones is None for clones in per_block):
        return Sharing(list(sources))
    clones_of = [clones or [] for clones in per_block]
    by_keyword = _called_by_keyword(sources)
    for clones in clones_of:
        variants: dict[str, str] = {}
        for clone in _in_dependency_order(clones):
            calls = {name: variants[name] for name in clone.calls}
            clone.variant = _variant(clone, calls, clone.name not in by_keyword)
            variants[clone.name] = clone.variant
    users: dict[str, list[Clone]] = {}
    for clones in clones_of:
        for clone in clones:
            users.setdefault(clone.variant, []).append(clone)
    hoisted, before = _hoisted(module, kernels, clones_of, users, bound)
    kept: dict[tuple[int, str], str] = {}  # (block, variant) -> the name its calls use
    for variant, clones in users.items():
        if variant in hoisted:
            for clone in clones:
                kept[clone.block, variant] = hoisted[variant]
        else:
            for clone in clones:
                kept.setdefault((clone.block, variant), clone.name)
    rewritten = []
    for index, (source, clones) in enumerate(zip(sources, clones_of, strict=True)):
        rename = {clone.name: kept[index, clone.variant] for clone in clones}
        dropped = {clone.name for clone in clones if rename[clone.name] != clone.name or clone.variant in hoisted}
        rewritten.append(_rewritten(source, clones, rename, dropped))
    shared_definitions = []
    for clone in _in_dependency_order([users[variant][0] for variant in hoisted], clones_of):
        rename = {c.name: kept[clone.block, c.variant] for c in clones_of[clone.block]}
        shared_definitions.append(_renamed("".join(clone.lines), rename))
    return Sharing(rewritten, "\n\n".join(shared_definitions), before if shared_definitions else None)


def _hoisted(
    module: StaticModule,
    kernels: list[ast.FunctionDef],
    clones_of: list[list[Clone]],
    users: dict[str, list[Clone]],
    bound: set[str],
) -> tuple[dict[str, str], ast.stmt | None]:
    """The variants that go into the shared block (variant -> the name it keeps: its first clone's), and the
    top-level statement the block goes before. A variant is shared where several blocks use it, it can live at
    module level there, and so can every variant it calls (those then go into the block too)."""
    tops = [top_statement(module, kernel) for kernel in kernels]
    candidates = {variant for variant, clones in users.items() if len({clone.block for clone in clones}) > 1}
    if not candidates:
        return {}, None
    by_block_name = {(clone.block, clone.name): clone for clones in clones_of for clone in clones}

    def closure(variant: str, seen: set[str]) -> set[str]:
        if variant in seen:
            return seen
        seen.add(variant)
        first = users[variant][0]
        for name in first.calls:
            closure(by_block_name[first.block, name].variant, seen)
        return seen

    wanted: set[str] = set()
    for variant in candidates:
        wanted |= closure(variant, set())
    using = [index for index, clones in enumerate(clones_of) if any(c.variant in wanted for c in clones)]
    before = min((tops[index] for index in using), key=_start)
    imports = [s.end_lineno or s.lineno for s in module.tree.body if isinstance(s, ast.Import | ast.ImportFrom)]
    if imports and _start(before) <= max(imports):
        return {}, None  # a kernel among the imports: the runtime, imported after them, is not there yet
    defined = bound | _bound_before(module, _start(before)) | set(dir(builtins))
    movable = {
        variant
        for variant in wanted
        if all(_movable(module, kernels[clone.block], clone, defined) for clone in users[variant])
    }
    changed = True
    while changed:  # a variant stays where a variant it calls cannot move
        changed = False
        for variant in list(movable):
            first = users[variant][0]
            if any(by_block_name[first.block, name].variant not in movable for name in first.calls):
                movable.discard(variant)
                changed = True
    if not movable:
        return {}, None
    using = [index for index, clones in enumerate(clones_of) if any(c.variant in movable for c in clones)]
    in_file_order = [clone.variant for clones in clones_of for clone in clones if clone.variant in movable]
    # (in the order the file first uses them: a set's order changes from one process to the next)
    hoisted = {variant: users[variant][0].name for variant in dict.fromkeys(in_file_order)}
    return hoisted, min((tops[i] for i in using), key=_start)


def _movable(module: StaticModule, kernel: ast.FunctionDef, clone: Clone, defined: set[str]) -> bool:
    """True if the clone can be defined at module level before the shared block's statement: it names nothing a
    function around its kernel binds (what it would see there), and what its decorators, annotations and defaults
    name is bound by then (they are evaluated when the ``def`` runs; the body only when Warp builds the kernel)."""
    arguments = clone.node.args
    own = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    own |= {node.id for node in walk(clone.node) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    free = {node.id for node in walk(clone.node) if isinstance(node, ast.Name)} - own
    if any(module.bound_around(name, kernel) for name in free):
        return False
    evaluated = [*clone.node.decorator_list, *arguments.defaults, *(d for d in arguments.kw_defaults if d)]
    evaluated += [
        a.annotation for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs) if a.annotation
    ]
    evaluated += [clone.node.returns] if clone.node.returns is not None else []
    calls = clone.calls
    return all(
        node.id in defined or node.id in calls
        for expr in evaluated
        for node in walk(expr)
        if isinstance(node, ast.Name)
    )


def _bound_before(module: StaticModule, line: int) -> set[str]:
    """The names the module's statements before ``line`` bind at module level (also in ``if``/``try`` blocks)."""
    names: set[str] = set()
    pending = [s for s in module.tree.body if s.lineno < line]
    while pending:
        statement = pending.pop()
        if isinstance(statement, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(statement.name)
        elif isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names |= {node.id for target in targets for node in walk(target) if isinstance(node, ast.Name)}
        elif isinstance(statement, ast.If | ast.Try | ast.With):
            for body in ("body", "orelse", "finalbody"):
                pending += getattr(statement, body, [])
            pending += [s for handler in getattr(statement, "handlers", []) for s in handler.body]
    return names


def _rewritten(source: str, clones: list[Clone], rename: dict[str, str], dropped: set[str]) -> str:
    """The block's source without the ``dropped`` clones, their calls renamed."""
    lines = source.splitlines(keepends=True)
    definitions, _ = _definitions(source)
    by_name = {clone.name: clone for clone in clones}
    parts = []
    for name, _node, first, last in definitions:
        if name in dropped:
            continue
        text = "".join(by_name[name].lines) if name in by_name else "".join(lines[first - 1 : last])
        parts.append(_renamed(text, rename))
    return "\n\n\n".join(part.rstrip("\n") for part in parts) + "\n"


def _renamed(text: str, rename: dict[str, str]) -> str:
    """``text`` (a definition) with the names ``rename`` maps renamed where they are read or called."""
    changes = {old: new for old, new in rename.items() if old != new}
    if not changes:
        return text
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    edits: dict[int, list[tuple[int, int, str]]] = {}
    for node in walk(tree):
        if isinstance(node, ast.Name) and node.id in changes:
            edits.setdefault(node.lineno, []).append((node.col_offset, node.end_col_offset or 0, changes[node.id]))
    for line, spans in edits.items():
        encoded = lines[line - 1].encode()
        for start, end, new in sorted(spans, reverse=True):
            encoded = encoded[:start] + new.encode() + encoded[end:]
        lines[line - 1] = encoded.decode()
    return "".join(lines)
