"""Launch specs as generated code spells them: the runtime's dataclasses as calls, laid out as ruff lays them out,
their locations in the emitted file moved to where its lines land (``Relocation``), and the field values several of
a file's specs hold named once (``SharedSpecValues``)."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.two_phase import ModuleNames
from warp_rewrite.runtime.specs import KernelSpec, LoopSpec, RecordSpec, SiteSpec

LINE_DIGITS = 7  # the most digits a line number has, for layouts that must not depend on it


@dataclass(frozen=True)
class Relocation:
    """Maps ``display:line:col`` of the input to ``name:line:col`` in the emitted file, where ``inserted`` (after
    which input line, what text) has moved the lines down, and a location in another file (a helper's) to its path
    in ``elsewhere`` (``import_path``): nothing generated depends on the working directory."""

    display: str
    name: str
    inserted: list[tuple[int, str]]
    elsewhere: dict[str, str]

    def __call__(self, location: str) -> str:
        path, line, column = location.rsplit(":", 2)
        if path != self.display:
            return f"{self.elsewhere.get(path, path)}:{line}:{column}"
        moved = sum(text.count("\n") for after, text in self.inserted if after < int(line))
        return f"{self.name}:{int(line) + moved}:{column}"

    def in_spec(self, location: str) -> str:
        """A site's or loop's location as its launch spec spells it: ``line:col`` where it is in the emitted file,
        which the spec's own location names (``KernelSpec`` completes it), else whole."""
        moved = self(location)
        path, line, column = moved.rsplit(":", 2)
        return f"{line}:{column}" if path == self.name else moved

    @functools.cached_property
    def _own_line(self) -> re.Pattern[str]:
        """The line number of a location of the emitted file in a string literal: ``"name:line:col"``, or
        ``"line:col"`` in a launch spec (``in_spec``)."""
        return re.compile(rf'("(?:{re.escape(self.name)}:)?)\d+(:\d+")')

    def widest(self, text: str) -> int:
        """The length of ``text`` once each location of the emitted file in it has a line number of ``LINE_DIGITS``
        digits: what a layout that must not depend on the lines inserted measures."""
        return len(self._own_line.sub(lambda found: found[1] + "9" * LINE_DIGITS + found[2], text))

    def joinable(self, text: str, around: int, width: int) -> bool:
        """Whether ruff might join ``text`` onto one line of ``width`` (``around`` other characters on it): with the
        line numbers its locations in the emitted file get, which may have as few as one digit. Where it might, a
        layout that must not depend on them takes one item a line, which the trailing comma keeps so."""
        return around + len(self._own_line.sub(lambda found: found[1] + "1" + found[2], text)) <= width

    def on_arguments_line(self, flat: str, arguments: str, around: int, inner: int, width: int) -> bool:
        """Whether a call too long for one line (``flat``, ``around`` other characters on its line) takes its
        ``arguments`` on a line of their own, ``inner`` columns in: where they fit there with their line numbers at
        their widest, and ruff could not join the call onto one line whatever those numbers are."""
        return not self.joinable(flat, around, width) and inner + self.widest(arguments) <= width


def spec_literal(
    value: Any,
    names: ModuleNames,
    indent: str,
    relocate: Relocation,
    width: int,
    around: int = 1,
    expanded: bool = False,
    shared: Mapping[tuple[str, Any], str] | None = None,
) -> str:
    """Source text that makes ``value`` (a launch spec: the runtime's dataclasses, tuples, Warp types, constants),
    laid out as ruff lays it out where one line would be too long for lines of ``width`` (its line is ``indent``,
    ``around`` other characters, a field's name and the comma after it, and the value): a call's arguments on a line
    of their own where they fit, else one item a line. A spec's fields without a default go by position, the others
    by name; a record and a site are calls of their kind and op (``RecordKind.CARRIED("x_in_loop0", dtype=...)``,
    ``Op.READ("state.count", "f.py:12:9")``). Lengths are measured with each location in the emitted file at its
    widest (``Relocation.widest``), so that the number of lines does not depend on its line numbers, which
    ``relocate`` changes. ``expanded``: one item a line, whatever fits. ``shared``: a launch spec's field values the
    file names once (``SharedSpecValues``), by field and value: the name stands for the value."""
    inner = indent + "    "
    if dataclasses.is_dataclass(value):
        fields = [f for f in dataclasses.fields(value) if f.default is dataclasses.MISSING]
        fields += [f for f in dataclasses.fields(value) if f not in fields and getattr(value, f.name) != f.default]
        located = isinstance(value, SiteSpec | LoopSpec | KernelSpec)
        relocated = relocate.in_spec if isinstance(value, SiteSpec | LoopSpec) else relocate  # (those: "line:col")
        items = [
            ("" if f.default is dataclasses.MISSING else f"{f.name}=")
            + (
                json.dumps(relocated(getattr(value, f.name)))
                if located and f.name == "location"
                else (shared or {}).get((f.name, getattr(value, f.name)))
                or spec_literal(getattr(value, f.name), names, inner, relocate, width, len(f.name) + 2)
            )
            for f in fields
        ]
        opening, closing = f"{names.runtime.named(type(value).__name__)}(", ")"
        if isinstance(value, (RecordSpec, SiteSpec)):  # the call of its kind or op, which comes second
            kind = value.kind if isinstance(value, RecordSpec) else value.op
            opening = f"{names.runtime.named(type(kind).__name__)}.{kind.name}("
            del items[1]
    elif isinstance(value, enum.Enum):  # the ABI's Op and RecordKind
        return f"{names.runtime.named(type(value).__name__)}.{value.name}"
    elif isinstance(value, tuple):
        items = [spec_literal(item, names, inner, relocate, width) for item in value]
        opening, closing = "(", ",)" if len(value) == 1 else ")"
    elif isinstance(value, type):
        spelled = dtypes.source(value, names.warp)
        assert spelled is not None  # (a record's dtype is one generated code can name)
        return spelled
    else:
        return json.dumps(value) if isinstance(value, str) else repr(value)  # strings in double quotes
    flat = opening + ", ".join(items) + closing
    widest = relocate.widest(flat)
    if len(indent) + around + widest <= width and "\n" not in flat and not expanded:
        return flat
    if isinstance(value, tuple) and len(value) == 1 and relocate.joinable(flat, len(indent) + around, width):
        # The comma of a tuple of one is no trailing comma to ruff: its item one item a line too.
        items = [spec_literal(value[0], names, inner, relocate, width, expanded=True)]
    arguments = ", ".join(items)  # a call's arguments on a line of their own, where they fit (as ruff does)
    if (
        not isinstance(value, tuple)
        and not expanded
        and "\n" not in arguments
        and relocate.on_arguments_line(flat, arguments, len(indent) + around, len(inner), width)
    ):
        return f"{opening}\n{inner}{arguments}\n{indent}{closing}"
    return opening + "\n" + "".join(f"{inner}{item},\n" for item in items) + indent + closing.lstrip(",")


SHAREABLE = ("written", "copied", "sites", "records", "loops")  # the fields a spec takes from the code it launches


@dataclass
class SharedSpecValues:
    """The launch specs' field values that several blocks of a file hold and that take more than a line: each is
    defined once, beside the helpers the blocks share, named after the first kernel whose spec holds it
    (``store_contact_kernel_sites``); the specs name it. Kernels that call the same helper and nothing else that
    records (a test file's many small kernels through one library helper) have the same sites, records and loops."""

    names: dict[tuple[str, Any], str] = dataclasses.field(default_factory=dict)  # (field, value): its name

    @classmethod
    def of(
        cls, specs: list[tuple[str, list[KernelSpec]]], namer: Namer, long: Callable[[str, Any], bool]
    ) -> SharedSpecValues:
        """``specs``: each block's kernel and the specs it holds; ``long``: whether a (field, value) takes more than
        a line in a spec."""
        held = Counter(
            pair for _, block in specs for pair in {(name, getattr(spec, name)) for spec in block for name in SHAREABLE}
        )
        shared = cls()
        for kernel, block in specs:
            for spec in block:
                for name in SHAREABLE:
                    pair = (name, getattr(spec, name))
                    if held[pair] > 1 and pair not in shared.names and long(name, pair[1]):
                        shared.names[pair] = namer.fresh(f"{kernel}_{name}")
        return shared

    def definitions(self, names: ModuleNames, relocate: Relocation, width: int) -> str:
        """``name = value`` for each, at module level."""
        return "\n".join(
            f"{name} = {spec_literal(value, names, '', relocate, width, len(name) + 3)}"
            for (_, value), name in self.names.items()
        )
