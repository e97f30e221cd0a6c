"""passes/naming.py: names the rewrite makes never reuse a taken one.

Nothing here compiles or launches a kernel.
"""

from tests.support.pass_sources import parse
from warp_rewrite.passes.naming import Namer


def test_namer_never_reuses_a_taken_name():
    namer = Namer.for_tree(parse("def thread(thread_1: int):\n    records = 1\n"), {"Any"})
    assert namer.fresh("thread") == "thread_2"
    assert namer.fresh("records") == "records_1"
    assert namer.fresh("records") == "records_2"
    assert namer.fresh("Any") == "Any_1"
    assert namer.fresh("fresh") == "fresh"
    assert namer.fresh_base("compact") == "compact" and namer.fresh_base("compact") == "compact_1"
