"""The helpers recording exact float atomics, written as real Python (Warp) functions whose names are
placeholders: one is generated per atomic op and number of indices, beside the kernels that call it.

``instantiate`` parses a template's source and renames its placeholders, so generated code reads like
code a Warp expert would write by hand. ``wp`` and ``Any`` are placeholders too: they become the name the
user's module binds to ``warp`` and the runtime's ``Any``. (Every other helper the generated kernels call is a
real ``@wp.func`` of ``warp_rewrite.runtime``.)
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from warp_rewrite.passes.syntax import walk

if TYPE_CHECKING:
    import warp as wp


def record_exact(
    target: Any,
    index: int,
    value: Any,
    tickets: Any,
    returned: wp.array(dtype=Any),
    values: wp.array(dtype=Any),
    order: wp.array(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    record_index: int,
):
    """Run a float atomic and record what its exact backward needs.

    That is its returned value, its operand, its place among the operations on its address (a ticket from a
    counter beside the target) and the address. ``wp.atomic_add`` stands for the atomic being recorded. A
    launch in which nothing the returns are made of requires grad passes empty arrays for all but the
    returned values: then the returns are exact as constants, and cost what a hand-written record costs.
    """
    operand = target.dtype(value)
    returned_value = wp.atomic_add(target, index, operand)
    if order.shape[0] > 0:  # empty when this launch needs no gradient through the returns
        ticket = wp.atomic_add(tickets, index, 1)
        if record_index < order.shape[0]:
            values[record_index] = operand
            order[record_index] = ticket
            addresses[record_index] = index
    if record_index < returned.shape[0]:
        returned[record_index] = returned_value
    return returned_value


def record_exact_cas(
    target: Any,
    index: int,
    compare: Any,
    value: Any,
    tickets: Any,
    returned: wp.array(dtype=Any),
    values: wp.array(dtype=Any),
    order: wp.array(dtype=wp.int32),
    addresses: wp.array(dtype=wp.int32),
    compares: wp.array(dtype=Any),
    record_index: int,
):
    """``record_exact`` for ``atomic_cas``: also records the compare operand, which decides the swap."""
    operand = target.dtype(value)
    expected = target.dtype(compare)
    returned_value = wp.atomic_cas(target, index, expected, operand)
    if order.shape[0] > 0:
        ticket = wp.atomic_add(tickets, index, 1)
        if record_index < order.shape[0]:
            values[record_index] = operand
            order[record_index] = ticket
            addresses[record_index] = index
            compares[record_index] = expected
    if record_index < returned.shape[0]:
        returned[record_index] = returned_value
    return returned_value


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.names.get(node.arg, node.arg)
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self.names.get(node.name, node.name)
        self.generic_visit(node)
        return node


@functools.cache
def _source_of(template: Callable) -> str:
    return textwrap.dedent(inspect.getsource(template))


def instantiate(template: Callable, **names: str) -> ast.FunctionDef:
    """The template's definition with each placeholder ``name`` renamed to ``names[name]``."""
    definition = ast.parse(_source_of(template)).body[0]
    return _Rename(names).visit(definition)


def instantiate_record_exact(op: str, indices: int, name: str, wp: str, any: str) -> ast.FunctionDef:
    """``record_exact`` for ``wp.atomic_<op>`` with ``indices`` index arguments (1 to 4)."""
    template = record_exact_cas if op == "cas" else record_exact
    definition = instantiate(template, wp=wp, Any=any, **{template.__name__: name})
    index_names = ["index"] if indices == 1 else [f"index{i}" for i in range(indices)]
    params = definition.args.args
    at = next(i for i, a in enumerate(params) if a.arg == "index")
    params[at : at + 1] = [ast.arg(n, ast.Name("int", ast.Load())) for n in index_names]
    flat = index_names[0]
    for axis, index_name in enumerate(index_names[1:], start=1):
        flat = f"({flat}) * tickets.shape[{axis}] + {index_name}"
    for node in walk(definition):
        if isinstance(node, ast.Call) and node.args and getattr(node.args[0], "id", None) in ("target", "tickets"):
            if getattr(node.func, "attr", "") == "atomic_add" and node.args[0].id == "target":
                node.func.attr = f"atomic_{op}"
            node.args[1:2] = [ast.Name(n, ast.Load()) for n in index_names]
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "addresses[record_index]":
            node.value = ast.parse(flat, mode="eval").body
    return definition
