"""The size of every Newton file the command line rewrites, in lines and times its own length: with Newton's ruff
settings (line length 120) and with none (ruff's defaults, 88). It prints the table of docs/realcode.md's "Size of
the rewritten files": ``PYTHONPATH=. .venv/bin/python tests/realcode/sizes.py`` (about four minutes)."""

from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
from pathlib import Path

from test_real_lint_config import FILES, NEWTON_RUFF
from trees import NEWTON, require

from warp_rewrite.cli.main import FINDINGS, OK, main


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def rewritten_lines(ruff_settings: str | None) -> dict[str, int]:
    """Each file's lines as the command line writes it, in a copy of Newton with ``ruff_settings`` in its
    ``pyproject.toml`` (None: no configuration)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        shutil.copytree(NEWTON.folder, root / "newton", ignore=shutil.ignore_patterns("__pycache__", "bin", "*.so"))
        if ruff_settings is not None:
            (root / "pyproject.toml").write_text(ruff_settings)
        sizes = {}
        for file in FILES:
            out = root / f"{file}.rewritten.py"
            with contextlib.redirect_stderr(io.StringIO()):
                assert main([str(root / file), "-o", str(out), "-q"]) in (OK, FINDINGS)
            sizes[file] = lines(out)
        return sizes


def table() -> str:
    require(NEWTON)
    original = {file: lines(NEWTON.folder.parent / file) for file in FILES}
    newton, plain = rewritten_lines(NEWTON_RUFF), rewritten_lines(None)
    rows = ["| file | lines | rewritten, Newton's settings | rewritten, no configuration |", "|---|---:|---:|---:|"]
    for file in sorted(FILES, key=lambda f: (-newton[f] / original[f], f)):
        size = original[file]
        rows.append(
            f"| `{file}` | {size:,} | {newton[file]:,} ({newton[file] / size:.1f}×) "
            f"| {plain[file]:,} ({plain[file] / size:.1f}×) |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
