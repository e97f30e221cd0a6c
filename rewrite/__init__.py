"""warp-rewrite: correct gradients for Warp kernels that use the values atomics return."""

from warp_rewrite.api import launch, wp_rewrite
from warp_rewrite.runtime import RewriteError, RewrittenKernel, __version__, check

__all__ = ["RewriteError", "RewrittenKernel", "__version__", "check", "launch", "wp_rewrite"]
