"""Kernels, names and a planner front end over plain sources for the passes' unit tests (tests/passes):
before/after source pairs that compile and launch nothing."""

import ast
import functools
import textwrap
from typing import Any

import warp as wp

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.atomics import WarpNames
from warp_rewrite.passes.count_slice import fewer_copies
from warp_rewrite.passes.layout import record_params
from warp_rewrite.passes.naming import Namer
from warp_rewrite.passes.plan import Planner
from warp_rewrite.passes.plan_types import KernelPlan, is_int_path
from warp_rewrite.passes.two_phase import (
    COUNT,
    KernelNames,
    ModuleNames,
    phase_functions,
    phase_name,
)
from warp_rewrite.runtime.abi import RuntimeNames

WARP = WarpNames(frozenset({"wp"}), (("atomic_add", "atomic_add"),))
MODULE = ModuleNames(warp="wp", runtime=RuntimeNames.spelled("rt"))
NAMES = KernelNames(
    thread="thread",
    coordinate="coordinate",
    launch_shape="launch_shape",
    coords=("c0",),
    trip_capacity="trip_capacity",
    loop_number="loop",
    status="status",
)
PROLOGUE = ["thread = wp.tid()"]
COMPACTION = """
    @wp.kernel
    def compact(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
        tid = wp.tid()
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid]
"""

PROBE = """
    @wp.kernel
    def probe(table: wp.array[int], key: int, n: int, out: wp.array[float]):
        slot = key % n
        while True:
            if wp.atomic_cas(table, slot, -1, key) == -1:
                break
            out[0] += 1.0
            slot = (slot + 1) % n
        out[slot] = 1.0
"""


def parse(source: str) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(source)).body[0]


class Unit:
    """A kernel's or helper's source as the planner sees it, without Warp."""

    def __init__(self, source: str):
        self.text = textwrap.dedent(source)
        self.tree = ast.parse(self.text).body[0]
        self.name = self.tree.name

    def location(self, node: ast.AST) -> str:
        return f"test.py:{node.lineno}:{node.col_offset + 1}"


def parameter_types(unit: Unit) -> dict:
    """The parameters' Warp types, from annotations evaluated against warp (None where that fails)."""
    types = {}
    for arg in unit.tree.args.args:
        try:
            types[arg.arg] = dtypes.normalized(eval(ast.unparse(arg.annotation), {"wp": wp}))
        except Exception:
            types[arg.arg] = None
    return types


class Frontend:
    """``passes.plan_types.Frontend`` over test sources: helpers found by name, types from the annotations."""

    max_unroll = 16  # Warp's default
    backward = True

    def __init__(self, kernel: Unit, helpers: dict[str, Unit]):
        self.kernel, self.helpers = kernel, helpers

    def warp_names(self, unit: Unit) -> WarpNames:
        return WARP

    def resolve_helper(self, unit: Unit, call: ast.Call) -> Unit | None:
        return self.helpers.get(getattr(call.func, "id", None))

    def parameter_types(self, unit: Unit) -> dict:
        return parameter_types(unit)

    def local_types(self, unit: Unit) -> dict:
        return {}

    def return_type(self, unit: Unit) -> None:
        return None

    def named_type(self, unit: Unit, expr: ast.expr) -> Any:
        return getattr(wp, expr.attr, None) if isinstance(expr, ast.Attribute) else None  # wp.float64, wp.vec3

    def element_struct(self, unit: Unit, name: str) -> None:
        return None  # the test kernels take no arrays of structs

    def is_builtin(self, unit: Unit, call: ast.Call) -> bool:
        return True  # the test kernels call only Warp's builtins and the helpers they are given

    def has_custom_gradient(self, unit: Unit) -> bool:
        return False  # the test helpers have no @wp.func_grad

    def array(self, path: str) -> dtypes.ArrayInfo | None:
        return dtypes.array_info(parameter_types(self.kernel).get(path))


def frontend_of(source: str, helpers: dict[str, Unit] | None = None) -> Frontend:
    return Frontend(Unit(source), helpers or {})


def plan_of(source: str, helpers: dict[str, Unit] | None = None) -> KernelPlan:
    frontend = frontend_of(source, helpers)
    everything = ast.Module([frontend.kernel.tree, *(h.tree for h in frontend.helpers.values())], [])
    return Planner(frontend, Namer.for_tree(everything, {"wp"})).plan()


def generated(plan: KernelPlan, phase: str, names: KernelNames = NAMES, max_records: int | None = None) -> str:
    frontend = Frontend(plan.root.unit, {})
    records = record_params(plan, frontend.array)
    int_paths = frozenset(s.target for s in plan.sites if is_int_path(frontend, s.target))

    def made(plan: KernelPlan) -> list[ast.FunctionDef]:
        return phase_functions(plan, phase, MODULE, names, records, int_paths, {}, max_records)

    named = functools.partial(phase_name, phase=COUNT)
    functions = fewer_copies(plan, made, named)[1] if phase == COUNT else made(plan)  # as the pipeline's count stage
    return "\n\n".join(ast.unparse(f) for f in functions)


def same_code(actual: str, expected: str) -> None:
    """Compare as code; a line saying PROLOGUE in ``expected`` stands for the thread-index prologue."""
    lines = []
    for line in textwrap.dedent(expected).splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        lines += [indent + p for p in PROLOGUE] if line.strip() == "PROLOGUE" else [line]
    assert actual == ast.unparse(ast.parse("\n".join(lines)))
