"""Seeded generator of random Warp kernels that consume atomics' returned values.

Each kernel is drawn from its own ``random.Random(f"{seed}:{index}")``, so any one of them can be written out
again from its seed and index alone. Kernels are built from blocks: a consumed atomic and a few uses of what
it returns (indices, conditions, arithmetic, other atomics), wrapped in ``if``s, ``for`` loops over ``range``
(constant or array-read bounds) and ``@wp.func`` helpers, with unconsumed atomics on the same targets. Some
kernels also carry locals through loops Warp does not unroll, or consist of such loops alone (``tests/fuzz/loops.py``,
drawn from a stream of their own).

Inputs are chosen so that finite differences of the original forward are a valid ground truth: float branch
conditions only compare inputs whose magnitudes stay well away from the threshold, float min/max operands of
different threads differ (inputs have distinct magnitudes, every operand in a loop depends on the loop
variable), and every slot used as an index stays inside an output sized from a bound on its counter.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.fuzz.combinations import CELLS, Cell, Projection, write_combination
from tests.fuzz.grammar import ACCEPTED, GENERATORS, KERNEL_LEVEL, REFUSED

INT_OPS = ("add", "sub", "min", "max", "cas", "exch", "and", "or", "xor")
FLOAT_OPS = ("add", "sub", "min", "max", "exch")
MOD = 16  # slots of non-monotone counters index outputs modulo this
TRIPS_MAX = 3  # array-read loop bounds are drawn from 0..TRIPS_MAX
KEYS_MAX = 9
THRESHOLD_GAP = 0.006  # inputs stay this far from the thresholds branches and min/max ties compare them with
FORM_SEED = 0  # the stream of ``generate_form_kernel``'s kernels, one per form of the fence's table, alone or not


@dataclass
class ArraySpec:
    """One array argument: its dtype (a Warp type's name: "float64", "int32", "vec3d", ..., see ``COMPONENTS``; or
    a struct's, with the layout "structs"), shape, initial values and role."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    values: list[float] | None = None  # flat; None: zeros
    requires_grad: bool = False
    loss: bool = False  # part of the loss (its values, weighted)
    wrt: bool = False  # differentiate the loss with respect to its initial values
    # "strided": every other element of a base array; "indexed": a wp.indexedarray of one; "structs": an array of
    # the struct ``dtype`` names, zeros
    layout: str = "plain"
    struct: str | None = None  # the struct argument that holds it as a field, if any
    alias_of: str | None = None  # launched bound to the same array as this argument (the launch must refuse)
    generic: bool = False  # annotated ``dtype=Any``: Warp instantiates the kernel for the dtype each launch passes

    def annotation(self) -> str:
        if self.generic:
            return f"wp.array{'' if len(self.shape) == 1 else f'{len(self.shape)}d'}(dtype=Any)"
        if self.layout == "structs":  # an array of the struct named by ``dtype``
            return f"wp.array(dtype={self.dtype})"
        if self.layout == "indexed":
            return f"wp.indexedarray(dtype=wp.{self.dtype})"
        if len(self.shape) == 1:
            return f"wp.array(dtype=wp.{self.dtype})"
        return f"wp.array{len(self.shape)}d(dtype=wp.{self.dtype})"

    @property
    def ref(self) -> str:
        """How kernel code names it: ``c0``, or ``s0.c0`` for a struct's field."""
        return f"{self.struct}.{self.name}" if self.struct else self.name


# The shape of one element of each array dtype the fuzzer uses besides scalars (an array's numpy values).
COMPONENTS = {
    "vec3d": (3,),
    "vec3i": (3,),
    "mat33d": (3, 3),
    "mat22d": (2, 2),
    "quatd": (4,),
    "spatial_vectord": (6,),
}


@dataclass
class StructSpec:
    """A struct argument: the ``@wp.struct`` class the module defines and the arrays it holds."""

    name: str
    class_name: str
    fields: list[ArraySpec]


@dataclass
class KernelCase:
    """A generated kernel: its name, launch size, arguments and source (helpers first, then the kernel)."""

    name: str
    seed: int
    index: int
    dim: int
    arrays: list[ArraySpec]  # the kernel's array arguments, then the struct arguments' fields
    source: str
    structs: list[StructSpec] = field(default_factory=list)  # arguments after the arrays
    combination: Cell | None = None  # the cell of tests/fuzz/combinations.py the kernel drew
    projections: list[Projection] = field(default_factory=list)  # kernels the loss reads arrays of structs through
    loop_forms: frozenset[str] = frozenset()  # the forms of loops Warp does not unroll it has (tests/fuzz/loops.py)
    # the fence's form it was written to use (``generate_form_kernel``): alone, it may be one of Warp's own limits
    form: str | None = None

    @property
    def arguments(self) -> list[ArraySpec]:
        """The arrays that are arguments of their own, in order (the struct arguments come after them)."""
        return [spec for spec in self.arrays if spec.struct is None]


@dataclass
class _Counter:
    """An int32 target. add/sub counters are monotone: their slots are unique, so outputs take plain stores."""

    array: ArraySpec
    op: str
    width: int
    out: ArraySpec
    total: int = 0  # bound on what add/sub ops move the counter by, over the whole launch

    @property
    def monotone(self) -> bool:
        return self.op in ("add", "sub")

    def address(self, index: str) -> str:
        """The atomic's index arguments: ``index`` into the first dimension, 0 into the others."""
        return index + ", 0" * (len(self.array.shape) - 1)


@dataclass
class _FloatTarget:
    array: ArraySpec
    op: str
    width: int

    @property
    def vector(self) -> bool:
        return self.array.dtype == "vec3d"

    def address(self, index: str) -> str:
        return index + ", 0" * (len(self.array.shape) - 1)


@dataclass
class _Scope:
    """Where code is being written: its lines, indentation and the loops around it (across helper calls)."""

    lines: list[str]
    indent: int
    loops: tuple[tuple[str, int], ...] = ()  # (variable, most trips), innermost last
    local_loops: int = 0  # loops around this point inside the current function
    carry: str | None = None  # an int carried through the innermost loop, to add slots into
    in_helper: bool = False  # inside a @wp.func (Warp 1.19 cannot pass an indexed array to one in backward)

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def nested(self, **changes) -> _Scope:
        values = {"lines": self.lines, "indent": self.indent + 1, "loops": self.loops, "in_helper": self.in_helper}
        values.update(local_loops=self.local_loops, carry=self.carry)
        values.update(changes)
        return _Scope(**values)

    @property
    def multiplicity(self) -> int:
        result = 1
        for _, trips in self.loops:
            result *= max(trips, 1)
        return result

    def loop_factor(self) -> str | None:
        """A float64 expression of the innermost loop variable, or None outside loops."""
        return f"wp.float64({self.loops[-1][0]} + 1)" if self.loops else None


def _literal(value: float) -> str:
    return f"wp.float64({value})"


def _distinct_inputs(rng: random.Random, n: int) -> list[float]:
    """Values with distinct magnitudes in [0.25, 1.47] (no ties under x*x) and random signs, at least
    ``THRESHOLD_GAP`` from 1 (where ``a * x`` ties with ``a`` in a min or max: seed 9001, index 1391)."""
    magnitudes = [round((m + rng.random()) / 100.0, 4) for m in rng.sample(range(25, 146, 3), n)]
    away = [m + 2 * THRESHOLD_GAP * (1 if m >= 1 else -1) if abs(m - 1) < THRESHOLD_GAP else m for m in magnitudes]
    return [m * rng.choice((-1.0, 1.0)) for m in away]


class _KernelWriter:
    """Writes one kernel. Every choice comes from ``rng``, but those added after the stream's kernels were settled,
    which come from a stream of their own (``later``), so that adding one leaves every kernel of a seed as it was
    but for what that choice changes."""

    def __init__(
        self,
        rng: random.Random,
        name: str,
        dim: int,
        cell: Cell | None = None,
        loops_alone: bool = False,
        refused_form: str | None = None,
    ):
        self.rng = rng
        self.later = random.Random(f"{name}:later")
        self.cell = cell
        self.loops_alone = loops_alone
        self.refused_form = refused_form
        self.name = name
        self.dim = dim
        self.x = ArraySpec("x", "float64", (dim,), _distinct_inputs(rng, dim), True, False, True)
        self.keys = ArraySpec("keys", "int32", (dim,), [rng.randint(0, KEYS_MAX) for _ in range(dim)])
        self.trips = ArraySpec("trips", "int32", (dim,), [rng.randint(0, TRIPS_MAX) for _ in range(dim)])
        self.y = ArraySpec("y", "float64", (dim,), None, True, True)
        self.y.layout = "strided" if rng.random() < 0.15 else "plain"
        self.arrays: list[ArraySpec] = [self.x, self.keys, self.trips, self.y]
        self.structs: list[StructSpec] = []
        self.counters: list[_Counter] = []
        self.targets: list[_FloatTarget] = []
        self.helpers: list[str] = []
        self.projections: list[Projection] = []
        self.names = 0
        self.loop_forms: set[str] = set()

    # --- names and values ---------------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def constant(self, low: float = 0.5, high: float = 2.0) -> str:
        return _literal(round(self.rng.uniform(low, high), 3))

    def add_array(self, spec: ArraySpec) -> ArraySpec:
        self.arrays.append(spec)
        return spec

    # --- targets ------------------------------------------------------------------------------------

    def new_counter(self, in_helper: bool = False) -> _Counter:
        op = self.rng.choice(INT_OPS)
        width = self.rng.choice((1, 1, 2))
        number = len(self.counters)
        shape = (width, 1, 1, 1)[: self.rng.choice((1, 1, 1, 2, 3, 4))]  # 1-4 index arguments
        layout = "strided" if len(shape) == 1 and self.rng.random() < 0.2 else "plain"
        struct = self.struct_argument() if self.rng.random() < 0.25 else None
        # Rarely of any dtype (an int32 one launched): but for a bitwise op's (Warp's take ints only), the command line
        # cannot tell that its returns are ints. Not in helpers: one handed it is generic, and a generic helper that
        # keeps a float write in its replay is refused (Warp allows it no replay of its own)
        generic = struct is None and not in_helper and self.later.random() < 0.1
        array = self.add_array(ArraySpec(f"c{number}", "int32", shape, layout=layout, struct=struct, generic=generic))
        out = self.add_array(ArraySpec(f"o{number}", "float64", (width, MOD), None, True, True))
        counter = _Counter(array, op, width, out)
        self.counters.append(counter)
        return counter

    def struct_argument(self) -> str:
        """The kernel's struct argument (made on first use): counters in it reach helpers as the whole struct."""
        if not self.structs:
            self.structs.append(StructSpec("s0", f"S_{self.name}", []))
        return self.structs[0].name

    def pick_counter(self, in_helper: bool = False) -> _Counter:
        reusable = self.counters_for(in_helper)
        if self.counters and self.rng.random() < 0.4 and reusable:
            return self.rng.choice(reusable)
        return self.new_counter(in_helper)

    def counters_for(self, in_helper: bool) -> list[_Counter]:
        """The counters code may use: in a helper, none of any dtype (see ``new_counter``)."""
        return [counter for counter in self.counters if not (in_helper and counter.array.generic)]

    def new_target(self) -> _FloatTarget:
        op = self.rng.choice(FLOAT_OPS)
        dtype = "vec3d" if self.rng.random() < 0.3 else "float64"
        width = self.rng.randint(1, 3)
        count = width * (3 if dtype == "vec3d" else 1)
        values = [round(self.rng.uniform(-1.0, 1.0), 4) for _ in range(count)]
        shape = (width, 1)[: self.rng.choice((1, 1, 2))]
        array = self.add_array(ArraySpec(f"f{len(self.targets)}", dtype, shape, values, True, True, True))
        if self.rng.random() < 0.2:  # exact returns on a field of the struct argument, which helpers get whole
            array.struct = self.struct_argument()
        target = _FloatTarget(array, op, width)
        self.targets.append(target)
        return target

    def pick_target(self) -> _FloatTarget:
        if self.targets and self.rng.random() < 0.4:
            return self.rng.choice(self.targets)
        return self.new_target()

    def index_expr(self, width: int, chained: str | None) -> str:
        if width == 1:
            return "0"
        if chained is not None:
            return f"{chained} % {width}"
        return self.rng.choice((f"tid % {width}", "0", f"keys[tid] % {width}"))

    # --- operands -----------------------------------------------------------------------------------

    def int_operand(self, counter: _Counter, scope: _Scope, consumed: bool) -> str:
        """The value operand(s) of an int atomic; add/sub grow the counter's bound."""
        op, loop = counter.op, scope.loops[-1][0] if scope.loops else None
        if op in ("add", "sub"):
            value = self.rng.randint(1, 2 if consumed else 3)
            counter.total += value * scope.multiplicity * self.dim
            return str(value)
        if op in ("min", "max"):
            return f"keys[tid] + {loop}" if loop else "keys[tid]"
        if op == "cas":
            return "keys[tid] % 3, tid + 1"
        if op == "exch":
            return f"tid + {loop}" if loop else self.rng.choice(("tid + 1", "keys[tid]"))
        if op == "and":
            return "~(1 << (tid % 8))"
        if op == "or":
            return "1 << (tid % 6)"
        return "3 << (tid % 4)"

    def float_value(self, scope: _Scope) -> str:
        """A float64 operand made of the input: distinct across threads and loop trips, away from ties."""
        forms = (
            f"xv * {self.constant()}",
            f"xv * xv * {self.constant()} + {self.constant(-0.5, 0.5)}",
            f"wp.sin(xv) * {self.constant()}",
        )
        value = self.rng.choice(forms)
        factor = scope.loop_factor()
        if factor is not None:
            value = f"({value}) * {factor} + {factor} * {self.constant(0.1, 0.3)}"
        return value

    def float_operand(self, target: _FloatTarget, scope: _Scope) -> str:
        if not target.vector:
            return self.float_value(scope)
        return f"wp.vec3d({self.float_value(scope)}, {self.float_value(scope)}, {self.float_value(scope)})"

    def convert(self, expr: str, vector: bool, to_vector: bool) -> str:
        """A float expression of a returned value, made into the dtype of another target.

        Bounded by ``sin``: a return fed on into another atomic on the same address, trip after trip, grows
        geometrically, to outputs (1e9 to 1e18) whose rounding hides an input's effect from finite differences
        (seed 7009, kernels 1152 and 3908: the tape right, the differences of the original blind to it)."""
        if vector:
            parts = [f"wp.sin({expr}[{component}])" for component in range(3)]
            if not to_vector:
                return f"{parts[self.rng.randint(0, 2)]} * xv"
            return f"wp.vec3d({', '.join(parts)}) * xv"
        if to_vector:
            return f"wp.vec3d(wp.sin({expr}) * xv, wp.sin({expr}) + xv, xv * {self.constant()})"
        return f"wp.sin({expr}) * xv"

    # --- blocks -------------------------------------------------------------------------------------

    def int_block(self, scope: _Scope, depth: int = 0, chained: str | None = None) -> str:
        """A consumed int atomic and a few uses of its return; returns the variable holding it."""
        counter = self.pick_counter(scope.in_helper)
        index = self.index_expr(counter.width, chained)
        if index != "0":
            local = self.fresh("i")
            scope.line(f"{local} = {index}")
            index = local
        slot = self.fresh("s")
        operand = self.int_operand(counter, scope, True)
        if counter.op == "add" and self.rng.random() < 0.3:
            # A capacity check before the counter: a read of what the launch writes (the replay must see its value).
            scope.line(f"{slot} = int(0)")
            scope.line(f"if {counter.array.ref}[{counter.address(index)}] < {self.rng.randint(1, 2 * self.dim)}:")
            scope = scope.nested()
        scope.line(f"{slot} = wp.atomic_{counter.op}({counter.array.ref}, {counter.address(index)}, {operand})")
        self.store_at_slot(scope, counter, index, slot)
        for _ in range(self.rng.randint(0, 2)):
            self.use_int(scope, slot, depth)
        if scope.carry is not None and self.rng.random() < 0.5:
            scope.line(f"{scope.carry} = {scope.carry} + {slot} % 3")
        if scope.local_loops and self.rng.random() < 0.2:
            scope.line(f"if {slot} % 4 == 3:")
            scope.nested().line("break")
        return slot

    def store_at_slot(self, scope: _Scope, counter: _Counter, index: str, slot: str) -> None:
        """Compaction: the slot indexes a float64 output (plain store where slots are unique)."""
        value = self.float_value(scope)
        if self.rng.random() < 0.2:
            # Built up in a local that only the store reads: a phase that leaves the store out leaves out all of it
            local = self.fresh("v")
            scope.line(f"{local} = {value}")
            scope.line(f"{local} += xv")
            value = local
        else:
            value = f"{value} + xv"
        out = counter.out.name
        if counter.op == "add":
            guard = self.rng.random() < 0.3
            if guard:
                scope.line(f"if {slot} < {self.rng.randint(2, 3 * self.dim)}:")
            (scope.nested() if guard else scope).line(f"{out}[{index}, {slot}] = {value}")
        elif counter.op == "sub":
            scope.line(f"{out}[{index}, {slot} - 1] = {value}")
        else:
            scope.line(f"{out}[{index}, {slot} % {MOD}] += {value}")

    def use_int(self, scope: _Scope, slot: str, depth: int) -> None:
        kind = self.rng.choice(("condition", "arithmetic", "chain", "float_index"))
        if kind == "condition":
            scope.line(f"if {slot} % 2 == {self.rng.randint(0, 1)}:")
            scope.nested().line(f"y[tid] += xv * {self.constant()}")
        elif kind == "arithmetic":
            scope.line(f"y[tid] += wp.float64({slot} % 5 + 1) * xv * {self.constant()}")
        elif kind == "chain" and depth < 2:
            self.int_block(scope, depth + 1, chained=slot)
        elif kind == "float_index" and depth < 2:
            self.float_block(scope, depth + 1, index_from=slot)

    def float_block(
        self, scope: _Scope, depth: int = 0, index_from: str | None = None, value: tuple[str, bool] | None = None
    ) -> None:
        """A consumed float atomic (float64 or vec3d) whose return feeds math or another atomic."""
        target = self.pick_target()
        index = self.index_expr(target.width, index_from)
        operand = self.float_operand(target, scope)
        if value is not None:
            operand = self.convert(value[0], value[1], target.vector)
        returned = self.fresh("a")
        # Rarely another kind of atomic on the target: kinds of different families are refused (RewriteError).
        op = self.rng.choice(FLOAT_OPS) if self.rng.random() < 0.03 else target.op
        scope.line(f"{returned} = wp.atomic_{op}({target.array.ref}, {target.address(index)}, {operand})")
        if depth < 2 and self.rng.random() < 0.3:
            self.float_block(scope, depth + 1, value=(returned, target.vector))
        if target.vector:
            use = f"wp.dot({returned}, wp.vec3d(xv, {self.constant()}, xv * xv))"
        else:
            # tanh first: chained returns can grow to 1e17, where sin's slope is beyond any finite difference's
            # reach (seed 7008, kernel 2215: the tape's cos(a) * da/dx was right, the differences blind to it)
            use = self.rng.choice((f"wp.sin(wp.tanh({returned})) * xv", f"{returned} * xv * {self.constant()}"))
        scope.line(f"y[tid] += {use}")

    def probe_block(self, scope: _Scope) -> None:
        """A hash-table insert: a CAS probe loop in a while loop (or Newton's, a for loop in a helper), the found slot
        indexing an output."""
        size = 17
        number = sum(1 for a in self.arrays if a.name.startswith("table"))
        table = self.add_array(ArraySpec(f"table{number}", "int32", (size,), [-1] * size))
        values = self.add_array(ArraySpec(f"hv{number}", "float64", (size,), None, True, True))
        key, slot, prev = self.fresh("key"), self.fresh("h"), self.fresh("prev")
        scope.line(f"{key} = keys[tid]" + (f" + {scope.loops[-1][0]}" if scope.loops else ""))
        scope.line(f"{slot} = ({key} * 7) % {size}")
        body = scope.nested(local_loops=scope.local_loops + 1, carry=None)
        variant = self.rng.choice(("flag", "break", "condition", "returned", "newton"))
        if variant == "flag":
            done = self.fresh("done")
            scope.line(f"{done} = int(0)")
            scope.line(f"while {done} == 0:")
            body.line(f"{prev} = wp.atomic_cas({table.name}, {slot}, -1, {key})")
            body.line(f"if {prev} == -1 or {prev} == {key}:")
            body.nested().line(f"{done} = 1")
            body.line("else:")
            body.nested().line(f"{slot} = ({slot} + 1) % {size}")
        elif variant == "break":
            scope.line("while True:")
            body.line(f"{prev} = wp.atomic_cas({table.name}, {slot}, -1, {key})")
            body.line(f"if {prev} == -1 or {prev} == {key}:")
            body.nested().line("break")
            body.line(f"{slot} = ({slot} + 1) % {size}")
        elif variant == "condition":  # the CAS in the condition (the rewrite moves it into the body), work in the body
            scope.line(f"while wp.atomic_cas({table.name}, {slot}, -1, {key}) != -1:")
            body.line(f"if {table.name}[{slot}] == {key}:")
            body.nested().line("break")
            body.line(f"y[tid] += xv * {self.constant()}")
            body.line(f"{slot} = ({slot} + 1) % {size}")
        elif variant == "returned":  # a helper returning from inside its probe loop (the rewrite makes that a flag
            # and a break)
            probe = self.fresh(f"{self.name}_probe")
            as_tuple = self.rng.random() < 0.5
            self.helpers.append(
                f"@wp.func\ndef {probe}(table: {table.annotation()}, key: int, slot: int) -> "
                + ("tuple[bool, int]" if as_tuple else "int")
                + ":\n    while True:\n        prev = wp.atomic_cas(table, slot, -1, key)\n"
                + "        if prev == -1 or prev == key:\n"
                + ("            return True, slot\n" if as_tuple else "            return slot\n")
                + f"        slot = (slot + 1) % {size}\n"
            )
            found = f"{self.fresh('found')}, " if as_tuple else ""
            scope.line(f"{found}{slot} = {probe}({table.name}, {key}, {slot})")
        if variant == "newton":
            self.newton_insert(scope, table, slot, key, values)
            return
        scope.line(f"{values.name}[{slot}] += {self.float_value(scope)}")

    def newton_insert(self, scope: _Scope, table: ArraySpec, slot: str, key: str, values: ArraySpec) -> None:
        """Newton's ``hashtable_find_or_insert``: a helper probing in a for loop, reading the key before its CAS,
        returning from inside the loop, and counting a new entry in an active-slot counter (at the end of its array)
        whose slot only indexes a store: its replay restores the probe from records, and its atomics record
        nothing (a dry run that kept the counter's atomic uncopied would update the launch's counter)."""
        size = table.shape[0]
        active = self.add_array(ArraySpec(f"active{table.name[5:]}", "int32", (size + 1,)))
        insert = self.fresh(f"{self.name}_insert")
        self.helpers.append(
            f"@wp.func\ndef {insert}(table: {table.annotation()}, active: {active.annotation()}, key: int, "
            "slot: int) -> int:\n"
            f"    for _i in range({size}):\n"
            "        stored = table[slot]\n"
            "        if stored == key:\n"
            "            return slot\n"
            "        if stored == -1:\n"
            "            prev = wp.atomic_cas(table, slot, -1, key)\n"
            "            if prev == -1:\n"
            f"                n = wp.atomic_add(active, {size}, 1)\n"
            f"                if n < {size}:\n"
            "                    active[n] = slot\n"
            "                return slot\n"
            "            if prev == key:\n"
            "                return slot\n"
            f"        slot = (slot + 1) % {size}\n"
            "    return -1\n"
        )
        scope.line(f"{slot} = {insert}({table.name}, {active.name}, {key}, {slot})")
        scope.line(f"if {slot} >= 0:")
        scope.nested().line(f"{values.name}[{slot}] += {self.float_value(scope)}")

    def lock_block(self, scope: _Scope) -> None:
        """A read-modify-write under a spin lock: the value read is what earlier threads wrote (on the CPU, in
        order), which the replay must read back from a record rather than from memory."""
        number = sum(1 for a in self.arrays if a.name.startswith("lock"))
        lock = self.add_array(ArraySpec(f"lock{number}", "int32", (1,), [0]))
        seen = self.fresh("seen")
        scope.line(f"while wp.atomic_cas({lock.name}, 0, 0, 1) != 0:")
        scope.nested().line("pass")
        if self.rng.random() < 0.5:
            total = self.add_array(ArraySpec(f"total{number}", "int32", (1,), [self.rng.randint(0, 3)]))
            scope.line(f"{seen} = {total.name}[0]")
            scope.line(f"{total.name}[0] = {seen} + tid % 3 + 1")
            use = f"wp.float64({seen} % 7 + 1) * xv * {self.constant()}"
        else:  # a float written from what needs no gradient: the value read is a constant
            total = self.add_array(ArraySpec(f"total{number}", "float64", (1,), [round(self.rng.random(), 3)]))
            scope.line(f"{seen} = {total.name}[0]")
            scope.line(f"{total.name}[0] = {seen} + wp.float64(keys[tid]) * {self.constant()}")
            use = f"{seen} * xv * {self.constant()}"
        scope.line(f"wp.atomic_exch({lock.name}, 0, 0)")
        scope.line(f"y[tid] += {use}")

    def peek_block(self, scope: _Scope) -> None:
        """A thread writes its element of a scratch array and reads another thread's: what it reads depends on
        the order the threads ran in, which the replay must read back from a record."""
        number = sum(1 for a in self.arrays if a.name.startswith("w"))
        dtype = self.rng.choice(("int32", "float64"))
        layout = self.rng.choice(("plain", "plain", "strided", *(() if scope.in_helper else ("indexed",))))
        # Warp's tape cannot take an indexed array's gradient: such kernels are checked forward only (runner)
        scratch = self.add_array(ArraySpec(f"w{number}", dtype, (self.dim,), None, layout=layout))
        loop = f" + {scope.loops[-1][0]}" if scope.loops else ""
        neighbour = f"{scratch.name}[(tid + {self.rng.randint(1, self.dim - 1)}) % {self.dim}]"
        if dtype == "int32":
            scope.line(f"{scratch.name}[tid] = keys[tid] * 2{loop}")
            scope.line(f"y[tid] += wp.float64({neighbour} % 5 + 1) * xv * {self.constant()}")
            return
        # Rarely written from the input: a gradient would flow through another thread's write (the launch refuses).
        written = "xv" if self.rng.random() < 0.15 else f"wp.float64(keys[tid]{loop})"
        scope.line(f"{scratch.name}[tid] = {written} * {self.constant()}")
        scope.line(f"y[tid] += {neighbour} * xv * {self.constant()}")

    def overloads_block(self, scope: _Scope) -> None:
        """Slots taken through helpers of one name: an overloaded helper (one definition per counter width) or a
        generic one (``Any``, instantiated by Warp for each), called for an int32 and an int64 counter."""
        name = self.fresh(f"{self.name}_take")
        counters = [self.add_array(ArraySpec(self.fresh("cn"), dtype, (1,), [0])) for dtype in ("int32", "int64")]
        out = self.add_array(ArraySpec(self.fresh("on"), "float64", (2 * self.dim,), None, True, True))
        if self.rng.random() < 0.5:
            for dtype in ("int32", "int64"):
                self.helpers.append(
                    f"@wp.func\ndef {name}(count: wp.array(dtype=wp.{dtype}), k: wp.{dtype}) -> wp.{dtype}:\n"
                    "    return wp.atomic_add(count, 0, k)\n"
                )
        else:
            self.helpers.append(
                f"@wp.func\ndef {name}(count: wp.array(dtype=Any), k: Any):\n    return wp.atomic_add(count, 0, k)\n"
            )
        first, second = self.fresh("sn"), self.fresh("sn")
        scope.line(f"{first} = {name}({counters[0].name}, wp.int32(1))")
        scope.line(f"{second} = {name}({counters[1].name}, wp.int64(1))")
        scope.line(f"{out.name}[{first}] = {self.float_value(scope)}")
        scope.line(f"{out.name}[{self.dim} + int({second})] = {self.float_value(scope)}")

    def alias_block(self, scope: _Scope) -> None:
        """A read through an argument the launch binds to a counter's array: the launch must refuse."""
        counter = self.pick_counter(scope.in_helper)
        peek = self.add_array(
            ArraySpec(f"peek{len(self.counters)}", "int32", counter.array.shape, alias_of=counter.array.name)
        )
        self.int_block(scope)
        scope.line(f"y[tid] += wp.float64({peek.name}[{counter.address('0')}] % 3 + 1) * xv")

    def updated_read(self, scope: _Scope, side: random.Random) -> None:
        """An array the launch writes and reads back (``passes.fence.Fence.reads_written``, WR009), in a kernel that
        uses no atomic's return: a count the threads add to, read to decide a branch (an int: no gradient through it,
        the rewrite records the read); a float sum of values needing no gradient, read to scale this thread's own
        (a float read of memory the launch wrote: exact where its terms need no gradient); or the thread's own
        element stored, then read into a product stored there again (the read becomes the stored value:
        ``passes.own_writes``). Drawn from ``side``."""
        cells = side.randint(2, 3)
        form = side.random()
        if form >= 2 / 3:
            # (requiring grad: an array that does not stops the gradient through memory, in Warp as designed)
            stored = self.add_array(ArraySpec(self.fresh("us"), "float64", (self.dim,), requires_grad=True)).name
            scope.line(f"{stored}[tid] = wp.sin(xv) * wp.float64({side.uniform(0.5, 1.5):.3f})")
            scope.line(f"{stored}[tid] = {stored}[tid] * {stored}[tid] * xv")
            scope.line(f"y[tid] += {stored}[tid] * xv")
            return
        if form < 1 / 3:
            count = self.add_array(ArraySpec(self.fresh("u"), "int32", (cells,))).name
            if side.random() < 0.5:
                scope.line(f"{count}[tid % {cells}] += 1")
            else:
                scope.line(f"wp.atomic_add({count}, tid % {cells}, 1)")
            scope.line(f"if {count}[(tid + 1) % {cells}] > {side.randint(0, 1)}:")
            scope.nested().line(f"y[tid] += xv * xv * wp.float64({side.uniform(0.5, 1.5):.3f})")
            return
        values = [round(side.uniform(0.5, 1.5), 3) for _ in range(self.dim)]
        weights = self.add_array(ArraySpec(self.fresh("uw"), "float64", (self.dim,), values)).name
        total = self.add_array(ArraySpec(self.fresh("u"), "float64", (cells,))).name
        scope.line(f"wp.atomic_add({total}, tid % {cells}, {weights}[tid])")
        scope.line(f"y[tid] += xv * xv / ({total}[tid % {cells}] + wp.float64(1.0))")

    def unconsumed(self, scope: _Scope) -> None:
        """An atomic whose return is unused (``arr[i] += v`` or a bare call) on an existing target."""
        choices = [*self.counters_for(scope.in_helper), *self.targets]
        if not choices:
            return
        target = self.rng.choice(choices)
        index = target.address(self.index_expr(target.width, None))
        if isinstance(target, _Counter):
            operand = self.int_operand(target, scope, False)
            augmented = {"add": "+=", "sub": "-=", "and": "&=", "or": "|=", "xor": "^="}.get(target.op)
        else:
            operand = self.float_operand(target, scope)
            augmented = {"add": "+=", "sub": "-="}.get(target.op)
        name = target.array.ref
        if augmented and "," not in operand and self.rng.random() < 0.6:
            scope.line(f"{name}[{index}] {augmented} {operand}")
        else:
            scope.line(f"wp.atomic_{target.op}({name}, {index}, {operand})")

    # --- wrappers -----------------------------------------------------------------------------------

    def wrapped(self, scope: _Scope, wrappers: list[str], body: Callable[[_Scope], str | None]) -> str | None:
        """Write ``body`` inside ``wrappers`` (outermost first); returns what body returns at this level."""
        if not wrappers:
            return body(scope)
        kind, rest = wrappers[0], wrappers[1:]
        if kind == "if":
            scope.line(f"if {self.condition()}:")
            self.wrapped(scope.nested(), rest, body)
        elif kind in ("for", "for_trips"):
            self.loop(scope, kind, rest, body)
        elif kind == "helper":
            return self.helper(scope, rest, body)
        return None

    def condition(self) -> str:
        return self.rng.choice(
            (
                f"xv > {_literal(0.0)}",
                f"xv < {_literal(0.0)}",
                f"tid % 3 != {self.rng.randint(0, 2)}",
                f"keys[tid] > {self.rng.randint(2, 7)}",
            )
        )

    def loop(self, scope: _Scope, kind: str, rest: list[str], body) -> None:
        variable = f"k{len(scope.loops)}"  # loops at the same depth reuse their variable's name, as people write
        if kind == "for":
            trips = self.rng.randint(1, 3)
            bounds = self.rng.choice((f"{trips}", f"0, {trips}"))
        else:
            trips, bounds = TRIPS_MAX, "trips[tid]"
        carry = None
        if "helper" not in rest and self.rng.random() < 0.3:
            carry = self.fresh("n")
            scope.line(f"{carry} = int(0)")
        reassigned = self.fresh("g") if self.rng.random() < 0.25 else None
        if reassigned:  # a float with a value before the loop, that no iteration and nothing after it reads
            scope.line(f"{reassigned} = xv * {self.constant()}")
        scope.line(f"for {variable} in range({bounds}):")
        inner = scope.nested(loops=(*scope.loops, (variable, trips)), local_loops=scope.local_loops + 1, carry=carry)
        if self.rng.random() < 0.2:
            inner.line(f"if {variable} == 1:")
            inner.nested().line("continue")
        if reassigned:
            self.reassign_then_read(inner, reassigned)
        self.wrapped(inner, rest, body)
        if carry is not None:
            scope.line(f"y[tid] += wp.float64({carry}) * xv * {self.constant()}")
        if reassigned:
            self.reassign_then_read(scope, reassigned)

    def reassign_then_read(self, scope: _Scope, local: str) -> None:
        """A branch assigning a float local before it reads it: whatever the local held, nothing is carried."""
        scope.line(f"if {self.condition()}:")
        scope.nested().line(f"{local} = {self.float_value(scope)}")
        scope.nested().line(f"y[tid] += {local} * {self.constant()}")

    def helper(self, scope: _Scope, rest: list[str], body) -> str | None:
        """Move the rest of the block into a new ``@wp.func``; it may return the block's int return."""
        name = self.fresh(f"{self.name}_h")
        lines: list[str] = []
        inner = _Scope(lines, 1, scope.loops, in_helper=True)
        returned = self.wrapped(inner, rest, body)
        returns = returned is not None and not rest and self.rng.random() < 0.6
        default = self.rng.random() < 0.3  # a parameter with a default, which calls may leave out
        if default:
            inner.line("y[tid] += wp.float64(bonus) * xv")
        if returns:
            inner.line(f"return {returned}")
        text = "\n".join(lines)
        params = self.helper_params(text, scope)
        signature = ", ".join([*(f"{p}: {t}" for p, t in params), *(["bonus: int = 0"] if default else [])])
        header = f"@wp.func\ndef {name}({signature})" + (" -> wp.int32" if returns else "") + ":"
        self.helpers.append(header + "\n" + text + "\n")
        callee = f"wp.static({name})" if self.rng.random() < 0.25 else name  # as Newton calls its writers
        arguments = [p for p, _ in params] + (["bonus=1"] if default and self.rng.random() < 0.5 else [])
        call = f"{callee}({', '.join(arguments)})"
        if not returns:
            scope.line(call)
            return None
        result = self.fresh("r")
        scope.line(f"{result} = {call}")
        scope.line(f"y[tid] += wp.float64({result} % 5 + 1) * xv * {self.constant()}")
        return result

    def helper_params(self, text: str, scope: _Scope) -> list[tuple[str, str]]:
        words = set(re.findall(r"[A-Za-z_]\w*", text))
        params = [(a.name, a.annotation()) for a in self.arrays if a.struct is None and a.name in words]
        params += [(s.name, s.class_name) for s in self.structs if s.name in words]  # the whole struct
        params += [(name, "int") for name, _ in scope.loops if name in words]
        return [*params, ("xv", "wp.float64"), ("tid", "int")]

    # --- the kernel ---------------------------------------------------------------------------------

    def form_block(self, scope: _Scope) -> None:
        """One use of a form of the fence's table (``fuzz.grammar``), inside random wrappers: a refused form
        rarely (the kernel is then refused), an accepted one otherwise."""
        name = self.rng.choice(REFUSED if self.rng.random() < 0.03 else ACCEPTED)
        if self.refused_form is not None:  # (see refused_form_of)
            name, self.refused_form = self.refused_form, None
        wrappers = [] if name in KERNEL_LEVEL else [w for w in ("if", "for", "helper") if self.rng.random() < 0.2]
        self.rng.shuffle(wrappers)

        def body(inner: _Scope) -> None:
            GENERATORS[name](self, inner)
            if inner.in_helper:
                # A helper whose atomics are all unconsumed is not cloned, and Warp's backward runs them again
                # (y[tid] += v in a helper doubles y): a known failure, kept out of the kernels until it is fixed.
                self.int_block(inner)

        self.wrapped(scope, wrappers, body)

    def block(self, scope: _Scope) -> str:
        """One block of a random kind, inside random wrappers; returns its kind."""
        kinds = ("int", "float", "probe", "lock", "peek", "alias")
        kind = self.rng.choices(kinds, weights=(6, 4, 1, 1, 1, 0.15))[0]
        wrappers = [
            w
            for w in ("if", "for", "for_trips", "helper", "if", "helper")
            if self.rng.random() < {"if": 0.2, "for": 0.25, "for_trips": 0.2, "helper": 0.2}[w]
        ]
        self.rng.shuffle(wrappers)
        if kind == "float" and "helper" in wrappers and self.rng.random() < 0.8:
            # The rewrite refuses a float target passed to a helper: keep such kernels rare.
            wrappers = [w for w in wrappers if w != "helper"]
        body = {
            "int": self.int_block,
            "float": self.float_block,
            "probe": self.probe_block,
            "lock": self.lock_block,
            "peek": self.peek_block,
            "alias": self.alias_block,
        }[kind]
        self.wrapped(scope, wrappers[:3], body)
        if self.rng.random() < 0.5:
            self.unconsumed(scope)
        return kind

    def finish(self) -> None:
        """Size every counter's output from its bound, and give sub counters room to count down."""
        for counter in self.counters:
            if counter.op == "add":
                counter.out.shape = (counter.width, max(counter.total + 1, 1))
            elif counter.op == "sub":
                counter.array.values = [counter.total] * counter.width
                counter.out.shape = (counter.width, max(counter.total, 1))
            else:
                initial = {"min": 20, "and": 255, "xor": 5}.get(counter.op, 0)
                counter.array.values = [initial] * counter.width

    def write(self) -> KernelCase:
        lines: list[str] = []
        scope = _Scope(lines, 1)
        scope.line("tid = wp.tid()")
        scope.line("xv = x[tid]")
        from tests.fuzz.loops import LoopDraw, write_loops  # (it builds on this module)

        loops = LoopDraw.of(self.name, self.loops_alone)  # a stream of its own: what the rest draws stays as it was
        if loops.alone:
            side = random.Random(f"{self.name}:updated")  # one too: the kernels without it stay as they were
            reads = side.random() < UPDATED_READS
            if reads:
                self.updated_read(scope, side)
            if not reads or side.random() < 0.5:  # else the read is the kernel's only hazard
                write_loops(self, scope, loops)
        else:
            kinds = [self.block(scope) for _ in range(self.rng.randint(1, 3))]
            if set(kinds) <= {"peek"}:  # the rewrite takes kernels that consume an atomic's return
                self.int_block(scope)
            for _ in range(self.rng.randint(1, 3)):
                self.form_block(scope)
            if self.cell is not None:
                write_combination(self, scope, self.cell)
            if self.rng.random() < 0.1:
                self.overloads_block(scope)
            if loops.with_atomics:
                write_loops(self, scope, loops)
        scope.line(f"y[tid] += xv * xv * {self.constant()}")
        return self.case(lines)

    def write_form(self, form: str, consumed: bool) -> KernelCase:
        """A kernel with one use of the fence's form ``form`` (``fuzz.grammar``), no wrapper around it, after a
        consumed int atomic where ``consumed``, else alone (only a form that consumes an atomic makes the kernel
        need a rewrite)."""
        lines: list[str] = []
        scope = _Scope(lines, 1)
        scope.line("tid = wp.tid()")
        scope.line("xv = x[tid]")
        if consumed:
            self.int_block(scope)
        GENERATORS[form](self, scope)
        scope.line(f"y[tid] += xv * xv * {self.constant()}")
        return self.case(lines)

    def case(self, lines: list[str]) -> KernelCase:
        """The kernel of the body ``lines``, with its arguments, structs and helpers."""
        self.finish()
        for struct in self.structs:
            struct.fields = [a for a in self.arrays if a.struct == struct.name]
        arguments = [a for a in self.arrays if a.struct is None]
        signature = ",\n    ".join(
            [*(f"{a.name}: {a.annotation()}" for a in arguments), *(f"{s.name}: {s.class_name}" for s in self.structs)]
        )
        kernel = f"@wp.kernel\ndef {self.name}(\n    {signature},\n):\n" + "\n".join(lines) + "\n"
        classes = [
            f"@wp.struct\nclass {s.class_name}:\n" + "".join(f"    {a.name}: {a.annotation()}\n" for a in s.fields)
            for s in self.structs
        ]
        source = "\n\n".join([*classes, *self.helpers, kernel])
        return KernelCase(
            self.name,
            0,
            0,
            self.dim,
            self.arrays,
            source,
            self.structs,
            self.cell,
            self.projections,
            frozenset(self.loop_forms),
        )


UPDATED_READS = 0.4  # of the kernels that use no atomic's return, those reading an array their launch updates

REFUSED_EVERY = 20  # one kernel in this many has its first form block use a refused form of the fence's table


def refused_form_of(index: int) -> str | None:
    """The refused form kernel ``index`` uses for sure, taken in turn (each is drawn rarely otherwise, and a slice of
    a few hundred kernels must use every one: ``fuzz/test_fuzz.py``); None for most kernels."""
    if index % REFUSED_EVERY != REFUSED_EVERY // 2:
        return None
    return REFUSED[(index // REFUSED_EVERY) % len(REFUSED)]


def combination_of(index: int) -> Cell:
    """The cell kernel ``index`` draws: the kernels that consume an atomic's return (all but those whose only hazard is
    their loops, every ``ALONE_EVERY``-th) take the cells in turn, so that any 45 of them cover every cell."""
    from tests.fuzz.loops import ALONE_EVERY  # (it builds on this module)

    return CELLS[(index - index // ALONE_EVERY) % len(CELLS)]


def generate_kernel(seed: int, index: int) -> KernelCase:
    """The kernel number ``index`` of the stream ``seed``: the same source and inputs every time."""
    rng = random.Random(f"{seed}:{index}")
    from tests.fuzz.loops import loops_alone  # (it builds on this module)

    alone = loops_alone(index)
    cell = None if alone else combination_of(index)
    writer = _KernelWriter(rng, f"fz_{seed}_{index}", rng.randint(4, 8), cell, alone, refused_form_of(index))
    case = writer.write()
    case.seed, case.index = seed, index
    return case


def generate_form_kernel(form: str, consumed: bool) -> KernelCase:
    """The kernel of ``_KernelWriter.write_form``, drawn from its own stream (the form's index in the fence's table
    stands for the seed's index; the seed is ``FORM_SEED``)."""
    index = 2 * list(GENERATORS).index(form) + consumed
    rng = random.Random(f"{FORM_SEED}:{form}:{consumed}")
    case = _KernelWriter(rng, f"fz_{FORM_SEED}_{index}", rng.randint(4, 8)).write_form(form, consumed)
    case.seed, case.index, case.form = FORM_SEED, index, form
    return case


def module_source(cases: list[KernelCase]) -> str:
    """One Python module holding every case's helpers and kernel: Warp compiles it as one module."""
    header = '"""Generated by tests/fuzz/generator.py."""\n\nfrom typing import Any\n\nimport warp as wp\n'
    return header + "\n\n" + "\n\n".join(case.source for case in cases)
