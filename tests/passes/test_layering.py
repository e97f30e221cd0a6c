"""The passes are pure: importing any of them loads no runtime and leaves Warp as it was (``wp.launch`` above all),
so that a tool reading kernels can use them without changing how the program it runs in launches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[2]
IMPORTS = """
import importlib, json, pkgutil, sys
import warp as wp
launch = wp.launch
warp_names = set(vars(wp))
import warp_rewrite.passes.two_phase
import warp_rewrite.passes
for found in pkgutil.iter_modules(warp_rewrite.passes.__path__):
    importlib.import_module(f"warp_rewrite.passes.{found.name}")
print(json.dumps({
    "runtime": sorted(name for name in sys.modules if name.startswith("warp_rewrite.runtime")),
    "launch_untouched": wp.launch is launch,
    "new_warp_names": sorted(set(vars(wp)) - warp_names),
    "passes": sorted(name for name in sys.modules if name.startswith("warp_rewrite.passes.")),
}))
"""


def test_importing_the_passes_loads_no_runtime_and_leaves_warp_alone():
    run = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, cwd=REPO, check=True)
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["runtime"] == [] and seen["launch_untouched"] and seen["new_warp_names"] == []
    assert len(seen["passes"]) == len(list((REPO / "passes").glob("[!_]*.py")))


API_IMPORTS = """
import json, sys
import warp_rewrite
from warp_rewrite import rewrite_launches, wp_rewrite
print(json.dumps(sorted(name for name in sys.modules if name.startswith("warp_rewrite.cli"))))
"""


def test_the_api_loads_nothing_of_the_command_line():
    """The folders are the layers: ``rewrite/`` (API and shared pipeline) never reaches into ``rewrite/cli/``."""
    run = subprocess.run([sys.executable, "-c", API_IMPORTS], capture_output=True, text=True, cwd=REPO, check=True)
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []
