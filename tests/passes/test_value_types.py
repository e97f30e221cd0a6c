"""passes/value_types.py: the Warp types of a function's locals, told from its source (nothing compiled)."""

from __future__ import annotations

import ast
import textwrap
from typing import Any

import warp as wp

from warp_rewrite.passes.atomics import WarpNames
from warp_rewrite.passes.value_types import ValueTypes


def locals_of(source: str, parameters: dict[str, Any]) -> dict[str, Any]:
    func = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(func, ast.FunctionDef)
    return ValueTypes(func, WarpNames(), parameters).locals


def test_a_local_assigned_from_itself_settles_on_its_other_assignments_type():
    told = locals_of(
        """
        def f(x: wp.array(dtype=wp.float64), n: int):
            acc = wp.float64(0.0)
            for j in range(n):
                acc = acc * 0.5 + x[j]
        """,
        {"x": wp.array(dtype=wp.float64), "n": int},
    )
    assert told["acc"] is wp.float64


def test_a_generic_parameter_tells_no_type_and_the_iteration_ends():
    """``p = v`` with ``v: Any``, then ``p = p * v``: Warp's ``mul`` matched on ``Any`` gave its first overload's
    type, which disagreed with ``Any``, leaving ``p`` untold, which let ``Any`` back: the fixpoint never ended (the
    suite hung on tests/api/test_errors.py's generic-carried refusal)."""
    told = locals_of(
        """
        def power(v: Any, n: int):
            p = v
            for _step in range(n):
                p = p * v
            return p
        """,
        {"v": Any, "n": int},
    )
    assert "p" not in told


def test_an_assignment_whose_type_cannot_be_told_leaves_it_to_the_others():
    told = locals_of(
        """
        def f(x: wp.array(dtype=float), n: int):
            best = float(1.0e20)
            for j in range(n):
                best = unknown_helper(x, j)
        """,
        {"x": wp.array(dtype=float), "n": int},
    )
    assert told["best"] is wp.float32


def test_the_indices_wp_tid_unpacks_are_ints():
    told = locals_of(
        """
        def f(x: wp.array2d(dtype=float)):
            i, j = wp.tid()
            v = x[i, j]
        """,
        {"x": wp.array2d(dtype=float)},
    )
    assert told["i"] is wp.int32 and told["j"] is wp.int32 and told["v"] is wp.float32
