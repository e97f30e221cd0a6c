"""The comments that fence a generated block, written by ``wp-rewrite`` and read back by every later run: the one
place their text is spelled. The begin marker carries the block's fingerprint (``warp_rewrite.runtime.fingerprints``)
and the options it was generated with, so that a later run can tell a block made from other source. The block of
the helper clones several blocks share has markers of its own, and no fingerprint: it is made again with them."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIX = "# ---- wp-rewrite: "
_BEGIN = _PREFIX + "generated from kernel '{kernel}' above (fingerprint {fingerprint}{options}) ----\n"
_NOTE = "# Do not edit: run wp-rewrite again after changing the kernel or its helpers.\n"  # (77 characters)
_END = _PREFIX + "end of the code generated from kernel '{kernel}' ----\n"
# An earlier version's begin marker has no fingerprint: its block counts as stale.
_BEGIN_RE = re.compile(
    r"^[ \t]*" + re.escape(_PREFIX) + r"generated from kernel '(?P<kernel>\w+)' above"
    r"(?: \(fingerprint (?P<fingerprint>[0-9a-f]+)(?:, options (?P<options>[^)]*))?\))?"
)
_END_RE = re.compile(r"^[ \t]*" + re.escape(_PREFIX) + r"end of the code generated from kernel '(?P<kernel>\w+)'")
# The block of the helper clones several blocks share (``warp_rewrite.cli.shared_clones``): a region of no kernel.
SHARED = ""
_SHARED_BEGIN = _PREFIX + "helpers the generated blocks below share ----\n"
_SHARED_NOTE = "# Do not edit: wp-rewrite makes this block again with the blocks that use it.\n"
_SHARED_END = _PREFIX + "end of the helpers the generated blocks below share ----\n"


def begin_marker(kernel: str, fingerprint: str, options: str) -> str:
    """The comment lines a block starts with; ``options``: its command-line flags ('' for the defaults)."""
    shown = f", options {options}" if options else ""
    return _BEGIN.format(kernel=kernel, fingerprint=fingerprint, options=shown) + _NOTE


def shared_markers() -> tuple[str, str]:
    """The lines the block of shared helper clones starts and ends with."""
    return _SHARED_BEGIN + _SHARED_NOTE, _SHARED_END


def end_marker(kernel: str) -> str:
    return _END.format(kernel=kernel)


@dataclass(frozen=True)
class Begin:
    """What a begin marker says."""

    kernel: str
    fingerprint: str | None  # None: written by a version without fingerprints
    options: str


def has_markers(text: str) -> bool:
    """False for a text without any marker line (most files): no need to read it line by line."""
    return _PREFIX in text


def read_begin(line: str) -> Begin | None:
    """What a begin marker says (the shared block's: of the kernel ``SHARED``), or None for any other line."""
    if line.strip() == _SHARED_BEGIN.strip():
        return Begin(SHARED, None, "")
    match = _BEGIN_RE.match(line)
    if match is None:
        return None
    return Begin(match["kernel"], match["fingerprint"], match["options"] or "")


def read_end(line: str) -> str | None:
    """The kernel an end marker names (``SHARED`` for the shared block's), or None for any other line."""
    if line.strip() == _SHARED_END.strip():
        return SHARED
    match = _END_RE.match(line)
    return match["kernel"] if match else None
