"""The fence's table (``warp_rewrite.passes.fence.FORMS``) as the fuzzer's grammar: a generator per form.

Each generator writes one use of its form into a scope of the kernel being written (in the kernel, a helper, a
loop or a branch: ``generator._KernelWriter.form_block`` picks the wrappers), on locals or on arrays of its own
that the launch writes, some of them vectors and matrices, so that the form combines with the consumed atomics
around it. ``tests/fuzz/test_fuzz.py`` checks that every form has a generator and that the suite's slice exercises
every form; ``make fuzz`` prints how many kernels exercised each (``exercised_forms``).
"""

from __future__ import annotations

import ast
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import warp as wp

from warp_rewrite.passes.atomics import WarpNames
from warp_rewrite.passes.fence import BY_NAME, FORMS, Fence, Kind

if TYPE_CHECKING:
    from tests.fuzz.generator import KernelCase, _KernelWriter, _Scope

Generator = Callable[["_KernelWriter", "_Scope"], None]


def _out(writer: _KernelWriter, dtype: str = "float64", shape: tuple[int, ...] | None = None, loss: bool = True):
    """A fresh array of the form's own that the launch writes (float ones are part of the loss)."""
    from tests.fuzz.generator import ArraySpec

    floating = dtype in ("float64", "vec3d", "mat33d")
    spec = ArraySpec(writer.fresh("g"), dtype, shape or (writer.dim,), None, floating, floating and loss)
    return writer.add_array(spec).name


def _local_matrix(writer: _KernelWriter, scope: _Scope) -> str:
    local = writer.fresh("lm")
    scope.line(f"{local} = wp.mat33d(xv, {writer.constant()}, 0.0, 0.0, xv * xv, 1.0, 0.5, 0.0, xv)")
    return local


def _use_matrix(writer: _KernelWriter, scope: _Scope, local: str) -> None:
    scope.line(f"y[tid] += wp.ddot({local}, wp.mat33d(1.0, xv, 0.0, 0.5, 1.0, 0.0, 0.0, 0.25, 1.0))")


def _float_update(writer: _KernelWriter) -> str:
    """A multiplicative update operand, safely away from zero (for /=)."""
    return writer.rng.choice((f"*= xv + {writer.constant(1.6, 2.0)}", f"/= xv * xv + {writer.constant()}"))


def _int_update(writer: _KernelWriter) -> str:
    return writer.rng.choice(("*= 3", "//= 2", "%= 5", "&= keys[tid] + 1", "|= keys[tid]", "^= 6", "<<= 1", ">>= 1"))


# --- assignment targets ------------------------------------------------------------------------------


def _name(group: str) -> Generator:
    def write(writer: _KernelWriter, scope: _Scope) -> None:
        local = writer.fresh("t")
        scope.line(f"{local} = xv * {writer.constant()}")
        if group != "=":
            scope.line(f"{local} {'+= xv' if group == '+=' else _float_update(writer)}")
        scope.line(f"y[tid] += {local} * {writer.constant()}")

    return write


def _attribute(group: str) -> Generator:
    """On a local struct: Warp 1.19's backward keeps the adjoint of a local vector's component it overwrites
    (``v.x = ...``, ``v[0] *= ...``), in plain Warp too, so the generators store into arrays' components only."""

    def write(writer: _KernelWriter, scope: _Scope) -> None:
        struct, local = f"{writer.name}_P", writer.fresh("lp")
        if not any(text.startswith(f"@wp.struct\nclass {struct}:") for text in writer.helpers):
            writer.helpers.append(f"@wp.struct\nclass {struct}:\n    a: wp.float64\n    b: wp.float64\n")
        scope.line(f"{local} = {struct}()")
        scope.line(f"{local}.a = xv * {writer.constant()}")
        update = {"=": f"= xv * xv * {writer.constant()}", "+=": "+= xv", "*=": _float_update(writer)}[group]
        scope.line(f"{local}.{writer.rng.choice('ab')} {update}")
        scope.line(f"y[tid] += {local}.a + {local}.b * {writer.constant()}")

    return write


def _subscript(group: str) -> Generator:
    def write(writer: _KernelWriter, scope: _Scope) -> None:
        if group == "*=":  # an int array: a read and a store (or an int atomic)
            out = _out(writer, "int32")
            scope.line(f"{out}[tid] = keys[tid] + 1")
            scope.line(f"{out}[tid] {_int_update(writer)}")
            return
        if group == "=" and not (scope.loops or scope.in_helper) and writer.rng.random() < 0.5:
            _read_back_at_a_slot(writer, scope)
            return
        if group == "=" and not scope.in_helper and writer.rng.random() < 0.5:
            _append_pool(writer, scope)
            return
        out = _out(writer)
        operator = writer.rng.choice(("+=", "-=")) if group == "+=" else "="
        scope.line(f"{out}[tid] {operator} {writer.float_value(scope)}")
        if group == "=" and writer.rng.random() < 0.5:  # read back what this thread stored (passes.own_writes)
            scope.line(f"y[tid] += {out}[tid] * {out}[tid] * {writer.constant()}")
        elif group == "=" and writer.rng.random() < 0.5:  # a read only compared (passes.layout.only_compared)
            scope.line(f"if {out}[(tid + 1) % {writer.dim}] > {writer.constant()}:")
            scope.line(f"    y[tid] += xv * {writer.constant()}")

    return write


def _read_back_at_a_slot(writer: _KernelWriter, scope: _Scope) -> None:
    """Stores at a slot taken from a counter, read back nonlinearly (``passes.own_writes.counter_slots``): outside
    loops and in the kernel, where the proof that no other thread writes the slot holds."""
    step = writer.rng.randint(1, 2)
    counter, out, slot = _out(writer, "int32", (1,)), _out(writer, shape=(step * writer.dim,)), writer.fresh("q")
    scope.line(f"{slot} = wp.atomic_add({counter}, 0, {step})")
    scope.line(f"{out}[{slot}] = {writer.float_value(scope)}")
    scope.line(f"{out}[{slot}] = {out}[{slot}] * {out}[{slot}] * {writer.constant()} + xv")
    scope.line(f"y[tid] += {out}[{slot}] * xv")


def _append_pool(writer: _KernelWriter, scope: _Scope) -> None:
    """An append pool: each thread reads its parent below the launch's writes and appends two children above them
    (``passes.memory.pool_arrays``); the gradient goes through the parents, which the launch checks it never
    wrote. In the kernel: a pool handed to a helper is no pool."""
    from tests.fuzz.generator import ArraySpec

    room = 2 * writer.dim * scope.multiplicity
    values = [round(writer.rng.uniform(0.5, 1.5), 4) for _ in range(writer.dim)] + [0.0] * room
    pool = writer.add_array(ArraySpec(writer.fresh("p"), "float64", (writer.dim + room,), values, True, True, True))
    counter, base, parent = _out(writer, "int32", (1,)), writer.fresh("b"), writer.fresh("pp")
    scope.line(f"{parent} = {pool.name}[tid]")
    scope.line(f"{base} = wp.atomic_add({counter}, 0, 2) + {writer.dim}")
    scope.line(f"{pool.name}[{base}] = {parent} * xv")
    scope.line(f"{pool.name}[{base} + 1] = {parent} * {parent} * {writer.constant()}")
    scope.line(f"y[tid] += {parent} * xv")


def _component(group: str) -> Generator:
    def write(writer: _KernelWriter, scope: _Scope) -> None:
        column = writer.rng.randint(0, 2)
        if group == "*=":
            out = _out(writer, "vec3i")
            scope.line(f"{out}[tid][{column}] = keys[tid] + 1")
            scope.line(f"{out}[tid][{column}] {_int_update(writer)}")
            return
        out = _out(writer, "vec3d")
        operator = writer.rng.choice(("+=", "-=")) if group == "+=" else "="
        scope.line(f"{out}[tid][{column}] {operator} {writer.float_value(scope)}")

    return write


def _field(group: str) -> Generator:
    def write(writer: _KernelWriter, scope: _Scope) -> None:
        component = writer.rng.choice("xyz")
        if group == "*=":
            out = _out(writer, "vec3i")
            scope.line(f"{out}[tid].{component} = keys[tid] + 2")
            scope.line(f"{out}[tid].{component} {_int_update(writer)}")
            return
        out = _out(writer, "vec3d")
        operator = writer.rng.choice(("+=", "-=")) if group == "+=" else "="
        scope.line(f"{out}[tid].{component} {operator} {writer.float_value(scope)}")

    return write


def _nested(group: str) -> Generator:
    def write(writer: _KernelWriter, scope: _Scope) -> None:
        row, column = writer.rng.randint(0, 2), writer.rng.randint(0, 2)
        if group == "*=":  # a component of an element of a row of a 2-D array
            out = _out(writer, "vec3i", (writer.dim, 1))
            scope.line(f"{out}[tid][0][{column}] = keys[tid] + 1")
            scope.line(f"{out}[tid][0][{column}] {_int_update(writer)}")
            return
        out = _out(writer, "mat33d")
        operator = writer.rng.choice(("+=", "-=")) if group == "+=" else "="
        scope.line(f"{out}[tid][{row}][{column}] {operator} {writer.float_value(scope)}")

    return write


def _tuple(writer: _KernelWriter, scope: _Scope) -> None:
    first, second = writer.fresh("p"), writer.fresh("p")
    scope.line(f"{first}, {second} = xv * {writer.constant()}, xv + {writer.constant()}")
    scope.line(f"y[tid] += {first} * {second}")


def _matmul(writer: _KernelWriter, scope: _Scope) -> None:
    local = _local_matrix(writer, scope)
    scope.line(f"{local} @= wp.mat33d(1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, xv)")
    _use_matrix(writer, scope, local)


# --- memory reached through locals and elements ---------------------------------------------------


def _read_only(writer: _KernelWriter) -> str:
    """A fresh float array the launch only reads, differentiated with respect to its values."""
    from tests.fuzz.generator import ArraySpec

    values = [round(writer.rng.uniform(0.5, 1.5), 4) for _ in range(writer.dim)]
    return writer.add_array(ArraySpec(writer.fresh("r"), "float64", (writer.dim,), values, True, False, True)).name


def _local_bound_to_memory(writer: _KernelWriter, scope: _Scope) -> None:
    """Stores and atomics through a local bound to an array the launch writes, or to a row of a 2-D one."""
    local = writer.fresh("m")
    if writer.rng.random() < 0.5:
        scope.line(f"{local} = {_out(writer)}")
    else:
        scope.line(f"{local} = {_out(writer, shape=(2, writer.dim))}[1]")
    if writer.rng.random() < 0.5:
        scope.line(f"{local}[tid] = {writer.float_value(scope)}")
    else:
        scope.line(f"wp.atomic_add({local}, tid, {writer.float_value(scope)})")


def _local_assigned_more_than_one_array(writer: _KernelWriter, scope: _Scope) -> None:
    """A local picking one of two arrays under a branch: read where the launch writes neither, stored through
    where it writes both."""
    local = writer.fresh("m")
    stored = writer.rng.random() < 0.4
    first, second = (_out(writer), _out(writer)) if stored else ("x", _read_only(writer))
    scope.line(f"{local} = {first}")
    scope.line(f"if {writer.condition()}:")
    scope.nested().line(f"{local} = {second}")
    if stored:
        scope.line(f"{local}[tid] = {writer.float_value(scope)}")
    else:
        scope.line(f"y[tid] += {local}[(tid + 1) % {writer.dim}] * xv * {writer.constant()}")


def _helper_returning_memory(writer: _KernelWriter, scope: _Scope) -> None:
    from tests.fuzz.generator import ArraySpec

    out, name, local = _out(writer), writer.fresh(f"{writer.name}_pick"), writer.fresh("m")
    annotation = ArraySpec(out, "float64", (writer.dim,)).annotation()
    writer.helpers.append(f"@wp.func\ndef {name}(a: {annotation}):\n    return a\n")
    scope.line(f"{local} = {name}({out})")
    scope.line(f"{local}[tid] = {writer.float_value(scope)}")


def _memory_in_struct_element(writer: _KernelWriter, scope: _Scope) -> None:
    """An array held in an element of an array of structs (always refused: its arguments are never made)."""
    from tests.fuzz.generator import ArraySpec

    struct = writer.fresh(f"{writer.name}_Holder")
    writer.helpers.append(f"@wp.struct\nclass {struct}:\n    data: wp.array(dtype=wp.float64)\n")
    holders = writer.add_array(ArraySpec(writer.fresh("hs"), struct, (1,), layout="structs")).name
    scope.line(f"{holders}[0].data[tid] = {writer.float_value(scope)}")


# --- atomics, calls, control flow -----------------------------------------------------------------


def _atomic_used(writer: _KernelWriter, scope: _Scope) -> None:
    if writer.rng.random() < 0.4:
        _depth_test(writer, scope)
    else:
        writer.int_block(scope)


def _depth_test(writer: _KernelWriter, scope: _Scope) -> None:
    """A z-buffer's early depth test: a read of the target of the float atomic after it, only compared, while the
    target's returns take the exact path (its record is read from the shadow); the return used as a number, or only
    compared too. On a 1-D or 2-D target, in the kernel or in a helper."""
    from tests.fuzz.generator import ArraySpec

    op, comparison, initial = writer.rng.choice((("min", "<", 50.0), ("max", ">", -50.0)))
    width = writer.rng.randint(1, 2)
    shape = (width, 2)[: writer.rng.choice((1, 2))]  # a 2-D z-buffer: its second index is 0 or 1
    values = [initial] * math.prod(shape)
    zbuf = writer.add_array(ArraySpec(writer.fresh("z"), "float64", shape, values, True, True, True))
    depth, returned = writer.fresh("d"), writer.fresh("zr")
    pixel = writer.index_expr(width, None) + (", tid % 2" if len(shape) == 2 else "")
    scope.line(f"{depth} = {writer.float_value(scope)}")
    scope.line(f"if {depth} {comparison} {zbuf.name}[{pixel}]:")
    inner = scope.nested()
    inner.line(f"{returned} = wp.atomic_{op}({zbuf.name}, {pixel}, {depth})")
    if writer.rng.random() < 0.5:
        inner.line(f"y[tid] += {returned} * xv * {writer.constant()}")
    else:
        inner.line(f"if {returned} {'>' if op == 'min' else '<'} {depth}:")
        inner.nested().line(f"y[tid] += {depth} * xv")


def _atomic_by_keyword(writer: _KernelWriter, scope: _Scope) -> None:
    counter, slot = _out(writer, "int32", (1,)), writer.fresh("q")
    scope.line(f"{slot} = wp.atomic_add(arr={counter}, i=0, value=1)")
    scope.line(f"y[tid] += wp.float64({slot} % 3 + 1) * xv * {writer.constant()}")


def _atomic_unused(writer: _KernelWriter, scope: _Scope) -> None:
    counter = _out(writer, "int32", (1,))
    scope.line(f"wp.atomic_add({counter}, 0, keys[tid])")


def _tile_atomic_used(writer: _KernelWriter, scope: _Scope) -> None:
    target, tile = _out(writer, "float64", (2,), loss=False), writer.fresh("tt")
    scope.line(f"{tile} = wp.tile_atomic_add({target}, wp.tile_ones(shape=2, dtype=wp.float64))")
    scope.line(f"y[tid] += xv * wp.tile_sum({tile})[0]")


def _helper_call(writer: _KernelWriter, scope: _Scope) -> None:
    writer.helper(scope, [], writer.int_block)


def _value_helper(writer: _KernelWriter) -> str:
    name = writer.fresh(f"{writer.name}_v")
    writer.helpers.append(f"@wp.func\ndef {name}(v: wp.float64) -> wp.float64:\n    return v * {writer.constant()}\n")
    return name


def _helper_through_static(writer: _KernelWriter, scope: _Scope) -> None:
    scope.line(f"y[tid] += wp.static({_value_helper(writer)})(xv)")


def _builtin_call(writer: _KernelWriter, scope: _Scope) -> None:
    scope.line(f"y[tid] += wp.cos(xv) * {writer.constant()} + wp.abs(xv)")


def _builtin_writing_its_arguments(writer: _KernelWriter, scope: _Scope) -> None:
    """Draws from a random state ``wp.randf`` advances in place: the second draw reads the state the first wrote, or
    a loop around a consumed atomic carries the state from trip to trip (the replay restores it per trip)."""
    state = writer.fresh("st")
    scope.line(f"{state} = wp.rand_init({writer.rng.randint(1, 99)}, tid)")
    if writer.rng.random() < 0.5:
        scope.line(f"y[tid] += xv * wp.float64(wp.randf({state}))")
        scope.line(f"y[tid] += xv * xv * wp.float64(wp.randf({state}))")
        return
    counter, trip, slot = _out(writer, "int32", (1,)), writer.fresh("j"), writer.fresh("q")
    scope.line(f"for {trip} in range(keys[tid] % 3 + 1):")
    inner = scope.nested()
    inner.line(f"{slot} = wp.atomic_add({counter}, 0, 1)")
    inner.line(f"y[tid] += xv * wp.float64(wp.randf({state})) * wp.float64({slot} % 3 + 1)")


def _builtin_refused(writer: _KernelWriter, scope: _Scope) -> None:
    """A thread-local array, whose stores Warp's replay skips."""
    kept = writer.fresh("ka")
    scope.line(f"{kept} = wp.zeros(shape=2, dtype=wp.float64)")
    scope.line(f"{kept}[0] = xv")
    scope.line(f"y[tid] += {kept}[0] * {kept}[0]")


def _call_of_a_local(writer: _KernelWriter, scope: _Scope) -> None:
    """A builtin bound to a local and handed an array, as Warp's deterministic-mode tests call ``wp.atomic_xor`` (an
    atomic max of an element with itself: it changes nothing)."""
    operation = writer.fresh("operation")
    scope.line(f"{operation} = wp.atomic_max")
    scope.line(f"{operation}(keys, 0, keys[0])")
    scope.line(f"y[tid] += xv * {writer.constant()}")


def _opaque_call(writer: _KernelWriter, scope: _Scope) -> None:
    name = writer.fresh(f"{writer.name}_native")
    writer.helpers.append(f'@wp.func_native("return a * 2;")\ndef {name}(a: int) -> int: ...\n')
    scope.line(f"y[tid] += wp.float64({name}(keys[tid]) % 5 + 1) * xv")


def _static_value(writer: _KernelWriter, scope: _Scope) -> None:
    scope.line(f"y[tid] += xv * wp.float64(wp.static({writer.rng.randint(1, 3)} + 1))")


def _if(writer: _KernelWriter, scope: _Scope) -> None:
    scope.line(f"if {writer.condition()}:")
    scope.nested().line(f"y[tid] += xv * {writer.constant()}")


def _for_range(writer: _KernelWriter, scope: _Scope) -> None:
    variable = writer.fresh("j")
    scope.line(f"for {variable} in range({writer.rng.randint(1, 3)}):")
    scope.nested().line(f"y[tid] += xv * wp.float64({variable} + 1)")


def _for_other(writer: _KernelWriter, scope: _Scope) -> None:
    variable = writer.fresh("j")
    scope.line(f"for {variable} in reversed(range({writer.rng.randint(1, 3)})):")
    scope.nested().line(f"y[tid] += xv * wp.float64({variable} + 2)")


def _while(writer: _KernelWriter, scope: _Scope) -> None:
    writer.probe_block(scope)


def _loop_else(writer: _KernelWriter, scope: _Scope) -> None:
    variable = writer.fresh("j")
    scope.line(f"for {variable} in range(2):")
    scope.nested().line(f"y[tid] += xv * wp.float64({variable} + 1)")
    scope.line("else:")
    scope.nested().line("y[tid] += xv")


def _break(writer: _KernelWriter, scope: _Scope) -> None:
    """With a consumed atomic in the loop: a loop that breaks with nothing the rewrite records inside is left to
    Warp, whose backward runs every trip of it (a known failure, in plain Warp too, kept out until it is fixed)."""
    variable = writer.fresh("j")
    scope.line(f"for {variable} in range(3):")
    inner = scope.nested(loops=(*scope.loops, (variable, 3)), local_loops=scope.local_loops + 1, carry=None)
    writer.int_block(inner)
    inner.line(f"if {variable} == keys[tid] % 3:")
    inner.nested().line("break")
    inner.line(f"y[tid] += xv * {writer.constant()}")


def _continue(writer: _KernelWriter, scope: _Scope) -> None:
    variable = writer.fresh("j")
    scope.line(f"for {variable} in range(3):")
    scope.nested().line(f"if {variable} == keys[tid] % 3:")
    scope.nested().nested().line("continue")
    scope.nested().line(f"y[tid] += xv * {writer.constant()}")


def _return_in_kernel(writer: _KernelWriter, scope: _Scope) -> None:
    scope.line("if keys[tid] > 100:")  # keys stay below 10: never taken
    scope.nested().line("return")


def _return_in_helper(writer: _KernelWriter, scope: _Scope) -> None:
    name = writer.fresh(f"{writer.name}_v")
    writer.helpers.append(
        f"@wp.func\ndef {name}(v: wp.float64) -> wp.float64:\n    if v > wp.float64(0.0):\n"
        f"        return v * {writer.constant()}\n    return v * v\n"
    )
    scope.line(f"y[tid] += {name}(xv)")


def _expression_statement(writer: _KernelWriter, scope: _Scope) -> None:
    scope.line('"""A note the rewrite keeps."""')


def _pass(writer: _KernelWriter, scope: _Scope) -> None:
    scope.line("if keys[tid] > 100:")
    scope.nested().line("pass")


def _assert(writer: _KernelWriter, scope: _Scope) -> None:
    scope.line("assert keys[tid] >= 0")


def _expressions(writer: _KernelWriter, scope: _Scope) -> None:
    scope.line(f"y[tid] += (xv if xv > wp.float64(0.0) and keys[tid] < 5 else -xv) * {writer.constant()}")


GENERATORS: dict[str, Generator] = {
    **{
        f"{target} {group}": make(group)
        for target, make in (
            ("name", _name),
            ("attribute", _attribute),
            ("subscript", _subscript),
            ("component", _component),
            ("field", _field),
            ("nested", _nested),
        )
        for group in ("=", "+=", "*=")
    },
    "tuple =": _tuple,
    "@= on any target": _matmul,
    "atomic, return used": _atomic_used,
    "atomic by keyword, return used": _atomic_by_keyword,
    "atomic, return unused": _atomic_unused,
    "tile atomic, return used": _tile_atomic_used,
    "local bound to memory": _local_bound_to_memory,
    "local assigned more than one array": _local_assigned_more_than_one_array,
    "memory in an element of an array of structs": _memory_in_struct_element,
    "helper returning memory": _helper_returning_memory,
    "helper call": _helper_call,
    "helper through wp.static": _helper_through_static,
    "builtin call": _builtin_call,
    "builtin writing its arguments": _builtin_writing_its_arguments,
    "builtin the rewrite cannot replay": _builtin_refused,
    "call of a local": _call_of_a_local,
    "opaque call": _opaque_call,
    "wp.static value": _static_value,
    "if": _if,
    "for over range()": _for_range,
    "for over another iterable": _for_other,
    "while": _while,
    "loop with an 'else' clause": _loop_else,
    "break": _break,
    "continue": _continue,
    "return in kernel": _return_in_kernel,
    "return in helper": _return_in_helper,
    "expression statement": _expression_statement,
    "pass": _pass,
    "assert": _assert,
    "operators": _expressions,
    "reads": _expressions,
}
# Forms with a known failure, by name: a failed kernel using one is an expected failure of the suite's slice
# (tests/fuzz/test_fuzz.py) until the fix lands, and is still reported by ``make fuzz``.
KNOWN_FAILURES: dict[str, str] = {}  # form -> why its kernels are expected to fail (none today)
# Forms written only where no wrapper goes around them: a kernel's return is a helper's inside one.
KERNEL_LEVEL = frozenset({"return in kernel"})
ACCEPTED = [form.name for form in FORMS if form.kind is Kind.ACCEPTED]
REFUSED = [form.name for form in FORMS if form.kind is Kind.REFUSED]


# --- which forms a kernel exercises ---------------------------------------------------------------


@dataclass
class _Unit:
    name: str
    text: str
    tree: ast.FunctionDef

    def location(self, node: ast.AST) -> str:
        return f"<fuzz>:{getattr(node, 'lineno', 0)}:{getattr(node, 'col_offset', 0) + 1}"


class _SourceFrontend:
    """What the fence asks, answered from a generated kernel's source alone: its helpers are the ``@wp.func``s
    the source defines (``wp.static(helper)`` too), its builtins Warp's and Python's."""

    max_unroll = 16
    backward = True

    def __init__(self, case: KernelCase):
        tree = ast.parse(case.source)
        functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
        # the annotations' types: Warp's, and the structs the source defines (made, not compiled)
        self.namespace: dict[str, Any] = {"wp": wp, "Any": Any}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                exec(compile(ast.Module([node], []), "<fuzz>", "exec", dont_inherit=True), self.namespace)
        native = {f.name for f in functions if "func_native" in ast.unparse(f.decorator_list[0])}
        units = {f.name: _Unit(f.name, case.source, f) for f in functions if f.name not in native}
        self.kernel = units.pop(case.name)
        self.helpers = units

    def warp_names(self, unit: _Unit) -> WarpNames:
        return WarpNames()

    def parameter_types(self, unit: _Unit) -> dict[str, Any]:
        return {a.arg: self._type(a.annotation) for a in unit.tree.args.args}

    def return_type(self, unit: _Unit) -> Any:
        return self._type(unit.tree.returns)

    def named_type(self, unit: _Unit, expr: ast.expr) -> Any:
        try:
            named = self._type(expr)
        except (NameError, AttributeError):  # a helper or a local's name
            return None
        return named if isinstance(named, type) else None

    def element_struct(self, unit: _Unit, name: str) -> Any:
        annotation = self.parameter_types(unit).get(name)
        return annotation.dtype if wp._src.types.is_array(annotation) and hasattr(annotation.dtype, "vars") else None

    def _type(self, annotation: ast.expr | None) -> Any:
        return None if annotation is None else eval(ast.unparse(annotation), self.namespace)

    def resolve_helper(self, unit: _Unit, call: ast.Call) -> _Unit | None:
        func = call.func
        if isinstance(func, ast.Call) and func.args:  # wp.static(helper)
            func = func.args[0]
        return self.helpers.get(func.id) if isinstance(func, ast.Name) else None

    def is_builtin(self, unit: _Unit, call: ast.Call) -> bool:
        func = call.func
        return isinstance(func, ast.Attribute) or getattr(func, "id", None) in ("int", "float", "range", "reversed")


def forms_of(case: KernelCase) -> set[str]:
    """The names of the fence's forms the kernel and its helpers use."""
    fence = Fence(_SourceFrontend(case))
    return {form.name for unit in fence.reached() for _, form in fence.forms(unit) if form is not None}


def exercised_forms(cases: list[KernelCase]) -> Counter:
    """How many of ``cases`` exercise each of the fence's forms."""
    counts = Counter(dict.fromkeys(BY_NAME, 0))
    for case in cases:
        counts.update(forms_of(case))
    return counts
