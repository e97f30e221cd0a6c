# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""What a generated block was made from, as one short hash: so that a block whose kernel changed since is found.

``wp-rewrite`` writes the fingerprint into the block's begin marker and compares it on every run (``--check``:
WR006; a rewrite regenerates the block). The block itself calls ``check_fingerprint`` first thing, at import, on the
source text the module already holds (Warp has read it for the kernel anyway): a kernel edited without re-running
``wp-rewrite`` stops the import with a ``RewriteError`` instead of launching the old generated kernels. Both sides
hash the same text, each function's lines as ``inspect.getsource`` gives them.
"""

import hashlib
import inspect
from collections.abc import Sequence
from typing import Any

from .errors import RewriteError

LENGTH = 16  # hex digits kept: 64 bits, short enough for a marker line


def _canonical(source: str) -> str:
    """The text hashed: line endings as Python reads them (``\\r\\n`` and ``\\r`` become ``\\n``)."""
    return source.replace("\r\n", "\n").replace("\r", "\n")


def digest(sources: Sequence[str]) -> str:
    """The hash of some functions' source texts, in order."""
    hashed = hashlib.sha256()
    for source in sources:
        text = _canonical(source).encode()
        hashed.update(b"%d\n" % len(text) + text)
    return hashed.hexdigest()[:LENGTH]


def fingerprint(options: str, sources: Sequence[str], elsewhere: str) -> str:
    """The fingerprint of a block: its options (as command-line flags), the source of its kernel and of the
    helpers in its file that the block can name (``sources``, kernel first), and ``elsewhere``, the ``digest`` of
    its other helpers' sources (in other files), which the import-time check takes as given."""
    return digest([options, *sources, elsewhere])


def source_of(function: Any) -> str:
    """A kernel's, helper's or plain function's source, decorators included, as ``inspect.getsource`` reads it."""
    return inspect.getsource(_plain(function))  # (the latest definition of an overloaded one)


NOTHING_ELSEWHERE = digest([])  # the ``elsewhere`` of a block whose helpers are all in its own file


def check_fingerprint(
    expected: str, functions: Sequence[Any], elsewhere: str = NOTHING_ELSEWHERE, options: str = ""
) -> None:
    """Raise ``RewriteError`` if the block generated for the kernel ``functions[0]`` was made from other source than
    the module now has: ``functions`` are the kernel and the helpers of its file the block names; ``elsewhere`` the
    digest of its other helpers' sources; ``options`` the command-line flags it was generated with (generated code
    leaves out the defaults). The kernel's name and place, for the message, are read off the kernel: so that the
    call, which runs first in every block, takes a line."""
    try:
        sources = [source_of(function) for function in functions]
    except (OSError, TypeError):  # no source to read (Warp needs it too, and says so when the kernel builds)
        return
    if fingerprint(options, sources, elsewhere) != expected:
        kernel = _plain(functions[0])
        raise RewriteError(
            kernel.__name__,
            _definition_location(kernel),
            "the kernel or a helper it calls changed since wp-rewrite generated the code below it "
            "(its fingerprint differs), which would launch the old kernel",
            "Regenerate the block: re-run wp-rewrite on this file (wp-rewrite FILE.py --in-place, or -o as before)",
        )


def known_int(value: Any, rewritten_for: int) -> Any:
    """A range bound the rewrite read as the int constant ``rewritten_for`` (``passes.constant_ranges``), checked when
    Warp builds the generated kernel, in a ``wp.static(...)``: Warp reads the name then, and unrolls the loop or not
    by its value, so any other value would make the loop another than the rewrite planned for. (Warp's message names
    the generated function and its line.)"""
    if type(value) is not int or value != rewritten_for:
        raise ValueError(
            f"warp-rewrite generated this loop for a bound of {rewritten_for}, but it is now {value!r}: it changed "
            "since (or the rewrite read it wrong). Generate the code again: wp-rewrite on its file, or wp_rewrite on "
            "the kernel"
        )
    return value


def _plain(function: Any) -> Any:
    """The Python function of a kernel, helper or plain function (Warp wraps its objects around it)."""
    function = inspect.unwrap(function)
    return inspect.unwrap(getattr(function, "func", function))


def _definition_location(function: Any) -> str:
    """``file:line:col`` of the function's ``def`` (its decorators above it)."""
    lines, first = inspect.getsourcelines(function)
    offset = next(i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "async def ")))
    line = lines[offset]
    return f"{inspect.getsourcefile(function)}:{first + offset}:{len(line) - len(line.lstrip()) + 1}"
