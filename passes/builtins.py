"""Every Warp builtin, by what it does to memory and to its arguments: the one table the fence, the planner and the
dataflow read (``builtin_effect``, ``call_effect``, ``written_arguments``).

Warp's registry (``warp._src.context.builtin_functions``) tells part of it, overload by overload: whether Warp's
replay skips the call (``skip_replay``), whether it has an adjoint (``is_differentiable``), its group (tiles) and its
parameters' types (arrays, query objects, ``uint64`` ids, textures). It does not tell which parameters the C++ takes
by reference and writes, nor what a builtin does with the memory behind an id: that is kept here by hand, in
``GROUPS``, with a one-line reason per group, read off ``warp/_src/builtins.py`` and ``warp/native/*.h``. The hand
facts are checked against the registry's hints (tests/passes/test_builtins.py): an overload taking an array is one
that reads or writes arrays, one taking a query or an id reads through a handle, and every builtin of the installed
Warp is in a group, so that a Warp upgrade that adds one fails there instead of passing it as a pure function.

Warp writes a builtin's argument only where it is a local's name: an element or a field is copied into a temporary
first, whose write is lost (in plain Warp too: ``wp.transform_set_translation(xforms[i], p)`` changes nothing).
"""

from __future__ import annotations

import ast
import builtins as python
import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import warp as wp
from warp._src import types as warp_types
from warp._src.context import Function, builtin_functions
from warp._src.texture import Texture

from warp_rewrite.passes import dtypes
from warp_rewrite.passes.atomics import ATOMIC_OPS, WarpNames


class Effect(Enum):
    """A class of builtins: what a call does, and how the rewrite handles it. A builtin may be in several."""

    def __init__(self, label: str, handling: str):
        self.label, self.handling = label, handling

    PURE = ("pure value", "a function of its arguments' values: the replay computes it again")
    HANDLE_READ = (
        "reads through a handle",
        "reads a mesh, BVH, hash grid, volume or texture by its id: memory the rewrite assumes the launch does not "
        "write (as Warp's own backward does), so the replay reads what the forward read, with no record",
    )
    WRITES_ARGUMENTS = (
        "writes its arguments",
        "writes the locals it is handed at the parameters it takes by reference: the dataflow sees each assigned by "
        "the call (``written_arguments``)",
    )
    READS_ARRAYS = (
        "reads arrays",
        "reads elements of arrays it is handed: refused where the launch writes one (the replay would read it after "
        "the forward changed it)",
    )
    WRITES_ARRAYS = (
        "writes arrays",
        "writes arrays it is handed (skipped by Warp's replay): the planner counts them as written, and records reads "
        "of them",
    )
    SHAPE = ("reads a shape", "reads a length or a shape, or whether an array is null, never an element")
    RANDOM = (
        "random state",
        "a draw advances its state in place (a local the dataflow sees assigned, recorded like any int a loop "
        "carries); a seed or noise is a function of its arguments",
    )
    ITERATOR = (
        "iterator",
        "starts or advances a loop's state (a range, a spatial query): the loop's state lives in the locals it writes",
    )
    TILE = (
        "tile",
        "works on tiles, values the threads of a block make together (registry group 'Tile Primitives', or a tile "
        "parameter): the replay runs on the launch's device with its block_dim",
    )
    OUTPUT = ("output", "prints or traps: no value the gradient needs; Warp's backward prints again, as plain Warp's")
    DEVICE_DEPENDENT = (
        "device-dependent",
        "its value differs between devices (no builtin of Warp 1.19 is device-only): the record and replay kernels "
        "run on the launch's device, so the replay recomputes what the forward computed",
    )
    NO_ADJOINT = ("no adjoint", "Warp has no adjoint for it (registry: is_differentiable=False): no gradient flows")
    SKIPPED_IN_REPLAY = (
        "skipped in the replay",
        "Warp's backward does not run it again (registry: skip_replay=True): its return is recorded where it is used",
    )
    REFUSED = ("refused", "the rewrite cannot replay it right: a kernel that consumes an atomic's return may not")
    ADJOINT_READS_RESULT = (
        "adjoint reads its result",
        "Warp's adjoint takes the value it returned (registry: require_original_output_arg, or several outputs): "
        "a loop Warp does not unroll that assigns the local holding it overwrites that value before the adjoint reads "
        "it (``passes.loop_hazards``), so the replay copies such a local into a variable of its own before the loop",
    )


# Effects that touch memory, arguments or the outside: a builtin with none of them is a pure value.
_IMPURE = frozenset(
    {
        Effect.HANDLE_READ,
        Effect.WRITES_ARGUMENTS,
        Effect.READS_ARRAYS,
        Effect.WRITES_ARRAYS,
        Effect.SHAPE,
        Effect.OUTPUT,
        Effect.REFUSED,
    }
)


# What a builtin does to the arrays it is handed: the classes of an overload that takes one.
_ARRAYS = frozenset({Effect.READS_ARRAYS, Effect.WRITES_ARRAYS, Effect.SHAPE})


@dataclass(frozen=True)
class BuiltinEffect:
    """What calling a builtin does (the union over the overloads a call may bind)."""

    effects: frozenset[Effect]
    written: tuple[int, ...]  # positions of the parameters the builtin writes (empty for most)
    reason: str  # the one-line reason of its group
    instead: str = ""  # a refused builtin: what to write instead

    @property
    def refused(self) -> bool:
        return Effect.REFUSED in self.effects


@dataclass(frozen=True)
class Group:
    """Builtins that do alike, kept by hand with the reason why. ``entries`` names each builtin, with the parameters
    its C++ takes by non-const reference and writes in parentheses: ``"randf(state) randn(state)"``."""

    reason: str
    entries: str
    effects: frozenset[Effect] = frozenset()
    instead: str = ""  # refused builtins: what to write instead

    def builtins(self) -> dict[str, tuple[str, ...]]:
        """Each builtin's name with the names of the parameters it writes."""
        found = {}
        for entry in self.entries.split():
            name, _, parameters = entry.partition("(")
            found[name] = tuple(p for p in parameters.rstrip(")").split(",") if p)
        return found


def _group(reason: str, entries: str, *effects: Effect) -> Group:
    return Group(reason, entries, frozenset(effects))


def _refused(reason: str, entries: str, instead: str, *effects: Effect) -> Group:
    return Group(reason, entries, frozenset({Effect.REFUSED, *effects}), instead)


GROUPS: tuple[Group, ...] = (
    # values
    _group("math on scalars, vectors, matrices, quaternions and transforms: a function of its arguments alone",
           "abs acos asin atan atan2 cbrt ceil clamp copysign cos cosh degrees erf erfc erfcinv erfinv exp floor frac "
           "isfinite isinf isnan log log10 log2 max min nonzero pow radians rint round sign sin sinh sqrt step tan "
           "tanh trunc bit_count lerp smoothstep add sub mul div floordiv mod neg pos invert lshift rshift "
           "bit_and bit_or bit_xor argmax argmin cross cw_div cw_mul ddot determinant diag get_diag "
           "inverse length length_sq normalize outer skew trace transpose dot quat_from_axis_angle quat_from_matrix "
           "quat_inverse quat_rotate quat_rotate_inv quat_rpy quat_slerp quat_to_matrix transform_get_rotation "
           "transform_get_translation transform_inverse transform_multiply transform_point transform_vector "
           "transform_set_rotation_copy transform_set_translation_copy spatial_adjoint spatial_bottom spatial_cross "
           "spatial_cross_dual spatial_dot spatial_top"),
    _group("geometry on values (intersect_tri_tri's C++ takes its vertices by reference and only reads them)",
           "closest_point_edge_edge intersect_tri_tri"),
    _group("constructors and casts: a value made of their arguments",
           "bool int int8 int16 int32 int64 uint8 uint16 uint32 uint64 float float16 float32 float64 bfloat16 cast "
           "vector matrix matrix_from_cols matrix_from_rows identity quaternion quat_identity transformation "
           "transform_identity spatial_vector"),
    _group("Warp's code generator's lowering of value syntax (a tuple, a slice, a component read, a copy, a local's "
           "component store as a copy): a value of its arguments", "tuple slice extract copy assign_copy"),
    _group("approximate arithmetic: exact on the CPU, approximate on CUDA", "div_approx inverse_approx",
           Effect.DEVICE_DEPENDENT),
    _group("written in Python with @wp.func inside Warp (the API reads them as helpers): math on values",
           "norm_huber norm_l1 norm_l2 norm_pseudo_huber smooth_normalize quat_from_euler quat_to_euler quat_to_rpy "
           "quat_twist quat_twist_angle quat_twist_angle_signed quat_between_vectors transform_compose "
           "transform_decompose transform_from_matrix transform_to_matrix transform_twist transform_wrench "
           "velocity_at_point"),
    _group("the thread's index and the block's size: the same in the record kernel and the replay", "tid block_dim"),
    _group("evaluated when Warp builds the kernel", "static"),
    _group("reads a length or a shape, never an element", "len", Effect.SHAPE),
    _group("picks a value, or negates a condition; of an array, asks only whether it is null", "select where unot",
           Effect.SHAPE),
    _group("prints, checks or stops in a debugger", "print printf breakpoint expect_eq expect_neq expect_near",
           Effect.OUTPUT),
    # writes to locals
    _group("decompositions whose out-argument forms write the factors into the caller's locals",
           "eig3(Q,d) qr3(Q,R) svd2(U,sigma,V) svd3(U,sigma,V) quat_to_axis_angle(axis,angle)"),
    _group("updates a local vector, matrix, quaternion or transform in place (Warp's lowering of `v[i] += x` and "
           "`xform.p = p`, and wp.transform_set_rotation)",
           "add_inplace(a) sub_inplace(a) bit_and_inplace(a) bit_or_inplace(a) bit_xor_inplace(a) assign_inplace(a) "
           "transform_add_inplace(a) transform_sub_inplace(a) transform_set_rotation(xform) "
           "transform_set_translation(xform)"),
    _group("a range to iterate, which Warp's code generator advances with iter_next", "range reversed"),
    _group("Warp's code generator's step of a for loop over a range or a query: advances it in place",
           "iter_next(range,query)"),
    # handles
    _group("starts a spatial query over a mesh, BVH or hash grid: a query object its *_next step advances, or a for "
           "loop iterates",
           "hash_grid_query bvh_query_aabb bvh_query_ray bvh_query_capsule bvh_query_sphere mesh_query_aabb "
           "mesh_query_sphere"),
    _group("a spatial query's step: advances the query and writes the next index into the caller's local",
           "hash_grid_query_next(query,index) bvh_query_next(query,index) mesh_query_aabb_next(query,index) "
           "mesh_query_next(query,index)"),
    _group("mesh queries; Warp's older forms write the hit (face, barycentrics, sign, distance) into the caller's "
           "locals, the newer return a struct",
           "mesh_query_point(inside,face,bary_u,bary_v) mesh_query_point_no_sign(face,bary_u,bary_v) "
           "mesh_query_point_sign_normal(inside,face,bary_u,bary_v) "
           "mesh_query_point_sign_parity(inside,face,bary_u,bary_v) "
           "mesh_query_point_sign_winding_number(inside,face,bary_u,bary_v) "
           "mesh_query_furthest_point_no_sign(face,bary_u,bary_v) mesh_query_ray(t,bary_u,bary_v,sign,normal,face)"),
    _group("reads a mesh, BVH, hash grid, volume or texture through its id",
           "hash_grid_point_id bvh_get_group_root mesh_get mesh_get_bvh mesh_get_group_root mesh_get_index "
           "mesh_get_point mesh_get_velocity mesh_eval_face_normal mesh_eval_position mesh_eval_velocity "
           "mesh_query_ray_anyhit mesh_query_ray_count_intersections volume_sample volume_sample_f volume_sample_i "
           "volume_sample_v volume_lookup volume_lookup_f volume_lookup_i volume_lookup_index volume_lookup_v "
           "volume_index_to_world volume_index_to_world_dir volume_world_to_index volume_world_to_index_dir "
           "volume_voxel_count texture_sample"),
    _group("samples a volume and writes the sample's gradient into the caller's local",
           "volume_sample_grad(grad) volume_sample_grad_f(grad)"),
    _group("samples a volume whose voxel values come from an array it is handed (and writes the gradient into the "
           "caller's local)", "volume_sample_index volume_sample_grad_index(grad)",
           Effect.READS_ARRAYS),
    # random numbers
    _group("draws from a random state and advances it in place",
           "randf(state) randi(state) randu(state) randn(state) poisson(state) sample_triangle(state) "
           "sample_unit_cube(state) sample_unit_disk(state) sample_unit_hemisphere(state) "
           "sample_unit_hemisphere_surface(state) sample_unit_ring(state) sample_unit_sphere(state) "
           "sample_unit_sphere_surface(state) sample_unit_square(state)", Effect.RANDOM),
    _group("draws an index from a CDF array it is handed and advances the state", "sample_cdf(state)",
           Effect.RANDOM, Effect.READS_ARRAYS),
    _group("a random state made from a seed, or noise of a state it does not advance: a function of its arguments",
           "rand_init noise pnoise curlnoise", Effect.RANDOM),
    # arrays
    _group("array atomics: passes.atomics records each consumed return", "atomic_add atomic_sub atomic_min atomic_max "
           "atomic_cas atomic_exch atomic_and atomic_or atomic_xor", Effect.READS_ARRAYS, Effect.WRITES_ARRAYS),
    _group("searches a sorted array it is handed", "lower_bound", Effect.READS_ARRAYS),
    _group("loads a tile from an array it is handed", "tile_load tile_load_indexed", Effect.READS_ARRAYS),
    _group("stores or adds a tile into an array it is handed",
           "tile_store tile_store_indexed tile_atomic_add tile_atomic_add_indexed", Effect.WRITES_ARRAYS),
    # tiles
    _group("makes a tile (a value the threads of a block make together, its shape following block_dim) from values "
           "or tiles",
           "tile tile_zeros tile_ones tile_full tile_empty tile_arange tile_from_thread tile_randf tile_randi untile "
           "tile_extract tile_astype tile_reshape tile_squeeze tile_broadcast tile_transpose tile_slice_indexed "
           "tile_sum tile_min tile_max tile_argmin tile_argmax tile_reduce tile_scan_exclusive tile_scan_inclusive "
           "tile_scan_max_inclusive tile_scan_min_inclusive tile_map tile_dot tile_cholesky tile_cholesky_solve "
           "tile_lower_solve tile_upper_solve tile_diag_add tile_stack tile_stack_count tile_query_valid"),
    _group("changes a tile or a tile stack it is handed in place",
           "assign(dst,dest) tile_assign(dst) tile_add_inplace(a) tile_sub_inplace(a) tile_bit_and_inplace(a) "
           "tile_bit_or_inplace(a) tile_bit_xor_inplace(a) tile_scatter_add(a) tile_scatter_masked(a) tile_axpy(dest) "
           "tile_matmul(out) tile_cholesky_inplace(A) tile_cholesky_solve_inplace(y) tile_lower_solve_inplace(y) "
           "tile_upper_solve_inplace(z) tile_fft(inout) tile_ifft(inout) tile_sort(keys,values) tile_stack_push(s) "
           "tile_stack_pop(s) tile_stack_clear(s)"),
    _group("starts a spatial query the threads of a block run together (the deprecated *_tiled aliases declare no "
           "query type)", "tile_bvh_query_aabb tile_bvh_query_ray bvh_query_aabb_tiled bvh_query_ray_tiled "
           "tile_mesh_query_aabb mesh_query_aabb_tiled", Effect.ITERATOR),
    _group("advances a block's spatial query in place and returns the next tile of indices",
           "tile_bvh_query_next(query) bvh_query_next_tiled(query) tile_mesh_query_aabb_next(query) "
           "mesh_query_aabb_next_tiled(query)"),
    # refused
    _refused("a view aliases its tile, so a write through it changes the tile where the rewrite's dataflow cannot see "
             "it", "tile_view", "Copy with wp.tile_extract or wp.tile_assign, or take the view in a kernel that "
             "consumes no atomic's return"),
    _refused("Warp's code generator's own access to memory and to components: skipped by Warp's replay, or reaching "
             "memory the planner does not follow", "address view load store array_store index indexref",
             "Write a[i], a[i] = v or v[i] instead", Effect.READS_ARRAYS, Effect.WRITES_ARRAYS),
    _refused("writes arrays it is handed and is not skipped by Warp's replay, which would write them again in "
             "backward", "dense_chol dense_chol_batched dense_gemm dense_gemm_batched dense_solve dense_solve_batched "
             "dense_subs", "Use wp.tile_matmul and wp.tile_cholesky on tiles, or call it from a kernel that consumes "
             "no atomic's return", Effect.READS_ARRAYS, Effect.WRITES_ARRAYS),
    _refused("writes a volume through its id, which the planner cannot follow, and is not skipped by Warp's replay, "
             "which would store again in backward", "volume_store volume_store_f volume_store_i volume_store_v",
             "Store into a wp.array, or write the volume from a kernel that consumes no atomic's return"),
    _refused("a thread-local array, whose stores Warp's replay skips (array_store is skip_replay), so the replay would "
             "read zeros (plain Warp's gradient through it is wrong too)", "zeros",
             "Hold the values in a vector or matrix local (wp.vector(length=N, dtype=...))"),
    _refused("an array made from a raw address, whose memory the planner cannot tell", "array",
             "Pass the array to the kernel as an argument"),
)  # fmt: skip

# Calls Warp's code generator handles itself, outside its registry (``Adjoint.emit_Call``), by name.
SPECIAL_FORMS: dict[str, BuiltinEffect] = {
    "address_of": BuiltinEffect(
        frozenset({Effect.REFUSED}),
        (),
        "takes the address of a local or an element, through which a write reaches memory the planner does not follow",
        "Index the array where the address would be used",
    ),
}

# Types whose parameters and results are a spatial query's state (Warp's iterators besides ranges).
QUERY_TYPES = (
    warp_types.HashGridQuery,
    warp_types.BvhQuery,
    warp_types.BvhQueryTiled,
    warp_types.MeshQuery,
    warp_types.MeshQueryAABBTiled,
)


def is_query_type(kind: Any) -> bool:
    """Is ``kind`` a spatial query's state (``QUERY_TYPES``)?"""
    return isinstance(kind, type) and issubclass(kind, QUERY_TYPES)


@dataclass(frozen=True)
class Overload:
    """One overload of a builtin, with its effect: the group's, plus what the registry tells of it."""

    function: Function
    signature: inspect.Signature
    written: tuple[str, ...]  # the names of the parameters it writes
    effect: BuiltinEffect


def _overloads(function: Function) -> list[Function]:
    """A registry entry's overloads; one written in Python (``@wp.func`` inside Warp) is its own only one."""
    return list(getattr(function, "overloads", None) or [function])


def derived_effects(function: Function) -> frozenset[Effect]:
    """What the registry tells of one overload: skipped by the replay, an adjoint that reads its result, no adjoint, a
    tile, a handle read (a query, a texture, or a ``uint64`` named ``id``), an iterator (a query or a range, taken or
    returned)."""
    found = set()
    if function.skip_replay:
        found.add(Effect.SKIPPED_IN_REPLAY)
    outputs = function.value_type if isinstance(function.value_type, tuple | list) else (function.value_type,)
    if function.is_differentiable and (function.require_original_output_arg or len(outputs) > 1):
        found.add(Effect.ADJOINT_READS_RESULT)
    if not function.is_differentiable or getattr(function, "missing_grad", False):  # (no missing_grad in Warp 1.19)
        found.add(Effect.NO_ADJOINT)
    types = [*function.input_types.values(), function.value_type]
    if function.group == "Tile Primitives" or any(warp_types.is_tile(t) for t in types):
        found.add(Effect.TILE)
    if any(_is_a(t, QUERY_TYPES) for t in types) or any(_is_a(t, (warp_types.range_t,)) for t in types):
        found.add(Effect.ITERATOR)
    handles = [t for name, t in function.input_types.items() if _is_a(t, (Texture, *QUERY_TYPES))]
    if handles or function.input_types.get("id") is wp.uint64:
        found.add(Effect.HANDLE_READ)
    return frozenset(found)


def _is_a(annotation: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, kinds)


def _overload(function: Function, group: Group, written_names: tuple[str, ...]) -> Overload:
    """One overload's effect: its group's, less what it does to arrays where it takes none (``len`` of a vector),
    plus what the registry tells of it and the parameters it writes."""
    parameters = list(function.signature.parameters)
    written = tuple(name for name in written_names if name in parameters)
    effects = group.effects | derived_effects(function) | ({Effect.WRITES_ARGUMENTS} if written else set())
    if not any(warp_types.is_array(t) for t in function.input_types.values()):
        effects -= _ARRAYS
    if not effects & _IMPURE:
        effects |= {Effect.PURE}
    positions = tuple(parameters.index(name) for name in written)
    effect = BuiltinEffect(frozenset(effects), positions, group.reason, group.instead)
    return Overload(function, function.signature, written, effect)


def registry() -> dict[str, Function]:
    """The builtins of the installed Warp, by name: its registry, and the functions Warp exports that it writes in
    Python outside the registry (``wp.quat_between_vectors``)."""
    found = dict(builtin_functions)
    for name, value in vars(wp).items():
        if isinstance(value, Function) and not value.is_builtin() and name not in found:
            found[name] = value
    return found


@functools.cache
def int_only_atomics() -> frozenset[str]:
    """The ops of the atomics Warp compiles for int targets only (``atomic_and``, ``atomic_or``, ``atomic_xor``): a
    target whose return such an atomic uses holds ints, whatever its annotation says (``dtype=Any``). Asked of the
    installed Warp: the overload's value function refuses a float32 array."""
    floats: dict[str, Any] = {"arr": warp_types.array(dtype=wp.float32), "i": wp.int32, "value": wp.float32}
    floats["compare"] = wp.float32
    refused = set()
    for op in ATOMIC_OPS:
        one_index = next(o for o in _overloads(builtin_functions[f"atomic_{op}"]) if set(o.input_types) <= set(floats))
        assert one_index.value_func is not None  # (Warp's atomics say their type)
        try:
            one_index.value_func({name: floats[name] for name in one_index.input_types}, {})
        except RuntimeError:
            refused.add(op)
    return frozenset(refused)


def _table() -> tuple[dict[str, tuple[Overload, ...]], dict[str, Group]]:
    groups = {name: (group, written) for group in GROUPS for name, written in group.builtins().items()}
    table = {}
    for name, function in registry().items():
        if name in groups:
            group, written = groups[name]
            table[name] = tuple(_overload(overload, group, written) for overload in _overloads(function))
    return table, {name: group for name, (group, _) in groups.items()}


TABLE, GROUP_OF = _table()


def _union(overloads: Sequence[Overload]) -> BuiltinEffect:
    effects = frozenset().union(*(o.effect.effects for o in overloads))
    written = sorted({position for o in overloads for position in o.effect.written})
    first = overloads[0].effect
    return BuiltinEffect(effects, tuple(written), first.reason, first.instead)


@functools.cache
def _binding(name: str, positional: int, keywords: tuple[str, ...]) -> tuple[Overload, ...]:
    """The overloads of ``name`` a call with ``positional`` arguments (a ``*v`` counts as one) and these keywords
    binds to, as Python binds them; none where it binds to none (Warp then refuses the call itself)."""
    placeholders = dict.fromkeys(keywords)
    found = []
    for overload in TABLE[name]:
        try:
            overload.signature.bind(*range(positional), **placeholders)
        except TypeError:
            continue
        found.append(overload)
    return tuple(found)


@functools.cache
def _effect(name: str, positional: int, keywords: tuple[str, ...]) -> BuiltinEffect:
    """The union of the effects of the overloads such a call binds to (of all of them, where it binds to none)."""
    return _union(_binding(name, positional, keywords) or TABLE[name])


def _shape(call: ast.Call) -> tuple[int, tuple[str, ...]]:
    """A call's number of positional arguments and its keywords' names: what decides the overloads it binds to."""
    return len(call.args), tuple(keyword.arg for keyword in call.keywords if keyword.arg)


def builtin_effect(name: str, overload_arity: int | None = None) -> BuiltinEffect | None:
    """The effect of the builtin ``name`` called with ``overload_arity`` positional arguments (None: any overload);
    None for a name the table does not have."""
    if name not in TABLE:
        return SPECIAL_FORMS.get(name)
    return _union(TABLE[name]) if overload_arity is None else _effect(name, overload_arity, ())


def is_known(name: str) -> bool:
    """Is ``name`` one Warp's code generator looks a call of ``wp.<name>`` up by itself: in its registry, or a
    special form (``SPECIAL_FORMS``)?"""
    return name in builtin_functions or name in SPECIAL_FORMS


def warp_builtin(call: ast.Call, names: WarpNames) -> str | None:
    """The name Warp looks the callee up by among its builtins, where the call spells it through Warp: ``X`` of
    ``wp.X(...)`` (any alias of Warp's module) or of a bare ``X(...)`` imported from Warp; None otherwise."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names.modules:
        return func.attr
    return names.member(func.id) if isinstance(func, ast.Name) else None


def called_builtin(call: ast.Call, names: WarpNames) -> str | None:
    """The builtin a call Warp sees as a builtin (``Frontend.is_builtin``) calls: spelled through Warp, or a Python
    builtin's name, which Warp looks up among its own (``min``, ``int``, ``range``); None for a constructor (a Warp
    type, a struct, a vector type made elsewhere), whose call only makes a value."""
    name = warp_builtin(call, names)
    if name is None and isinstance(call.func, ast.Name) and hasattr(python, call.func.id):
        name = call.func.id
    if name is None or (name not in TABLE and dtypes.is_type_name(name)):
        return None
    return name


def call_effect(call: ast.Call, names: WarpNames) -> BuiltinEffect | None:
    """The effect of a call of the builtin ``called_builtin`` names, over the overloads its arguments bind to; None
    where the table does not have it."""
    name = called_builtin(call, names)
    if name is None or name not in TABLE:
        return None if name is None else SPECIAL_FORMS.get(name)
    return _effect(name, *_shape(call))


def returned_type(call: ast.Call, names: WarpNames) -> Any:
    """The Warp type a call of a builtin spelled through Warp returns, where every overload it may bind declares the
    same one (``wp.rand_init(seed)``: ``uint32``); None otherwise."""
    name = warp_builtin(call, names)
    if name not in TABLE:
        return None
    returned = {dtypes.normalized(o.function.value_type) for o in _binding(name, *_shape(call)) or TABLE[name]}
    return returned.pop() if len(returned) == 1 else None


@dataclass(frozen=True)
class Written:
    """A local a builtin call writes, with the Warp type of the parameter it is handed to (Any where generic)."""

    local: ast.Name
    parameter: str
    dtype: Any


def written_locals(call: ast.Call, names: WarpNames) -> list[Written]:
    """The locals a builtin call writes: the arguments at the parameters it takes by reference and writes, where they
    are a local's name (Warp copies an element or a field into a temporary first, whose write is lost)."""
    name = warp_builtin(call, names)
    if name not in TABLE or not any(overload.written for overload in TABLE[name]):
        return []
    keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
    found: dict[str, Written] = {}
    for overload in _binding(name, *_shape(call)):
        arguments = overload.signature.bind(*call.args, **keywords).arguments if overload.written else {}
        for parameter in overload.written:
            local = arguments.get(parameter)
            if isinstance(local, ast.Name) and local.id not in found:
                dtype = overload.function.input_types.get(parameter)
                found[local.id] = Written(local, parameter, dtype)
    return list(found.values())


def written_arguments(call: ast.Call, names: WarpNames) -> list[ast.Name]:
    """The argument expressions a builtin call writes (locals' names: see ``written_locals``); empty for any other
    call."""
    return [written.local for written in written_locals(call, names)]


def class_counts() -> dict[Effect, tuple[int, int]]:
    """How many builtins, and how many overloads, are of each class."""
    counts = {}
    for effect in Effect:
        overloads = [o for found in TABLE.values() for o in found if effect in o.effect.effects]
        names = {o.function.key for o in overloads}
        counts[effect] = (len(names), len(overloads))
    return counts


def class_list() -> str:
    """The design notes' table of builtin classes (docs/design.md, between ``<!-- builtins -->`` and
    ``<!-- /builtins -->``)."""
    counts = class_counts()
    rows = [
        f"| {effect.label} | {counts[effect][0]} | {counts[effect][1]} | {effect.handling} |\n" for effect in Effect
    ]
    header = "| class | builtins | overloads | what the rewrite does |\n|---|---|---|---|\n"
    return header + "".join(rows)


def group_list() -> str:
    """The design notes' table of the hand-kept groups (docs/design.md, between ``<!-- builtin groups -->`` and
    ``<!-- /builtin groups -->``)."""
    rows = []
    for group in GROUPS:
        entries = group.builtins()
        classes = sorted({e.label for name in entries if name in TABLE for o in TABLE[name] for e in o.effect.effects})
        writers = ", ".join(f"{n}({', '.join(w)})" for n, w in entries.items() if w)
        rows.append(f"| {group.reason} | {len(entries)} | {', '.join(classes)} | {writers} |\n")
    header = "| group (why) | builtins | classes | writes |\n|---|---|---|---|\n"
    return header + "".join(rows)
