"""What happened to one real kernel, through ``wp_rewrite`` (the API) or ``wp-rewrite`` (the command line)."""

from __future__ import annotations

import re
from dataclasses import dataclass

REWRITTEN = "rewritten"  # and compiled (API: its generated kernels; command line: the emitted module)
REFUSED = "refused"  # a RewriteError naming the kernel, the place and what to do
# No atomic's return used, and a loop Warp's backward replays wrong in a form the rewrite cannot replay right: the
# kernel runs as plain Warp, with a warning saying why (``pipeline.LeftToWarp``)
LEFT = "left as plain Warp"
ORIGINAL_FAILS = "original fails"  # does not compile, and neither does the original kernel (Warp's negative tests)
CRASH = "crash"  # any other exception, or generated code that does not compile where the original does
# A generic kernel (a parameter annotated ``Any``) has nothing to compile until it is launched with concrete types;
# where the suite knows none its callers pass (``RealKernel.launch_types``), what was generated is not compiled.
GENERIC = "rewritten, generic: not compiled"


@dataclass(frozen=True, order=True)
class Outcome:
    """``kernel`` is ``module.name`` for a kernel of a module's body, ``module.factory(args)/name`` for one a
    factory made; ``detail`` is the refusal's reason or the error."""

    tree: str
    way: str  # "wp_rewrite" or "wp-rewrite"
    kernel: str
    result: str
    detail: str = ""
    function: str = ""  # API: the kernel's function, ``file:name`` (file relative to site-packages)


def refusal_reason(message: str) -> str:
    """``path:line:col: kernel 'k': what. What to do`` -> ``what. What to do`` (the message's kernel-free part)."""
    return re.sub(r"^.*?: kernel '[^']+': ", "", message.strip())


LEFT_WARNING = re.compile(
    r"kernel '(?P<kernel>[^']+)' is left as plain Warp, .*? as the rewrite cannot make it right: (?P<reason>.+)$"
)
