"""A notebook as IPython runs one: each cell's source registered in ``linecache`` under a virtual file name of its
own and executed in one module's namespace (``__main__`` there; a module of its own here)."""

from __future__ import annotations

import itertools
import linecache
import sys
import textwrap
import types

_notebooks = itertools.count()
_cells = itertools.count()


class Notebook:
    """``run(cell)`` runs a cell; the names it defines are attributes of the notebook."""

    def __init__(self) -> None:
        self.module = types.ModuleType(f"notebook_{next(_notebooks)}")
        sys.modules[self.module.__name__] = self.module  # Warp finds a kernel's module by its name
        self.run("import warp as wp\n")

    def run(self, cell: str) -> None:
        text = textwrap.dedent(cell)
        filename = f"<ipython-input-{next(_cells)}-0f3c2a>"
        linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
        exec(compile(text, filename, "exec"), self.module.__dict__)

    def __getattr__(self, name: str):
        return getattr(self.module, name)
