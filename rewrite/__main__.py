"""``python -m warp_rewrite``: the command line (``wp-rewrite``), or ``python -m warp_rewrite run script.py`` to run a
program with ``rewrite_launches()`` on (``warp_rewrite.switch``)."""

import sys

if sys.argv[1:2] == ["run"]:
    from warp_rewrite.switch import run

    sys.exit(run(sys.argv[2:]))

from warp_rewrite.cli.main import command

command()
