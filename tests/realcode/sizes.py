"""The size of every Newton file the command line rewrites, in lines and times its own length: with Newton's ruff
settings (line length 120) and with none (ruff's defaults, 88); and, for the files above three times, where their
lines go. It prints the two tables of docs/realcode.md's "Size of the rewritten files":
``PYTHONPATH=. .venv/bin/python tests/realcode/sizes.py`` (about four minutes)."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from test_real_lint_config import FILES, NEWTON_RUFF
from trees import NEWTON, require

from warp_rewrite.cli.main import FINDINGS, OK, main

GOAL = 3.0  # issue 37: every rewritten file at most three times its input
# the names the pipeline gives a generated function: its kernel's or helper's, a clone number, then its phase
# A generated function: a phase of a kernel or clone, or the factory that defines its phases (``rewrite/cli/weave.py``)
PHASE = re.compile(r"^(?P<base>.+?)(_\d+)?_(record|count|replay|replay_forward|phases)$")


def lines(text: str) -> int:
    return len(text.splitlines())


def rewritten(ruff_settings: str | None) -> dict[str, str]:
    """Each file as the command line writes it, in a copy of Newton with ``ruff_settings`` in its
    ``pyproject.toml`` (None: no configuration)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        shutil.copytree(NEWTON.folder, root / "newton", ignore=shutil.ignore_patterns("__pycache__", "bin", "*.so"))
        if ruff_settings is not None:
            (root / "pyproject.toml").write_text(ruff_settings)
        texts = {}
        for file in FILES:
            out = root / f"{file}.rewritten.py"
            with contextlib.redirect_stderr(io.StringIO()):
                assert main([str(root / file), "-o", str(out), "-q"]) in (OK, FINDINGS)
            texts[file] = out.read_text()
        return texts


@dataclass
class Breakdown:
    """Where a rewritten file's lines go (generated functions: those the original does not define)."""

    kernels: int = 0  # the record, count and replay kernels
    count_phase: int = 0  # of the generated kernels and clones, those of the count phase
    clones: int = 0  # the helpers' clones
    foreign_clones: int = 0  # of them, clones of helpers the file imports from another module
    specs: int = 0  # the launch specs (``KernelSpec``)

    @classmethod
    def of(cls, original: str, emitted: str) -> Breakdown:
        defined = {node.name for node in ast.walk(ast.parse(original)) if isinstance(node, ast.FunctionDef)}
        counted = cls()
        tree = ast.parse(emitted)
        bound: Counter[str] = Counter()  # the lines binding a factory's phases, by factory
        for node in ast.walk(tree):
            for call in ast.walk(node.value) if isinstance(node, ast.Assign) else ():
                if isinstance(call, ast.Call) and ast.unparse(call.func).endswith("_phases"):
                    bound[ast.unparse(call.func)] += (node.end_lineno or node.lineno) - node.lineno + 1
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "KernelSpec":
                counted.specs += (node.end_lineno or node.lineno) - node.lineno + 1
            if not isinstance(node, ast.FunctionDef) or node.name in defined:
                continue
            match = PHASE.match(node.name)
            if match is None:
                continue
            size = (node.end_lineno or node.lineno) - min([node.lineno, *(d.lineno for d in node.decorator_list)]) + 1
            size += bound[node.name]
            decorators = [d for n in (node, *node.body) if isinstance(n, ast.FunctionDef) for d in n.decorator_list]
            if any("kernel" in ast.unparse(d) for d in decorators) or not decorators:  # (a factory of kernels)
                counted.kernels += size
            else:
                counted.clones += size
                counted.foreign_clones += size if match["base"] not in defined else 0
            counted.count_phase += size if node.name.endswith("_count") else 0
        return counted


def tables() -> str:
    require(NEWTON)
    original = {file: (NEWTON.folder.parent / file).read_text() for file in FILES}
    newton, plain = rewritten(NEWTON_RUFF), rewritten(None)
    size = {file: lines(text) for file, text in original.items()}
    order = sorted(FILES, key=lambda f: (-lines(newton[f]) / size[f], f))
    rows = ["| file | lines | rewritten, Newton's settings | rewritten, no configuration |", "|---|---:|---:|---:|"]
    for file in order:
        ours, theirs = lines(newton[file]), lines(plain[file])
        times = f"{ours:,} ({ours / size[file]:.1f}×) | {theirs:,} ({theirs / size[file]:.1f}×)"
        rows.append(f"| `{file}` | {size[file]:,} | {times} |")
    rows += [
        "",
        "| file above 3× (Newton's settings) | record, count and replay kernels | count phase (kernels and clones) "
        "| helper clones | of them, of helpers from other modules | launch specs |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for file in (f for f in order if lines(newton[f]) > GOAL * size[f]):
        parts = Breakdown.of(original[file], newton[file])
        rows.append(
            f"| `{file}` | {parts.kernels:,} | {parts.count_phase:,} | {parts.clones:,} | {parts.foreign_clones:,} "
            f"| {parts.specs:,} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(tables())
