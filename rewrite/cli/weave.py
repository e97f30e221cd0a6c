"""One definition for the phases of a generated kernel or helper clone, not one per phase.

The pipeline makes a kernel's record and replay kernels, and a helper's record and replay clones and the replay's
forward twin (``@replays``), as functions of their own, most of their text alike. In a written file, functions of
one family (one name, its phase after it: ``f_record``, ``f_replay``, ``f_replay_forward``) that take the same
parameters become one definition in a factory, ``f_phases(record, store)``; the statements only some phases hold
stand under ``if wp.static(record):`` (or ``store``, the twin's: it stores nothing), which Warp resolves when it
compiles, so that each phase compiles to what the pipeline made. Each phase's name is then bound to the factory's
function for it. Where the phases call another family's functions, the factory names them once (``g = g_record if
record else g_replay``) and the definition calls that name.

A family is woven only where resolving its factory for each phase gives back that phase's function, statement
for statement (``_resolved``), and where no line of it grows too long to lay out (``_too_long``); else its
functions stay as they are.
"""

from __future__ import annotations

import ast
import copy
import difflib
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from warp_rewrite.cli.layout import laid_out
from warp_rewrite.passes.naming import Namer
from warp_rewrite.printing import unparse_keeping_text


class Phase(enum.Enum):
    """A phase of a family, by the suffix of its function's name."""

    RECORD = "_record"
    REPLAY = "_replay"
    TWIN = "_replay_forward"  # the replay's forward, which Warp's backward runs in its place: no stores

    @property
    def flags(self) -> dict[str, bool]:
        return {"record": self is Phase.RECORD, "store": self is not Phase.TWIN}


_BY_SUFFIX = sorted(Phase, key=lambda phase: -len(phase.value))  # ``_replay_forward`` before ``_replay``


def family_of(name: str) -> tuple[str, Phase] | None:
    """(family, phase) of a generated function's name; None for one of no phase (a count kernel or clone)."""
    for phase in _BY_SUFFIX:
        if name.endswith(phase.value) and len(name) > len(phase.value):
            return name[: -len(phase.value)], phase
    return None


def _condition(phases: frozenset[Phase], family: frozenset[Phase]) -> str:
    """The flags' expression true in exactly ``phases`` of ``family``."""
    rest = family - phases
    if phases == {Phase.RECORD}:
        return "record"
    if rest == {Phase.RECORD}:
        return "not record"
    if phases == {Phase.TWIN}:
        return "not store"
    if rest == {Phase.TWIN}:
        return "store"
    return "not record and store" if phases == {Phase.REPLAY} else "record or not store"


def _parameters(family: frozenset[Phase]) -> list[str]:
    return [name for name, phase in (("record", Phase.RECORD), ("store", Phase.TWIN)) if phase in family]


_CALLEE = "__wp_rewrite_callee__"


@dataclass
class _Guard:
    """An ``if wp.static(...)`` being written, and the phases of the statements going into it now."""

    node: ast.If
    phases: frozenset[Phase]
    in_else: bool = False


@dataclass
class _Piece:
    """A statement of the woven definition: each phase's own statement it stands for, and, for a compound
    statement whose phases share its header but not its bodies, its bodies woven."""

    nodes: dict[Phase, ast.stmt]
    children: dict[str, list[_Piece]] | None = None

    @property
    def phases(self) -> frozenset[Phase]:
        return frozenset(self.nodes)

    @property
    def first(self) -> ast.stmt:
        return next(iter(self.nodes.values()))


_BODIES = ("body", "orelse")
_HEADER = ("test", "target", "iter")  # of an ``if``, ``for`` or ``while``


@dataclass
class _Weaver:
    """Weaves one family's functions; ``generated``: the names of the file's generated functions, whose calls
    differ from phase to phase by name only."""

    generated: set[str]
    aliases: dict[tuple[tuple[Phase, str], ...], str] = field(default_factory=dict)  # each phase's name: its stand-in
    # The ``if wp.static(...)`` it wrote, by id (the node kept: a node dropped could hand its id on to another)
    guards: dict[int, ast.If] = field(default_factory=dict)

    # Each statement's key and header, by id (the node kept: its id stays its own)
    keys: dict[int, tuple[ast.AST, str, str | None]] = field(default_factory=dict)

    def key(self, node: ast.stmt) -> str:
        """The statement's dump, calls of generated functions all named alike."""
        return self._keyed(node)[1]

    def header(self, node: ast.stmt) -> str | None:
        """The key of a compound statement without its bodies, None for a simple one."""
        return self._keyed(node)[2]

    def _keyed(self, node: ast.stmt) -> tuple[ast.AST, str, str | None]:
        if id(node) not in self.keys:
            header = None
            if isinstance(node, ast.If | ast.For | ast.While):
                bare = copy.copy(node)
                bare.body, bare.orelse = [], []
                header = self._dump(bare)
            self.keys[id(node)] = (node, self._dump(node), header)
        return self.keys[id(node)]

    def _dump(self, node: ast.AST) -> str:
        abstract = copy.deepcopy(node)
        for call in ast.walk(abstract):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in self.generated:
                call.func.id = _CALLEE
        return ast.dump(abstract)

    def merge(self, pieces: list[_Piece], body: list[ast.stmt], phase: Phase) -> list[_Piece]:
        """``pieces`` with the statements of one more phase woven in."""
        matcher = difflib.SequenceMatcher(
            None, [self.key(p.first) for p in pieces], [self.key(s) for s in body], autojunk=False
        )
        merged: list[_Piece] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for piece, statement in zip(pieces[i1:i2], body[j1:j2], strict=True):
                    merged.append(self.joined(piece, statement, phase))
            else:
                merged += self.paired(pieces[i1:i2], body[j1:j2], phase)
        return merged

    def paired(self, pieces: list[_Piece], body: list[ast.stmt], phase: Phase) -> list[_Piece]:
        """Statements that differ: compound ones of one header are woven body by body; the others are kept apart,
        the earlier phases' first (each phase's own in its order)."""
        headers = difflib.SequenceMatcher(
            None, [self.header(p.first) for p in pieces], [self.header(s) for s in body], autojunk=False
        )
        merged: list[_Piece] = []
        earlier: list[_Piece] = []
        added: list[_Piece] = []
        for tag, i1, i2, j1, j2 in headers.get_opcodes():
            for index in range(max(i2 - i1, j2 - j1)):
                piece = pieces[i1 + index] if i1 + index < i2 else None
                statement = body[j1 + index] if j1 + index < j2 else None
                if tag == "equal" and piece and statement and self.header(statement) is not None:
                    merged += earlier + added + [self.joined(piece, statement, phase)]
                    earlier, added = [], []
                    continue
                earlier += [piece] if piece else []
                added += [_Piece({phase: statement})] if statement else []
        return merged + earlier + added

    def joined(self, piece: _Piece, statement: ast.stmt, phase: Phase) -> _Piece:
        """One piece for ``statement`` and a piece of the same key, or of the same header (its bodies woven)."""
        nodes = {**piece.nodes, phase: statement}
        if piece.children is None and self.key(piece.first) == self.key(statement):
            return _Piece(nodes)
        children = piece.children
        if children is None:  # its phases' statements are alike: their bodies, statement by statement
            children = {
                name: [
                    _Piece({p: n for p, n in zip(piece.nodes, column, strict=True)})
                    for column in zip(*bodies, strict=True)
                ]
                for name in _BODIES
                for bodies in [[getattr(n, name) for n in piece.nodes.values()]]
            }
        return _Piece(nodes, {name: self.merge(children[name], getattr(statement, name), phase) for name in _BODIES})

    def statements(self, pieces: list[_Piece], family: frozenset[Phase], warp: str) -> list[ast.stmt]:
        """The woven statements: those of some phases only under ``if wp.static(...)``, with an ``else`` where the
        next ones are the other phases'."""
        out: list[ast.stmt] = []
        guard: _Guard | None = None
        for piece in pieces:
            statement = self.statement(piece, family, warp)
            if piece.phases == family:
                out.append(statement)
                guard = None
            elif guard is not None and guard.phases == piece.phases:
                (guard.node.orelse if guard.in_else else guard.node.body).append(statement)
            elif guard is not None and not guard.in_else and guard.phases == family - piece.phases:
                guard.node.orelse.append(statement)
                guard = _Guard(guard.node, piece.phases, in_else=True)
            else:
                test = ast.parse(f"{warp}.static({_condition(piece.phases, family)})", mode="eval").body
                guard = _Guard(ast.If(test=test, body=[statement], orelse=[]), piece.phases)
                self.guards[id(guard.node)] = guard.node
                out.append(guard.node)
        return [self.folded(statement) for statement in out]

    def folded(self, statement: ast.stmt) -> ast.stmt:
        """A guard around one ``if`` alone as one ``if``, its test ``test if wp.static(...) else False`` (which
        Warp resolves as the guard: a constant ``False`` leaves the ``if`` out), not two nested ``if`` (ruff's
        SIM102)."""
        if self.guards.get(id(statement)) is not statement or not isinstance(statement, ast.If) or statement.orelse:
            return statement
        inner = statement.body[0]
        if len(statement.body) != 1 or not isinstance(inner, ast.If) or inner.orelse:
            return statement
        test = ast.IfExp(test=statement.test, body=inner.test, orelse=ast.Constant(False))
        fold = ast.If(test=test, body=inner.body, orelse=[])
        self.guards[id(fold)] = fold
        return fold

    def statement(self, piece: _Piece, family: frozenset[Phase], warp: str) -> ast.stmt:
        """The piece's statement, its calls of generated functions that differ from phase to phase by a stand-in
        name (``aliases``)."""
        if piece.children is None:
            return self.aliased(piece.first, piece, headers_only=False)
        bare = copy.copy(piece.first)
        for name in _BODIES:
            setattr(bare, name, self.statements(piece.children[name], family, warp))
        return self.aliased(bare, piece, headers_only=True)

    def aliased(self, node: ast.stmt, piece: _Piece, headers_only: bool) -> ast.stmt:
        walked = [list(_walk(n, headers_only)) for n in piece.nodes.values()]
        differing: dict[int, dict[Phase, str]] = {}
        for index, column in enumerate(zip(*walked, strict=True)):
            names = [name for name in map(_callee, column) if name is not None]
            if len(names) == len(column) and len(set(names)) > 1:
                differing[index] = dict(zip(piece.nodes, names, strict=True))
        if not differing:
            return node
        named = copy.copy(node) if headers_only else copy.deepcopy(node)
        for name in _HEADER if headers_only else ():
            if hasattr(named, name):
                setattr(named, name, copy.deepcopy(getattr(named, name)))
        renamed = list(_walk(named, headers_only))
        for index, by_phase in differing.items():
            call = renamed[index]
            assert isinstance(call, ast.Call)
            ordered = tuple((phase, by_phase[phase]) for phase in Phase if phase in by_phase)
            call.func = ast.Name(self.aliases.setdefault(ordered, f"{_CALLEE}{len(self.aliases)}"), ast.Load())
        return named


def _callee(node: ast.AST) -> str | None:
    """The name a call calls, None for any other node."""
    return node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None


def _walk(node: ast.stmt, headers_only: bool) -> Iterable[ast.AST]:
    """The statement's nodes in a fixed order; of a compound statement woven body by body, its header's only."""
    if not headers_only:
        return ast.walk(node)
    return [n for name in _HEADER if hasattr(node, name) for n in ast.walk(getattr(node, name))]


@dataclass
class _Family:
    """The functions of one family that take the same parameters."""

    stem: str
    members: dict[Phase, ast.FunctionDef]

    @property
    def phases(self) -> frozenset[Phase]:
        return frozenset(self.members)


def _names(nodes: Iterable[ast.AST]) -> set[str]:
    """The names the nodes read or bind."""
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


def _parse(text: str) -> ast.stmt:
    return ast.parse(text).body[0]


def _weave(family: _Family, generated: set[str], factories: Namer, warp: str) -> list[ast.stmt] | None:
    """The family's factory and the bindings of its phases' names; None where resolving the factory for a phase
    would not give back that phase's function, or where its parameters would hide a name the functions read."""
    members = family.members
    # (a parameter too: named like a stand-in or a flag, it would hide the factory's name in the definition)
    local = Namer.for_tree(ast.Module(list(members.values()), []))
    if local.taken & {"record", "store"}:
        return None
    local.taken |= {"record", "store"}
    weaver = _Weaver(generated)
    order = [phase for phase in Phase if phase in members]
    pieces = [_Piece({order[0]: statement}) for statement in members[order[0]].body]
    for phase in order[1:]:
        pieces = weaver.merge(pieces, members[phase].body, phase)
    body = weaver.statements(pieces, family.phases, warp)
    aliases = {local.fresh(names[0][1].removesuffix(names[0][0].value)): dict(names) for names in weaver.aliases}
    stand_ins = dict(zip(weaver.aliases.values(), aliases, strict=True))
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in stand_ins:
            node.func = ast.Name(stand_ins[node.func.id], ast.Load())
    if any(
        _resolved(body, phase, aliases, weaver.guards) != ast.dump(ast.Module(m.body, []))
        for phase, m in members.items()
    ):
        return None
    common = _common_decorators([m.decorator_list for m in members.values()])
    first = members[order[0]]
    inner = copy.copy(first)
    inner.name = local.fresh(f"{family.stem}_phase")
    inner.body = body
    inner.decorator_list = first.decorator_list[len(first.decorator_list) - common :]
    parameters = _parameters(family.phases)
    factory = factories.fresh(f"{family.stem}_phases")
    made = _parse(f"def {factory}({', '.join(f'{p}: bool' for p in parameters)}):\n    return {inner.name}")
    assert isinstance(made, ast.FunctionDef)
    made.body[:0] = [
        *(_chosen(alias, by_phase, family.phases) for alias, by_phase in aliases.items()),
        inner,
    ]
    bindings: list[ast.stmt] = []
    for phase in order:  # (the twin's binding names the replay's)
        member = members[phase]
        value = f"{factory}({', '.join(f'{p}={phase.flags[p]}' for p in parameters)})"
        for decorator in reversed(member.decorator_list[: len(member.decorator_list) - common]):
            value = f"{ast.unparse(decorator)}({value})"
        bindings.append(_parse(f"{member.name} = {value}"))
    return [made, *bindings]


def _common_decorators(decorators: Sequence[list[ast.expr]]) -> int:
    """How many of the innermost decorators all phases share: those decorate the factory's function, the others
    its phases' names."""
    dumps = [[ast.dump(d) for d in reversed(listed)] for listed in decorators]
    common = 0
    while all(len(d) > common for d in dumps) and len({d[common] for d in dumps}) == 1:
        common += 1
    return common


def _chosen(alias: str, by_phase: dict[Phase, str], family: frozenset[Phase]) -> ast.stmt:
    """``g = g_record if record else g_replay``: each phase's function of another family; where the three phases
    call three, ``if record: ... elif store: ... else: ...`` (a conditional expression in another, ruff lays out
    otherwise than ``layout`` does)."""
    names: dict[str, set[Phase]] = {}
    last = list(by_phase.values())[-1]
    for phase in Phase:
        if phase in family:
            names.setdefault(by_phase.get(phase, last), set()).add(phase)
    if len(names) == 3:
        record, replay, twin = names
        return _parse(
            f"if record:\n    {alias} = {record}\nelif store:\n    {alias} = {replay}\nelse:\n    {alias} = {twin}"
        )
    (first, phases), (otherwise, _) = names.items()
    return _parse(f"{alias} = {first} if {_condition(frozenset(phases), family)} else {otherwise}")


def _resolved(
    body: list[ast.stmt], phase: Phase, aliases: dict[str, dict[Phase, str]], guards: dict[int, ast.If]
) -> str:
    """The dump of the woven body as Warp compiles it for ``phase``: its guards resolved, the factory's names
    for other families' functions by the phase's own."""

    def resolve(statements: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for statement in statements:
            if guards.get(id(statement)) is statement:
                assert isinstance(statement, ast.If)
                test = statement.test
                static = test.test if isinstance(test, ast.IfExp) else test  # (a guard folded into its ``if``)
                assert isinstance(static, ast.Call)
                kept: list[ast.stmt] = statement.body
                if isinstance(test, ast.IfExp):
                    kept = [ast.If(test=test.body, body=statement.body, orelse=[])]
                condition = ast.unparse(static.args[0])
                out += resolve(kept if eval(condition, {}, phase.flags) else statement.orelse)
                continue
            copied = copy.copy(statement)
            for name in _BODIES:
                if hasattr(copied, name):
                    setattr(copied, name, resolve(getattr(copied, name)))
            out.append(copied)
        return out

    module = copy.deepcopy(ast.Module(resolve(body), []))
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in aliases:
            node.func.id = aliases[node.func.id].get(phase, node.func.id)
    return ast.dump(module)


def _signature(function: ast.FunctionDef) -> str:
    return ast.dump(function.args) + ast.dump(function.returns or ast.Constant(None))


def _families(tree: ast.Module) -> list[_Family]:
    """The families of a source's definitions, each with its members that take the parameters its replay takes (or
    most of its members do)."""
    found: dict[str, dict[Phase, ast.FunctionDef]] = {}
    for node in tree.body:
        named = family_of(node.name) if isinstance(node, ast.FunctionDef) else None
        if named is not None and isinstance(node, ast.FunctionDef):
            found.setdefault(named[0], {})[named[1]] = node
    families = []
    for stem, members in found.items():
        alike: dict[str, dict[Phase, ast.FunctionDef]] = {}
        for phase, member in members.items():
            alike.setdefault(_signature(member), {})[phase] = member
        chosen = max(alike.values(), key=lambda group: (len(group), Phase.REPLAY in group))
        if len(chosen) > 1:
            families.append(_Family(stem, chosen))
    return families


@dataclass
class _Item:
    """A top-level statement of the woven source: its text, the names it binds, and those of the source it needs
    bound before it (a factory's, where its phases are bound; a decorator's)."""

    text: str
    binds: set[str]
    needs: set[str]


def woven_source(source: str, generated: set[str], factories: Namer, warp: str, width: int) -> str:
    """``source`` (generated definitions at column 0) with each family's functions in one definition.

    ``generated``: the names of every generated function of the file (the calls that may differ by name only);
    ``factories``: names the factories' names (fresh in the file); ``warp``: the file's name for Warp; ``width``:
    the longest line the source may have at column 0. A family stays as it is where its definition, a level deeper
    in its factory (and deeper still under a guard), would have a line too long that ``layout`` cannot split (a
    user's statement with a comment, a condition over several lines), which ruff's formatter would split.
    """
    tree = ast.parse(source)
    families = _families(tree)
    if not families:
        return source
    lines = source.splitlines()
    bound = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    originals = {s: source for node in tree.body for s in ast.walk(node) if isinstance(s, ast.stmt)}
    items = {
        id(node): _Item(
            _text(node, lines), {getattr(node, "name", "")}, _names(getattr(node, "decorator_list", [])) & bound
        )
        for node in tree.body
    }
    woven_any = False
    for family in families:
        woven = _weave(family, generated, factories, warp)
        if woven is None:
            continue
        factory, *bindings = woven
        assert isinstance(factory, ast.FunctionDef)
        text = (
            _spaced(unparse_keeping_text(factory, originals, comments_above=True))
            + "\n\n\n"
            + "\n".join(map(ast.unparse, bindings))
        )
        members = list(family.members.values())
        if _too_long(text, width) - _too_long("\n\n\n".join(_text(m, lines) for m in members), width):
            continue
        last = max(members, key=lambda m: tree.body.index(m))
        inner = factory.body[-2]
        assert isinstance(inner, ast.FunctionDef)
        eager = [*factory.body[:-2], *inner.decorator_list, *bindings]  # what runs where the phases are bound
        items[id(last)] = _Item(text, {m.name for m in members}, _names(eager) & bound - {m.name for m in members})
        for member in members:
            if member is not last:
                del items[id(member)]
        woven_any = True
    if not woven_any:
        return source
    return "\n\n\n".join(item.text for item in _in_order(list(items.values()))) + "\n"


def _in_order(items: list[_Item]) -> list[_Item]:
    """The items in their order, but each after those binding what it needs (a factory placed at its last phase may
    need a family placed after it)."""
    ordered: list[_Item] = []
    bound: set[str] = set()
    while items:
        ready = next((item for item in items if item.needs <= bound), items[0])  # (Warp has no recursion)
        ordered.append(ready)
        bound |= ready.binds
        items.remove(ready)
    return ordered


def _spaced(printed: str) -> str:
    """The factory as formatters keep it: its function right below its header (``ast.unparse`` puts a blank line
    before a nested definition), a blank line before its ``return``."""
    lines = printed.split("\n")
    if len(lines) > 1 and not lines[1].strip():
        del lines[1]
    at = max(number for number, line in enumerate(lines) if line.startswith("    return "))
    return "\n".join([*lines[:at], "", *lines[at:]])


def _too_long(text: str, width: int) -> set[str]:
    """The lines of ``text`` longer than ``width`` once laid out (``layout.laid_out``), without their indentation."""
    return {line.strip() for line in laid_out(text, "", width).splitlines() if len(line) > width}


def _text(node: ast.stmt, lines: list[str]) -> str:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return "\n".join(lines[first - 1 : node.end_lineno])


def woven_sources(
    sources: list[str], widths: list[int], shared: str, namer: Namer, warp: str, width: int
) -> tuple[list[str], str]:
    """``woven_source`` of each block's source (its lines at most as long as ``widths`` says) and of the shared one
    (``shared_clones``; ``width``); ``namer``: the file's."""
    generated = {node.name for text in [*sources, shared] for node in ast.parse(text).body if hasattr(node, "name")}
    namer.taken |= generated
    woven = [woven_source(text, generated, namer, warp, room) for text, room in zip(sources, widths, strict=True)]
    return woven, woven_source(shared, generated, namer, warp, width)
