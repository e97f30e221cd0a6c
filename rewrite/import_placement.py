"""Where an emitted module's added imports go: among the file's own imports, where isort (ruff's ``I001``, on by
default) puts them, so that a sorted file stays sorted.

isort's sections, in order: ``__future__``, the standard library, third-party, first-party, relative imports.
Within a section, ``import x`` lines come before ``from x import y`` lines, each sorted by module name ignoring
case. Which modules are first-party follows ruff's default: those found in the folder of the nearest ruff
configuration (``pyproject.toml`` with ``[tool.ruff]``, ``ruff.toml``, ``.ruff.toml``) or its ``src/``; without
one, ruff takes the folder it runs in, and so this takes the folder ``wp-rewrite`` runs in.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

from warp_rewrite.passes.syntax import end_line

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


def _ruff_root(folder: Path) -> Path | None:
    for candidate in (folder, *folder.parents):
        if (candidate / "ruff.toml").is_file() or (candidate / ".ruff.toml").is_file():
            return candidate
        pyproject = candidate / "pyproject.toml"
        try:
            if pyproject.is_file() and "[tool.ruff" in pyproject.read_text(encoding="utf-8", errors="replace"):
                return candidate
        except OSError:
            continue
    return None


@dataclass(frozen=True)
class Sections:
    """Tells which isort section an import belongs to, for a file in ``folder``."""

    first_party_roots: tuple[Path, ...]

    @classmethod
    def for_folder(cls, folder: Path) -> Sections:
        root = _ruff_root(folder.resolve()) or Path.cwd().resolve()
        return cls((root, root / "src"))  # resolved: compared with resolved folders

    def of_module(self, dotted: str, level: int = 0) -> int:
        top = dotted.split(".")[0]
        if level:
            return RELATIVE
        if top == "__future__":
            return FUTURE
        if top in sys.stdlib_module_names:
            return STANDARD
        found = any((root / f"{top}.py").is_file() or (root / top).is_dir() for root in self.first_party_roots)
        return FIRST_PARTY if found else THIRD_PARTY

    def of_statement(self, node: ast.Import | ast.ImportFrom) -> int:
        if isinstance(node, ast.Import):
            return self.of_module(node.names[0].name)
        return self.of_module(node.module or "", node.level)


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
    imports = leading_imports(tree)
    section = sections.of_module(added.module)
    key = _sort_key(False, 0, added.module)
    line = added.text + "\n"
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
