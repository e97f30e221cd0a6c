"""passes/loop_carried.py: locals carried across loop iterations: those a read can see from an earlier iteration.

Nothing here compiles or launches a kernel.
"""

import ast
import textwrap

import pytest

from tests.support.pass_sources import parse
from warp_rewrite.passes.loop_carried import LoopFlow

# (body of a kernel, with the loop asked about over 'i' or a while loop; locals carried into later iterations,
# out of the loop)
CARRIED_SHAPES = {
    "a running minimum read after the loop": (
        """
        m = x[0]
        for i in range(n):
            m = wp.min(m, x[i])
        y[0] = m
        """,
        {"m"},
        {"m"},
    ),
    "reassigned late in an iteration, read early in the next": (
        """
        s = x[0]
        for i in range(n):
            y[i] = s
            s = x[i] * 2.0
        """,
        {"s"},
        set(),
    ),
    "assigned before it is read, in the branch that reads it": (
        """
        s = x[0]
        for i in range(n):
            if x[i] > 0.0:
                s = x[i] * x[i]
                y[i] = s
        """,
        set(),
        set(),
    ),
    "assigned on both branches before the read": (
        """
        s = x[0]
        for i in range(n):
            if x[i] > 0.0:
                s = x[i]
            else:
                s = -x[i]
            y[i] = s
        """,
        set(),
        set(),
    ),
    "assigned on one branch only before the read": (
        """
        s = x[0]
        for i in range(n):
            if x[i] > 0.0:
                s = x[i]
            y[i] = s
        """,
        {"s"},
        set(),
    ),
    "after the loop, read only where a later branch assigned it first": (
        """
        for i in range(n):
            s = x[i] * 2.0
            y[i] = s
        for j in range(n):
            if x[j] > 1.0:
                s = x[j] * 3.0
                y[j] = s
        """,
        set(),
        set(),
    ),
    "after the loop, read on a path that skips the later assignment": (
        """
        for i in range(n):
            s = x[i] * 2.0
        if x[0] > 1.0:
            s = x[0]
        y[0] = s
        """,
        set(),
        {"s"},
    ),
    "a continue skips the assignment before the read": (
        """
        s = x[0]
        for i in range(n):
            if i == 1:
                continue
            y[i] = s
            s = x[i]
        """,
        {"s"},
        set(),
    ),
    "a break leaves before the assignment that later code would see": (
        """
        s = x[0]
        for i in range(n):
            s = x[i]
            if s > 1.0:
                break
            s = 0.0
        y[0] = s
        """,
        set(),
        {"s"},
    ),
    "read in the next iteration of a loop around it": (
        """
        s = x[0]
        for k in range(n):
            for i in range(n):
                s = x[i]
            y[k] = s
        """,
        set(),
        {"s"},
    ),
    "a while loop's condition reads what its body changes": (
        """
        s = x[0]
        while s < 4.0:
            s = s * 2.0
        """,
        {"s"},
        set(),
    ),
    "a local first assigned in the loop carries nothing into the next iteration": (
        """
        for i in range(n):
            if i > 0:
                y[i] = t
            t = x[i]
        """,
        set(),
        set(),
    ),
    "a vector changed one component at a time": (
        """
        acc = wp.vec2d()
        for i in range(n):
            acc[0] = acc[0] + x[i]
            y[i] = 2.0
        y[0] = acc[0]
        """,
        {"acc"},
        {"acc"},
    ),
    "a vector made in each iteration before its components are set": (
        """
        p = wp.vec2d()
        for i in range(n):
            p = wp.vec2d()
            p[1] = x[i]
            y[i] = p[1]
        """,
        set(),
        set(),
    ),
    "updated right before a break: no later iteration sees it, but Warp's replay of each trip does": (
        """
        acc = x[0]
        k = 0
        while k < n:
            k += 1
            if k >= 3:
                acc = acc * x[k]
                break
        y[0] = acc
        """,
        {"acc", "k"},
        {"acc"},
    ),
    "a loop variable is set by its own loop, and read after it keeps its last value": (
        """
        for i in range(n):
            for j in range(n):
                y[j] = x[i]
        y[0] = float(i + j)
        """,
        set(),
        {"i", "j"},
    ),
}


@pytest.mark.parametrize("shape", CARRIED_SHAPES)
def test_loop_carried_locals_are_those_a_read_can_see_across_an_iteration(shape):
    body, into, out = CARRIED_SHAPES[shape]
    kernel = parse("def k(x: wp.array[float], y: wp.array[float], n: int):\n" + textwrap.indent(body, "    "))
    asked = lambda n: isinstance(n, ast.While) or (isinstance(n, ast.For) and n.target.id == "i")  # noqa: E731
    loop = next(n for n in ast.walk(kernel) if asked(n))
    values = {"acc", "p"}  # the locals that hold a vector, as the planner tells them from the arrays
    carried = LoopFlow(kernel, values.__contains__).carried(loop)
    assert (set(carried.into_iterations), set(carried.out_of_loop)) == (into, out)
    assert carried.updated_only == ({"acc"} if shape == "a vector changed one component at a time" else set())
