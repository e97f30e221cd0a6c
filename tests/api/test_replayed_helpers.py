"""One verdict for a kernel whose only consumed atomic is in a helper with a hand-written ``@wp.func_replay``: the
API and the command line both rewrite it (``pipeline.needs_rewrite``: the command line used to leave it as it was,
the API to rewrite it), the same source, gradients against finite differences of the original through both."""

from pathlib import Path

import numpy as np

from tests.api.test_frontends import both_sources
from tests.support import replayed_helpers
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import f64, i32
from warp_rewrite import wp_rewrite
from warp_rewrite.pipeline import RewriteOptions

N = 5
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6])

emitted = emitted_fixture(replayed_helpers)
PATTERNS = {
    "compact_replayed": Pattern(
        lambda: [f64(X, True), i32([0]), i32(np.zeros(N)), f64(np.zeros(N), True)], loss=[3], wrt=[0]
    )
}
test_through_the_api, test_through_the_command_line = end_to_end_tests(replayed_helpers, N, PATTERNS)


def test_both_front_ends_rewrite_it_the_same_way(emitted):
    assert wp_rewrite(replayed_helpers.compact_replayed).pair is not None
    assert hasattr(emitted.compact_replayed, "launches_rewritten")
    api, cli = both_sources(replayed_helpers.compact_replayed, Path(replayed_helpers.__file__), RewriteOptions())
    assert api == cli and api is not None
