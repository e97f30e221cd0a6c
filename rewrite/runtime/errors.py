# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The one error warp-rewrite raises for a kernel it cannot make differentiable correctly."""


class RewriteError(Exception):
    """A kernel pattern the rewrite cannot make differentiable correctly.

    The message names the kernel, the ``file:line:col`` of the construct, what is unsupported and what
    to do instead: a clear error, never a silently wrong gradient.
    """

    def __init__(self, kernel: str, location: str, problem: str, advice: str):
        self.kernel = kernel
        self.location = location
        self.problem = problem
        self.advice = advice
        super().__init__(f"{location}: kernel '{kernel}': {problem}. {advice}")
