"""What a kernel's generated block is made from, read from the source alone: the text behind its fingerprint
(``warp_rewrite.runtime.fingerprints``, which hashes it), so that a rewrite regenerates a stale block and ``--check``
reports one (WR006)."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from types import ModuleType

from warp_rewrite.cli.hazards import HazardFinder, ReachedHelper
from warp_rewrite.cli.project import Unfollowed
from warp_rewrite.cli.source_file import Region
from warp_rewrite.cli.static_module import StaticModule


def _fingerprints() -> ModuleType:
    """The runtime's ``fingerprints``, imported where a generated block is checked: the runtime package imports
    Warp (about a second), which ``--check`` does not need for files without generated blocks."""
    from warp_rewrite.runtime import fingerprints

    return fingerprints


def definition_source(module: StaticModule, definition: ast.FunctionDef) -> str:
    """A function's text from its first decorator on, as ``inspect.getsource`` reads it once the file runs."""
    first = min([node.lineno for node in definition.decorator_list] + [definition.lineno])
    lines = [line.replace("\r\n", "\n").replace("\r", "\n") for line in module.lines[first - 1 :]]
    return "".join(inspect.getblock(lines))


@dataclass(frozen=True)
class MadeFrom:
    """A block's inputs: its options, the kernel's source and its helpers'. ``named``: the helpers of the kernel's
    file the block can name (defined before the kernel, bound to that name where it is), then the other names the
    kernel calls a helper through (``put = put_square``, bound before the kernel), each with the source of the
    helper the rewrite took it for: its import-time check reads them again, so that a name bound otherwise when the
    module runs stops the import rather than launch a clone of another helper. The others' sources (other files,
    class members) are in ``elsewhere``, a digest."""

    options: str
    sources: tuple[str, ...]  # the kernel's, then those of the named helpers and of the helpers the aliases name
    named: tuple[str, ...]
    elsewhere: str

    @property
    def fingerprint(self) -> str:
        return _fingerprints().fingerprint(self.options, self.sources, self.elsewhere)


def made_from(module: StaticModule, kernel: ast.FunctionDef, finder: HazardFinder, options: str) -> MadeFrom:
    """What the block of ``kernel`` is made from with the given options (command-line flags).

    Nothing of it depends on how the files were named or found (relative or absolute paths, the working directory,
    which file was read first): the named helpers are in the order of their lines, the others' sources in the order
    of their text."""
    calls = finder.kernel_calls(module, kernel)
    helpers = calls.reached.values()
    named = sorted((h for h in helpers if _nameable(module, kernel, h)), key=lambda h: h.definition.lineno)
    others = sorted(definition_source(h.module, h.definition) for h in helpers if all(h is not n for n in named))
    aliases = sorted(alias for alias in calls.aliases if _alias_bound_before(module, kernel, alias))
    return MadeFrom(
        options,
        (
            definition_source(module, kernel),
            *(definition_source(module, h.definition) for h in named),
            *(definition_source(calls.aliases[a].module, calls.aliases[a].definition) for a in aliases),
        ),
        (*(h.definition.name for h in named), *aliases),
        _fingerprints().digest(others),
    )


def _alias_bound_before(module: StaticModule, kernel: ast.FunctionDef, alias: str) -> bool:
    """True if ``alias`` is bound to another name (``put = put_square``) before ``kernel``, where the block after
    the kernel can name it."""
    bound = module.binding(alias, module.scopes(kernel))
    return isinstance(bound, ast.Name) and bound.lineno < kernel.lineno


def _nameable(module: StaticModule, kernel: ast.FunctionDef, helper: ReachedHelper) -> bool:
    """True if the block after ``kernel`` can name ``helper`` by its own name when it runs."""
    definition = helper.definition
    if helper.module.path.resolve() != module.path.resolve() or definition.lineno >= kernel.lineno:
        return False
    bound = module.binding(definition.name, module.scopes(kernel))
    return isinstance(bound, ast.FunctionDef) and (bound.lineno, bound.col_offset) == (
        definition.lineno,
        definition.col_offset,
    )


def stale(module: StaticModule, kernel: ast.FunctionDef, region: Region, finder: HazardFinder, options: str) -> bool:
    """True if ``region``, the block an earlier run generated for ``kernel``, was made from other source or
    options than ``options`` and the file as it is now. Where a helper's file is not found now, the helpers in
    other files are taken as the block has them (its ``elsewhere``): only what can be read is compared."""
    if region.fingerprint is None:
        return True
    made = made_from(module, kernel, finder, options)
    if made.fingerprint == region.fingerprint:
        return False
    if not any(isinstance(unknown.miss, Unfollowed) for unknown in finder.kernel_calls(module, kernel).unknown):
        return True
    stored = _stored_elsewhere(module, region)
    return stored is None or _fingerprints().fingerprint(options, made.sources, stored) != region.fingerprint


def _stored_elsewhere(module: StaticModule, region: Region) -> str | None:
    """The ``elsewhere`` digest the block's ``check_fingerprint(...)`` call carries."""
    for node in module.nodes:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == _fingerprints().check_fingerprint.__name__
            and region.first <= node.lineno <= region.last
        ):
            value = next((k.value for k in node.keywords if k.arg == "elsewhere"), None)
            if value is None:  # (left out where no helper is in another file)
                return str(_fingerprints().NOTHING_ELSEWHERE)
            return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
    return None


def option_flags(max_records: int | None, detach_returns: bool) -> str:
    """The options a block is generated with, as the command-line flags that give them ('' for the defaults)."""
    flags = [f"--max-records {max_records}"] if max_records is not None else []
    return " ".join(flags + (["--detach-returns"] if detach_returns else []))
