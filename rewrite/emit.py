"""Rewritten modules, built from source text alone: the engine behind ``wp-rewrite FILE.py``.

``emit_module`` inserts, right after each kernel that consumes an atomic's return, a block with what the
pipeline generated (``warp_rewrite.pipeline``: the record and replay kernels and the clones of the helpers they
call) and ``<kernel>_rewritten``, the ``RewrittenKernel`` that launches them; every other character of the file
is kept. The blocks call warp-rewrite's runtime, which the emitted module imports from ``wp_rewrite_runtime.py``
beside it (a copy of ``warp_rewrite/runtime.py``, see ``write_runtime``). Blocks are fenced by marker comments, so
a second run recognises them and changes nothing.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_rewrite import pipeline, runtime
from warp_rewrite.lint import helper_hazards
from warp_rewrite.live import RUNTIME_NAME
from warp_rewrite.passes import dtypes
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.syntax import walk
from warp_rewrite.passes.two_phase import ModuleNames
from warp_rewrite.pipeline import GeneratedKernel, RewriteOptions
from warp_rewrite.runtime import RewriteError
from warp_rewrite.static_module import Imported, Project, StaticModule, split_lines
from warp_rewrite.static_types import StaticFrontend

BEGIN = (
    "# ---- wp-rewrite: generated from kernel '{kernel}' above ({where}) ----\n"
    "# Do not edit. After changing the kernel, delete down to the end marker and run wp-rewrite again.\n"
)
END = "# ---- wp-rewrite: end of the code generated from kernel '{kernel}' ----\n"
RUNTIME_FILE = f"{RUNTIME_NAME}.py"
_WIDTH = 120


@dataclass
class Emitted:
    """The rewritten module's text, and what the user should be told about it."""

    text: str
    rewritten: list[str]  # kernels that got generated phases
    warnings: list[str]


def kernels_to_rewrite(module: StaticModule, project: Project) -> tuple[list[ast.FunctionDef], list[str]]:
    """Kernels that consume an atomic's return and have no generated block yet; warnings about the others.

    Raises ``RewriteError`` for the first kernel whose pattern the rewrite cannot handle.
    """
    chosen, warnings = [], []
    for kernel in module.nested_kernels():
        if module.consumed(kernel) or helper_hazards(project, module, kernel)[0]:
            raise RewriteError(
                kernel.name, module.location(kernel),
                "only kernels defined directly in the module body can be rewritten to a file",
                "Define the kernel at module level, or rewrite it at run time with warp_rewrite.wp_rewrite()",
            )  # fmt: skip
    for kernel in module.top_level("kernel").values():
        if module.rewritten(kernel.name):
            continue
        hazards, unfollowed = helper_hazards(project, module, kernel)
        for miss in unfollowed:
            warnings.append(
                f"{module.location(miss.call)}: warning: kernel '{kernel.name}' calls '{miss.helper}' from "
                f"'{miss.module}', whose file wp-rewrite could not find; if it uses an atomic's returned value, "
                "its gradients stay wrong"
            )
        if module.consumed(kernel) or hazards:
            chosen.append(kernel)
    return chosen, warnings


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the module uses or binds (imports and classes included): generated names must avoid them."""
    names = Namer.for_tree(tree).taken
    names |= {n.name for n in walk(tree) if isinstance(n, ast.ClassDef)}
    for node in walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _module_names(module: StaticModule, taken: set[str]) -> tuple[ModuleNames, list[str]]:
    """How the generated blocks name Warp and the runtime, and the import lines the module lacks for them."""
    imports = []
    warp = min(module.warp.modules) if module.warp.modules else None
    if warp is None:
        warp = Namer(taken).fresh("wp")
        imports.append(f"import warp as {warp}")
    imported = Imported(0, RUNTIME_NAME, None)
    name = next((local for local, source in module.imported.items() if source == imported), None)
    if name is None:
        name = Namer(taken).fresh(RUNTIME_NAME)
        imports.append(f"import {RUNTIME_NAME}" + (f" as {name}" if name != RUNTIME_NAME else ""))
    taken |= {warp, name}
    return ModuleNames(warp, name), imports


def _literal(value: Any, names: ModuleNames, indent: str = "") -> str:
    """Source text that makes ``value`` (a launch spec: the runtime's dataclasses, tuples, Warp types, constants),
    one item a line where one line would be too long."""
    inner = indent + "    "
    if dataclasses.is_dataclass(value):
        fields = [f for f in dataclasses.fields(value) if getattr(value, f.name) != f.default]
        items = [f"{f.name}={_literal(getattr(value, f.name), names, inner)}" for f in fields]
        opening, closing = f"{names.runtime_function(type(value).__name__)}(", ")"
    elif isinstance(value, tuple):
        items = [_literal(item, names, inner) for item in value]
        opening, closing = "(", ",)" if len(value) == 1 else ")"
    elif isinstance(value, type):
        return dtypes.source(value, names.warp)
    else:
        return json.dumps(value) if isinstance(value, str) else repr(value)  # strings in double quotes
    flat = opening + ", ".join(items) + closing
    if len(indent) + len(flat) <= _WIDTH - 10 and "\n" not in flat:
        return flat
    return opening + "\n" + "".join(f"{inner}{item},\n" for item in items) + indent + closing.lstrip(",")


def _rewritten_kernel(generated: GeneratedKernel, names: ModuleNames, taken: set[str], max_records: int | None):
    """``<kernel>_rewritten = RewrittenKernel(...)`` and ``launch_<kernel> = <kernel>_rewritten.launch``."""
    kernel = generated.kernel
    namer = Namer(taken)
    rewritten, launch = namer.fresh(f"{kernel}_rewritten"), namer.fresh(f"launch_{kernel}")
    taken |= {rewritten, launch}
    pair = [generated.record_kernel, generated.replay_kernel, _literal(generated.spec, names, " " * 8)]
    options = [f"max_records={max_records}"] if max_records is not None else []
    return "\n".join([
        f"{rewritten} = {names.runtime_function('RewrittenKernel')}(",
        f"    {kernel},",
        f"    {names.runtime_function('KernelPair')}(",
        *(f"        {item}," for item in pair),
        "    ),",
        *(f"    {option}," for option in options),
        ")",
        f"{launch} = {rewritten}.launch  # takes wp.launch's arguments",
    ]) + "\n"  # fmt: skip


def kernel_block(module: StaticModule, frontend: StaticFrontend, max_records: int | None,
                 detach_returns: bool) -> str | None:  # fmt: skip
    """One kernel's generated block, fenced by its begin and end markers; None when the kernel has nothing to
    record (as when ``wp_rewrite`` leaves a kernel unchanged)."""
    # max_records is the launches' default, not compiled in
    generated = pipeline.rewrite_kernel(frontend, RewriteOptions(None, detach_returns))
    if generated is None:
        return None
    for function in generated.plan.root.walk():
        frontend.check_portable(function)
    kernel = frontend.definition
    body = generated.source + "\n\n" + _rewritten_kernel(generated, frontend.module, frontend.taken, max_records)
    begin = BEGIN.format(kernel=kernel.name, where=f"{module.display}:{kernel.lineno}")
    return begin + body + "\n\n" + END.format(kernel=kernel.name)


def _imports_end(module: StaticModule) -> int:
    """The line after which import lines go: the last import before the module's first definition, else its
    docstring (0: the top of the file)."""
    end = 0
    for statement in module.tree.body:
        if isinstance(statement, ast.Import | ast.ImportFrom):
            end = statement.end_lineno
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and end == 0:
            end = statement.end_lineno  # the docstring
        elif isinstance(statement, ast.FunctionDef | ast.ClassDef):
            break
    return end


def emit_module(
    path: Path,
    display: str,
    text: str,
    project: Project | None = None,
    max_records: int | None = None,
    detach_returns: bool = False,
) -> Emitted:
    """``text`` with each kernel's generated block inserted after it; raises ``ParseError``/``RewriteError``.

    ``max_records`` and ``detach_returns`` have the meaning of ``wp_rewrite``'s options (``max_records`` is the
    launches' default, which each launch may change).
    """
    project = project or Project()
    module = StaticModule.parse(path, display, text)
    project.modules.setdefault(path.resolve(), module)
    kernels, warnings = kernels_to_rewrite(module, project)  # also loads the files their helpers come from
    if not kernels:
        return Emitted(text, [], warnings)
    taken = set().union(*(_bound_names(m.tree) for m in project.modules.values() if m is not None))
    names, imports = _module_names(module, taken)
    blocks = []
    for kernel in kernels:
        block = kernel_block(module, StaticFrontend(module, project, kernel, names, taken), max_records, detach_returns)
        if block is not None:
            blocks.append((kernel, block))
    if not blocks:
        return Emitted(text, [], warnings)
    newline = "\r\n" if "\r\n" in text else "\n"  # the file's own line endings, for the inserted lines too
    lines = split_lines(text)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += newline
    for kernel, block in reversed(blocks):
        lines[kernel.end_lineno : kernel.end_lineno] = [("\n\n" + block).replace("\n", newline)]
    if imports:
        at = _imports_end(module)
        lines[at:at] = [line + newline for line in imports]
    return Emitted("".join(lines), [kernel.name for kernel, _ in blocks], warnings)


def write_runtime(directory: Path) -> Path:
    """Write ``wp_rewrite_runtime.py`` into ``directory`` (a copy of this package's runtime, byte for byte) unless
    it is there already; returns its path."""
    target = directory / RUNTIME_FILE
    code = Path(runtime.__file__).read_bytes()
    if not target.exists() or target.read_bytes() != code:
        target.write_bytes(code)
    return target
