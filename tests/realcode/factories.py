"""Kernel factories of the real code, called with plausible arguments: the kernels each call makes.

Most of Newton's consumed atomics are in kernels made by functions (narrow phase, soft contacts, Kamino's linear
algebra), with the contact writer, the speculative mode or a dtype as arguments; Warp's tests make kernels per
dtype. The arguments are those Newton's own callers pass (``CollisionPipeline`` picks ``write_contact`` or
``write_contact_speculative``, speculative or not, and builds the narrow phase with ``external_aabb=False`` on the
CPU). The same table serves the original packages (API) and their emitted copies (command line).
"""

from __future__ import annotations

import contextlib
import io
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import warp as wp


@dataclass(frozen=True)
class FactoryCall:
    """``module.label`` names the call in the outcomes (``narrow_phase.create_..(write_contact)``); ``launch_types``
    the types the callers of the kernels it makes pass for their generic parameters (``Any``), by name."""

    module: str
    label: str
    call: Callable[[], object]  # makes the kernels; what it returns is kept alive until they are harvested
    launch_types: Mapping[str, Any] = field(default_factory=dict, compare=False)


def newton_calls() -> list[FactoryCall]:
    import newton._src.geometry.contact_reduction_global as reduction
    import newton._src.geometry.contact_reduction_hydroelastic as hydro_reduction
    import newton._src.geometry.narrow_phase as narrow
    import newton._src.geometry.sdf_contact as sdf_contact
    import newton._src.geometry.sdf_hydroelastic as hydro
    import newton._src.geometry.soft_contacts_sdf as soft_sdf
    import newton._src.sim.collide as collide
    import newton._src.solvers.kamino._src.geometry.contacts as kamino_contacts
    import newton._src.solvers.kamino._src.linalg.conjugate_fused as conjugate
    import newton._src.solvers.kamino._src.linalg.factorize.rcm_batch as rcm
    import newton._src.solvers.kamino._src.linalg.sparse_matrix as sparse
    import newton._src.solvers.kamino._src.solvers.fk.kernels as fk

    calls = []

    def add(module, label, call, launch_types=None):
        calls.append(FactoryCall(module.__name__, label, call, launch_types or {}))

    for writer in (collide.write_contact, collide.write_contact_speculative):
        name = writer.key
        # The kernels take the writer's data as ``writer_data: Any`` and hand it to the writer, which declares its
        # type: Warp compiles the call for that type alone, and CollisionPipeline launches them with it.
        written = {"writer_data": writer.input_types["writer_data"]}
        for speculative in (False, True):
            add(
                narrow,
                f"create_narrow_phase_primitive_kernel({name}, speculative={speculative})",
                lambda w=writer, s=speculative: narrow.create_narrow_phase_primitive_kernel(w, speculative=s),
                written,
            )
            add(
                narrow,
                f"create_narrow_phase_kernel_gjk_mpr(False, {name}, speculative={speculative})",
                lambda w=writer, s=speculative: narrow.create_narrow_phase_kernel_gjk_mpr(False, w, speculative=s),
                written,
            )
            add(
                narrow,
                f"create_narrow_phase_kernels_gjk_mpr_split(False, {name}, speculative={speculative})",
                lambda w=writer, s=speculative: narrow.create_narrow_phase_kernels_gjk_mpr_split(
                    False, w, speculative=s
                ),
                written,
            )
        add(
            narrow,
            f"create_narrow_phase_process_mesh_plane_contacts_kernel({name})",
            lambda w=writer: narrow.create_narrow_phase_process_mesh_plane_contacts_kernel(w),
            written,
        )
        add(
            reduction,
            f"create_export_reduced_contacts_kernel({name})",
            lambda w=writer: reduction.create_export_reduced_contacts_kernel(w),
            written,
        )
        add(
            reduction,
            f"create_export_group_contacts_kernel({name})",
            lambda w=writer: reduction.create_export_group_contacts_kernel(w),
            written,
        )
        add(
            hydro,
            f"get_decode_contacts_kernel(0.0, {name})",
            lambda w=writer: hydro.get_decode_contacts_kernel(0.0, w),
            written,
        )
        for reduce in (False, True):  # two different kernels
            add(
                sdf_contact,
                f"create_narrow_phase_process_mesh_mesh_contacts_kernel({name}, reduce_contacts={reduce})",
                lambda w=writer, r=reduce: sdf_contact.create_narrow_phase_process_mesh_mesh_contacts_kernel(
                    w, reduce_contacts=r
                ),
                written,
            )
    for ratio in (0, 4):
        add(
            narrow,
            f"_create_find_mesh_triangle_overlaps_kernel({ratio})",
            lambda r=ratio: narrow._create_find_mesh_triangle_overlaps_kernel(r),
        )
    add(
        hydro_reduction,
        "get_reduce_hydroelastic_contacts_kernel()",
        hydro_reduction.get_reduce_hydroelastic_contacts_kernel,
    )
    for compact in (False, True):
        add(
            soft_sdf,
            f"_create_soft_face_contact_kernel({compact})",
            lambda c=compact: soft_sdf._create_soft_face_contact_kernel(c),
        )
        add(
            soft_sdf,
            f"_create_soft_edge_contact_kernel({compact})",
            lambda c=compact: soft_sdf._create_soft_edge_contact_kernel(c),
        )
    for geo_filter in (0, 1):
        add(
            soft_sdf,
            f"_create_soft_sdf_contact_kernel({geo_filter})",
            lambda g=geo_filter: soft_sdf._create_soft_sdf_contact_kernel(g),
        )
    add(
        kamino_contacts,
        "make_convert_contacts_newton_to_kamino()",
        kamino_contacts.make_convert_contacts_newton_to_kamino,
    )
    add(conjugate, "make_row_index_kernel(4)", lambda: conjugate.make_row_index_kernel(4))
    add(rcm, "_make_rcm_batch_kernels(wp.float32)", lambda: rcm._make_rcm_batch_kernels(wp.float32))
    add(sparse, "_make_dense_to_bsm_detect_kernel(6)", lambda: sparse._make_dense_to_bsm_detect_kernel(6))
    add(sparse, "_make_dense_to_bsm_copy_kernel(6)", lambda: sparse._make_dense_to_bsm_copy_kernel(6))
    add(fk, "make_1d_tile_based_kernels(8, 8, False)", lambda: fk.make_1d_tile_based_kernels(8, 8, False))
    return calls


def calls_for(tree: str) -> list[FactoryCall]:
    return {"newton": newton_calls, "warp/tests": warp_tests_calls}.get(tree, list)()


def warp_tests_calls() -> list[FactoryCall]:
    """Warp's tests register most of their kernels when imported (per dtype, ``wp.Kernel(func)``); this factory
    only when a test calls it."""
    import warp.tests.test_atomic_cas as cas

    return [
        FactoryCall(cas.__name__, "create_spinlock_test_4d(wp.int32)", lambda: cas.create_spinlock_test_4d(wp.int32))
    ]


def kernels_in(value: object, depth: int = 3) -> Iterator[wp.Kernel]:
    """The kernels in what a factory returned or a module holds: the value itself, or in its containers, function
    closures and attributes (a ``RewrittenKernel``'s original and generated kernels), ``depth`` levels down."""
    if isinstance(value, wp.Kernel):
        yield value
    elif type(value).__name__ == "RewrittenKernel":  # what factories of emitted modules return (any runtime copy's)
        yield from (value.kernel, *((value.record_kernel, value.replay_kernel) if value.pair else ()))
    elif depth > 0:
        if isinstance(value, dict):
            contents = list(value.values())
        elif isinstance(value, list | tuple | set):
            contents = list(value)
        elif isinstance(value, types.FunctionType):
            contents = [cell.cell_contents for cell in value.__closure__ or () if cell.cell_contents is not value]
        elif isinstance(value, types.SimpleNamespace):
            contents = list(vars(value).values())
        else:
            return
        for item in contents:
            yield from kernels_in(item, depth - 1)


def made_by(calls: list[FactoryCall]) -> Iterator[tuple[FactoryCall, wp.Kernel]]:
    """The kernels each call returns (each once)."""
    for call in calls:
        with contextlib.redirect_stdout(io.StringIO()):
            made = call.call()
        yield from ((call, kernel) for kernel in dict.fromkeys(kernels_in(made)))
