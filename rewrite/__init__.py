"""warp-rewrite: correct gradients for Warp kernels that use the values atomics return."""

from warp_rewrite.api import launch, wp_rewrite
from warp_rewrite.runtime import RewriteError, RewrittenKernel, __version__

__all__ = ["RewriteError", "RewrittenKernel", "__version__", "launch", "wp_rewrite"]
