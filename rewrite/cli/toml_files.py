"""Reading the TOML files a run takes settings from (``pyproject.toml``, ``ruff.toml``): the two steps that
``settings`` (``[tool.wp-rewrite]``) and ``import_placement`` (ruff's settings) share; each decides what a missing
reader or a syntax error means for it."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType


def text_of(path: Path) -> str | None:
    """The file's text, None where there is no such file or it cannot be read."""
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    except OSError:
        return None


def toml_reader() -> ModuleType | None:
    """``tomllib`` (Python 3.11 and later), or ``tomli``, the same installed on Python 3.10; None without either."""
    for name in ("tomllib", "tomli"):  # (imported by name: a module mypy's 3.10 does not know)
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None
