"""``wp_rewrite`` and ``wp-rewrite`` on every kernel of the real code that uses an atomic's return: no crash
(any exception but ``RewriteError``, or generated code that does not compile where the original does), and every
refusal and failure counted by its reason, as ``ledger.EXPECTED`` and the tables of docs/realcode.md say."""

import pytest
import survey
from ledger import DOCUMENT, EXPECTED, reason_of, render, shown, summarize
from outcomes import REWRITTEN, Outcome
from trees import TREES, Tree, require


def assert_as_ledgered(tree: Tree, way: str, outcomes: list[Outcome]) -> None:
    measured = summarize(outcomes).get((tree.name, way), {})
    expected = EXPECTED.get((tree.name, way), {})
    unknown = [o for o in outcomes if o.result != REWRITTEN and reason_of(o.detail).startswith("unknown")]
    listing = "\n".join(f"{o.result}: {o.kernel}: {o.detail.strip()[-600:]}" for o in outcomes if o.result != REWRITTEN)
    assert not unknown, f"outcomes whose reason ledger.REASONS does not know:\n{listing}"
    assert measured == expected, (
        f"{tree} through {way}: the outcomes changed. If for the better, update ledger.EXPECTED (python "
        f"tests/realcode/survey.py prints it), then python tests/realcode/ledger.py (the tables of docs/realcode.md)."
        f"\nmeasured: {measured}\n"
        f"expected: {expected}\nevery outcome but rewritten:\n{listing}"
    )


@pytest.mark.parametrize("tree", TREES, ids=str)
def test_wp_rewrite_on_the_flagged_modules_and_their_factories(tree):
    require(tree)
    assert_as_ledgered(tree, "wp_rewrite", survey.api_outcomes(tree))


@pytest.mark.parametrize("tree", TREES, ids=str)
def test_the_command_line_on_every_flagged_file(tree, emitted_root):
    require(tree)
    assert_as_ledgered(tree, "wp-rewrite", survey.cli_outcomes(tree, emitted_root))


def test_the_docs_show_the_ledger():
    assert shown(DOCUMENT.read_text()) == render(), "docs/realcode.md is not current: python tests/realcode/ledger.py"
