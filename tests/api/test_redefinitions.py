"""Nothing stale: a rewritten kernel computes what plain Warp's kernel computes after the code it reaches is
redefined, as a notebook does when a cell runs again (``tests/support/notebook.py``: each cell's source in
``linecache`` under a virtual file name, as IPython registers it), and for kernels made with ``exec()`` from a
template or defined under one name in two modules. Forward results equal the original's exactly; gradients match
finite differences of the original forward (``tests/support/harness.py``)."""

import linecache

import numpy as np
import pytest
import warp as wp

import warp_rewrite
from tests.support.harness import Case, check, f64, i32, original_or
from tests.support.notebook import Notebook
from warp_rewrite import RewriteError, wp_rewrite

N = 5
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6])

HELPER = """
@wp.func
def weigh(v: wp.float64) -> wp.float64:
    return v * v * wp.float64({factor})
"""
KERNEL = """
@wp.kernel
def compact(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = weigh(x[tid]) * wp.float64({scale}) + wp.float64(slot) * x[tid]
"""


def compaction_args() -> list:
    return [f64(X, True), i32([0]), f64(np.zeros(N), True)]


def case(kernel: wp.Kernel) -> Case:
    """``kernel`` through ``wp_rewrite`` against finite differences of ``kernel`` itself."""
    return Case(kernel, N, compaction_args, [2], [0])


def kept(rewritten, original: wp.Kernel) -> Case:
    """A ``RewrittenKernel`` kept from before, launched as it is, against ``original`` (its own kernel)."""
    launched = original_or(original, N, lambda args: wp.launch(rewritten, N, inputs=args, device="cpu"))
    return Case(None, N, compaction_args, [2], [0], program=launched)


def forward(kernel) -> list[float]:
    args = compaction_args()
    wp.launch(kernel, N, inputs=args, device="cpu")
    return args[2].numpy().tolist()


def test_a_helper_cell_run_again_is_used_at_the_next_launch_and_a_kept_kernel_runs_its_own_body():
    notebook = Notebook()
    notebook.run(HELPER.format(factor=2.0))
    notebook.run(KERNEL.format(scale=1.0))
    first = notebook.compact
    rewritten = wp_rewrite(first)
    check(case(first))

    before = forward(first)
    notebook.run(HELPER.format(factor=3.0))  # the helper's cell, changed and run again
    assert forward(rewritten) == forward(first) != before  # called by name, not cloned: the new one
    check(case(first))  # wp_rewrite(first) is ``rewritten``, made again
    assert wp_rewrite(first) is rewritten
    pair = rewritten.pair

    notebook.run(HELPER.format(factor=3.0))  # the same cell run again, unchanged: nothing to make again
    notebook.run(KERNEL.format(scale=10.0))  # the kernel's cell, run twice with other bodies
    notebook.run(KERNEL.format(scale=100.0))
    check(kept(rewritten, first))  # its own body, the current helper
    assert rewritten.pair is pair
    latest = notebook.compact
    assert latest is not first
    check(case(latest))
    assert forward(wp_rewrite(latest)) == forward(latest) != forward(first)


SLOT = """
@wp.func
def take_slot(count: wp.array(dtype=wp.int32), step: int) -> int:
    return wp.atomic_add(count, 0, step) * {spread}
"""
TAKER = """
@wp.kernel
def spread(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = take_slot(count, 1)
    out[slot] = x[tid] * x[tid] * wp.float64(slot + 1)
"""


def spread_args() -> list:
    return [f64(X, True), i32([0]), f64(np.zeros(2 * N), True)]


def test_a_cloned_helper_redefined_is_cloned_again():
    """A helper that consumes an atomic's return is copied into the generated kernels: its new body is copied."""
    notebook = Notebook()
    notebook.run(SLOT.format(spread=1))
    notebook.run(TAKER)
    rewritten = wp_rewrite(notebook.spread)
    check(Case(notebook.spread, N, spread_args, [2], [0]))
    notebook.run(SLOT.format(spread=2))
    check(Case(notebook.spread, N, spread_args, [2], [0]))
    assert "* 2" in rewritten.source


MATMUL = """
@wp.func
def weigh(v: wp.float64) -> wp.float64:
    m = wp.mat22d(v, wp.float64(0.0), wp.float64(0.0), v)
    m @= m
    return m[0, 0]
"""


def on_a_tape(kernel) -> None:
    with wp.Tape():
        wp.launch(kernel, N, inputs=compaction_args(), device="cpu")


def test_a_helper_redefined_into_a_refused_form_raises_at_each_launch_until_it_is_redefined_again():
    notebook = Notebook()
    notebook.run(HELPER.format(factor=2.0))
    notebook.run(KERNEL.format(scale=1.0))
    strict, lenient = wp_rewrite(notebook.compact), wp_rewrite(notebook.compact, on_refusal="original")
    check(case(notebook.compact))
    notebook.run(MATMUL)
    for _ in range(2):
        with pytest.raises(RewriteError, match=r"kernel 'compact': @= on any target \(m @= m\) is not supported"):
            on_a_tape(strict)
    assert forward(lenient) == forward(notebook.compact)  # no tape: the original runs, with the new helper
    with pytest.raises(RewriteError, match="@= on any target"):
        on_a_tape(lenient)
    notebook.run(HELPER.format(factor=0.5))
    check(case(notebook.compact))  # through ``strict``, made again
    check(kept(lenient, notebook.compact))


BUMP = """
@wp.func
def bump(count: wp.array(dtype=wp.int32)) -> int:
    return {body}
"""
BUMPED = """
@wp.kernel
def bumped(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    out[tid] = x[tid] * x[tid] * wp.float64(bump(count) + 1)
"""


def test_a_kernel_whose_helper_starts_consuming_an_atomic_is_rewritten_at_its_next_launch():
    notebook = Notebook()
    notebook.run(BUMP.format(body="count[0]"))
    notebook.run(BUMPED)
    rewritten = wp_rewrite(notebook.bumped)
    assert rewritten.pair is None  # nothing consumed: launched unchanged
    assert forward(rewritten) == forward(notebook.bumped)
    notebook.run(BUMP.format(body="wp.atomic_add(count, 0, 1)"))
    check(kept(rewritten, notebook.bumped))
    assert rewritten.pair is not None


@pytest.fixture
def launches_rewritten():
    warp_rewrite.rewrite_launches()
    try:
        yield
    finally:
        warp_rewrite.rewrite_launches(False)


def test_rewrite_launches_uses_the_helper_of_the_latest_cell(launches_rewritten):
    notebook = Notebook()
    notebook.run(HELPER.format(factor=2.0))
    notebook.run(KERNEL.format(scale=1.0))
    kernel = notebook.compact

    def launched(args):  # the plain kernel, on the harness's tape: rewrite_launches() rewrites it
        wp.launch(kernel, N, inputs=args, device="cpu")

    check(Case(None, N, compaction_args, [2], [0], program=original_or(kernel, N, launched)))
    notebook.run(HELPER.format(factor=-1.5))
    check(Case(None, N, compaction_args, [2], [0], program=original_or(kernel, N, launched)))


TEMPLATE = """
@wp.kernel
def scaled(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * x[tid] * wp.float64(SCALE) + wp.float64(slot)
"""


def from_template(scale: float) -> wp.Kernel:
    """A kernel made with ``exec()`` from a template, its text registered in ``linecache`` under one virtual file
    name for every kernel the template makes (each registration replaces the last), in this module."""
    text = TEMPLATE.replace("SCALE", repr(scale))
    linecache.cache["<template>"] = (len(text), None, text.splitlines(keepends=True), "<template>")
    scope = {"wp": wp, "__name__": __name__}
    exec(compile(text, "<template>", "exec"), scope)
    return scope["scaled"]


def test_kernels_made_with_exec_from_one_template_each_run_their_own_body():
    kernels = [from_template(scale) for scale in (2.0, -3.0)]
    rewritten = [wp_rewrite(kernel) for kernel in kernels]
    for kernel, kept_kernel in zip(kernels, rewritten, strict=True):
        check(kept(kept_kernel, kernel))
    assert forward(rewritten[0]) != forward(rewritten[1])


def test_two_modules_defining_a_kernel_and_a_helper_of_the_same_names():
    notebooks = [Notebook(), Notebook()]
    for notebook, factor in zip(notebooks, (2.0, -0.5), strict=True):
        notebook.run(HELPER.format(factor=factor))
        notebook.run(KERNEL.format(scale=1.0))
    for notebook in notebooks:
        check(case(notebook.compact))
    assert forward(wp_rewrite(notebooks[0].compact)) != forward(wp_rewrite(notebooks[1].compact))


THROUGH_STATIC = """
@wp.kernel
def through_static(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = wp.static(weigh)(x[tid]) + wp.float64(slot) * x[tid]
"""


def test_a_helper_named_in_wp_static_is_the_one_warp_found_or_the_kernel_must_be_defined_again():
    """Warp evaluates ``wp.static(weigh)`` when the kernel is defined and keeps that helper after ``weigh`` is
    redefined; so does a rewrite made before. One made after could not name it: it asks for the kernel's cell."""
    notebook = Notebook()
    notebook.run(HELPER.format(factor=2.0))
    notebook.run(THROUGH_STATIC)
    kernel = notebook.through_static
    rewritten = wp_rewrite(kernel)
    check(case(kernel))
    notebook.run(HELPER.format(factor=3.0))
    check(kept(rewritten, kernel))
    with pytest.raises(RewriteError) as refusal:
        wp_rewrite(kernel, detach_returns=True)
    assert refusal.value.problem.startswith("wp.static(weigh) names another object now than when 'through_static'")
    assert refusal.value.advice.startswith("Run the cell that defines 'through_static' again")
    assert refusal.value.location.endswith(":6:17")
    notebook.run(THROUGH_STATIC)
    check(case(notebook.through_static))


CONSTANT_KERNEL = """
@wp.kernel
def scaled_by_constant(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float64)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * x[tid] * SCALE + wp.float64(slot)
"""


def test_a_constant_redefined_is_used_when_warp_builds_the_kernel_again():
    """Warp reads a constant when it hashes the kernel's module, which it does again once anything is defined there:
    a constant's cell run again is seen at the next launch after that, by plain Warp and the rewrite alike."""
    notebook = Notebook()
    notebook.run("SCALE = wp.constant(wp.float64(2.0))")
    notebook.run(CONSTANT_KERNEL)
    kernel = notebook.scaled_by_constant
    rewritten = wp_rewrite(kernel)
    check(case(kernel))
    notebook.run("SCALE = wp.constant(wp.float64(-3.0))")
    notebook.run(HELPER.format(factor=1.0))  # any definition: Warp hashes the module again at the next launch
    check(kept(rewritten, kernel))
    assert forward(rewritten) == forward(kernel) and forward(kernel)[0] < 0
