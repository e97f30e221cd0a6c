"""Combinations the fuzzer draws along three dimensions, one per kernel: the dtype of an array the kernel writes, the
path of a consumed atomic's return beside that write, and what the write is.

Each feature alone was right while two together were wrong: updates of a field of an element of an array of structs
(``bodies[b].mass += m``) beside a consumed vector atomic whose return carries a gradient got the field updates'
gradient twice, because the exact backward's table of the dtypes that carry a gradient had no structs. Drawing every
cell of the product, and counting each (``make fuzz`` prints the counts), is what finds such pairs.

A kernel's cell is its index in the stream modulo the number of cells, so that any slice of ``len(CELLS)`` kernels
covers them all.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.fuzz.generator import KernelCase, _KernelWriter, _Scope


class Dtype(Enum):
    """The dtype of the array written (for a struct, the atomic's target is its vector field's dtype)."""

    SCALAR = "scalar"
    VECTOR = "vector"
    MATRIX = "matrix"
    QUATERNION = "quaternion"
    SPATIAL_VECTOR = "spatial vector"
    STRUCT_FIELD = "struct field"


class Path(Enum):
    """How the consumed atomic's return reaches the write."""

    INT_SLOT = "int slot"  # a counter's slot indexes the write
    DETACHED_FLOAT = "detached float"  # a float return made of nothing that requires grad: a constant
    EXACT_FLOAT = "exact float"  # a float return whose target requires grad: exact gradients


class Target(Enum):
    """What the kernel writes of an element."""

    WRITTEN_ELEMENT = "written element"  # g[i] = v
    COMPONENT_UPDATE = "component update"  # g[i][k] += v, g[i][r, c] += v, g[i].com[k] += v
    FIELD_UPDATE = "field update"  # g[i].x += v, g[i].mass += v


@dataclass(frozen=True)
class Cell:
    dtype: Dtype
    path: Path
    target: Target

    def __str__(self) -> str:
        return f"{self.dtype.value} x {self.path.value} x {self.target.value}"


@dataclass(frozen=True)
class Shape:
    """How kernel code spells a dtype: its Warp type, its components (``[k]`` or ``[r, c]`` subscripts) and its
    named components (``.x``); a struct's are those of its vector field ``com`` and its scalar field ``mass``."""

    warp: str
    components: tuple[str, ...]
    names: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return len(self.components)


SHAPES = {
    Dtype.SCALAR: Shape("float64", ("",)),
    Dtype.VECTOR: Shape("vec3d", ("[0]", "[1]", "[2]"), ("x", "y", "z")),
    Dtype.MATRIX: Shape("mat22d", ("[0, 0]", "[0, 1]", "[1, 0]", "[1, 1]")),
    Dtype.QUATERNION: Shape("quatd", ("[0]", "[1]", "[2]", "[3]"), ("x", "y", "z", "w")),
    Dtype.SPATIAL_VECTOR: Shape("spatial_vectord", tuple(f"[{k}]" for k in range(6)), ("x", "y", "z", "w")),
}
STRUCT_FIELDS = Shape("vec3d", (".com[0]", ".com[1]", ".com[2]"), ("mass",))  # an element of the struct array


def possible(cell: Cell) -> bool:
    """A scalar has no components; a matrix has no named ones."""
    if cell.target is Target.WRITTEN_ELEMENT:
        return True
    if cell.dtype is Dtype.SCALAR:
        return False
    return cell.target is Target.COMPONENT_UPDATE or cell.dtype is not Dtype.MATRIX


CELLS = [cell for cell in (Cell(d, p, t) for d in Dtype for p in Path for t in Target) if possible(cell)]


@dataclass(frozen=True)
class Projection:
    """A kernel after the fuzzed one that reads an array of structs into floats, for the loss to weigh (Warp's tape
    carries the gradient back through it): ``kernel(source, out)`` over ``size`` elements."""

    kernel: str
    source: str  # the array of structs, an argument of the fuzzed kernel
    size: int


def write_combination(writer: _KernelWriter, scope: _Scope, cell: Cell) -> None:
    """One array of ``cell.dtype`` written as ``cell.target`` says, with a value or index from a consumed atomic's
    return on the path ``cell.path``, sometimes inside an ``if`` or a helper."""
    wrapper = writer.rng.choice(("", "", "if", "helper"))
    body = lambda inner: _Combination(writer, inner, cell).write()  # noqa: E731
    writer.wrapped(scope, [wrapper] if wrapper else [], body)


class _Combination:
    def __init__(self, writer: _KernelWriter, scope: _Scope, cell: Cell):
        self.writer, self.scope, self.cell, self.rng = writer, scope, cell, writer.rng
        self.struct = cell.dtype is Dtype.STRUCT_FIELD
        self.element = STRUCT_FIELDS if self.struct else SHAPES[cell.dtype]  # of the array written
        self.atomic = SHAPES[Dtype.VECTOR] if self.struct else SHAPES[cell.dtype]  # of the atomic's target
        self.returned = ""  # the local holding a float return, or "" on the int slot path

    def write(self) -> None:
        index = self.take_return()
        written = self.written_array()
        target = self.cell.target
        if target is Target.WRITTEN_ELEMENT:
            self.store(written, index)
            return
        operator = self.rng.choice(("+=", "-="))
        if target is Target.FIELD_UPDATE:
            self.scope.line(f"{written}[{index}].{self.rng.choice(self.element.names)} {operator} {self.amount()}")
        elif self.cell.dtype is Dtype.MATRIX and self.rng.random() < 0.3:  # a row
            row = self.rng.randint(0, 1)
            self.scope.line(f"{written}[{index}][{row}] {operator} wp.vec2d({self.amount()}, {self.amount()})")
        else:
            self.scope.line(f"{written}[{index}]{self.rng.choice(self.element.components)} {operator} {self.amount()}")

    def take_return(self) -> str:
        """The consumed atomic; returns the index the write goes to."""
        from tests.fuzz.generator import ArraySpec

        writer, fresh = self.writer, self.writer.fresh
        if self.cell.path is Path.INT_SLOT:
            counter = writer.add_array(ArraySpec(fresh("cc"), "int32", (1,), [0]))
            slot = fresh("cs")
            self.scope.line(f"{slot} = wp.atomic_add({counter.name}, 0, 1)")
            return slot
        exact = self.cell.path is Path.EXACT_FLOAT
        values = [round(self.rng.uniform(-1.0, 1.0), 4) for _ in range(self.atomic.size)]
        spec = ArraySpec(fresh("cf"), self.atomic.warp, (1,), values, exact, exact, exact)
        target = writer.add_array(spec)
        made_of = (lambda: writer.float_value(self.scope)) if exact else self.constant_of_keys
        operand = _construct(self.atomic, [made_of() for _ in range(self.atomic.size)])
        self.returned = fresh("ca")
        op = self.rng.choice(("add", "sub"))
        self.scope.line(f"{self.returned} = wp.atomic_{op}({target.name}, 0, {operand})")
        return "tid" if self.cell.target is Target.WRITTEN_ELEMENT else "tid % 2"

    def constant_of_keys(self) -> str:
        """A float64 made of nothing that requires grad."""
        return f"wp.float64(keys[tid] + 1) * {self.writer.constant()}"

    def amount(self) -> str:
        """A float64 made of the input and, on the float paths, of a component of the return."""
        if not self.returned:
            return self.writer.float_value(self.scope)
        return f"{self.returned}{self.rng.choice(self.atomic.components)} * xv"

    def written_array(self) -> str:
        from tests.fuzz.generator import ArraySpec

        writer = self.writer
        if not self.struct:
            spec = ArraySpec(writer.fresh("cg"), self.element.warp, (writer.dim,), None, True, True)
            return writer.add_array(spec).name
        struct = f"{writer.name}_Body"
        if not any(text.startswith(f"@wp.struct\nclass {struct}:") for text in writer.helpers):
            writer.helpers.insert(0, f"@wp.struct\nclass {struct}:\n    mass: wp.float64\n    com: wp.vec3d\n")
        bodies = writer.add_array(ArraySpec(writer.fresh("cb"), struct, (writer.dim,), None, True, layout="structs"))
        project = f"{writer.name}_project_{bodies.name}"
        writer.helpers.append(
            f"@wp.kernel(enable_backward=True)\ndef {project}(bodies: wp.array(dtype={struct}), "
            "out: wp.array(dtype=wp.float64)):\n    b = wp.tid()\n"
            f"    out[b] = bodies[b].mass + {writer.constant()} * bodies[b].com[0] + bodies[b].com[1] * "
            f"{writer.constant()} + bodies[b].com[2]\n"
        )
        writer.projections.append(Projection(project, bodies.name, writer.dim))
        return bodies.name

    def store(self, written: str, index: str) -> None:
        if not self.struct:
            amounts = [self.amount() for _ in self.element.components]
            self.scope.line(f"{written}[{index}] = {_construct(self.element, amounts)}")
            return
        local = self.writer.fresh("cl")
        self.scope.line(f"{local} = {self.writer.name}_Body()")
        self.scope.line(f"{local}.mass = {self.amount()}")
        self.scope.line(f"{local}.com = wp.vec3d({self.amount()}, {self.amount()}, {self.amount()})")
        self.scope.line(f"{written}[{index}] = {local}")


def _construct(shape: Shape, amounts: list[str]) -> str:
    return amounts[0] if shape.warp == "float64" else f"wp.{shape.warp}({', '.join(amounts)})"


def cell_counts(cases: list[KernelCase]) -> Counter:
    """How many of ``cases`` drew each cell."""
    counts = Counter(dict.fromkeys(CELLS, 0))
    counts.update(case.combination for case in cases if case.combination is not None)
    return counts
