"""``WP_REWRITE_LAUNCHES=1``: ``rewrite_launches()`` turned on from outside a program, which imports nothing of
warp-rewrite (code one cannot edit).

Two ways, as coverage.py and profilers offer them:

- the environment variable, in every Python process of an environment where warp-rewrite is installed: the package
  installs ``warp_rewrite_launches.pth`` into ``site-packages``, whose one line, run at every interpreter start,
  calls ``on_start`` when the variable is set; ``on_start`` turns the hook on as soon as the program imports
  ``warp`` (so a process that never imports Warp never loads it);
- ``python -m warp_rewrite run script.py [ARGS]`` (or ``run -m module``): the script run as ``python script.py``
  would run it, with the hook on, and the variable set for the processes it starts.

``warp_rewrite.enabled()`` says whether the hook is on. Nothing here imports Warp or the runtime until the program
does.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

VARIABLE = "WP_REWRITE_LAUNCHES"
_OFF = ("", "0", "false", "no", "off")


def switched_on(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for the hook: ``WP_REWRITE_LAUNCHES`` set to anything but 0, false, no, off."""
    return environ.get(VARIABLE, "").strip().lower() not in _OFF


def enabled() -> bool:
    """Whether ``rewrite_launches()`` is on in this process (by the call, the environment variable or ``python -m
    warp_rewrite run``), or set to be on as soon as the program imports Warp or, where warp-rewrite's own runtime
    imported it, launches a kernel (``WP_REWRITE_LAUNCHES=1``): plain kernels that consume an atomic's return are
    then rewritten at their launches on a tape. Loads nothing."""
    hook = sys.modules.get("warp_rewrite.runtime.hook")
    on = hook is not None and getattr(hook, "AUTO_REWRITE", None) is not None
    return on or ((_state.armed or _state.waiting) and not _state.turned_on)


@dataclass
class _State:
    waiting: bool = False  # ``_AfterWarp`` waits for Warp's import
    armed: bool = False  # ``first_launch`` (``_arm``) is in ``wp.launch``'s place, or the runtime's hook wraps it
    turned_on: bool = False  # by ``_turn_on``


_state = _State()


def _turn_on() -> None:
    """The hook on, now: the API's import installs it, ``rewrite_launches()`` turns it on."""
    _state.turned_on = True
    importlib.import_module("warp_rewrite.api").rewrite_launches()


def _importing_the_runtime() -> bool:
    """Whether warp-rewrite's own modules are being imported (by the program): importing the API now would find them
    half made. The API turns the hook on itself at the end of its import, where the environment asks."""
    return any(name in sys.modules for name in ("warp_rewrite.api", "warp_rewrite.runtime"))


def _warp_loaded() -> None:
    """Warp has just been imported: the hook on now, or, where warp-rewrite's runtime imported Warp (and is still
    being imported), from the first launch (``_arm``)."""
    if _importing_the_runtime():
        _arm(sys.modules["warp"])
    else:
        _turn_on()


def _arm(warp: Any) -> None:
    """Put ``first_launch`` in ``wp.launch``'s place (``warp``: the module): the first launch turns the hook on and
    goes through it."""
    real = warp.launch

    @functools.wraps(real)
    def first_launch(*args, **kwargs):
        if _state.turned_on:  # the runtime's hook wrapped this before it was turned on: Warp's own launch
            return real(*args, **kwargs)
        if warp.launch is first_launch:
            warp.launch = real  # the hook wraps Warp's own launch, not this
        _turn_on()
        return warp.launch(*args, **kwargs)

    warp.launch = first_launch
    _state.armed = True


class _AfterWarp(importlib.abc.MetaPathFinder):
    """Finds nothing itself: where ``warp`` is imported, lets the other finders find it and turns the hook on once
    the module has run (``_warp_loaded``)."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None):
        if name != "warp":
            return None
        sys.meta_path.remove(self)  # once, and not in the search below
        _state.waiting = False
        spec = next((found for f in sys.meta_path if (found := _found(f, name, path, target)) is not None), None)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        run_module = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            try:
                run_module(module)
            finally:
                del loader.exec_module  # the loader's own again
            _warp_loaded()

        loader.exec_module = exec_module
        return spec


def _found(finder: object, name: str, path: Sequence[str] | None, target: ModuleType | None):
    find_spec = getattr(finder, "find_spec", None)
    return find_spec(name, path, target) if find_spec is not None else None


def on_start() -> None:
    """Where ``WP_REWRITE_LAUNCHES`` is set (at interpreter start, from ``warp_rewrite_launches.pth``; or when the
    program imports ``warp_rewrite``): the hook on once Warp is imported, at once where it already is."""
    if not switched_on() or _state.turned_on or _state.armed or _state.waiting:
        return
    if "warp" in sys.modules:
        _warp_loaded()
    else:
        sys.meta_path.insert(0, _AfterWarp())
        _state.waiting = True


USAGE = "usage: python -m warp_rewrite run (SCRIPT | -m MODULE) [ARGS...]"


def run(argv: list[str]) -> int:
    """``python -m warp_rewrite run script.py ARGS`` / ``run -m module ARGS``: the program run as ``python`` runs it
    (``__main__``, ``sys.argv``, ``sys.path[0]``), with ``rewrite_launches()`` on, and ``WP_REWRITE_LAUNCHES=1`` for
    the processes it starts. Returns the exit status where the program does not exit itself."""
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(USAGE, file=sys.stderr if not argv or argv[0] == "-m" else sys.stdout)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    import runpy  # (here: the .pth imports this module at every start, where the launcher is not needed)

    os.environ[VARIABLE] = "1"
    _turn_on()
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]  # runpy puts the module's file in sys.argv[0]; sys.path[0] is the cwd
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # the script's folder, where -m put the cwd
        runpy.run_path(argv[0], run_name="__main__")
    return 0
