"""Where an emitted module's added imports go: among the file's own imports, where isort (ruff's ``I001``, on by
default) puts them, so that a sorted file stays sorted.

isort's sections, in order: ``__future__``, the standard library, third-party, first-party, relative imports.
Within a section, ``import x`` lines come before ``from x import y`` lines, each sorted by module name ignoring
case. Which modules are first-party follows ruff's default: those found in the folder of the nearest ruff
configuration (``pyproject.toml`` with ``[tool.ruff]``, ``ruff.toml``, ``.ruff.toml``) or its ``src/``, and those
its ``known-first-party`` names; without one, ruff takes the folder it runs in, and so this takes the folder
``wp-rewrite`` runs in. ``LintConfig`` reads the settings that decide how the added lines are written.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from warp_rewrite.cli.layout import QuoteStyle
from warp_rewrite.cli.source_file import module_level
from warp_rewrite.cli.toml_files import text_of, toml_reader
from warp_rewrite.passes.syntax import end_column, end_line

if TYPE_CHECKING:
    from warp_rewrite.cli.static_frontend import HelperImport
    from warp_rewrite.cli.static_module import StaticModule

FUTURE, STANDARD, THIRD_PARTY, FIRST_PARTY, RELATIVE = range(5)


@dataclass(frozen=True)
class NewImport:
    """An import statement to add: ``import module [as alias]``."""

    module: str
    alias: str | None = None

    @property
    def text(self) -> str:
        alias = f" as {self.alias}" if self.alias and self.alias != self.module else ""
        return f"import {self.module}{alias}"


_CONFIGS = ("ruff.toml", ".ruff.toml", "pyproject.toml")  # in ruff's order of precedence within a folder
DEFAULT_LINE_LENGTH = 88  # ruff's, where a configuration does not say


@dataclass(frozen=True)
class LintConfig:
    """What the user's ruff configuration (the nearest above the file, as ruff finds it) says about the lines
    wp-rewrite writes: their length and quotes, and how isort (``I001``) sorts and wraps imports. Read with
    ``tomllib``; on Python 3.10, which has none, only the folder of the configuration is used and ruff's defaults
    are assumed."""

    root: Path | None = None  # the folder of the configuration (its first-party modules), None without one
    line_length: int = DEFAULT_LINE_LENGTH  # without a configuration, ruff's default
    known_first_party: frozenset[str] = frozenset()
    known_third_party: frozenset[str] = frozenset()
    force_single_line: bool = False  # isort's: one name per ``from`` import, so nothing is merged
    order_by_type: bool = True
    case_sensitive: bool = False
    quote_style: QuoteStyle = QuoteStyle.DOUBLE  # ruff format's, for the strings of generated code

    @classmethod
    def for_folder(cls, folder: Path) -> LintConfig:
        for candidate in (folder, *folder.parents):
            for name in _CONFIGS:
                settings = _ruff_settings(candidate / name)
                if settings is not None:
                    return cls._of(candidate, settings)
        return cls()

    @classmethod
    def _of(cls, root: Path, settings: dict) -> LintConfig:
        isort = settings.get("lint", {}).get("isort", {}) or settings.get("isort", {})
        length = settings.get("line-length")
        quotes = {style.name.lower(): style for style in QuoteStyle}.get(settings.get("format", {}).get("quote-style"))
        return cls(
            root,
            length if isinstance(length, int) and length > 0 else DEFAULT_LINE_LENGTH,
            frozenset(isort.get("known-first-party", ())),
            frozenset(isort.get("known-third-party", ())),
            bool(isort.get("force-single-line", False)),
            bool(isort.get("order-by-type", True)),
            bool(isort.get("case-sensitive", False)),
            quotes or QuoteStyle.DOUBLE,
        )


def _ruff_settings(path: Path) -> dict | None:
    """Ruff's settings in ``path`` (``[tool.ruff]`` of a ``pyproject.toml``), None where it has none; ``{}`` where
    it has some that cannot be read (no ``tomllib``, a syntax error): the folder still is the configuration's."""
    text = text_of(path)
    if text is None or (path.name == "pyproject.toml" and "[tool.ruff" not in text):
        return None
    tomllib = toml_reader()
    if tomllib is None:
        return {}
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}
    settings = data.get("tool", {}).get("ruff") if path.name == "pyproject.toml" else data
    return settings if isinstance(settings, dict) else {}


@dataclass(frozen=True)
class Sections:
    """Tells which isort section an import belongs to, for a file in ``folder``."""

    first_party_roots: tuple[Path, ...]
    first_party: frozenset[str] = frozenset()
    third_party: frozenset[str] = frozenset()

    @classmethod
    def for_folder(cls, folder: Path, config: LintConfig | None = None) -> Sections:
        config = config or LintConfig.for_folder(folder.resolve())
        root = config.root.resolve() if config.root is not None else Path.cwd().resolve()
        return cls((root, root / "src"), config.known_first_party, config.known_third_party)  # resolved: compared

    def of_module(self, dotted: str, level: int = 0) -> int:
        top = dotted.split(".")[0]
        if level:
            return RELATIVE
        if top == "__future__":
            return FUTURE
        if top in self.first_party:
            return FIRST_PARTY
        if top in self.third_party:
            return THIRD_PARTY
        if top in sys.stdlib_module_names:
            return STANDARD
        found = any((root / f"{top}.py").is_file() or (root / top).is_dir() for root in self.first_party_roots)
        return FIRST_PARTY if found else THIRD_PARTY

    def of_statement(self, node: ast.Import | ast.ImportFrom) -> int:
        if isinstance(node, ast.Import):
            return self.of_module(node.names[0].name)
        return self.of_module(node.module or "", node.level)


def _natural(text: str) -> tuple:
    """Digits compared as numbers, as ruff's isort sorts names (``v2`` before ``v10``)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def member_key(name: str, config: LintConfig) -> tuple:
    """Where isort puts a name in ``from x import ...``: constants, then classes, then the rest (``order-by-type``),
    each ignoring case unless ``case-sensitive``."""
    if not config.order_by_type or (len(name) > 1 and name.isupper()):
        kind = 0
    elif name[:1].isupper():
        kind = 1
    else:
        kind = 2
    return kind, _natural(name if config.case_sensitive else name.lower()), _natural(name)


def sorted_members(names: list[ast.alias], config: LintConfig) -> list[ast.alias]:
    return sorted(names, key=lambda alias: (member_key(alias.name, config), alias.asname or ""))


def from_import(indent: str, source: str, names: list[ast.alias], config: LintConfig, split: bool = False) -> str:
    """``from source import names`` as isort writes it: the names sorted, on one line where it fits the line length
    (and ``split`` does not ask for one a line, as a magic trailing comma does), else one a line in parentheses."""
    spelled = [alias.name + (f" as {alias.asname}" if alias.asname else "") for alias in sorted_members(names, config)]
    line = f"{indent}from {source} import {', '.join(spelled)}"
    if len(line) <= config.line_length and not split:
        return line + "\n"
    inner = "".join(f"{indent}    {name},\n" for name in spelled)
    return f"{indent}from {source} import (\n{inner}{indent})\n"


def _sort_key(is_from: bool, level: int, module: str) -> tuple[bool, int, str]:
    """isort's order: ``import x`` before ``from x import y``; relative imports from the furthest (``..``)."""
    return is_from, -level, module.lower()


def _statement_key(node: ast.Import | ast.ImportFrom) -> tuple[bool, int, str]:
    if isinstance(node, ast.Import):
        return _sort_key(False, 0, node.names[0].name)
    return _sort_key(True, node.level, node.module or "")


def leading_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The file's first run of import statements (after its docstring)."""
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    imports = []
    for statement in body:
        if not isinstance(statement, ast.Import | ast.ImportFrom):
            break
        imports.append(statement)
    return imports


def placement(tree: ast.Module, lines: list[str], added: NewImport, sections: Sections) -> tuple[int, str]:
    """(0-based line index, text) that inserts ``added`` where isort would put it; the text ends in a newline and
    carries the blank lines that separate sections."""
    key = _sort_key(False, 0, added.module)
    return _placed(tree, lines, sections.of_module(added.module), key, added.text + "\n", sections)


def from_placement(tree: ast.Module, lines: list[str], source: str, text: str, sections: Sections) -> tuple[int, str]:
    """``placement`` for ``text``, a ``from <source> import ...`` statement (``source`` with its leading dots)."""
    level = len(source) - len(source.lstrip("."))
    module = source[level:]
    return _placed(tree, lines, sections.of_module(module, level), _sort_key(True, level, module), text, sections)


def _placed(
    tree: ast.Module, lines: list[str], section: int, key: tuple[bool, int, str], line: str, sections: Sections
) -> tuple[int, str]:
    imports = leading_imports(tree)
    same = [node for node in imports if sections.of_statement(node) == section]
    if same:
        # After its ties: for ``from . import x`` isort would merge the two into one statement (not done here).
        later = next((node for node in same if _statement_key(node) > key), None)
        return (later.lineno - 1, line) if later is not None else (end_line(same[-1]), line)
    before = [node for node in imports if sections.of_statement(node) < section]
    after = [node for node in imports if sections.of_statement(node) > section]
    if before:
        return end_line(before[-1]), "\n" + line + ("\n" if after else "")
    if after:
        return after[0].lineno - 1, line + "\n"
    return _top_of_file(tree, lines), line + "\n"


def after_imports(tree: ast.Module, lines: list[str], block: str) -> tuple[int, str]:
    """(0-based line index, text) that puts a block of code (more than an import statement: isort leaves it where
    it is) after the file's first run of imports, a blank line before it, and one after it where code follows."""
    imports = leading_imports(tree)
    at = end_line(imports[-1]) if imports else _top_of_file(tree, lines)
    followed = at < len(lines) and lines[at].strip()
    return at, ("\n" if at else "") + block + ("\n" if followed else "")


def _top_of_file(tree: ast.Module, lines: list[str]) -> int:
    """The line after the docstring, else after the leading comments (a shebang, a coding cookie, a licence)."""
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return end_line(body[0])
    index = 0
    while index < len(lines) and lines[index].lstrip().startswith("#"):
        index += 1
    return index


@dataclass
class ImportLines:
    """The imports that the helpers copied into the module need: new statements (input line after which, text),
    and the module's own imports of the same modules written again with the names added (the statement, its new
    text), as isort merges them (a second ``from x import`` line of one module is ruff's ``I001``)."""

    added: list[tuple[int, str]] = field(default_factory=list)
    merged: list[tuple[ast.ImportFrom, str]] = field(default_factory=list)


def helper_import_lines(
    module: StaticModule, imports: list[HelperImport], config: LintConfig, sections: Sections
) -> ImportLines:
    """The imports of the names the helpers copied into the module use: each module's names added to the module's
    own ``from`` import of it where it has one that can be written again (no comment in it), else one ``from ...
    import`` after the import the helper came through (indented as it is), or, where the module imports nothing from
    the helper's file, where isort puts it (``from_placement``); with isort's ``force-single-line``, one statement a
    name, sorted together."""
    own: dict[str, ast.ImportFrom] = {}
    for statement in module_level(module.tree):
        if isinstance(statement, ast.ImportFrom) and _rewritable(module, statement):
            own.setdefault("." * statement.level + (statement.module or ""), statement)
    groups: dict[int | str, tuple[ast.stmt | None, str, set[str]]] = {}
    for found in imports:
        target = own.get(found.source)
        key: int | str = id(target) if target is not None else id(found.after) if found.after else found.source
        groups.setdefault(key, (target or found.after, found.source, set()))[2].add(found.name)
    lines = ImportLines()
    for node, source, names in groups.values():
        indent = " " * node.col_offset if node is not None else ""
        mine = own.get(source) if node is not None and node is own.get(source) else None  # written again with them
        if mine is not None:
            have = {alias.name for alias in mine.names if alias.asname is None}
            aliases = [*mine.names, *(ast.alias(name) for name in sorted(names - have))]
        else:
            aliases = [ast.alias(name) for name in sorted(names)]
        if config.force_single_line:  # one name a statement, sorted together
            text = "".join(from_import(indent, source, [alias], config) for alias in sorted_members(aliases, config))
        else:
            written = module.lines[mine.lineno - 1 : end_line(mine)] if mine is not None else []
            split = len(written) > 1 and re.search(r",\s*\)\s*$", "".join(written)) is not None
            text = from_import(indent, source, aliases, config, split)
        if node is None:
            lines.added.append(from_placement(module.tree, module.lines, source, text, sections))
        elif mine is not None:
            lines.merged.append((mine, text))
        else:
            lines.added.append((end_line(node), text))
    return ImportLines(sorted(lines.added, key=lambda line: line[0]), lines.merged)


def _rewritable(module: StaticModule, node: ast.ImportFrom) -> bool:
    """True for an import statement on lines of its own, without a comment or a ``*``: it can be written again."""
    lines = module.lines[node.lineno - 1 : end_line(node)]
    after = module.lines[end_line(node) - 1].encode()[end_column(node) :]
    own_lines = not lines[0][: node.col_offset].strip() and not after.strip()
    return own_lines and not any("#" in line or ";" in line for line in lines) and node.names[0].name != "*"
