"""``rewrite/cli/weave.py``: a family's phases as one definition, before and after."""

from __future__ import annotations

import ast

from warp_rewrite.cli.weave import woven_source
from warp_rewrite.passes.naming import Namer

# What the pipeline makes for a kernel calling a helper that claims a slot (``Ints``, ``Floats``: Warp's array types,
# short here; the block is laid out after weaving).
BEFORE = """\
@wp.func
def claim_record(count: Ints, out: Floats, slot_records: Ints, thread: int) -> int:
    slot = wp_rewrite_runtime.record_returned(wp.atomic_add(count, 0, 1), slot_records, thread)
    out[slot] = 1.0  # the user's comment
    return slot


@wp.func
def claim_replay(count: Ints, out: Floats, slot_records: Ints, thread: int) -> int:
    slot = wp_rewrite_runtime.recorded_int32(slot_records, thread)
    out[slot] = 1.0  # the user's comment
    return slot


@wp_rewrite_runtime.replays(claim_replay)
@wp.func
def claim_replay_forward(count: Ints, out: Floats, slot_records: Ints, thread: int) -> int:
    slot = wp_rewrite_runtime.recorded_int32(slot_records, thread)
    return slot


@wp.kernel(enable_backward=False)
def emit_record(x: Floats, count: Ints, out: Floats, slot_records: Ints, status: Ints):
    thread = wp.tid()
    if x[thread] > 0.0:
        slot = claim_record(count, out, slot_records, thread)
        out[slot] = out[slot] * x[thread]


@wp.kernel
def emit_replay(x: Floats, count: Ints, out: Floats, slot_records: Ints, status: Ints):
    thread = wp.tid()
    if wp_rewrite_runtime.refused(status):
        return
    if x[thread] > 0.0:
        slot = claim_replay(count, out, slot_records, thread)
        out[slot] = out[slot] * x[thread]
"""

# One factory a family: a phase's own statements under ``if wp.static(...)``, the callee named once for each phase,
# the replay's guard folded into its ``if`` (ruff's SIM102), the decorators that differ applied where the names are
# bound.
AFTER = """\
def claim_phases(record: bool, store: bool):
    @wp.func
    def claim_phase(count: Ints, out: Floats, slot_records: Ints, thread: int) -> int:
        if wp.static(record):
            slot = wp_rewrite_runtime.record_returned(wp.atomic_add(count, 0, 1), slot_records, thread)
        else:
            slot = wp_rewrite_runtime.recorded_int32(slot_records, thread)
        if wp.static(store):
            out[slot] = 1.0
        return slot

    return claim_phase


claim_record = claim_phases(record=True, store=True)
claim_replay = claim_phases(record=False, store=True)
claim_replay_forward = wp_rewrite_runtime.replays(claim_replay)(claim_phases(record=False, store=False))


def emit_phases(record: bool):
    claim = claim_record if record else claim_replay

    def emit_phase(x: Floats, count: Ints, out: Floats, slot_records: Ints, status: Ints):
        thread = wp.tid()
        if wp_rewrite_runtime.refused(status) if wp.static(not record) else False:
            return
        if x[thread] > 0.0:
            slot = claim(count, out, slot_records, thread)
            out[slot] = out[slot] * x[thread]

    return emit_phase


emit_record = wp.kernel(enable_backward=False)(emit_phases(record=True))
emit_replay = wp.kernel(emit_phases(record=False))
"""


def woven(source: str) -> str:
    names = {node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}
    return woven_source(source, names, Namer(names), "wp", width=1000)  # (the lines are laid out after)


def test_each_family_is_one_definition():
    assert woven(BEFORE) == AFTER


def test_a_family_reading_a_name_the_factory_takes_is_left_as_it_is():
    """``record`` and ``store`` are the factory's parameters: a global of that name would be hidden."""
    source = BEFORE.replace("out[slot] = 1.0", "out[slot] = store")
    kept = woven(source)
    assert "def claim_record(" in kept and "def claim_replay(" in kept and "def emit_phases(" in kept


def test_phases_of_another_signature_stay_apart():
    """The record clone taking a parameter more: the replay and its twin are woven, the record is not."""
    source = BEFORE.replace("def claim_record(count:", "def claim_record(extra: int, count:")
    source = source.replace("claim_record(count,", "claim_record(0, count,")
    kept = woven(source)
    assert "def claim_record(extra: int," in kept
    assert "def claim_phases(store: bool):" in kept
    assert "claim_replay_forward = wp_rewrite_runtime.replays(claim_replay)(claim_phases(store=False))" in kept


COMMENTED = """\
@wp.func
def f_record(a: int, r: Ints) -> int:
    x = wp_rewrite_runtime.record_if_room(wp.atomic_add(c, 0, 1), r, a)
    if x == 0:
        # Undo the reservation.
        wp.atomic_add(c, 0, -1)
        return -1
    return x


@wp.func
def f_replay(a: int, r: Ints) -> int:
    x = wp_rewrite_runtime.recorded_int32(r, a)
    if x == 0:
        return -1
    return x
"""


def test_a_comment_inside_a_statement_woven_anew_stays_above_its_statement():
    """The ``if`` is printed anew (its body differs from phase to phase): the statement it held keeps its comment."""
    assert "        if x == 0:\n            if wp.static(record):\n                # Undo the reservation.\n" in woven(
        COMMENTED
    )


NOTED = """\
@wp.func
def g_record(a: int, r: Ints) -> int:
    x = wp_rewrite_runtime.record_if_room(wp.atomic_add(c, 0, 1), r, a)
    y = (x  # the user's note on why one is added here, long enough to be the longest line
         + 1)
    return y


@wp.func
def g_replay(a: int, r: Ints) -> int:
    x = wp_rewrite_runtime.recorded_int32(r, a)
    y = (x  # the user's note on why one is added here, long enough to be the longest line
         + 1)
    return y
"""


def test_a_family_whose_definition_would_have_a_line_too_long_to_split_stays_as_it_is():
    """A level deeper in its factory, the user's statement with a comment would not fit where it fits now: ruff's
    formatter would split it, ``layout`` cannot (it keeps the user's comment)."""
    names = {"g_record", "g_replay"}
    fits = max(len(line) for line in NOTED.splitlines()) + 2
    assert woven_source(NOTED, names, Namer(names), "wp", width=fits) == NOTED
    assert "def g_phases(record: bool):" in woven_source(NOTED, names, Namer(names), "wp", width=fits + 8)
