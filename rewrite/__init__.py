"""warp-rewrite: correct gradients for Warp kernels that use the values atomics return."""

from rewrite.api import RewrittenKernel, launch, wp_rewrite
from rewrite.errors import RewriteError

__all__ = ["RewriteError", "RewrittenKernel", "launch", "wp_rewrite"]
