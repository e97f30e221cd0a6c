"""The core rewrite: one kernel becomes a record kernel and a replay kernel.

Record kernel: the complete original forward, plus a store of each consumed atomic's returned value into a
per-launch record array. It runs forward only (``enable_backward=False``).

Replay kernel: the original code with each consumed atomic's value read back from the records. Each atomic
call stays in place as the argument of ``replay_returned``, so Warp still generates its adjoint
(d target / d value); its side effect never runs, since this kernel is launched only in backward, where
Warp skips atomics when it replays the forward code.

Both wrap the atomic call where it stands, so argument evaluation order, short-circuit ``and``/``or`` and
``x if c else y`` keep the original semantics.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from passes import templates


@dataclass(frozen=True)
class Site:
    """A consumed atomic and the record array generated for it."""

    call: ast.Call
    records: str  # name of the record array parameter
    record_dtype: str  # source text of the records' dtype, e.g. "float" or "wp.int32"


@dataclass(frozen=True)
class Names:
    """Names chosen for the generated code (all fresh in the user's namespace)."""

    warp: str
    any: str
    record_helper: str
    replay_helper: str
    launch_shape: str
    thread: str
    coords: tuple[str, str, str, str]


def _span(node: ast.AST) -> tuple[int, int, int, int]:
    return (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


class _WrapConsumedAtomics(ast.NodeTransformer):
    def __init__(self, sites: list[Site], helper: str, thread: str):
        self.sites = {_span(s.call): s for s in sites}
        self.helper = helper
        self.thread = thread

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)  # inner atomics first: an index may come from another atomic
        site = self.sites.get(_span(node))
        if site is None:
            return node
        wrapped = ast.Call(
            func=ast.Name(self.helper, ast.Load()),
            args=[node, ast.Name(site.records, ast.Load()), ast.Name(self.thread, ast.Load())],
            keywords=[],
        )
        return ast.copy_location(wrapped, node)


def _decorator(warp: str, options: dict) -> ast.expr:
    keywords = ", ".join(f"{key}={value!r}" for key, value in options.items())
    return ast.parse(f"{warp}.kernel({keywords})" if keywords else f"{warp}.kernel", mode="eval").body


def phase_kernel(
    kernel: ast.FunctionDef, sites: list[Site], names: Names, *, name: str, helper: str, options: dict
) -> ast.FunctionDef:
    """``kernel`` with every site wrapped in ``helper``, plus the record parameters and thread index."""
    phase = _WrapConsumedAtomics(sites, helper, names.thread).visit(copy.deepcopy(kernel))
    phase.name = name
    phase.decorator_list = [_decorator(names.warp, options)]
    for site in sites:
        annotation = ast.parse(f"{names.warp}.array(dtype={site.record_dtype})", mode="eval").body
        phase.args.args.append(ast.arg(site.records, annotation))
    phase.args.args.append(ast.arg(names.launch_shape, ast.parse(f"{names.warp}.vec4i", mode="eval").body))
    c0, c1, c2, c3 = names.coords
    prologue = templates.instantiate_body(
        templates.linear_thread_index,
        wp=names.warp,
        launch_shape=names.launch_shape,
        thread=names.thread,
        c0=c0,
        c1=c1,
        c2=c2,
        c3=c3,
    )
    at = 0 if ast.get_docstring(phase) is None else 1
    phase.body[at:at] = prologue
    return ast.fix_missing_locations(phase)


def helper_functions(names: Names) -> list[ast.FunctionDef]:
    """The two small ``@wp.func`` helpers both phases call."""
    helpers = []
    pairs = ((templates.record_returned, names.record_helper), (templates.replay_returned, names.replay_helper))
    for template, name in pairs:
        helper = templates.instantiate(template, wp=names.warp, Any=names.any, **{template.__name__: name})
        helper.decorator_list = [ast.parse(f"{names.warp}.func", mode="eval").body]
        helpers.append(ast.fix_missing_locations(helper))
    return helpers
