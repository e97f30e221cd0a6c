"""Every outcome of the real-code suite for one tree, through the API and through the command line.

``python tests/realcode/survey.py [TREE...]`` prints them (and how long each part took), to update ``ledger.py``
after a change to the rewrite.
"""

from __future__ import annotations

import sys
import time
from functools import cache
from pathlib import Path

import factories
import ledger
import through_api
import through_cli
import warp as wp
from outcomes import Outcome
from trees import TREES, Tree, check, module_name

TIMINGS: dict[str, float] = {}  # "newton: wp_rewrite" -> seconds, for the account of the run time in docs/realcode.md


class timed:
    def __init__(self, label: str):
        self.label = label

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *_):
        TIMINGS[self.label] = TIMINGS.get(self.label, 0.0) + time.perf_counter() - self.start


def flagged_modules(tree: Tree) -> list[str]:
    """The modules with a ``--check`` finding, of any code (kernels without backward and helpers with a
    hand-written replay included: the API rewrites those too)."""
    with timed(f"{tree}: --check"):
        return sorted({module_name(file) for file in check(tree).files})


@cache
def unimportable(tree: Tree) -> list[Outcome]:
    """The flagged modules that do not import here (``through_api.unimportable``)."""
    return through_api.unimportable(tree, flagged_modules(tree))


@cache
def api_kernels(tree: Tree) -> list[through_api.RealKernel]:
    """The kernels of the flagged modules' bodies, those made when they were imported (Warp's tests build
    kernels per dtype with ``wp.Kernel(func)`` at import), and those their factories make."""
    failed = {outcome.kernel for outcome in unimportable(tree)}
    modules = [name for name in flagged_modules(tree) if name not in failed]
    found = through_api.module_level_kernels(modules)
    at_module_level = {real.kernel for real in found}
    for name in modules:
        held = dict.fromkeys(factories.kernels_in(list(vars(sys.modules[name]).values())))
        for kernel in sorted(held, key=lambda k: k.key):
            if kernel.func.__module__ == name and kernel not in at_module_level:
                found.append(through_api.RealKernel(f"{name}.(at import)/{kernel.key}", kernel))
    for call, kernel in factories.made_by(factories.calls_for(tree.name)):
        name = f"{call.module}.{call.label}/{kernel.func.__name__}"
        found.append(through_api.RealKernel(name, kernel, call.launch_types))
    return found


@cache
def api_outcomes(tree: Tree) -> list[Outcome]:
    with timed(f"{tree}: wp_rewrite and compile"):
        return through_api.rewrite_and_compile(tree, api_kernels(tree)) + unimportable(tree)


@cache
def cli_outcomes(tree: Tree, root: Path) -> list[Outcome]:
    modules = flagged_modules(tree)
    with timed(f"{tree}: wp-rewrite"):
        through_cli.copy_package(tree, root)
        rewrites = [through_cli.rewrite_file(tree, file, root) for file in check(tree).files]
    with timed(f"{tree}: import and compile the emitted modules"):
        loaded = through_cli.load_emitted(tree, [r.module for r in rewrites if r.changed], root)
    assert {r.module for r in rewrites} == set(modules)
    return through_cli.outcomes(tree, rewrites, loaded)


def main(names: list[str]) -> None:
    import tempfile

    wp.config.log_level = 40
    wp.init()
    every = []
    with tempfile.TemporaryDirectory() as root:
        for tree in TREES:
            if (names and tree.name not in names) or not tree.installed:
                continue
            every += api_outcomes(tree) + cli_outcomes(tree, Path(root))
    for outcome in every:
        detail = outcome.detail.strip().replace("\n", " | ")[-400:]
        print(f"# {outcome.tree}\t{outcome.way}\t{outcome.result}\t{outcome.kernel}\t{detail}")
    print("EXPECTED = {")
    for key, by_result in ledger.summarize(every).items():
        print(f"    {key!r}: {{")
        for result, counts in by_result.items():
            print(f"        {result!r}: Counter({dict(counts)!r}),")
        print("    },")
    print("}")
    for label, seconds in TIMINGS.items():
        print(f"# {label}: {seconds:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
