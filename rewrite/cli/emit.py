"""Rewritten modules, built from source text alone: the engine behind ``wp-rewrite FILE.py``.

``emit_module`` inserts, right after each kernel that consumes an atomic's return, a block with what the
pipeline generated (``warp_rewrite.pipeline``: the record and replay kernels and the clones of the helpers they
call), ``<kernel>_rewritten``, the ``RewrittenKernel`` that launches them, and ``launch_<kernel>``, its launch.
A kernel defined inside a function (a factory) gets its block there, indented, so that the generated kernels see
the factory's closure values as the kernel does, and the factory's name of the kernel is then bound to the
rewritten kernel: what the factory returns launches both phases. ``wp.launch(kernel, ...)`` calls of the file
become ``launch_<kernel>(...)`` (the callee and the kernel argument replaced in place). Every other character of
the file is kept. The blocks call warp-rewrite's runtime, which the emitted module imports, after its own imports,
from the folder ``wp_rewrite_runtime/`` beside it (``runtime_import``). Blocks are fenced by marker comments, so
that a second run recognises them and changes nothing, and deleting one and running again brings it back.
"""

from __future__ import annotations

import ast
import builtins
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warp_rewrite import pipeline, runtime
from warp_rewrite.cli.call_edits import Edit, Offsets, apply_edits, construction_edits, launch_edits
from warp_rewrite.cli.hazards import HazardFinder
from warp_rewrite.cli.import_placement import (
    DEFAULT_LINE_LENGTH,
    LintConfig,
    NewImport,
    Sections,
    after_imports,
    helper_import_lines,
    placement,
)
from warp_rewrite.cli.kernel_choice import choose_kernels, warning
from warp_rewrite.cli.layout import laid_out, quoted
from warp_rewrite.cli.markers import begin_marker, end_marker, shared_markers
from warp_rewrite.cli.project import Project
from warp_rewrite.cli.shared_clones import share, top_statement
from warp_rewrite.cli.source_file import Imported, Region, import_path, module_level
from warp_rewrite.cli.spec_literal import Relocation, SharedSpecValues, spec_literal
from warp_rewrite.cli.staleness import MadeFrom, made_from, option_flags, stale
from warp_rewrite.cli.static_frontend import (
    HelperImport,
    StaticFrontend,
    StaticUnit,
)
from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.cli.weave import woven_sources
from warp_rewrite.passes import dtypes
from warp_rewrite.passes.naming import RUNTIME_FOLDER, RUNTIME_NAME, Namer
from warp_rewrite.passes.plan_types import array_at
from warp_rewrite.passes.syntax import Located, end_line, walk
from warp_rewrite.passes.two_phase import ModuleNames
from warp_rewrite.pipeline import GeneratedKernel, LeftToWarp, RewriteOptions
from warp_rewrite.printing import string_lines
from warp_rewrite.runtime import RewriteError
from warp_rewrite.runtime.abi import RuntimeNames
from warp_rewrite.runtime.fingerprints import NOTHING_ELSEWHERE
from warp_rewrite.runtime.specs import KernelSpec


@dataclass
class Emitted:
    """The rewritten module's text, and what the user should be told about it."""

    text: str
    rewritten: list[str] = field(default_factory=list)  # kernels that got generated phases in this run
    refusals: list[RewriteError] = field(default_factory=list)  # kernels the rewrite cannot handle
    left: list[LeftToWarp] = field(default_factory=list)  # kernels left as plain Warp (see ``pipeline.LeftToWarp``)
    warnings: list[str] = field(default_factory=list)
    launches: int = 0  # wp.launch calls now calling a rewritten launch
    constructions: int = 0  # calls making a kernel of a plain function now giving the rewritten kernel
    already: list[str] = field(default_factory=list)  # kernels with a block from an earlier run, still current
    regenerated: list[str] = field(default_factory=list)  # kernels whose earlier block was stale, made again
    runtime_up: int = 0  # how many folders above the module the runtime copy it imports is (0: beside it)

    @property
    def has_blocks(self) -> bool:
        """True if the emitted module calls the runtime (and needs it beside it)."""
        return bool(self.rewritten or self.already)


def _bound_names(tree: ast.Module, skip: Callable[[ast.AST], bool] = lambda node: False) -> set[str]:
    """Every name the module uses or binds (imports and classes included): generated names must avoid them.
    ``skip``: nodes not to count."""
    names = set()
    for node in walk(tree):
        if skip(node):
            continue
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _taken_names(module: StaticModule) -> set[str]:
    """``_bound_names`` of the user's code, plus what earlier runs' blocks define where the kernels are (not the
    generated kernels' own parameters and locals): the names a first run had taken by its end, so that a block
    generated again gets the names it had."""

    def generated(node: ast.AST) -> bool:
        return isinstance(node, Located) and module.generated(node)

    names = _bound_names(module.tree, generated)
    for node in module.nodes:
        if not (isinstance(node, ast.stmt) and generated(node)):
            continue
        scopes = module.scopes(node)
        if scopes and generated(scopes[0]):
            continue  # inside a generated kernel or helper
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _unbound_reads(tree: ast.Module) -> list[ast.Name]:
    """The reads of names the module never binds (Python's builtins and module attributes aside)."""
    reads: list[ast.Name] = []
    bound: set[str] = set(dir(builtins))
    for node in walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.append(node)
        elif isinstance(node, ast.Name):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return [node for node in reads if node.id not in bound and not node.id.startswith("__")]


def _only_read(tree: ast.Module) -> set[str]:
    """Names the module reads but never binds: a deleted block's ``launch_k`` still called by the rewritten
    call sites. A block generated again may define them."""
    return {node.id for node in _unbound_reads(tree)}


def _dangling(module: StaticModule) -> bool:
    """True if a generated block reads a name nothing binds: the shared helpers' block was deleted."""
    return any(module.generated(node) for node in _unbound_reads(module.tree))


@dataclass
class ModuleImports:
    """What the module lacks to run its generated blocks: an import of Warp, the import of the runtime."""

    warp: NewImport | None = None
    runtime: str = ""  # the text of runtime_import(), if the module has none


def _taken_in_project(module: StaticModule, project: Project) -> set[str]:
    """The names generated code must not take: those the module uses, and those bound in the files it reads."""
    taken = set().union(*(_bound_names(m.tree) for m in project.modules.values() if m is not None and m is not module))
    return taken | _taken_names(module)


def _frontends(
    module: StaticModule, project: Project, names: ModuleNames, taken: set[str]
) -> Callable[[ast.FunctionDef], StaticFrontend]:
    """The front end of each kernel of ``module``, made once."""
    made: dict[int, StaticFrontend] = {}

    def frontend(kernel: ast.FunctionDef) -> StaticFrontend:
        if id(kernel) not in made:
            made[id(kernel)] = StaticFrontend(module, project, kernel, names, taken)
        return made[id(kernel)]

    return frontend


def _any_to_rewrite(
    module: StaticModule, project: Project, finder: HazardFinder, runtime_up: int, config: LintConfig
) -> bool:
    """Does a kernel of ``module`` that has no block yet need one?"""
    taken = _taken_in_project(module, project)
    names, _ = _module_names(module, taken, runtime_up, config.line_length)
    return bool(choose_kernels(module, finder, _frontends(module, project, names, taken)).to_rewrite)


def _module_names(
    module: StaticModule, taken: set[str], up: int = 0, width: int = DEFAULT_LINE_LENGTH
) -> tuple[ModuleNames, ModuleImports]:
    """How the generated blocks name Warp and the runtime, and the imports the module lacks for them."""
    imports = ModuleImports()
    warp = min(module.warp.modules) if module.warp.modules else None
    if warp is None:
        warp = Namer(taken).fresh("wp")
        imports.warp = NewImport("warp", warp)
    name = next((local for local, source in module.imported.items() if _is_runtime(source)), None)
    if name is None:
        name = Namer(taken).fresh(RUNTIME_NAME)
        imports.runtime = runtime_import(name, up, width)
    taken |= {warp, name}
    return ModuleNames(warp, RuntimeNames.spelled(name)), imports


def _is_runtime(source: Imported) -> bool:
    """``import wp_rewrite_runtime`` or ``from . import wp_rewrite_runtime`` (also from further up)."""
    relative = source.level > 0 and not source.module and source.name == RUNTIME_NAME
    return source == Imported(0, RUNTIME_NAME, None) or relative


def runtime_import(name: str, up: int = 0, width: int = DEFAULT_LINE_LENGTH) -> str:
    """The import of the runtime copy, under ``name``, for a module ``up`` folders below the folder that holds the
    copy (0: beside it). Relative where the module is one of a package (also in a folder without ``__init__.py``
    inside one, as ``python -m pkg.sub.module`` runs it); run as a script (or imported as a top-level module) it
    imports the copy beside it, whose folder is then on ``sys.path``, or, from below, puts the copy's folder at the
    end of ``sys.path`` first (in lines of ``width``)."""
    alias = f" as {name}" if name != RUNTIME_NAME else ""
    if not up:
        return (
            _commented("if __package__:", f"{RUNTIME_FOLDER}/ is beside this file", width)
            + f"    from . import {RUNTIME_NAME}{alias}\n"
            "else:\n"
            f"    import {RUNTIME_NAME}{alias}\n"
        )
    above = "/".join([".."] * up)
    folder = f'str(__import__("pathlib").Path(__file__).resolve().parents[{up}])'
    append = f'    __import__("sys").path.append({folder})'
    if len(append) > width:  # as ruff format splits it
        append = f'    __import__("sys").path.append(\n        {folder}\n    )'
    return (
        _commented("if __package__:", f"{RUNTIME_FOLDER}/ is in the package's root folder, {above}/", width)
        + f"    from .{'.' * up} import {RUNTIME_NAME}{alias}\n"
        "else:  # run as a script\n"
        f"{append}\n"
        f"    import {RUNTIME_NAME}{alias}\n"
    )


def _commented(code: str, comment: str, width: int) -> str:
    """``code  # comment``, or the comment on a line of its own before it where that line would be too long (ruff
    format would break the code to make room)."""
    line = f"{code}  # {comment}"
    return line + "\n" if len(line) <= width else f"# {comment}\n{code}\n"


def runtime_level(module: StaticModule) -> int | None:
    """How many folders above the module the runtime copy is that it imports (0: beside it, its ``from .``
    import), or None if it imports none."""
    levels = [
        node.level - 1
        for node in module_level(module.tree)
        if isinstance(node, ast.ImportFrom)
        and not node.module
        and node.level
        and any(alias.name == RUNTIME_NAME for alias in node.names)
    ]
    if levels:
        return levels[0]
    imported = any(source == Imported(0, RUNTIME_NAME, None) for source in module.imported.values())
    return 0 if imported else None


@dataclass(frozen=True)
class LaunchNames:
    """The names a block binds for the kernel's launch."""

    rewritten: str  # <kernel>_rewritten: the RewrittenKernel; rewrite_<kernel>: the KernelRewrite of a plain function
    launch: str | None  # launch_<kernel>; in a function, <kernel>.launch (the function's <kernel> is rebound); None
    # for a plain function made a kernel by a call: the call is wrapped in rewrite_<kernel>(...) instead
    spec: str  # <kernel>_spec: the KernelSpec, a statement of its own
    detached_spec: str | None  # <kernel>_detached_spec: that of the variant recording float returns as constants


def _launch_names(
    kernel: str, taken: set[str], free: set[str], nested: bool, constructed: bool, detached: bool
) -> LaunchNames:
    """Fresh names for the kernel's RewrittenKernel and launch, or for the KernelRewrite of a plain function made
    a kernel by a call, and for their specs (``detached``: the block holds a detached variant); ``free``: taken names
    the block may define."""
    namer = Namer(taken - free)
    if constructed:
        rewritten, launch = namer.fresh(f"rewrite_{kernel}"), None
    else:
        rewritten = namer.fresh(f"{kernel}_rewritten")
        launch = f"{kernel}.launch" if nested else namer.fresh(f"launch_{kernel}")
    spec = namer.fresh(f"{kernel}_spec")
    names = LaunchNames(rewritten, launch, spec, namer.fresh(f"{kernel}_detached_spec") if detached else None)
    taken |= {name for name in (names.rewritten, names.launch, names.spec, names.detached_spec) if name is not None}
    return names


def _pair(generated: GeneratedKernel, spec: str, names: ModuleNames) -> str:
    """``KernelPair(...)``: the record and replay kernels, the spec and the count kernel, if any."""
    items = [generated.record_kernel, generated.replay_kernel, spec]
    items += [f"count={generated.count_kernel}"] if generated.count_kernel else []
    return f"{names.runtime.KernelPair}({', '.join(items)})"


def _rewritten_kernel(
    generated: GeneratedKernel,
    names: ModuleNames,
    launch: LaunchNames,
    max_records: int | None,
    rebind: bool,
    width: int,
    detached: tuple[GeneratedKernel, str] | None = None,
) -> str:
    """``<kernel>_rewritten = RewrittenKernel(<kernel>, KernelPair(...))`` on one line (``laid_out`` breaks it as
    ruff would), then (at module level) ``launch_<kernel> = <kernel>_rewritten.launch``, then ``<kernel> =
    <kernel>_rewritten``: every name of the kernel (aliases, default arguments, what a factory returns, what another
    module imports) is the rewritten kernel from then on, which ``wp.launch`` launches through the runtime's hook. For
    a plain function made a kernel by a call, ``rewrite_<kernel> = KernelRewrite(...)``, which that call is wrapped
    in. The specs are statements of their own, above."""
    kernel = generated.kernel
    arguments = [_pair(generated, launch.spec, names)]
    if launch.launch is not None:
        arguments.insert(0, kernel)
    if detached is not None:  # (``Block.detached``, and its spec's name) a lambda: broken here
        items = [detached[0].record_kernel, detached[0].replay_kernel, detached[1]]
        arguments.append(
            f"detached=lambda: {names.runtime.KernelPair}(\n" + "".join(f"        {i},\n" for i in items) + "    )"
        )
    arguments += [f"max_records={max_records}"] if max_records is not None else []
    made = f"{launch.rewritten} = {names.runtime.RewrittenKernel if launch.launch else names.runtime.KernelRewrite}("
    # one line, which laid_out breaks as ruff would; or, with a lambda, one item a line (kept so by a trailing comma)
    call = made + (", ".join(arguments) if detached is None else "\n" + "".join(f"    {a},\n" for a in arguments)) + ")"
    if launch.launch is None:
        wrapped = f"each call that makes {kernel} a kernel is wrapped in {launch.rewritten}(...)"
        return _commented(call, wrapped, width) if detached is None else f"# {wrapped}\n{call}\n"
    lines = [call + "\n"]
    if not rebind:
        lines.append(_commented(f"{launch.launch} = {launch.rewritten}.launch", "takes wp.launch's arguments", width))
    lines.append(
        _commented(f"{kernel} = {launch.rewritten}", f"every name of {kernel} now launches both phases", width)
    )
    return "".join(lines)


def generate(frontend: StaticFrontend, detach_returns: bool) -> tuple[GeneratedKernel, list[HelperImport]] | None:
    """What the pipeline makes of the frontend's kernel, and what the module must import for the helpers copied
    into it; None when the kernel has nothing to record (as when ``wp_rewrite`` leaves a kernel unchanged). Raises
    ``RewriteError``."""
    # max_records is the launches' default, not compiled in
    generated = pipeline.rewrite_kernel(frontend, RewriteOptions(None, detach_returns))
    if generated is None:
        return None
    imports = []
    for function in generated.plan.root.walk():
        unit = generated.source_unit(function.unit)
        assert isinstance(unit, StaticUnit)  # (the static front end's)
        imports += frontend.helper_imports(unit, function.clones)
    # Only what the copies still name: a name a helper's default uses is gone where each call passes its argument
    named = {node.id for node in walk(ast.parse(generated.source)) if isinstance(node, ast.Name)}
    return generated, [helper_import for helper_import in imports if helper_import.name in named]


def _takes_any_dtype(frontend: StaticFrontend, generated: GeneratedKernel) -> bool:
    """Does an atomic whose float returns get exact gradients act on an array of any dtype? A launch may pass ints,
    which a plain atomic serves (``wp_rewrite`` makes that variant from a launch's dtypes; the block holds it too)."""
    arrays = [array_at(frontend, generated.plan.narrowed, site.target) for site in generated.spec.sites if site.exact]
    return any(array is None or array.dtype is None or dtypes.is_generic(array.dtype) for array in arrays)


@dataclass
class Block:
    """A kernel's generated code, and where it goes."""

    kernel: ast.FunctionDef
    generated: GeneratedKernel
    launch: LaunchNames
    names: ModuleNames
    indent: str  # the kernel's own indentation
    nested: bool  # in a function: the function's name of the kernel is rebound
    made: MadeFrom  # what its fingerprint is of
    location: str  # the kernel's, in the input
    lint: LintConfig  # the user's: the line length and quotes of the generated lines
    end: int  # the input line after which the block goes: the kernel's last, or its overload stubs' (definition_end)
    # The variant recording float returns as constants (``_takes_any_dtype``, ``RewrittenKernel.detached``)
    detached: GeneratedKernel | None = None
    source: str = ""  # the generated definitions it holds (``shared_clones``: less those defined elsewhere)
    shared_specs: dict[tuple[str, Any], str] = field(default_factory=dict)  # (``SharedSpecValues.names``)

    @property
    def variants(self) -> list[GeneratedKernel]:
        """The kernel's generated code, then its detached variant's."""
        return [self.generated] + ([self.detached] if self.detached else [])

    @property
    def generated_source(self) -> str:
        """The pipeline's definitions for the block."""
        return "\n\n\n".join(variant.source.rstrip("\n") for variant in self.variants) + "\n"

    @property
    def specs(self) -> list[KernelSpec]:
        return [variant.spec for variant in self.variants]

    @property
    def kernels(self) -> set[str]:
        """The generated kernels' names (the other definitions are helpers' clones)."""
        names = [name for v in self.variants for name in (v.record_kernel, v.replay_kernel, v.count_kernel)]
        return {name for name in names if name}

    @property
    def gap(self) -> int:
        """Blank lines around the block: two at module level, one in a function, as formatters keep them."""
        return 1 if self.nested else 2

    def text(self, max_records: int | None, relocate: Relocation) -> str:
        """The block, fenced by its begin and end markers, indented as the kernel; ``relocate`` maps the
        locations in the launch spec to the emitted file's lines."""
        gap = "\n" * self.gap
        width = self.lint.line_length - len(self.indent)
        detached = None
        if self.detached is not None and self.launch.detached_spec is not None:
            detached = (self.detached, self.launch.detached_spec)
        spec_lines = "".join(
            self._spec_statement(name, variant.spec, relocate, width) + "\n"
            for variant, name in [(self.generated, self.launch.spec), *([detached] if detached else [])]
        )
        launch = _rewritten_kernel(self.generated, self.names, self.launch, max_records, self.nested, width, detached)
        definitions = self.source or self.generated_source
        # Two blank lines after a definition (its last line is indented), as formatters keep them; none between the
        # block's statements (a statement at column 0 ends at column 0)
        after = gap if definitions.rstrip("\n").rpartition("\n")[2][:1].isspace() else ""
        name, made = self.kernel.name, self.made
        header = begin_marker(name, made.fingerprint, made.options) + self._abi_check(relocate)
        header += self._fingerprint_check() + gap
        block = header + definitions + after + spec_lines + launch + end_marker(name)
        laid = laid_out(quoted(block, self.lint.quote_style), self.indent, self.lint.line_length)
        return indent_block(laid, self.indent, self.nested)

    def _spec_statement(self, name: str, spec: runtime.KernelSpec, relocate: Relocation, width: int) -> str:
        """``name = KernelSpec(...)``; where even its first line, ``name = ...KernelSpec(``, is too long, the call in
        parentheses a level in, as ruff lays out such a right-hand side, but only where every line then fits (a name
        so long that the spec's own first argument, a level further in, does not)."""
        literal = spec_literal(spec, self.names, "", relocate, width, len(name) + 3, shared=self.shared_specs)
        if len(name) + 3 + len(literal.partition("\n")[0]) <= width:
            return f"{name} = {literal}"
        inner = spec_literal(spec, self.names, "    ", relocate, width, 0, shared=self.shared_specs)
        parenthesized = f"{name} = (\n    {inner}\n)"
        if any(len(line) > width for line in parenthesized.splitlines()):
            return f"{name} = {literal}"
        return parenthesized

    def _abi_check(self, relocate: Relocation) -> str:
        """The first line, before any of the ABI's names is evaluated: the runtime imported is the one this was
        generated for. On one line where it fits with a line number of ``LINE_DIGITS`` digits in its location; else
        its arguments on a line of their own where they fit so and ruff could not join them whatever the line number;
        else one argument a line (kept so by the trailing comma): so that its lines do not depend on the line number,
        which ``relocate`` changes."""
        location = relocate(self.generated.spec.location)
        arguments = [str(runtime.ABI), json.dumps(self.generated.kernel), json.dumps(location)]
        flat = f"{self.names.runtime.require_abi}({', '.join(arguments)})"
        width, indent = self.lint.line_length, len(self.indent)
        if indent + relocate.widest(flat) <= width:
            return flat + "\n"
        joined = ", ".join(arguments)
        if relocate.on_arguments_line(flat, joined, indent, indent + 4, width):
            return f"{self.names.runtime.require_abi}(\n    {joined}\n)\n"
        return f"{self.names.runtime.require_abi}(\n" + "".join(f"    {item},\n" for item in arguments) + ")\n"

    def _fingerprint_check(self) -> str:
        """The second line: the kernel and the helpers it reads are what the block was generated from
        (``check_fingerprint``)."""
        made, functions = self.made, (self.kernel.name, *self.made.named)
        arguments = [json.dumps(made.fingerprint), f"({', '.join(functions)}{',' * (len(functions) == 1)})"]
        arguments += [f"elsewhere={json.dumps(made.elsewhere)}"] if made.elsewhere != NOTHING_ELSEWHERE else []
        arguments += [f"options={json.dumps(made.options)}"] if made.options else []
        return f"{self.names.runtime.check_fingerprint}({', '.join(arguments)})\n"  # (laid out with the block)

    def insertion(self, lines: list[str], text: str) -> tuple[int, str]:
        """(input line after which, text) that puts the block after the kernel with ``gap`` blank lines before
        and after it, counting those already there: so that deleting a block from its begin marker to its end
        marker and running again gives back the same file."""
        after, blank = self.end, 0
        while after + blank < len(lines) and not lines[after + blank].strip():
            blank += 1
        before = min(blank, self.gap)
        followed = after + blank < len(lines)
        trailing = max(0, self.gap - (blank - before)) if followed else 0
        return after + before, "\n" * (self.gap - before) + text + "\n" * trailing


def indent_block(text: str, indent: str, nested: bool) -> str:
    """``text`` with every line indented by ``indent`` but the lines inside a string; blank lines stay empty and,
    ``nested`` in a function, come one at a time (as formatters keep them there)."""
    inside_strings = string_lines(text)
    lines, previous_blank = [], False
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if number in inside_strings:
            lines.append(line)
            previous_blank = False
        elif not line.strip():
            if not (nested and previous_blank):
                lines.append("\n")
            previous_blank = True
        else:
            lines.append(indent + line)
            previous_blank = False
    return "".join(lines)


def emit_module(
    path: Path,
    display: str,
    text: str,
    project: Project | None = None,
    max_records: int | None = None,
    detach_returns: bool = False,
    folder: Path | None = None,
    name: str | None = None,
    runtime_up: int = 0,
) -> Emitted:
    """``text`` with each kernel's generated block inserted after it and its launches rewritten; raises
    ``ParseError``. Kernels the rewrite cannot handle are left as they are, their ``RewriteError`` in
    ``refusals``.

    ``max_records`` and ``detach_returns`` have the meaning of ``wp_rewrite``'s options (``max_records`` is the
    launches' default, which each launch may change). ``folder`` and ``name``: where the module is written
    (default: ``path``), which decides where an import of Warp it lacks goes (isort's first-party modules) and how
    the launch spec names locations. ``runtime_up``: how many folders above ``folder`` the runtime copy is that the
    module is to import, if it imports none yet (``Emitted.runtime_up`` says which it imports).
    """
    project = project or Project()
    folder = folder if folder is not None else path.parent
    original = text
    if text and not text.endswith(("\n", "\r")):  # a last line without its line ending gets one
        text += "\r\n" if "\r\n" in text else "\n"
    options = option_flags(max_records, detach_returns)
    config = LintConfig.for_folder(folder.resolve())
    module = StaticModule.parse(path, display, text)
    project.modules.setdefault(path.resolve(), module)
    finder = HazardFinder(project)  # also loads the files the kernels' helpers come from
    regenerated = stale_kernels(module, finder, options)
    current: list[str] = []  # kernels whose blocks were current, made again with the others
    if module.regions and (
        regenerated or _any_to_rewrite(module, project, finder, runtime_up, config) or _dangling(module)
    ):
        # Blocks share their helpers' clones (``shared_clones``): where one block is made, all are, as a first run
        # makes them (as if the user had deleted them: the next steps bring them back, under the names they had).
        current = [k.name for k in module.kernels() if module.region_of(k) is not None and k not in regenerated]
        original = text = without_regions(module, module.regions)
        module = StaticModule.parse(path, display, text)
        project.modules[path.resolve()] = module
        finder = HazardFinder(project)
    taken = _taken_in_project(module, project)
    free = _only_read(module.tree)
    names, imports = _module_names(module, taken, runtime_up, config.line_length)
    frontend = _frontends(module, project, names, taken)
    choice = choose_kernels(module, finder, frontend)
    emitted = Emitted(
        original,
        refusals=[refusal for refusal in choice.refusals if not isinstance(refusal, LeftToWarp)],
        left=[refusal for refusal in choice.refusals if isinstance(refusal, LeftToWarp)],
        warnings=choice.warnings,
        already=[k.name for k in choice.already] + current,
        regenerated=[k.name for k in regenerated],
    )
    imported = runtime_level(module)
    emitted.runtime_up = runtime_up if imported is None else imported
    offsets = Offsets(module)
    launches = {id(k): given for k in choice.already if (given := module.launch_name(k))}
    blocks, helper_imports = [], []
    wrappers = {id(k): given for k in choice.already if (given := module.rewrite_name(k))}
    for kernel in choice.to_rewrite:
        nested = bool(module.scopes(kernel))
        constructed = module.constructed(kernel)
        try:
            made = generate(frontend(kernel), detach_returns)
        except LeftToWarp as left:
            emitted.left.append(left)
            continue
        except RewriteError as error:  # (a helper the block cannot copy, too: left to Warp as the pipeline's are)
            if pipeline.consumes_returns(frontend(kernel)):
                emitted.refusals.append(error)
            else:
                emitted.left.append(LeftToWarp(error.kernel, error.location, error.problem, error.advice))
            continue
        if made is None:
            continue
        generated, needed = made
        helper_imports += needed
        detached = None
        if not detach_returns and _takes_any_dtype(frontend(kernel), generated):
            made = generate(frontend(kernel), True)
            assert made is not None  # (the same atomics, their returns recorded as constants)
            detached, needed = made
            helper_imports += needed
        launch = _launch_names(kernel.name, taken, free, nested, constructed, detached is not None)
        line = module.lines[kernel.lineno - 1]
        indent, origin = line[: len(line) - len(line.lstrip())], made_from(module, kernel, finder, options)
        location = module.location(kernel)
        end = module.definition_end(kernel)
        blocks.append(Block(kernel, generated, launch, names, indent, nested, origin, location, config, end, detached))
        if constructed:
            wrappers[id(kernel)] = launch.rewritten
            emitted.warnings += [
                warning(
                    module,
                    use,
                    f"kernel '{kernel.name}' is a plain function named here, where "
                    "wp-rewrite cannot tell whether a kernel is made of it: one made through "
                    "here launches the original, whose gradients are wrong",
                )
                for use in module.other_uses(kernel)
            ]
        elif launch.launch is not None:  # (a kernel that is not constructed has a launch)
            launches[id(kernel)] = launch.launch
        if kernel.name not in current:
            emitted.rewritten.append(kernel.name)
    emitted.warnings += [
        warning(
            module,
            kernel,
            f"kernel '{kernel.name}' no longer uses an atomic's returned value: its stale block "
            f"is removed; calls of the rewritten launch it defined must go back to wp.launch({kernel.name}, ...)",
        )
        for kernel in module.kernels()
        if kernel.name in emitted.regenerated
        and kernel.name not in emitted.rewritten
        and not any(refusal.kernel == kernel.name for refusal in emitted.refusals)
    ]
    helper_lines = helper_import_lines(module, helper_imports, config, Sections.for_folder(folder, config))
    inserted, merged = list(helper_lines.added), helper_lines.merged  # added: (input line after which, text)
    elsewhere = {m.display: import_path(m.path) for m in project.modules.values() if m is not None}
    renamed = Relocation(module.display, name or path.name, [], elsewhere)  # the lines as they are
    helper_names = {i.name for i in helper_imports}
    shared = _shared_clones(module, blocks, names, helper_names, config, renamed) if blocks else None
    at_shared = len(inserted)
    inserted += [shared.insertion(renamed)] if shared else []
    if (blocks or emitted.already) and imports.warp:
        inserted.append(placement(module.tree, module.lines, imports.warp, Sections.for_folder(folder, config)))
    if (blocks or emitted.already) and imports.runtime:
        inserted.append(after_imports(module.tree, module.lines, quoted(imports.runtime, config.quote_style)))
    unplaced = [block.insertion(module.lines, block.text(max_records, renamed)) for block in blocks]
    # A merged import that takes more lines than before moves the lines after it as an insertion there would.
    grown = [(end_line(node), "\n" * (text.count("\n") - (end_line(node) - node.lineno + 1))) for node, text in merged]
    relocate = Relocation(module.display, name or path.name, inserted + grown + unplaced, elsewhere)
    inserted[at_shared : at_shared + bool(shared)] = [shared.insertion(relocate)] if shared else []
    inserted += [block.insertion(module.lines, block.text(max_records, relocate)) for block in blocks]
    edits = [Edit(offsets.line_start(at + 1), offsets.line_start(at + 1), added) for at, added in inserted]
    edits += [
        Edit(offsets.line_start(node.lineno), offsets.line_start(end_line(node) + 1), text) for node, text in merged
    ]
    calls, kept = launch_edits(module, launches, offsets)
    emitted.warnings += [warning(module, call, why) for call, why in kept]
    emitted.launches = len(calls)
    edits += [edit for pair in calls for edit in pair]
    wrapped = construction_edits(module, wrappers, offsets)
    emitted.constructions = len(wrapped)
    edits += [edit for pair in wrapped for edit in pair]
    if edits:
        emitted.text = apply_edits(text, edits)
    return emitted


@dataclass
class SharedBlock:
    """The module-level block of what the blocks share: helpers' clones, and spec values (``SharedSpecValues``)."""

    at: int  # the input line before the first top-level statement holding a block that uses it
    blank: int  # the blank lines above that statement
    clones: str  # the shared definitions, at column 0
    specs: SharedSpecValues
    names: ModuleNames
    config: LintConfig

    def insertion(self, relocate: Relocation) -> tuple[int, str]:
        """(input line after which, text), with two blank lines on each side, counting those there (as
        ``Block.insertion``): the file a first run makes."""
        begin, end = shared_markers()
        values = self.specs.definitions(self.names, relocate, self.config.line_length)
        text = begin + "\n\n" + self.clones.rstrip("\n") + "\n\n\n" + (values + "\n\n\n" if values else "") + end
        laid = laid_out(quoted(text, self.config.quote_style), "", self.config.line_length)
        before = min(self.blank, 2)
        return self.at - self.blank + before, "\n" * (2 - before) + laid + "\n" * max(0, 2 - (self.blank - before))


def _shared_clones(
    module: StaticModule,
    blocks: list[Block],
    names: ModuleNames,
    imported: set[str],
    config: LintConfig,
    relocate: Relocation,
) -> SharedBlock | None:
    """One definition per variant of the blocks' cloned helpers (``shared_clones``), per family of phases (``weave``)
    and per spec value blocks after the shared ones hold alike (``SharedSpecValues``): each block's source, and the
    module-level block of the shared ones, if any. ``relocate``: where the spec values' locations go, to measure them
    as they are written (the lines they move by are not known yet: they do not change a layout)."""
    bound = {names.warp, names.runtime.alias, *imported}
    kernels = [block.kernels for block in blocks]
    sharing = share(module, [b.kernel for b in blocks], [b.generated_source for b in blocks], kernels, bound)
    namer = Namer(_taken_names(module))
    widths = [config.line_length - len(block.indent) for block in blocks]
    sources, shared = woven_sources(sharing.sources, widths, sharing.shared, namer, names.warp, config.line_length)
    for block, source in zip(blocks, sources, strict=True):
        block.source = source
    if sharing.before is None:
        return None
    at = min([sharing.before.lineno, *(d.lineno for d in getattr(sharing.before, "decorator_list", []))]) - 1
    while at > 0 and module.lines[at - 1].lstrip().startswith("#"):
        at -= 1  # the comments above the statement stay with it
    blank = 0
    while at - blank > 0 and not module.lines[at - blank - 1].strip():
        blank += 1
    after = [block for block in blocks if top_statement(module, block.kernel).lineno > at]  # (defined by then)

    deepest = max((len(block.indent) for block in after), default=0)

    def long(field: str, value: Any) -> bool:
        """Whether the value takes more than a line where a spec holds it (``field=value,`` in the most indented
        block): a value on one line there costs no more than its name."""
        return "\n" in spec_literal(value, names, "    ", relocate, config.line_length - deepest, len(field) + 2)

    specs = SharedSpecValues.of([(b.kernel.name, b.specs) for b in after], namer, long)
    for block in after:
        block.shared_specs = specs.names
    return SharedBlock(at, blank, shared, specs, names, config)


def stale_kernels(module: StaticModule, finder: HazardFinder, options: str) -> list[ast.FunctionDef]:
    """The kernels whose block an earlier run generated from other source or options than this run has."""
    return [
        kernel
        for kernel in module.kernels()
        if (region := module.region_of(kernel)) is not None and stale(module, kernel, region, finder, options)
    ]


def without_regions(module: StaticModule, regions: list[Region]) -> str:
    """The module's text without the given blocks, each from its begin marker to its end marker."""
    dropped = {number for region in regions for number in range(region.first, region.last + 1)}
    return "".join(line for number, line in enumerate(module.lines, start=1) if number not in dropped)
