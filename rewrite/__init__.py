"""warp-rewrite: correct gradients for Warp kernels that use the values atomics return."""

from warp_rewrite.api import launch, rewrite_launches, wp_rewrite
from warp_rewrite.runtime import RewriteError, RewrittenKernel, __version__, check

__all__ = ["RewriteError", "RewrittenKernel", "__version__", "check", "launch", "rewrite_launches", "wp_rewrite"]
