"""The invariant of ``--check``'s scanner (``rewrite/cli/elision.py``): its masked code, strings and comments taken out,
still names every name the file's syntax tree has, since every check that reads a left-out or unparsed file reads
the masked code. (An f-string's fields are code: a review found a launch hidden in one.)"""

from __future__ import annotations

import ast
import re

from warp_rewrite.cli.elision import elide

_WORD = re.compile(r"\w+")


def unmasked_names(text: str) -> set[str]:
    """The names and attribute names of ``text``'s tree missing from the scanner's masked code (none where the
    scanner gives up: the file is parsed in full)."""
    elision = elide(text)
    if elision is None:
        return set()
    nodes = list(ast.walk(ast.parse(text)))
    named = {node.id for node in nodes if isinstance(node, ast.Name)}
    named |= {node.attr for node in nodes if isinstance(node, ast.Attribute)}
    return named - set(_WORD.findall(elision.code))
