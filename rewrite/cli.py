"""The ``wp-rewrite`` command line."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("wp-rewrite: the command line is not implemented yet; use rewrite.wp_rewrite() from Python", file=sys.stderr)
    return 2
