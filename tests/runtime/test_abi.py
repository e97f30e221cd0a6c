"""The contract between generated code and the runtime (``warp_rewrite.runtime.abi``): the runtime exports exactly
the ABI's names, emitted blocks refuse a runtime of another ABI, and ``check()`` reads every copy of the runtime.

That generated kernels call only the ABI's names is checked on every kernel the suite generates
(``tests/conftest.py``, ``tests/support/generated_names.py``).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import numpy as np
import pytest
import warp as wp

import warp_rewrite
import warp_rewrite.runtime
from warp_rewrite.cli.main import main
from warp_rewrite.runtime import abi

SMALL = """import warp as wp


@wp.kernel
def compact(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid]
"""


def test_the_runtime_exports_exactly_the_abis_names():
    runtime = warp_rewrite.runtime
    public = {
        name
        for name, value in vars(runtime).items()
        if not name.startswith(("_", *abi.Reader)) and not inspect.ismodule(value)  # readers: made on demand
    }
    assert public | {"__version__"} == set(runtime.__all__) == set(abi.EXPORTED)
    assert len(abi.EXPORTED) == len(set(abi.EXPORTED))
    assert all(getattr(runtime, name) is not None for name in abi.EXPORTED)


def test_runtime_names_are_spelled_from_the_table_only():
    names = abi.RuntimeNames.spelled("rt")
    assert names.record_returned == "rt.record_returned" and names.exact("cas") == "rt.exact_cas"
    assert names.reader(wp.float32) == "rt.recorded_float32" and names.reader(int) is None
    assert names.carrier(wp.vec3d) == "rt.carried_vec3d"
    with pytest.raises(KeyError, match="not a runtime name"):
        names.named("wp_rewrite_runtime_internals")
    with pytest.raises(KeyError):
        names.exact("and")  # no exact float and


def emitted_package(tmp_path, monkeypatch, name: str):
    """SMALL rewritten by wp-rewrite into the package ``name``, with the runtime beside it (not imported yet)."""
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "small.py").write_text(SMALL)
    assert main([str(package / "small.py"), "--in-place"]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(wp, "launch", wp.launch)  # the copy's hook goes with the test
    return package


def test_emitted_blocks_record_the_abi(tmp_path, monkeypatch):
    package = emitted_package(tmp_path, monkeypatch, "abi_recorded")
    text = (package / "small.py").read_text()
    assert f'wp_rewrite_runtime.require_abi({abi.ABI}, "compact", ' in text
    assert text.index("require_abi(") < text.index("def compact_phases(")


def test_an_emitted_file_refuses_a_runtime_of_another_abi_at_import(tmp_path, monkeypatch):
    package = emitted_package(tmp_path, monkeypatch, "abi_other")
    copied = package / "wp_rewrite_runtime" / "abi.py"
    copied.write_text(copied.read_text().replace(f"\nABI = {abi.ABI} ", f"\nABI = {abi.ABI + 1} "))
    expected = (
        rf"small\.py:\d+:\d+: kernel 'compact': .* expects warp-rewrite's runtime ABI {abi.ABI}, but .* has ABI "
        rf"{abi.ABI + 1}\. re-run wp-rewrite on this file"
    )
    with pytest.raises(Exception, match=expected) as raised:
        importlib.import_module("abi_other.small")
    assert type(raised.value).__name__ == "RewriteError"


def test_check_reads_the_pending_checks_of_every_copy_of_the_runtime(tmp_path, monkeypatch):
    emitted_package(tmp_path, monkeypatch, "abi_copies")
    small = importlib.import_module("abi_copies.small")
    copy = small.wp_rewrite_runtime
    assert copy is not warp_rewrite.runtime
    assert copy.checks.device_checks is not warp_rewrite.runtime.checks.device_checks
    monkeypatch.setattr(copy.checks.PendingCheck, "arrived", lambda self: False)  # as on a GPU not there yet
    refusal = copy.RewriteError("compact", "small.py:5:1", "the device refused it", "Do something else")
    status = wp.zeros(3, dtype=wp.int32, device="cpu")
    copy.checks.device_checks.watch(status, lambda values: refusal)  # pending, in the copy's own state
    with pytest.raises(copy.RewriteError, match="the device refused it"):
        warp_rewrite.check()  # the package's check()
    assert not copy.checks.device_checks.pending
    warp_rewrite.check()  # reported once
    # The copy's kernels launch as the package's do.
    x, count, out = wp.array(np.ones(4), dtype=wp.float32), wp.zeros(1, dtype=int), wp.zeros(4, dtype=wp.float32)
    small.launch_compact(4, inputs=[x, count, out])
    assert count.numpy()[0] == 4


def test_specs_spell_sites_and_records_as_calls_of_their_op_and_kind():
    site = abi.Op.READ("state.count", "sim.py:12:9", gradient_sources=("x",))
    assert site == warp_rewrite.runtime.SiteSpec("state.count", abi.Op.READ, "sim.py:12:9", ("x",))
    record = abi.RecordKind.CARRIED("x_in_loop0", dtype=wp.float32, loops=(0,))
    assert record == warp_rewrite.runtime.RecordSpec("x_in_loop0", abi.RecordKind.CARRIED, dtype=wp.float32, loops=(0,))


def test_a_spec_names_its_file_once_for_its_sites_and_loops():
    """Generated code spells a site or loop in the spec's own file ``line:col``: the spec completes it, for every
    message, and leaves a location in another file (a helper's) as it is."""
    spec = warp_rewrite.runtime.KernelSpec(
        "take",
        location="pkg/sim.py:4:1",
        sites=(abi.Op.ADD("count", "6:13"), abi.Op.READ("state.x", "pkg/helpers.py:9:5")),
        loops=(warp_rewrite.runtime.LoopSpec(0, "5:5", counted=True),),
    )
    assert [site.location for site in spec.sites] == ["pkg/sim.py:6:13", "pkg/helpers.py:9:5"]
    assert spec.loops[0].location == "pkg/sim.py:5:5"
    assert dataclasses.replace(spec, parameters=("x", "count")).sites == spec.sites  # completed once, kept


@wp.kernel
def take_slot(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
    out[wp.atomic_add(count, 0, 1)] = x[wp.tid()]


@wp.kernel
def take_two_slots(x: wp.array[float], count: wp.array[int], out: wp.array[float], y: float):
    out[wp.atomic_add(count, 0, 2)] = x[wp.tid()] * y


def test_a_spec_takes_its_parameters_from_the_kernel_it_was_generated_from():
    """Generated code leaves them out (the kernel right above names them); a kernel made by a wrapped call whose
    parameters the record kernel does not take first is not the one it was generated from."""
    pair = warp_rewrite.wp_rewrite(take_slot).pair
    assert pair is not None and pair.spec.parameters == ("x", "count", "out")
    bare = dataclasses.replace(pair, spec=dataclasses.replace(pair.spec, parameters=()))
    assert warp_rewrite.runtime.RewrittenKernel(take_slot, bare).pair.spec.parameters == ("x", "count", "out")
    assert warp_rewrite.runtime.KernelRewrite(bare)(take_slot).pair.spec.parameters == ("x", "count", "out")
    with pytest.raises(warp_rewrite.RewriteError, match="not a kernel made of the function 'take_slot'"):
        warp_rewrite.runtime.KernelRewrite(bare)(take_two_slots)
