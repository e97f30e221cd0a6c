"""Code templates, written as real Python (Warp) functions whose names are placeholders.

``instantiate`` parses a template's source and renames its placeholders, so generated code reads like
code a Warp expert would write by hand. ``wp`` and ``Any`` are placeholders too: they become whatever
names the user's module binds to ``warp`` and ``typing.Any``.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import warp as wp


def record_returned(value: Any, records: wp.array(dtype=Any), index: int):
    """Store an atomic's returned value for the replay kernel and pass it on unchanged.

    An index past the end means a loop ran more often than the records have room for: the launch
    checks the trip counts afterwards and raises, so the store is only skipped, never out of bounds.
    """
    if index < records.shape[0]:
        records[index] = value
    return value


def replay_returned(value: Any, records: wp.array(dtype=Any), index: int):
    """Stand in for an atomic's returned value: the value recorded in forward.

    The atomic passed in as ``value`` keeps its own adjoint (d target / d value), but its side effect
    never runs: the replay kernel is only launched in backward, where Warp skips every atomic.
    """
    return records[index]


def range_length(start: int, stop: int, step: int):
    """How many iterations ``range(start, stop, step)`` makes: the capacity a loop's records need."""
    if step > 0:
        return wp.max((stop - start + step - 1) // step, 0)
    return wp.max((start - stop - step - 1) // (-step), 0)


def linear_thread_index(launch_shape, thread, c0, c1, c2, c3):
    """Prologue of both phases: this thread's row in the record arrays, for launches of 1 to 4 dims."""
    c0, c1, c2, c3 = wp.tid()
    thread = ((c0 * launch_shape[1] + c1) * launch_shape[2] + c2) * launch_shape[3] + c3  # noqa: F841 (read by the generated kernel)


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


def instantiate(template: Callable, **names: str) -> ast.FunctionDef:
    """The template's definition with each placeholder ``name`` renamed to ``names[name]``."""
    definition = ast.parse(textwrap.dedent(inspect.getsource(template))).body[0]
    return _Rename(names).visit(definition)


def instantiate_body(template: Callable, **names: str) -> list[ast.stmt]:
    """The template's statements (not the ``def`` nor its docstring) with placeholders renamed."""
    definition = instantiate(template, **names)
    return definition.body[0 if ast.get_docstring(definition) is None else 1 :]
