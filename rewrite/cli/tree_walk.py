"""The Python files below a folder that a run reads: not in hidden folders, caches or runtime copies, nor left out by
the user's exclusions."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from warp_rewrite.cli.settings import Exclusion
from warp_rewrite.passes.naming import RUNTIME_FOLDER


def _skipped_folder(name: str) -> bool:
    """Folders never walked into: hidden ones, caches and the runtime copies ``Writes.runtime`` puts there (its
    atomics' returns are the tool's own, never differentiated)."""
    return name.startswith(".") or name in ("__pycache__", RUNTIME_FOLDER)


def walk_python_files(folder: Path, exclusion: Exclusion) -> Iterator[Path]:
    """The Python files below ``folder``, not in a ``_skipped_folder`` nor left out by ``exclusion``; symbolic links
    to folders are not followed."""
    for at, folders, files in os.walk(folder):
        here = Path(at)
        folders[:] = [name for name in folders if not _skipped_folder(name) and not exclusion.excludes(here / name)]
        yield from (here / name for name in files if name.endswith(".py") and not exclusion.excludes(here / name))


def excluded(path: Path, exclusion: Exclusion) -> bool:
    """True if ``exclusion`` leaves out ``path`` or a folder above it (``--force-exclude``, for the paths named)."""
    return any(exclusion.excludes(folder) for folder in (path, *path.absolute().parents))
