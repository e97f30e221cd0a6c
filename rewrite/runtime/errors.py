# SPDX-License-Identifier: Apache-2.0
# Copyright (c) 2026 the warp-rewrite authors
"""The one error warp-rewrite raises for a kernel it cannot make differentiable correctly, and the warning for a kernel
it leaves as plain Warp."""


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


class RewriteWarning(UserWarning):
    """A kernel left as plain Warp: it uses no atomic's return, and what Warp's backward replays wrong in it (a loop
    Warp does not unroll, a read of an array its launch updates) is of a form the rewrite cannot make right (said when
    it is rewritten, or at a launch it cannot make right). Its gradients are plain Warp's; it launches as it always
    did."""


def left_to_warp(refusal: RewriteError) -> str:
    """The warning's text for a kernel left as plain Warp, from what the rewrite could not do (a refusal's parts),
    without its location, which the API and the command line put before it in their own ways."""
    return (
        f"kernel '{refusal.kernel}' is left as plain Warp, whose backward replays it wrong (a loop Warp does not "
        f"unroll, or a read of an array its launch updates), as the rewrite cannot make it right: {refusal.problem}. "
        f"{refusal.advice}"
    )
