"""A read of memory the launch writes is recorded only where the replay needs its value
(tests/support/unread_reads.py): the API and the command line alike, gradients against finite differences of the
original through both."""

from pathlib import Path

import numpy as np

from tests.api.test_frontends import both_sources
from tests.support import invariants, unread_reads
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import f64, i32
from tests.support.replay_reads import unrecorded_reads
from warp_rewrite import pipeline, wp_rewrite
from warp_rewrite.pipeline import RewriteOptions
from warp_rewrite.runtime import Op

N = 5
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6])

emitted = emitted_fixture(unread_reads)
PATTERNS = {
    "keep_max_and_scale": Pattern(
        lambda: [f64(X, True), i32([0, 1, 0, 2, 1]), i32(np.zeros(3)), i32([0]), f64(np.zeros(N), True)],
        loss=[4],
        wrt=[0],
    ),
    "guarded_store": Pattern(lambda: [f64(X, True), i32([0]), i32([0]), f64(np.zeros(N), True)], loss=[3], wrt=[0]),
}
test_through_the_api, test_through_the_command_line = end_to_end_tests(unread_reads, N, PATTERNS)


def test_only_the_read_whose_value_the_replay_needs_is_recorded():
    spec = wp_rewrite(unread_reads.keep_max_and_scale).pair.spec
    reads = [site for site in spec.sites if site.op == Op.READ]
    assert [site.location.rsplit(":", 2)[1] for site in reads] == ["32"]  # the kernel's, not the helper's (18)
    assert len([record for record in spec.records if record.target == "best"]) == 1
    api, cli = both_sources(unread_reads.keep_max_and_scale, Path(unread_reads.__file__), RewriteOptions())
    assert api == cli and api is not None
    assert "if values[slot] < value:" in api  # the helper's record clone reads as the user wrote it


def test_the_invariants_catch_a_read_left_unrecorded_that_the_replay_needs(monkeypatch):
    """Were the kernel's own read of ``best`` left unrecorded too, its replay would read what the launch wrote
    (``replay_reads.unrecorded_reads``, which the suite runs on every kernel it generates)."""
    found: list[str] = []
    monkeypatch.setattr(pipeline, "records_read", lambda replay: frozenset())  # as if the replay read no record
    monkeypatch.setattr(
        invariants, "check_invariants", lambda f, generated: found.extend(unrecorded_reads(f, generated))
    )
    wp_rewrite(unread_reads.keep_max_and_scale, detach_returns=True)  # another option: generated anew
    assert [line.split(": ", 1)[1] for line in found] == [
        "the replay reads 'best[slots[tid]]' of 'best', which the launch writes"
    ]


def test_a_read_deciding_a_float_store_stays_recorded():
    spec = wp_rewrite(unread_reads.guarded_store).pair.spec
    assert sorted(site.op for site in spec.sites) == [Op.ADD, Op.READ]
