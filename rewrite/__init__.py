"""warp-rewrite: correct gradients for Warp kernels that use the values atomics return."""

from warp_rewrite.api import RewrittenKernel, launch, wp_rewrite
from warp_rewrite.errors import RewriteError

__all__ = ["RewriteError", "RewrittenKernel", "launch", "wp_rewrite"]
