"""passes/constant_ranges.py: range bounds a front end reads as int constants, written out as the passes read them;
before and after, as source (``wp.static(wp_rewrite_runtime.known_int(...))`` checks each value when Warp builds the
generated kernel: ``tests/cli/test_constant_ranges.py``)."""

import ast
import textwrap

import pytest

from warp_rewrite.passes.constant_ranges import bound_value, known_bounds
from warp_rewrite.passes.loop_hazards import unrolled_by_warp

CONSTANTS = {"N": 6, "M": 20, "FLAG": True}


def rewritten(source: str) -> str | None:
    function = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(function, ast.FunctionDef)
    value = CONSTANTS.get
    tree = known_bounds(function, value, "wp", "rt")  # type: ignore[arg-type]  # (FLAG: a bool, which is no int)
    return None if tree is None else ast.unparse(tree)


def body(source: str) -> str:
    return ast.unparse(ast.parse(textwrap.dedent(source)))


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "def k():\n    for i in range(N):\n        pass",
            "def k():\n    for i in range(wp.static(rt.known_int(N, 6))):\n        pass",
        ),
        (
            "def k():\n    for i in range(wp.static(N + 1)):\n        pass",
            "def k():\n    for i in range(wp.static(rt.known_int(N + 1, 7))):\n        pass",
        ),
        (
            "def k():\n    for i in range(2, M, 3):\n        pass",
            "def k():\n    for i in range(2, wp.static(rt.known_int(M, 20)), 3):\n        pass",
        ),
        (
            "def k():\n    for i in range(N):\n        for j in range(i):\n            pass",
            "def k():\n    for i in range(wp.static(rt.known_int(N, 6))):\n"
            "        for j in range(i):\n            pass",
        ),
    ],
)
def test_a_bound_read_as_a_constant_is_written_out(before, after):
    assert rewritten(before) == body(after)


@pytest.mark.parametrize(
    "source",
    [
        "def k():\n    for i in range(6):\n        pass",  # literals already
        "def k():\n    N = 3\n    for i in range(N):\n        pass",  # a local: Warp reads it first
        "def k(N: int):\n    for i in range(N):\n        pass",  # a parameter
        "def k(m: int):\n    for i in range(N, m):\n        pass",  # one bound of unknown value: a loop whatever N is
        "def k():\n    for i in range(UNKNOWN):\n        pass",  # a name the front end cannot read
        "def k():\n    for i in range(N * 2):\n        pass",  # arithmetic outside wp.static: Warp does not fold it
        "def k():\n    for i in range(FLAG):\n        pass",  # a bool is no int to Warp's range
        "def k():\n    for i in range(wp.static(N, M)):\n        pass",  # not one argument
    ],
)
def test_other_bounds_are_left_as_they_are(source):
    assert rewritten(source) is None


def test_the_passes_read_a_written_bound_as_its_value():
    tree = known_bounds(ast.parse("def k():\n    for i in range(N):\n        pass").body[0], CONSTANTS.get, "wp", "rt")  # type: ignore[arg-type]
    assert tree is not None
    loop = tree.body[0]
    assert isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
    assert bound_value(loop.iter.args[0]) == 6 and unrolled_by_warp(loop, 16)
    assert bound_value(ast.parse("wp.static(other.known_int(N, x))", mode="eval").body) is None


def test_a_static_of_a_literal_is_its_value_as_written():
    assert rewritten("def k():\n    for i in range(wp.static(17)):\n        pass") is None
    assert bound_value(ast.parse("wp.static(17)", mode="eval").body) == 17
