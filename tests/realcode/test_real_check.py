"""``wp-rewrite --check`` over whole trees of real code: it reads every file, its scanner's masked code names every
name of each file (``tests/support/masked_names.py``), and it agrees with what ``wp_rewrite``
finds at run time. Every kernel that uses an atomic's return or holds a loop Warp's backward replays wrong (by
``wp_rewrite``'s account: rewritten or refused) is reported as a hazard (WR001/WR003/WR008, or WR005 where a call
cannot be followed) where Warp builds it with a backward pass; where it has none, nothing but the informational
WR101 and WR103 is."""

import pytest
import survey
from through_api import RealKernel
from trees import TREES, check, require

from tests.support.masked_names import unmasked_names

HAZARDS = {"WR001", "WR003", "WR005", "WR008", "WR009"}
NOT_HAZARDS = {"WR101", "WR103"}  # or nothing: a kernel without backward is no hazard, whatever it calls

# Kernels whose every consumed atomic is in a helper with a hand-written @wp.func_replay: correct in plain Warp, so
# --check reports the helper (WR102, informational) and not the kernel.
HAND_WRITTEN_REPLAY = {
    "newton/_src/geometry/kernels.py:create_soft_contacts",
    "warp/tests/deterministic/test_deterministic_backward.py:custom_replay_counter_kernel",
    "warp/tests/test_grad_customs.py:run_atomic_add",
}
# Where --check and Warp disagree today, and why (function -> reason).
KNOWN: dict[str, str] = {}


def backward(real: RealKernel) -> bool:
    return (real.kernel.module.options | real.kernel.options).get("enable_backward", True) is not False


@pytest.mark.parametrize("tree", TREES, ids=str)
def test_check_reads_every_file(tree):
    require(tree)
    run = check(tree)
    assert run.status == 1 and run.stderr == ""
    assert not [finding for finding in run.findings if finding.code == "E999"]


@pytest.mark.parametrize("tree", TREES, ids=str)
def test_the_scanners_masked_code_names_every_name_of_each_file(tree):
    require(tree)
    files = sorted(tree.folder.rglob("*.py"))
    assert {str(path): names for path in files if (names := unmasked_names(path.read_text(errors="replace")))} == {}


@pytest.mark.parametrize("tree", TREES, ids=str)
def test_check_reports_every_kernel_wp_rewrite_finds(tree):
    require(tree)
    codes: dict[str, set[str]] = {}
    for finding in check(tree).findings:
        codes.setdefault(f"{finding.file}:{finding.subject}", set()).add(finding.code)
    kernels = {real.name: real for real in survey.api_kernels(tree)}
    statuses: dict[str, set[bool]] = {}
    for outcome in survey.api_outcomes(tree):
        if outcome.kernel not in kernels:  # a module that does not import here: no kernel to compare
            continue
        statuses.setdefault(outcome.function, set()).add(backward(kernels[outcome.kernel]))
    assert {f for f in HAND_WRITTEN_REPLAY if f.startswith(tree.name)} <= set(statuses)
    disagreements = {}
    for function, backwards in sorted(statuses.items()):
        reported = codes.get(function, set())
        if function in HAND_WRITTEN_REPLAY:  # (a loop it holds is a hazard of its own: WR008)
            agrees = not reported & (HAZARDS - {"WR008"})
        elif True in backwards:  # a factory may make it both ways (Newton: enable_backward=False if compact_sdf)
            agrees = bool(reported & HAZARDS)
        else:
            agrees = reported <= NOT_HAZARDS
        if not agrees:
            disagreements[function] = f"backward {sorted(backwards)}, reported {sorted(reported)}"
    unexplained = {function: why for function, why in disagreements.items() if function not in KNOWN}
    assert not unexplained, "--check disagrees with wp_rewrite on:\n" + "\n".join(
        f"{k}: {v}" for k, v in unexplained.items()
    )
    assert set(disagreements) == {function for function in KNOWN if function.startswith(tree.name)}
