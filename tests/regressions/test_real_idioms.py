"""Idioms of real code: each rewrites, compiles where the original does, and gives the original's forward
and gradients equal to finite differences; through the API and, where the command line can read them, through
wp-rewrite too. The kernels are in tests/support/idioms.py (modelled on Newton's and Warp's own, not copied)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import warp as wp

from tests.support import harness, idioms, idioms_buffers_in, idioms_buffers_out, idioms_future, idioms_structs
from tests.support.harness import Case, check, f64, i32
from warp_rewrite import RewriteError, launch, wp_rewrite
from warp_rewrite.cli.main import main

N = 6
X = np.array([0.7, 1.3, 1.9, 0.4, 0.6, 1.1])
TRIPS = [1, 2, 0, 3, 1, 2]  # loop lengths per thread


def zeros(n: int) -> wp.array:
    return f64(np.zeros(n), True)


# name -> (arguments, loss outputs, differentiate with respect to)
CASES = {
    "append_with_defaults": (lambda: [f64(X, True), i32([0]), zeros(3 * N)], [2], [0]),
    "atomics_by_keyword": (lambda: [f64(X, True), i32([0, 0]), i32([0]), zeros(N)], [3], [0]),
    "emit_weighted": (lambda: [f64(X, True), i32([0]), zeros(3 * N)], [2], [0]),
    "probe_with_a_helper": (lambda: [i32([0] * 8), f64(X, True), zeros(8)], [2], [1]),
    "probe_sized_by_shape": (lambda: [i32([0] * 8), f64(X, True), zeros(8)], [2], [1]),
    "probe_with_a_wide_hash": (lambda: [i32([0] * 8), f64(X, True), zeros(8)], [2], [1]),
    "count_while_working": (lambda: [i32([0]), f64(X, True), zeros(N)], [2], [1]),
    "float_assigned_before_read": (lambda: [i32([0]), f64(X, True), zeros(N)], [2], [1]),
    "store_into_columns": (
        lambda: [f64(X, True), i32([0]), wp.zeros(N, dtype=idioms.column, requires_grad=True)],
        [2],
        [0],
    ),
    "running_columns": (
        lambda: [f64(X, True), wp.array([[[0.5], [-0.25]]], dtype=idioms.column, requires_grad=True), zeros(N)],
        [2],
        [0, 1],
    ),
    "offsets_per_trip": (lambda: [i32(TRIPS), i32([0]), f64(X, True), i32([0] * 3 * N), zeros(3 * N)], [4], [2]),
    "cursor_read_by_its_condition": (lambda: [i32(TRIPS), i32([0]), f64(X, True), zeros(3 * N)], [3], [2]),
}


@pytest.mark.parametrize("name", CASES)
def test_the_api_takes_the_idiom(name):
    make, loss, wrt = CASES[name]
    check(Case(getattr(idioms, name), N, make, loss, wrt))


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    """tests/support/idioms.py through wp-rewrite, imported from where it was written."""
    out = tmp_path_factory.mktemp("idioms") / "idioms_rewritten.py"
    assert main([str(Path(idioms.__file__)), "-o", str(out)]) == 0
    sys.path.append(str(out.parent))
    spec = importlib.util.spec_from_file_location("idioms_rewritten", out)
    module = importlib.util.module_from_spec(spec)
    sys.modules["idioms_rewritten"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", CASES)
def test_the_command_line_takes_the_idiom(emitted, name):
    make, loss, wrt = CASES[name]

    def program(args, launcher):
        if launcher is harness.launch_original:
            wp.launch(getattr(emitted, name), N, inputs=args, device="cpu")
        else:
            getattr(emitted, f"launch_{name}")(N, inputs=args, device="cpu")

    check(Case(None, N, make, loss, wrt, program=program))


# --- a struct taken as Any ---------------------------------------------------------------------------------------


def test_a_struct_taken_as_any_has_the_type_the_helpers_it_is_handed_to_declare(emitted):
    """Newton's narrow-phase kernels take their contact writer's struct as ``Any`` and hand it whole to a writer
    helper that declares it: its int counter is no float target (no exact returns, so no refusal of the helper it is
    handed to, or of a plain read of the counter), and that read is recorded."""

    def program_of(module):
        def program(args, launcher):
            emitter = module.Emitter()
            emitter.count, emitter.capacity, emitter.values = args[1], 4, args[2]
            if launcher is harness.launch_original:
                wp.launch(idioms.emit_through_any, N, inputs=[args[0], emitter], device="cpu")
            elif module is idioms:
                launcher(idioms.emit_through_any, N, [args[0], emitter])
            else:
                module.launch_emit_through_any(N, inputs=[args[0], emitter], device="cpu")

        return program

    sites = wp_rewrite(idioms.emit_through_any).pair.spec.sites
    assert [(site.target, site.op, site.exact) for site in sites] == [
        ("emitter.count", "read", None),
        ("emitter.count", "add", None),
    ]
    for module in (idioms, emitted):
        check(Case(None, N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0], program=program_of(module)))


# --- string annotations ----------------------------------------------------------------------------------------


def test_a_helper_declared_to_return_an_int_by_a_string_annotation_returns_an_int(tmp_path):
    """Under ``from __future__ import annotations`` a helper's ``-> int`` is the string ``'int'``: read as Warp reads
    it, the local it is assigned to is an int, which a loop around a consumed atomic may carry (Newton's
    export_reduced_contacts_kernel, whose ``contact_id = unpack_contact_id(...)`` was refused as not an int)."""
    packed = np.array([0x1203, 0x3401, 0x05, 0xFF02, 0x04, 0x106, 0x2, 0x7, 0x1, 0x3, 0x8, 0x9], dtype=np.uint64)
    packed_ids = lambda: wp.array(packed, dtype=wp.uint64, device="cpu")  # noqa: E731
    make = lambda: [packed_ids(), i32([0]), f64(X, True), zeros(2 * N), zeros(N)]  # noqa: E731
    check(Case(idioms_future.export_unpacked, N, make, [3, 4], [2]))
    out = tmp_path / "idioms_future_rewritten.py"
    assert main([str(Path(idioms_future.__file__)), "-o", str(out)]) == 0


# --- kernel factories ------------------------------------------------------------------------------------------


def make_annotated_only(dtype):
    """The factory's value appears only in annotations: it is no closure variable of the kernel."""

    @wp.kernel
    def scatter(x: wp.array(dtype=dtype), count: wp.array(dtype=wp.int32), out: wp.array(dtype=dtype)):
        tid = wp.tid()
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid]

    return scatter


scalar = wp.float32  # a global of the name of the factory's parameter below, meaning something else


def make_shadowing(scalar):
    @wp.kernel
    def scatter(x: wp.array(dtype=scalar), count: wp.array(dtype=wp.int32), out: wp.array(dtype=scalar)):
        tid = wp.tid()
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid]

    return scatter


def make_typed(type):
    @wp.kernel
    def scatter(x: wp.array[type], count: wp.array(dtype=wp.int32), out: wp.array[type]):
        tid = wp.tid()
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid]

    return scatter


@pytest.mark.parametrize("factory", [make_annotated_only, make_shadowing, make_typed])
def test_factories_whose_values_appear_in_annotations(factory):
    check(Case(factory(wp.float64), N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0]))


# --- two structs of one name -------------------------------------------------------------------------------------


def test_structs_and_helpers_of_one_name_from_two_modules():
    def program(args, launcher):
        source, target = idioms_buffers_in.Buffers(), idioms_buffers_out.Buffers()
        source.count, source.data = args[0], args[1]
        target.scale, target.values, target.written = wp.float64(0.5), args[2], args[3]
        launcher(idioms_structs.scatter_between_buffers, N, [source, target])

    make = lambda: [i32([0]), f64(X, True), zeros(N), i32([0])]  # noqa: E731
    check(Case(None, N, make, [2], [1], program=program))


# --- generated code that does not compile ------------------------------------------------------------------------


def test_generated_code_that_does_not_compile_is_reported_as_the_rewrites_fault(monkeypatch):
    rewritten = wp_rewrite(idioms.count_while_working)

    @wp.kernel(module="unique")
    def broken(count: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
        out[0] = x[0] + wp.float32(1.0)  # float64 + float32: Warp refuses it

    pair = rewritten.pair
    monkeypatch.setattr(rewritten, "pair", type(pair)(broken, pair.replay, pair.spec))
    with (
        pytest.raises(
            RewriteError,
            match=r"kernel 'count_while_working': the kernels warp-rewrite generated for it "
            r"do not compile .* this is a bug in warp-rewrite. Please report it",
        ),
        wp.Tape(),
    ):
        launch(rewritten, N, inputs=[i32([0]), f64(X, True), zeros(N)], device="cpu")


UNPACKED_OPTIONS = """
import warp as wp

OPTIONS = {"enable_backward": True, "launch_bounds": 128}


@wp.kernel(**OPTIONS)
def compact_with_options(x: wp.array(dtype=wp.float64), count: wp.array(dtype=wp.int32), out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[tid] * x[tid]
"""


def test_options_unpacked_into_the_decorator_are_passed_on(tmp_path):
    """``@wp.kernel(**options)``: the generated kernels take the same, the record kernel without a backward."""
    source, out = tmp_path / "unpacked.py", tmp_path / "unpacked_rewritten.py"
    source.write_text(UNPACKED_OPTIONS)
    assert main([str(source), "-o", str(out)]) == 0
    text = out.read_text()
    record = 'compact_with_options_record = wp.kernel(**{**OPTIONS, "enable_backward": False})('
    assert record + "\n    compact_with_options_phases(record=True)\n)" in text
    assert "_replay = wp.kernel(**{**OPTIONS})(\n    compact_with_options_phases(record=False)\n)" in text
    sys.path.append(str(tmp_path))
    spec = importlib.util.spec_from_file_location("unpacked_rewritten", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def program(args, launcher):
        if launcher is harness.launch_original:
            wp.launch(module.compact_with_options, N, inputs=args, device="cpu")
        else:
            module.launch_compact_with_options(N, inputs=args, device="cpu")

    check(Case(None, N, lambda: [f64(X, True), i32([0]), zeros(N)], [2], [0], program=program))
