"""warp-rewrite: correct gradients for Warp kernels that use the values atomics return.

The names below are loaded on first use (PEP 562), so that importing a part of the package (``warp_rewrite.passes``,
the command line's modules) loads no runtime and leaves ``wp.launch`` alone: the runtime installs its ``wp.launch``
hook when it is first imported (see ``warp_rewrite.runtime``). ``WP_REWRITE_LAUNCHES=1`` asks for the hook at once
(and, through the package's ``.pth`` file, in programs that never import this package: ``warp_rewrite.switch``).
"""

import importlib
from typing import Any

from warp_rewrite.switch import enabled, on_start, switched_on

_HOMES = {
    "launch": "warp_rewrite.api",
    "rewrite_launches": "warp_rewrite.api",
    "wp_rewrite": "warp_rewrite.api",
    "RewriteError": "warp_rewrite.runtime",
    "RewriteWarning": "warp_rewrite.runtime.errors",
    "RewrittenKernel": "warp_rewrite.runtime",
    "__version__": "warp_rewrite.runtime",
    "check": "warp_rewrite.runtime",
}
__all__ = [
    "RewriteError",
    "RewriteWarning",
    "RewrittenKernel",
    "__version__",
    "check",
    "enabled",
    "launch",
    "rewrite_launches",
    "wp_rewrite",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if switched_on():
    on_start()  # rewrites plain kernels' launches from Warp's import on (at once where it is imported already)
