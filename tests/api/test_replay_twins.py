"""A helper's replay gets a ``@wp.func_replay`` twin only where it keeps a write Warp's backward would run again
(tests/support/replay_twin_kernels.py): the API and the command line alike, gradients against finite differences of
the original through both."""

from pathlib import Path

import numpy as np
import warp as wp

from tests.api.test_frontends import both_sources
from tests.support import replay_twin_kernels
from tests.support.emitted import Pattern, emitted_fixture, end_to_end_tests
from tests.support.harness import empty_keys, f64, i32, u64
from warp_rewrite import wp_rewrite
from warp_rewrite.pipeline import RewriteOptions
from warp_rewrite.runtime import Op

N = 5
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6])
IDS = [17, 4, 25, 9, 31]  # 17 and 25 probe from one slot: the second moves on

emitted = emitted_fixture(replay_twin_kernels)
PATTERNS = {
    "scatter_by_key": Pattern(
        lambda: [f64(X, True), u64(IDS), empty_keys(8), i32(np.zeros(9)), f64(np.zeros(8), True)],
        loss=[4],
        wrt=[0],
    ),
    "emit_wrapped": Pattern(lambda: [f64(X, True), i32([0]), f64(np.zeros(2 * N), True)], loss=[2], wrt=[0]),
}
test_through_the_api, test_through_the_command_line = end_to_end_tests(replay_twin_kernels, N, PATTERNS)


def defined(kernel: wp.Kernel) -> set[str]:
    """The generated functions' names, and ``@replays(f)`` for each replay ``f`` a twin is registered for."""
    api, cli = both_sources(kernel, Path(replay_twin_kernels.__file__), RewriteOptions())
    assert api == cli and api is not None
    lines = api.splitlines()
    names = {line.split("(")[0].removeprefix("def ") for line in lines if line.startswith("def ")}
    return names | {f"@replays({line.split('(')[1][:-1]})" for line in lines if ".replays(" in line}


def test_a_replay_that_writes_nothing_has_no_twin_and_one_that_writes_keeps_it():
    assert "find_or_insert_replay" in defined(replay_twin_kernels.scatter_by_key)
    assert not {name for name in defined(replay_twin_kernels.scatter_by_key) if "replay_" in name}
    names = defined(replay_twin_kernels.emit_wrapped)
    helpers = {name for name in names if name.endswith("_replay")} - {"emit_wrapped_replay"}
    assert {name for name in names if name.startswith("@replays")} == {f"@replays({name})" for name in helpers}
    assert {name for name in names if name.endswith("_forward")} == {f"{name}_forward" for name in helpers}
    assert any(name.startswith("emit_twice") for name in helpers)  # the wrapper's twin calls the store's


def test_a_helpers_site_reached_by_two_calls_is_one_site_of_the_launch_spec():
    """``emit`` is called twice: its atomic is recorded once per call (two records), and named once in the spec."""
    spec = wp_rewrite(replay_twin_kernels.emit_wrapped).pair.spec
    assert [site.op for site in spec.sites] == [Op.ADD]
    assert len([record for record in spec.records if record.target == "count"]) == 2
