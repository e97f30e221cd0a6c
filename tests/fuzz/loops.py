"""Loops Warp does not unroll, as the fuzzer writes them (issue 34): locals carried out of and through them, used
linearly and not, in kernels with and without a consumed atomic.

A loop block carries one to three locals through one loop and uses them after it: a float64 (taking in each trip's value
linearly, or through a nonlinear function of itself), a vec3d, or an int index chosen by comparing ints (an argmax) that
reads a float array after the loop; a for loop's own variable may be read after it too. The loop is one of the forms
Warp does not unroll: a ``for`` over a data-dependent range, over the launch's arguments (an array's shape), over a
range of module-level names (``range(R * C)``; ``range(R)`` alone Warp unrolls, and the rewrite reads it so) or over a
constant range longer than ``max_unroll`` (its bound an int, a ``wp.static(...)`` of one, or a module-level constant);
a ``while`` over a
data-dependent count or over a float condition
(halvings); a helper's loop whose helper returns a nonlinear function of what it carried, or returns from inside
``while True``; a walk of a spatial query over a hash grid (both spellings), a BVH (boxes and rays) or a mesh (boxes),
the structures built by the runner for each batch (``tests/fuzz/structures.py``). Loops may break or continue on ints,
hold consumed atomics (the generator's int and float blocks), be followed by one whose slot stores what they carried,
or sit in another loop.

Inputs stay away from branch thresholds as the generator's docstring says: conditions compare ints, or the
halvings' value, whose scale is chosen so that no input's halvings come near 1 (``_halving_scale``). Each form a
kernel exercises is named in its ``loop_forms`` (``LOOP_FORMS``); ``make fuzz`` prints how many kernels exercised
each.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.fuzz.generator import TRIPS_MAX, ArraySpec, KernelCase, _KernelWriter, _literal, _Scope
from tests.fuzz.grammar import _out
from tests.fuzz.structures import BOXES, FACES, GRID_POINTS, StructureArgument

STATIC_LONG = "for over a wp.static(...) range beyond max_unroll"
NAMED_LONG = "for over a module-level constant beyond max_unroll"
QUERY_FORMS = ("hash-grid query (while)", "hash-grid query (for)", "BVH box query", "BVH ray query", "mesh box query")
# The forms a kernel's loops exercise (``KernelCase.loop_forms``), in the order ``make fuzz`` prints them.
LOOP_FORMS = (
    "float carried out, used linearly",
    "float carried out, used nonlinearly",
    "float carried from trip to trip nonlinearly",
    "float starting as a builtin's result its adjoint reads",
    "vector carried",
    "int carried, used as an index",
    "for loop's variable read after it",
    "for over a data-dependent range",
    "for over the launch's arguments",
    "for over module-level names",
    "for over a constant range beyond max_unroll",
    STATIC_LONG,
    NAMED_LONG,
    "while over a data-dependent count",
    "while over a float condition",
    "while that breaks",
    "float updated only right before a break",
    "while that continues",
    "for that breaks",
    "for that continues",
    "nested in a loop Warp does not unroll",
    "helper loop with a nonlinear return",
    "helper returning from inside while True",
    *QUERY_FORMS,
    "consumed atomic in the loop",
    "consumed atomic after the loop",
    "no consumed atomic in the kernel",
)
# The for loops Warp does not unroll whose variable a kernel may read after them (``_read_variable_after``): those
# that always make a trip. After a loop that made none, Warp leaves the variable undefined (Python keeps its value
# from before the loop), so the original kernel's own forward is not defined there.
VARIABLE_READ_AFTER = ("for over a constant range beyond max_unroll", STATIC_LONG, NAMED_LONG)
ALONE_EVERY = 6  # every sixth kernel's only hazard is its loops: no atomic's return consumed anywhere
WITH_ATOMICS = 0.4  # of the other kernels, those that get loop blocks too
LONG_TRIPS = (17, 20)  # constant ranges longer than Warp's default max_unroll (16)
HALVINGS_GAP = 0.02  # no halving of an input comes closer to the threshold 1 than this, relatively


@dataclass
class _Header:
    """A loop's head, and what its body may use: an int that differs from trip to trip, an index into a float64
    array that differs too, and an int score to compare (the argmax)."""

    form: str
    setup: list[str]  # lines before the loop
    line: str  # "for ...:" or "while ...:"
    variable: str
    trips: int  # the most trips one execution makes
    values: str  # a float64 array the index reads
    size: int  # its length
    index: str  # an index into ``values``
    score: str  # an int the argmax compares
    first: list[str] = field(default_factory=list)  # body lines that come first (a while loop's own step)
    is_while: bool = False

    @property
    def kind(self) -> str:
        return "while" if self.is_while else "for"


def forms_of_loops(cases: list[KernelCase]) -> Counter:
    """How many of ``cases`` exercise each loop form."""
    counts = Counter(dict.fromkeys(LOOP_FORMS, 0))
    for case in cases:
        counts.update(case.loop_forms)
    return counts


@dataclass
class LoopDraw:
    """Whether a kernel gets loop blocks, and the stream they are drawn from: one of the kernel's own, so that adding
    loops to a kernel leaves everything else it draws (from the generator's stream) as it was."""

    rng: random.Random
    alone: bool  # loops are the kernel's only hazard: it consumes no atomic's return
    with_atomics: bool  # loops after the kernel's other blocks

    @classmethod
    def of(cls, kernel: str, alone: bool) -> LoopDraw:
        rng = random.Random(f"{kernel}:loops")
        return cls(rng, alone, not alone and rng.random() < WITH_ATOMICS)


def loops_alone(index: int) -> bool:
    """Whether kernel ``index`` of a stream is one whose only hazard is its loops (by index, not drawn: the kernels
    that consume an atomic's return then draw the combination cells in turn, see ``combination_of``)."""
    return index % ALONE_EVERY == ALONE_EVERY - 1


def write_loops(writer: _KernelWriter, scope: _Scope, draw: LoopDraw) -> None:
    """One or two loop blocks, drawn from ``draw``'s stream; where the kernel consumes atomics' returns, so may its
    loops."""
    consumed = not draw.alone
    if not consumed:
        writer.loop_forms.add("no consumed atomic in the kernel")
    kept, writer.rng = writer.rng, draw.rng
    try:
        for _ in range(writer.rng.randint(1, 2)):
            _loop_block(writer, scope, consumed)
    finally:
        writer.rng = kept


def _loop_block(writer: _KernelWriter, scope: _Scope, consumed: bool) -> None:
    rng = writer.rng
    shapes: dict[str, Callable[[_KernelWriter, _Scope, bool], None]] = {
        "range": lambda w, s, c: _carried_loop(w, s, _range_header(w), c),
        "names": lambda w, s, c: _carried_loop(w, s, _names_header(w), c),
        "long": lambda w, s, c: _carried_loop(w, s, _long_header(w), c),
        "while": lambda w, s, c: _carried_loop(w, s, _while_header(w), c),
        "halvings": _halvings,
        "helper": _helper_loop,
        "while True": _return_from_while_true,
        "query": lambda w, s, c: _carried_loop(w, s, _query_header(w), c),
    }
    shape = rng.choices(list(shapes), weights=(3, 2, 1.5, 2.5, 1.5, 2, 1, 5))[0]
    wrappers = [w for w in ("if", "for_trips", "for") if rng.random() < 0.15]
    if "for_trips" in wrappers:
        writer.loop_forms.add("nested in a loop Warp does not unroll")
    writer.wrapped(scope, wrappers, lambda inner: shapes[shape](writer, inner, consumed))


# --- heads ------------------------------------------------------------------------------------------------


def _range_header(writer: _KernelWriter) -> _Header:
    """A range of the kernel's data (a dry run counts its trips), or one the launch's arguments give, ``x``'s shape
    (``passes/launch_trips.py``: each launch sizes its records from its arguments, with no dry run)."""
    k = writer.fresh("lk")
    bounds = writer.rng.choice(
        ("trips[tid]", "keys[tid] % 2, keys[tid] % 2 + trips[tid]", "x.shape[0]", "1, x.shape[0]")
    )
    if "shape" in bounds:
        return _x_header(writer, "for over the launch's arguments", f"for {k} in range({bounds}):", k, writer.dim)
    return _x_header(writer, "for over a data-dependent range", f"for {k} in range({bounds}):", k, TRIPS_MAX)


def _names_header(writer: _KernelWriter) -> _Header:
    """Bounds from module-level names: ``range(R * C)`` (a loop to Warp), or ``range(N)`` (Warp looks the constant
    up and unrolls it; the rewrite, erring on the safe side, replays it from records all the same)."""
    rng = writer.rng
    number = writer.fresh("")
    rows, columns = f"{writer.name.upper()}_R{number}", f"{writer.name.upper()}_C{number}"
    r, c = rng.randint(1, 3), rng.randint(1, 3)
    writer.helpers.append(f"{rows} = {r}\n{columns} = {c}\n")
    bounds, trips = rng.choice(
        (
            (f"{rows} * {columns}", r * c),
            (f"{rows} + {columns}", r + c),
            (rows, r),
            (f"{columns}, {rows} * {columns}", r * c),
        )
    )
    k = writer.fresh("lk")
    return _x_header(writer, "for over module-level names", f"for {k} in range({bounds}):", k, max(trips, 1))


def _long_header(writer: _KernelWriter) -> _Header:
    """``range(trips)``, or one time in two ``range(wp.static(trips))``: Warp puts the static's value in its place
    before it decides, so the loop is one to it as well (which ``unrolled_by_warp`` once took for unrolled); half of
    those bound by a module-level constant instead, ``range(NAME)`` or ``range(wp.static(NAME))``, which the rewrite
    reads as a loop of known length. Which spelling is drawn from streams of the loop's own, so that every other
    kernel stays as it was drawn."""
    trips = writer.rng.randint(*LONG_TRIPS)
    k = writer.fresh("lk")
    if random.Random(f"{writer.name}:{k}:static").random() < 0.5:
        if random.Random(f"{writer.name}:{k}:named").random() < 0.5:
            # a module-level constant, which the front ends read (``passes.constant_ranges``) as Warp does
            name = f"{writer.name.upper()}_{k.upper()}_TRIPS"
            writer.helpers.append(f"{name} = {trips}\n")
            bound = random.Random(f"{writer.name}:{k}:spelling").choice((name, f"wp.static({name})"))
            return _x_header(writer, NAMED_LONG, f"for {k} in range({bound}):", k, trips)
        return _x_header(writer, STATIC_LONG, f"for {k} in range(wp.static({trips})):", k, trips)
    return _x_header(writer, "for over a constant range beyond max_unroll", f"for {k} in range({trips}):", k, trips)


def _while_header(writer: _KernelWriter) -> _Header:
    w = writer.fresh("w")
    header = _x_header(writer, "while over a data-dependent count", f"while {w} < trips[tid] + keys[tid] % 2:", w, 0)
    header.setup, header.first, header.is_while, header.trips = [f"{w} = int(0)"], [f"{w} += 1"], True, TRIPS_MAX + 1
    return header


def _x_header(writer: _KernelWriter, form: str, line: str, variable: str, trips: int) -> _Header:
    """A loop over the kernel's own inputs: each trip reads another thread's x."""
    index = f"(tid + {variable} + {writer.rng.randint(1, writer.dim)}) % {writer.dim}"
    return _Header(form, [], line, variable, trips, "x", writer.dim, index, f"keys[{index}]")


def _query_header(writer: _KernelWriter) -> _Header:
    """A walk of a spatial query: the index each step writes reads the structure's elements' values."""
    rng = writer.rng
    form = rng.choice(QUERY_FORMS)
    kind, size = {"h": ("grid", GRID_POINTS), "B": ("bvh", BOXES), "m": ("mesh", FACES)}[form[0]]
    if not any(a.name == kind for a in writer.arrays):
        writer.add_array(StructureArgument(kind, "uint64", ()))
    values = _element_values(writer, kind, size)
    query, j = writer.fresh("q"), writer.fresh("j")
    ranges = ((0.2, 0.4), (0.0, 0.3), (0.15, 0.3), (0.0, 0.3))
    step_x, offset_x, step_y, height = (f"wp.float32({rng.uniform(*r):.3f})" for r in ranges)
    point = f"wp.vec3(wp.float32(tid % 3) * {step_x} + {offset_x}, wp.float32(keys[tid] % 4) * {step_y}, {height})"
    half = rng.uniform(0.1, 0.35)
    box = f"{point} - wp.vec3({half:.3f}), {point} + wp.vec3({half:.3f})"
    radius = f"wp.float32({rng.uniform(0.2, 0.5):.3f})"
    setup, line = [f"{j} = int(0)"], ""
    if form == "hash-grid query (for)":
        setup, line = [], f"for {j} in wp.hash_grid_query(grid, {point}, {radius}):"
    elif form == "hash-grid query (while)":
        setup.insert(0, f"{query} = wp.hash_grid_query(grid, {point}, {radius})")
        line = f"while wp.hash_grid_query_next({query}, {j}):"
    elif form == "BVH box query":
        setup.insert(0, f"{query} = wp.bvh_query_aabb(bvh, {box})")
        line = f"while wp.bvh_query_next({query}, {j}):"
    elif form == "BVH ray query":
        direction = f"wp.normalize(wp.vec3({rng.uniform(-0.5, 0.5):.3f}, {rng.uniform(-0.5, 0.5):.3f}, 1.0))"
        setup.insert(0, f"{query} = wp.bvh_query_ray(bvh, {point} - wp.vec3(0.0, 0.0, 1.0), {direction})")
        line = f"while wp.bvh_query_next({query}, {j}):"
    else:
        setup.insert(0, f"{query} = wp.mesh_query_aabb(mesh, {box})")
        line = f"while wp.mesh_query_aabb_next({query}, {j}):"
    is_while = line.startswith("while")
    score = f"({j} * {rng.randint(3, 7)} + tid) % {rng.randint(5, 11)}"
    return _Header(form, setup, line, j, size, values, size, j, score, is_while=is_while)


def _element_values(writer: _KernelWriter, kind: str, size: int) -> str:
    """The kernel's float64 values of the structure's elements (made on first use), differentiated."""
    name = f"{kind}_values"
    if not any(a.name == name for a in writer.arrays):
        values = [round(writer.rng.uniform(0.5, 1.5), 4) for _ in range(size)]
        writer.add_array(ArraySpec(name, "float64", (size,), values, True, False, True))
    return name


# --- the carried locals -----------------------------------------------------------------------------------


@dataclass
class _Carried:
    """Locals carried through a loop: their lines before it, in each trip and after it (float64 uses)."""

    before: list[str] = field(default_factory=list)
    trip: list[str] = field(default_factory=list)
    uses: list[str] = field(default_factory=list)
    floats: list[tuple[str, str, str]] = field(default_factory=list)  # (a carried float, its trip line, a trip's term)


def _carry(writer: _KernelWriter, header: _Header, carried: _Carried, scale: float) -> None:
    """One to three carried locals of random kinds. ``scale`` keeps a sum over many trips moderate."""
    rng = writer.rng
    term = f"{header.values}[{header.index}] * {writer.constant(scale * 0.5, scale * 1.5)}"
    kinds = rng.sample(("float", "float", "vector", "index"), rng.randint(1, 3))
    for kind in kinds:
        if kind == "float":
            _carry_float(writer, carried, term)
        elif kind == "vector":
            _carry_vector(writer, carried, term)
        else:
            _carry_index(writer, header, carried)


def _carry_float(writer: _KernelWriter, carried: _Carried, term: str) -> None:
    rng, a = writer.rng, writer.fresh("a")
    carried.before.append(f"{a} = xv * {writer.constant()}" if rng.random() < 0.6 else f"{a} = {writer.constant()}")
    # One in three starts as the result of a builtin whose adjoint reads it, which a loop Warp does not unroll
    # overwrites in place (``loop_hazards.overwritten_results``). Drawn from a stream of its own, so that every other
    # kernel stays as it was drawn.
    side = random.Random(f"{writer.name}:{a}:start")
    if side.random() < 1 / 3:
        writer.loop_forms.add("float starting as a builtin's result its adjoint reads")
        c = _literal(round(side.uniform(0.5, 1.5), 3))
        carried.before[-1] = side.choice(
            (
                f"{a} = wp.sqrt(xv * xv + {c})",
                f"{a} = wp.exp(xv * {c})",
                f"{a} = {c} / (xv * xv + wp.float64(1.0))",
                f"{a} = wp.length(wp.vec3d(xv, {c}, wp.float64(0.5)))",
            )
        )
    update = rng.choice(("linear", "sin", "drag", "norm"))
    if update == "linear":
        carried.trip.append(f"{a} += {term} * xv")
    else:
        writer.loop_forms.add("float carried from trip to trip nonlinearly")
        carried.trip.append(
            {
                "sin": f"{a} = wp.sin({a}) * {writer.constant(0.3, 0.9)} + {term} * xv",
                "drag": f"{a} = {a} - {writer.constant(0.2, 0.5)} * {a} * {a} * {a} * wp.float64(0.1) + {term}",
                "norm": f"{a} = wp.sqrt({a} * {a} + {term} * {term} * xv * xv)",
            }[update]
        )
    carried.floats.append((a, carried.trip[-1], term))
    if rng.random() < 0.35:
        writer.loop_forms.add("float carried out, used linearly")
        carried.uses.append(f"{a} * {writer.constant()}")
    else:
        writer.loop_forms.add("float carried out, used nonlinearly")
        carried.uses.append(
            rng.choice(
                (f"{a} * {a} * {writer.constant()}", f"wp.sqrt({a} * {a} + wp.float64(1.0)) * xv", f"wp.sin({a}) * xv")
            )
        )


def _carry_vector(writer: _KernelWriter, carried: _Carried, term: str) -> None:
    writer.loop_forms.add("vector carried")
    rng, v = writer.rng, writer.fresh("v")
    carried.before.append(f"{v} = wp.vec3d(xv, {writer.constant()}, xv * xv)")
    if rng.random() < 0.5:
        carried.trip.append(f"{v} += wp.vec3d({term}, {term} * xv, {writer.constant()})")
    else:
        turn = f"wp.cross({v}, wp.vec3d({term}, wp.float64(0.0), xv)) * wp.float64(0.1)"
        carried.trip.append(f"{v} = {v} * {writer.constant(0.5, 0.9)} + {turn}")
    carried.uses.append(rng.choice((f"wp.length({v}) * {writer.constant()}", f"wp.dot({v}, {v}) * xv")))


def _read_variable_after(writer: _KernelWriter, header: _Header, carried: _Carried) -> None:
    """The loop's variable read after it, keeping its last value as Python does (Warp's forward too; its backward,
    leaving the loop out, does not): an index into the float array."""
    writer.loop_forms.add("for loop's variable read after it")
    carried.before.append(f"{header.variable} = int(0)")
    carried.uses.append(f"{header.values}[{header.variable} % {header.size}] * xv")


def _carry_index(writer: _KernelWriter, header: _Header, carried: _Carried) -> None:
    """An argmax over ints: the index it picks reads the float array after the loop (nonlinearly)."""
    writer.loop_forms.add("int carried, used as an index")
    at, best = writer.fresh("at"), writer.fresh("best")
    carried.before += [f"{at} = tid % {header.size}", f"{best} = int(-1)"]
    carried.trip.append(f"if {header.score} > {best}:")
    carried.trip.append(f"    {best} = {header.score}")
    carried.trip.append(f"    {at} = {header.index}")
    values = header.values
    carried.uses.append(f"{values}[{at}] * {values}[{at}] * xv + wp.float64({best}) * {writer.constant()}")


# --- loops ------------------------------------------------------------------------------------------------


def _carried_loop(writer: _KernelWriter, scope: _Scope, header: _Header, consumed: bool) -> None:
    """Locals carried through the loop ``header`` heads, used after it: added into ``y`` (or, where ``consumed``,
    some stored at a slot taken after the loop)."""
    writer.loop_forms.add(header.form)
    carried = _Carried()
    _carry(writer, header, carried, 1.0 / max(1, header.trips) ** 0.5)
    if header.form in VARIABLE_READ_AFTER and writer.rng.random() < 0.5:
        _read_variable_after(writer, header, carried)
    _write_loop(writer, scope, header, carried, consumed)
    _use_after(writer, scope, carried.uses, consumed)


def _write_loop(writer: _KernelWriter, scope: _Scope, header: _Header, carried: _Carried, consumed: bool) -> None:
    rng = writer.rng
    # One carried float in four is updated only right before a break of its own, through its value at the trip's
    # start: no later trip sees the update, but Warp's backward replays each trip with the value the whole loop left
    # it. Drawn from a stream of the loop's own, so that every other kernel stays as it was drawn.
    side = random.Random(f"{writer.name}:{header.variable}:break")
    sole = side.choice(carried.floats) if carried.floats and side.random() < 0.25 else None
    for line in [*carried.before, *header.setup]:
        scope.line(line)
    scope.line(header.line)
    inner = scope.nested(
        loops=(*scope.loops, (header.variable, header.trips)), local_loops=scope.local_loops + 1, carry=None
    )
    for line in header.first:
        inner.line(line)
    if rng.random() < 0.2:
        writer.loop_forms.add(f"{header.kind} that continues")
        inner.line(f"if {header.variable} % 3 == keys[tid] % 3:")
        inner.nested().line("continue")
    for line in carried.trip:
        if sole is None or line != sole[1]:
            inner.line(line)
    if consumed and rng.random() < 0.5:
        writer.loop_forms.add("consumed atomic in the loop")
        if rng.random() < 0.8:
            writer.int_block(inner)
        else:
            writer.float_block(inner)
    if rng.random() < 0.2:
        writer.loop_forms.add(f"{header.kind} that breaks")
        inner.line(f"if keys[(tid + {header.variable}) % {writer.dim}] > {rng.randint(5, 8)}:")
        inner.nested().line("break")
    if sole is not None:
        writer.loop_forms.add("float updated only right before a break")
        a, _, term = sole
        inner.line(f"if keys[(tid + {header.variable} + 1) % {writer.dim}] > {side.randint(3, 7)}:")
        inner.nested().line(f"{a} = {a} * xv * wp.float64({side.uniform(0.5, 1.5):.3f}) + {term}")
        inner.nested().line("break")


def _use_after(writer: _KernelWriter, scope: _Scope, uses: list[str], consumed: bool) -> None:
    """Each use added into ``y``; or, where the kernel consumes atomics, their sum stored at a slot taken now."""
    if consumed and writer.rng.random() < 0.5:
        writer.loop_forms.add("consumed atomic after the loop")
        counter, slot = _out(writer, "int32", (1,)), writer.fresh("q")
        out = _out(writer, shape=(writer.dim * scope.multiplicity,))
        scope.line(f"{slot} = wp.atomic_add({counter}, 0, 1)")
        scope.line(f"{out}[{slot}] = {' + '.join(uses)}")
        return
    for use in uses:
        scope.line(f"y[tid] += {use}")


def _halving_scale(writer: _KernelWriter) -> float:
    """A scale ``s`` such that no input's ``|x| * s / 2**k`` comes within ``HALVINGS_GAP`` of 1 (relatively)."""
    magnitudes = [abs(v) for v in writer.x.values]
    while True:
        scale = round(writer.rng.uniform(2.0, 12.0), 3)
        ratios = [m * scale / 2**k for m in magnitudes for k in range(8)]
        if all(abs(r - 1.0) > HALVINGS_GAP for r in ratios):
            return scale


def _halvings(writer: _KernelWriter, scope: _Scope, consumed: bool) -> None:
    """``while h > 1: h = h * 0.5``: a trip count the input decides, the halved value carried out (and in)."""
    writer.loop_forms.add("while over a float condition")
    scale = _halving_scale(writer)
    h, w = writer.fresh("h"), writer.fresh("w")
    trips = math.ceil(math.log2(1.5 * scale)) + 1
    header = _x_header(writer, "while over a float condition", f"while {h} > wp.float64(1.0):", w, trips)
    header.setup = [f"{h} = wp.abs(xv) * wp.float64({scale})", f"{w} = int(0)"]
    header.first, header.is_while = [f"{h} = {h} * wp.float64(0.5)", f"{w} += 1"], True
    carried = _Carried(uses=[f"{h} * {h} * {writer.constant()}", f"wp.float64({w}) * xv * {writer.constant()}"])
    if writer.rng.random() < 0.6:
        _carry(writer, header, carried, 1.0 / trips**0.5)
    writer.loop_forms.add("float carried out, used nonlinearly")
    _write_loop(writer, scope, header, carried, consumed)
    _use_after(writer, scope, carried.uses, consumed)


def _helper_loop(writer: _KernelWriter, scope: _Scope, consumed: bool) -> None:
    """A helper whose loop carries locals, returning a nonlinear function of them (Warp's suggested workaround of
    moving the loop into a helper is wrong exactly there: its issue #1754)."""
    writer.loop_forms.add("helper loop with a nonlinear return")
    header = writer.rng.choice((_range_header, _names_header, _long_header, _while_header))(writer)
    writer.loop_forms.add(header.form)
    lines: list[str] = []
    inner = _Scope(lines, 1, scope.loops, in_helper=True)
    carried = _Carried()
    _carry(writer, header, carried, 1.0 / max(1, header.trips) ** 0.5)
    _write_loop(writer, inner, header, carried, consumed)
    returned = " + ".join(f"({use})" for use in carried.uses)
    if writer.rng.random() < 0.5:
        returned = f"wp.sqrt(({returned}) * ({returned}) + wp.float64(1.0))"
    inner.line(f"return {returned}")
    _call_helper(writer, scope, lines)


def _return_from_while_true(writer: _KernelWriter, scope: _Scope, consumed: bool) -> None:
    """A helper returning from inside ``while True``: an index it carried (an argmax), which the kernel reads
    nonlinearly, or a nonlinear function of a float it carried (the rewrite lowers returns from such loops in
    functions returning ints and bools only, and refuses the others)."""
    writer.loop_forms.add("helper returning from inside while True")
    lines: list[str] = []
    inner = _Scope(lines, 1, scope.loops, in_helper=True)
    w, a = writer.fresh("w"), writer.fresh("a")
    at, best = writer.fresh("at"), writer.fresh("best")
    index = f"(tid + {w}) % {writer.dim}"
    returns_index = writer.rng.random() < 0.6
    inner.line(f"{w} = int(0)")
    if returns_index:
        writer.loop_forms.add("int carried, used as an index")
        inner.line(f"{at} = tid")
        inner.line(f"{best} = int(-1)")
    else:
        writer.loop_forms.add("float carried out, used nonlinearly")
        inner.line(f"{a} = xv * {writer.constant()}")
    inner.line("while True:")
    body = inner.nested(loops=(*scope.loops, (w, TRIPS_MAX + 1)), local_loops=1, carry=None)
    body.line(f"{w} += 1")
    if returns_index:
        body.line(f"if keys[{index}] > {best}:")
        body.nested().line(f"{best} = keys[{index}]")
        body.nested().line(f"{at} = {index}")
    else:
        body.line(f"{a} = wp.sin({a}) * {writer.constant(0.3, 0.9)} + x[{index}] * xv")
    if consumed and writer.rng.random() < 0.5:
        writer.loop_forms.add("consumed atomic in the loop")
        writer.int_block(body)
    body.line(f"if {w} >= trips[tid] + 1:")
    if returns_index:
        body.nested().line(f"return {at}")
        inner.line(f"return {at}")  # after a break an int block may add
        _call_helper(writer, scope, lines, "int", f"x[{{call}}] * x[{{call}}] * xv * {writer.constant()}")
        return
    body.nested().line(f"return {a} * {a} * {writer.constant()}")
    inner.line(f"return {a}")  # after a break an int block may add
    _call_helper(writer, scope, lines)


def _call_helper(
    writer: _KernelWriter, scope: _Scope, lines: list[str], returns: str = "wp.float64", use: str = ""
) -> None:
    """Define a helper of ``lines`` returning ``returns``; add ``use`` of what a call returns (``{call}``) into y."""
    name = writer.fresh(f"{writer.name}_loop")
    text = "\n".join(lines)
    params = writer.helper_params(text, scope)
    signature = ", ".join(f"{p}: {t}" for p, t in params)
    writer.helpers.append(f"@wp.func\ndef {name}({signature}) -> {returns}:\n{text}\n")
    returned = writer.fresh("r")
    scope.line(f"{returned} = {name}({', '.join(p for p, _ in params)})")
    scope.line(f"y[tid] += {(use or f'{{call}} * {writer.constant()}').format(call=returned)}")
