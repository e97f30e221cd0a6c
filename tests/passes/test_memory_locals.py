"""Memory reached through locals (passes/read_back.py, passes/dataflow.py): a store through a local bound to an
array or a row writes that array; a local assigned one of several arrays writes each and may only be read while
the launch writes none of them; a store into a component of a local value writes no memory (and its gradient is
right); a native helper handed memory, an array in an element of an array of structs and a helper returning an
array are refused. Through the API and the command line, against finite differences of the original
forward."""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest
import warp as wp

from tests.support import memory_locals, memory_refused
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests, run_cli
from tests.support.harness import f64, i32
from warp_rewrite import RewriteError, wp_rewrite
from warp_rewrite.passes.dataflow import rebound_locals, single_assignments

N = memory_locals.N
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6])


def zeros(shape=N):
    return wp.zeros(shape, dtype=wp.float64, requires_grad=True, device="cpu")


def vectors():
    return wp.array(np.stack([X, X + 1.5, X * X], 1), dtype=wp.vec3d, requires_grad=True, device="cpu")


KERNELS = {
    "store_through_alias": Pattern(lambda: [i32([0]), zeros(), f64(X, True), zeros()], [1, 3], [2]),
    "store_through_row": Pattern(lambda: [i32([0]), zeros((2, N)), f64(X, True), zeros()], [1, 3], [2]),
    "read_one_of_two": Pattern(
        lambda: [i32([0]), f64(X + 2, True), f64(X * 3, True), f64(X, True), zeros(), 1],
        [4],
        [1, 2, 3],
    ),
    "component_of_a_local_value": Pattern(lambda: [i32([0]), vectors(), f64(X, True), zeros()], [3], [1, 2]),
}
emitted = emitted_fixture(memory_locals)
test_through_the_api, test_through_the_command_line = end_to_end_tests(memory_locals, N, KERNELS)


def test_a_read_of_another_threads_write_through_an_alias_is_refused_at_launch(emitted):
    """``buf = a; buf[tid] = ...`` writes ``a``: a float read of another thread's element of ``a`` that needs a
    gradient is refused, as without the alias (once the store through ``buf`` went unseen, and the gradient was
    silently wrong)."""
    rewritten = wp_rewrite(memory_locals.read_other_thread_through_alias)
    emitted_kernel, emitted_error = emitted.read_other_thread_through_alias, emitted.wp_rewrite_runtime.RewriteError
    for kernel, error in ((rewritten, RewriteError), (emitted_kernel, emitted_error)):
        args = [i32([0]), zeros(), f64(X, True), zeros()]
        with wp.Tape(), pytest.raises(error, match="reads 'a', which the launch also writes"):
            wp.launch(kernel, N, inputs=args, device="cpu")


REFUSED = {
    "read_written_through_choice": "'buf' is assigned more than one array ('a' or 'b') and is read here",
    "choice_handed_to_helper": "'buf' is assigned more than one array ('a' or 'b') and is handed to 'put' here",
    "atomic_on_a_choice": "the target of wp.atomic_add() is not a kernel argument or a struct field of one",
    "native_handed_memory": "'native_store' is handed 'out' but the rewrite cannot see what it does with it",
    "array_in_a_struct_element": "memory in an element of an array of structs (holder.data[tid] = ",
    "helper_returning_an_array": "helper returning memory (pick(a, b, 1)) is not supported by warp-rewrite yet",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_through_the_api(name):
    with pytest.raises(RewriteError, match=re.escape(REFUSED[name])):
        wp_rewrite(getattr(memory_refused, name))


def test_refused_through_the_command_line(capsys, tmp_path):
    status, _, err = run_cli(capsys, memory_refused.__file__, "-o", tmp_path / "out.py")
    assert status == 1
    for name, message in REFUSED.items():
        assert f"kernel '{name}': {message}" in err


def test_a_store_through_a_local_does_not_rebind_it():
    function = ast.parse("def f(a, b, c):\n    buf = a\n    buf[0] = 1.0\n    v = b\n    v = c\n    w = a\n").body[0]
    assert sorted(single_assignments(function)) == ["buf", "w"]
    assert {name: [ast.unparse(v) for v in values] for name, values in rebound_locals(function).items()} == {
        "v": ["b", "c"]
    }
