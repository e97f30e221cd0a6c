"""``wp-rewrite --check``: every use of an atomic's returned value in a codebase, found without importing it."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from warp_rewrite.passes.syntax import walk
from warp_rewrite.static_module import Project, StaticModule, Unfollowed, position


@dataclass(frozen=True)
class HelperHazard:
    """A helper, called from a kernel, that consumes an atomic's return (itself or through other helpers)."""

    call: ast.Call  # the call in the kernel
    helper: str  # the name the kernel calls
    consumer: str  # the function that consumes the return
    where: str  # path:line:col of the consumed atomic
    op: str


def helper_hazards(
    project: Project, module: StaticModule, function: ast.FunctionDef
) -> tuple[list[HelperHazard], list[Unfollowed]]:
    """Each call in ``function`` of a helper that consumes an atomic's return (at any depth), in source order,
    and the helper calls that could not be followed."""
    hazards, unfollowed = [], []
    for call in sorted((n for n in walk(function) if isinstance(n, ast.Call)), key=position):
        found = project.resolve(module, call)
        if isinstance(found, Unfollowed):
            unfollowed.append(found)
        elif found is not None and (consumer := _consumer(project, *found, set())):
            name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
            hazards.append(HelperHazard(call, name, *consumer))
    return hazards, unfollowed


def _consumer(
    project: Project, owner: StaticModule, helper: ast.FunctionDef, seen: set[int]
) -> tuple[str, str, str] | None:
    """(name, where, op) of the first consumed atomic in ``helper`` or the helpers it calls, if any."""
    if id(helper) in seen:
        return None
    seen.add(id(helper))
    consumed = owner.consumed(helper)
    if consumed:
        return helper.name, owner.location(consumed[0].node), consumed[0].op
    for call in sorted((n for n in walk(helper) if isinstance(n, ast.Call)), key=position):
        found = project.resolve(owner, call)
        if isinstance(found, tuple) and (result := _consumer(project, *found, seen)):
            return result
    return None


_WRONG = "gradients through it are wrong in plain Warp"
CODES = {
    "WR001": "kernel '{name}' uses the value returned by wp.atomic_{op}(); " + _WRONG,
    "WR002": "helper '{name}' uses the value returned by wp.atomic_{op}(); " + _WRONG,
    "WR003": "kernel '{name}' calls helper '{helper}', which uses the value returned by wp.atomic_{op}() ({where}); "
    + _WRONG,
}


@dataclass(frozen=True)
class Finding:
    location: str
    line: int
    col: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.code} {self.message}"


def check_module(module: StaticModule, project: Project) -> list[Finding]:
    """Every kernel and helper in the file that consumes an atomic's return, directly or through a helper.

    Kernels that already have a generated block are skipped: their ``launch_<kernel>`` handles them.
    """
    findings = []

    def add(code: str, node: ast.AST, **fields: str) -> None:
        findings.append(
            Finding(module.location(node), node.lineno, node.col_offset, code, CODES[code].format(**fields))
        )

    kernels = [k for k in module.top_level("kernel").values() if not module.rewritten(k.name)]
    kernels += module.nested_kernels()
    for kernel in kernels:
        for call in module.consumed(kernel):
            add("WR001", call.node, name=kernel.name, op=call.op)
        for hazard in helper_hazards(project, module, kernel)[0]:
            where = f"at {hazard.where}"
            if hazard.consumer != hazard.helper:
                where = f"in helper '{hazard.consumer}' at {hazard.where}"
            add("WR003", hazard.call, name=kernel.name, helper=hazard.helper, op=hazard.op, where=where)
    helpers = [n for n in walk(module.tree) if module.warp.decorated(n, "func") and not module.generated(n)]
    for helper in helpers:
        for call in module.consumed(helper):
            add("WR002", call.node, name=helper.name, op=call.op)
    return sorted(findings, key=lambda f: (f.line, f.col, f.code))
