"""``[tool.wp-rewrite]`` in ``pyproject.toml``: the command line's settings for a project, with ruff's option names,
so that a CI runs ``wp-rewrite --check .`` as it runs ``ruff check .``.

    [tool.wp-rewrite]
    extend-exclude = ["tests/fixtures", "*_generated.py"]
    extend-select = ["WR101"]
    ignore = ["WR005"]

The table is read from the nearest ``pyproject.toml`` that has one, in the working directory or a folder above it,
as ruff finds its settings for the command line; paths in it are relative to that file's folder. The command line's
options come on top: ``--select`` replaces the table's ``select`` and ``extend-select``, ``--exclude`` its
``exclude``; ``--extend-select``, ``--ignore`` and ``--extend-exclude`` add to the table's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from warp_rewrite.cli.toml_files import text_of, toml_reader

TABLE = "wp-rewrite"
# ruff's default ``exclude``: folders of tools and environments, never a project's own code.
DEFAULT_EXCLUDE = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".git-rewrite",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pants.d",
    ".pyenv",
    ".pytest_cache",
    ".pytype",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    ".vscode",
    "__pypackages__",
    "_build",
    "buck-out",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)
_LISTS = ("exclude", "extend-exclude", "select", "extend-select", "ignore")
_KNOWN = (*_LISTS, "force-exclude", "output-format")


class SettingsError(ValueError):
    """A ``[tool.wp-rewrite]`` table that cannot be read: a usage error, as an unknown option is."""


def _glob(pattern: str) -> re.Pattern[str]:
    """A glob as ruff reads it: ``*`` and ``?`` within one path component, ``**`` across them."""
    parts = re.split(r"(\*\*/?|\*|\?|\[[^]]*\])", pattern.rstrip("/"))
    translated = []
    for part in parts:
        if part.startswith("**"):
            translated.append("(?:.*/)?" if part.endswith("/") else ".*")
        elif part == "*":
            translated.append("[^/]*")
        elif part == "?":
            translated.append("[^/]")
        elif part.startswith("[") and part.endswith("]") and len(part) > 2:
            translated.append("[" + ("^" + part[2:-1] if part[1] == "!" else part[1:-1]) + "]")
        else:
            translated.append(re.escape(part))
    return re.compile("".join(translated) + r"\Z")


@dataclass(frozen=True)
class Exclusion:
    """Which files and folders a walk through a folder named on the command line leaves out: a pattern without a
    ``/`` matches the name of a file or folder anywhere (``tests``, ``*_pb2.py``), one with a ``/`` the path from the
    settings' folder (``newton/tests``, ``docs/**/*.py``)."""

    patterns: tuple[str, ...]
    root: Path  # the folder of the settings (the working directory without any), resolved

    @cached_property
    def _compiled(self) -> tuple[tuple[bool, re.Pattern[str]], ...]:
        return tuple(("/" in pattern.rstrip("/"), _glob(pattern.lstrip("./") or ".")) for pattern in self.patterns)

    def excludes(self, path: Path) -> bool:
        """True if the file or folder ``path`` is left out (its name or, relative to the root, its path)."""
        anchored = None
        for has_slash, pattern in self._compiled:
            if not has_slash:
                if pattern.match(path.name):
                    return True
                continue
            if anchored is None:
                try:
                    anchored = path.absolute().relative_to(self.root).as_posix()
                except ValueError:
                    anchored = ""
            if anchored and pattern.match(anchored):
                return True
        return False


@dataclass(frozen=True)
class Settings:
    """The project's ``[tool.wp-rewrite]`` table (``source``: its file; None without one)."""

    source: Path | None = None
    lists: dict[str, tuple[str, ...]] = field(default_factory=dict)  # by ruff's option name
    force_exclude: bool = False
    output_format: str | None = None

    @classmethod
    def find(cls, start: Path | None = None) -> Settings:
        """The table of the nearest ``pyproject.toml`` that has one, from ``start`` (the working directory) up."""
        start = (start or Path.cwd()).absolute()
        for folder in (start, *start.parents):
            candidate = folder / "pyproject.toml"
            table = _table(candidate)
            if table is not None:
                return cls.read(candidate, table)
        return cls()

    @classmethod
    def read(cls, source: Path, table: dict) -> Settings:
        unknown = sorted(set(table) - set(_KNOWN))
        if unknown:
            raise SettingsError(
                f"{source}: [tool.{TABLE}]: unknown option{'s' * (len(unknown) > 1)} {', '.join(unknown)} "
                f"(known: {', '.join(_KNOWN)})"
            )
        lists = {}
        for name in _LISTS:
            value = table.get(name)
            if value is None:
                continue
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise SettingsError(f"{source}: [tool.{TABLE}]: {name} must be a list of strings")
            lists[name] = tuple(value)
        force = table.get("force-exclude", False)
        output_format = table.get("output-format")
        if not isinstance(force, bool):
            raise SettingsError(f"{source}: [tool.{TABLE}]: force-exclude must be true or false")
        if output_format is not None and not isinstance(output_format, str):
            raise SettingsError(f"{source}: [tool.{TABLE}]: output-format must be a string")
        return cls(source, lists, force, output_format)

    @property
    def root(self) -> Path:
        """The folder relative paths in the settings start from: the table's, or the working directory."""
        return (self.source.parent if self.source is not None else Path.cwd()).resolve()

    def exclusion(self, exclude: list[str] | None, extend_exclude: list[str] | None) -> Exclusion:
        """What a walk leaves out: ``--exclude`` (else the table's ``exclude``, else ruff's defaults), with the
        table's ``extend-exclude`` and ``--extend-exclude``."""
        base = tuple(exclude) if exclude is not None else self.lists.get("exclude", DEFAULT_EXCLUDE)
        extended = self.lists.get("extend-exclude", ()) + tuple(extend_exclude or ())
        return Exclusion(base + extended, self.root)


def _table(path: Path) -> dict | None:
    """``[tool.wp-rewrite]`` of ``path``, None where the file or the table is missing."""
    text = text_of(path)
    if text is None or (f"[tool.{TABLE}" not in text and f'[tool."{TABLE}"' not in text):
        return None
    tomllib = toml_reader()
    if tomllib is None:
        raise SettingsError(f"{path}: [tool.{TABLE}] is read with tomllib (Python 3.11) or tomli")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{path}: cannot read: {error}") from None
    table = data.get("tool", {}).get(TABLE)
    if table is not None and not isinstance(table, dict):
        raise SettingsError(f"{path}: tool.{TABLE} must be a table")
    return table
