"""Which kernels of a file get a generated block (``choose_kernels``): those the pipeline says need a rewrite, less
those already rewritten, those without a backward pass, and those the command line cannot write a block for (a
kernel in a class body, a kernel made by a call it cannot follow), each with its ``RewriteError``; and the warnings
for what it cannot see."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from warp_rewrite import pipeline
from warp_rewrite.cli.hazards import HazardFinder, Unknown
from warp_rewrite.cli.project import SEARCHED, Unfollowed, Unresolved
from warp_rewrite.cli.static_frontend import StaticFrontend, construction_options, construction_problem
from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.passes.syntax import Located
from warp_rewrite.pipeline import LeftToWarp
from warp_rewrite.runtime import RewriteError


def warning(module: StaticModule, node: Located, message: str) -> str:
    return f"{module.location(node)}: warning: {message}"


def _unknown_warning(module: StaticModule, kernel: ast.FunctionDef, unknown: Unknown) -> str:
    miss = unknown.miss
    through = f" (through helper '{unknown.via}')" if unknown.via else ""
    if isinstance(miss, Unfollowed):
        what = f"{miss.callee.value} '{miss.helper}' from '{miss.module}', whose file wp-rewrite could not find"
        what += f" ({SEARCHED})"
    else:
        what = (
            f"{miss.callee.value} '{miss.helper}'{through}, {miss.reason}, which wp-rewrite cannot follow from "
            "the source"
        )
        through = ""
    return warning(
        module,
        unknown.call,
        f"kernel '{kernel.name}' calls {what}{through}; if it uses an atomic's returned value, "
        f"its gradients stay wrong: launch wp_rewrite({kernel.name}) instead, which sees the value at run time",
    )


def _undecided_refusal(module: StaticModule, kernel: ast.FunctionDef, unknown: Unknown) -> RewriteError:
    """A kernel calling a helper known only at run time, each candidate of which consumes an atomic's return: its
    gradients are wrong in plain Warp whichever runs, and the rewrite cannot tell which one to clone."""
    miss = unknown.miss
    assert isinstance(miss, Unresolved)  # (``KernelCalls.undecided``)
    return RewriteError(
        kernel.name,
        module.location(unknown.call),
        f"it calls '{miss.helper}', {miss.reason}; each of those uses an atomic's returned value, so the kernel's "
        "gradients are wrong in plain Warp, and the source alone does not tell which one to rewrite",
        f"Bind the helper once, unconditionally (one helper that branches inside), or launch wp_rewrite({kernel.name}) "
        "instead, which sees the helper at run time",
    )


def _refusal(
    module: StaticModule, kernel: ast.FunctionDef, problem: str, advice: str, verdict: type[RewriteError] = RewriteError
) -> RewriteError:
    return verdict(kernel.name, module.location(kernel), problem, advice)


@dataclass
class Choice:
    """The file's kernels sorted by what this run does with them."""

    to_rewrite: list[ast.FunctionDef] = field(default_factory=list)
    already: list[ast.FunctionDef] = field(default_factory=list)
    refusals: list[RewriteError] = field(default_factory=list)  # LeftToWarp where no atomic's return is used
    warnings: list[str] = field(default_factory=list)


def choose_kernels(
    module: StaticModule, finder: HazardFinder, frontend: Callable[[ast.FunctionDef], StaticFrontend]
) -> Choice:
    """Which kernels consume an atomic's return or hold a loop Warp's backward replays wrong, and get a block (the
    pipeline may still find nothing to record: the kernel is then left as it is); which have one; which cannot have
    one. Which need a rewrite the pipeline says, as it says it for ``wp_rewrite`` (``pipeline.needs_rewrite``)."""
    choice = Choice()
    for kernel in module.kernels():
        if module.rewritten(kernel):
            choice.already.append(kernel)
            continue
        calls = finder.kernel_calls(module, kernel)
        if module.backward_disabled(kernel):
            continue  # no backward pass: nothing to make right
        choice.warnings += [_unknown_warning(module, kernel, unknown) for unknown in calls.unknown]
        if calls.undecided:
            choice.refusals.append(_undecided_refusal(module, kernel, calls.undecided[0]))
            continue
        if not pipeline.needs_rewrite(frontend(kernel)):
            continue
        verdict = RewriteError if pipeline.consumes_returns(frontend(kernel)) else LeftToWarp
        scopes = module.scopes(kernel)
        refusal = _construction_refusal(module, kernel, verdict) if module.constructed(kernel) else None
        if refusal is not None:
            choice.refusals.append(refusal)
        elif scopes and isinstance(scopes[0], ast.ClassDef):
            choice.refusals.append(
                _refusal(
                    module,
                    kernel,
                    "a kernel defined in a class body cannot be rewritten to a file (the generated "
                    "kernels could not see the class's names)",
                    "Define the kernel at module level or in a function, or rewrite it at run time with wp_rewrite()",
                    verdict,
                )
            )
        else:
            choice.to_rewrite.append(kernel)
    return choice


def _shown(call: ast.Call, most: int = 70) -> str:
    """The call as written (shortened), for messages that say what was seen."""
    text = ast.unparse(call)
    return text if len(text) <= most else text[: most - 5] + "...)"


def _construction_refusal(
    module: StaticModule, kernel: ast.FunctionDef, verdict: type[RewriteError]
) -> RewriteError | None:
    """Why the calls that make a kernel of the plain function ``kernel`` cannot be made to give the rewritten
    kernel, or None if each can (each is then wrapped in the block's ``KernelRewrite``)."""
    advice = "decorate the function with @wp.kernel, or rewrite the kernel at run time with wp_rewrite()"
    first, first_options = None, None
    for made in module.constructions(kernel):
        seen = f"{_shown(made.site)} ({module.location(made.site)})"
        if made.maker is not None and not module.returns_kernel(made.maker):
            maker = made.maker.function.name
            return _refusal(
                module,
                kernel,
                f"it is made a kernel by {seen}, and '{maker}' does not return the kernel "
                "it makes (at every return), so wp-rewrite cannot hand on the rewritten one",
                f"Make '{maker}' return the kernel, {advice}",
                verdict,
            )
        problem = construction_problem(module, made)
        if problem is not None:
            return _refusal(
                module,
                kernel,
                f"it is made a kernel by {seen} with {problem}",
                f"Write the options as literals in that call, {advice}",
                verdict,
            )
        options = construction_options(module, made)
        if first is None:
            first, first_options = seen, options
        elif options != first_options:
            return _refusal(
                module,
                kernel,
                f"it is made a kernel by {first} and by {seen} with other options: one "
                "pair of generated kernels cannot serve both",
                f"Give both calls the same options, {advice}",
                verdict,
            )
    return None
