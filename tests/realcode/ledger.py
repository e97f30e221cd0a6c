"""What the real-code suite expects, the one home of the tables of docs/realcode.md (``render()``).

Every outcome that is not "rewritten" is counted by its reason, and every reason has a verdict: a documented limit
of the rewrite, a refusal that is right for that code, or a bug (with the test in
tests/regressions/test_real_code_bugs.py that reproduces it). After a change to the rewrite,
``python tests/realcode/survey.py`` prints the new counts; after a change to ``EXPECTED``,
``python tests/realcode/ledger.py`` writes the tables into docs/realcode.md.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from outcomes import CRASH, GENERIC, LEFT, ORIGINAL_FAILS, REFUSED, REWRITTEN, Outcome

VERSIONS = {"newton": "newton 1.8.0", "warp/examples": "warp-lang 1.19.0", "warp/tests": "warp-lang 1.19.0"}
WAYS = {"wp_rewrite": "`wp_rewrite` + CPU compile", "wp-rewrite": "`wp-rewrite FILE -o OUT`, import + CPU compile"}


@dataclass(frozen=True)
class Reason:
    pattern: str  # a regex searched in the refusal's reason or the error
    label: str
    verdict: str


def _loop_carried(local: str, verdict: str) -> Reason:
    return Reason(
        rf"'{local}' is changed in a loop around a consumed atomic",
        f"float `{local}` changed in a loop around a consumed atomic",
        verdict,
    )


RETURNED = "a value returned from inside a loop Warp does not unroll, of a type the rewrite does not lower"
PLAIN = "plain read or write of a target of float atomics whose returns are used"

REASONS = (
    Reason(
        r"a 'return' inside a loop (around a consumed atomic|the rewrite replays)",
        RETURNED,
        "documented limit: a return from a loop the rewrite replays is lowered for ints, bools and tuples of them; "
        "Newton's GJK and MPR (called by its tests' kernels) return floats and vectors from inside their iteration "
        "loops",
    ),
    _loop_carried("min_dis_to_tris", "right: a running minimum over the loop, read after it"),
    _loop_carried("radius", "right: a running maximum over the loop, read after it (backward is off there anyway)"),
    _loop_carried("sdf_mesh_margin", "right: reassigned late in an iteration, read early in the next one"),
    Reason(
        r"a plain (read of|write into) '[\w.]+', whose float atomic returns",
        PLAIN,
        "right: an exact gradient needs every access to go through the atomics (`detach_returns=True` if nothing "
        "it holds needs one): Kamino's metrics read back the NaN flag they set, `_eval_max_residual` stores its "
        "initial maximum, Warp's float spin locks read and write the value they guard (a read only compared, as "
        "`raycast_kernel`'s of the minimum distance, is accepted: it reads the shadow)",
    ),
    Reason(
        r"helper '\w+' has generic parameters and keeps a float atomic's adjoint",
        "a generic helper keeps a float atomic's adjoint",
        "documented limit: Warp allows no `@wp.func_replay` for generic functions (Kamino's `add_multiple_contacts`, "
        "the mesh-triangle contact reducer)",
    ),
    Reason(
        r"'wp.tile_store_indexed' reads '\w+', which this launch also writes",
        "`wp.tile_store_indexed` reads what the launch writes",
        "right: the replay would read the array after the forward changed it (backward is off there anyway)",
    ),
    Reason(
        r"is handed '\w+' but the rewrite cannot see what it does with it",
        "a function value is handed an array",
        "right for the command line, which cannot see what Warp's test passes there; `wp_rewrite` rewrites these",
    ),
    Reason(
        r"Deterministic mode cannot compile this kernel",
        "Warp's deterministic mode refuses the original kernel too",
        "Warp's own negative tests",
    ),
    Reason(
        r"a thread-local array, whose stores Warp's replay skips",
        "a thread-local array (`wp.zeros` in a kernel)",
        "right: Warp's replay skips the array's stores, so the replay would read zeros, and plain Warp's gradient "
        "through it is wrong too (the table of builtins, issue 35; the narrow phase's contact buffers)",
    ),
    Reason(
        r"the Warp type of '\w+', which this loop carries to later iterations or past its end, cannot be told",
        "a local a loop carries whose type the source does not tell",
        "documented limit of the command line, which reads types off the source (a helper's undeclared return, a "
        "struct's or a tile's); `wp_rewrite` reads Warp's and rewrites these; the kernel is left as it was",
    ),
    Reason(
        r"the spatial query '\w+' is used other than by its loop's own step",
        "a spatial query used other than by its loop's step",
        "documented limit: the replay runs the loop's recorded trips without the query object (the narrow phase "
        "hands its mesh query to a helper)",
    ),
    Reason(
        r"is not in the rewrite's table of Warp's builtins",
        "a builtin the table does not have (`type(v)`)",
        "documented limit (issue 35): the table refuses what it does not know; `type(row0)()` in the differential "
        "IK's SVD",
    ),
    Reason(
        r"an array made from a raw address",
        "an array made from a raw address",
        "right: the planner cannot tell which memory it names (Kamino's `wp.array(ptr=...)` views)",
    ),
    Reason(
        r"has \d+ definitions \(overloads\), and \d+ of them fit this call",
        "a call of an overloaded helper the source does not tell",
        "documented limit, in kernels that need a rewrite only: pass arguments of told types",
    ),
    Reason(
        r"does not import: ModuleNotFoundError|ModuleNotFoundError: No module named",
        "a module importing a package not installed here (scipy, pxr, torch, PIL)",
        "not the rewrite's: the original module does not import either (the realcode extra installs only Newton and "
        "Warp)",
    ),
    Reason(
        r"call of a local \(",
        "a function called through a local or a parameter, handed an array",
        "right (`test_a_builtin_called_through_a_local_is_refused`, `test_a_function_parameter_handed_an_array_is_"
        "refused`): the rewrite cannot see what the call writes (`operation = wp.atomic_xor`, a `g: wp.Function` "
        "parameter); Warp's deterministic-mode tests only",
    ),
    Reason(
        r"which this loop carries to later iterations or past its end, is a (vec_t|mat_t|vec1f)",
        "a carried local of a vector or matrix type Warp does not export by name",
        "documented limit: the replay's carriers are made per type Warp exports by name (`wp.vec3f`); a generic "
        "helper's `vec_t` (Newton's contact reducer's `slot_values`, a 2x3 `mat_t` of box-box contacts) has none",
    ),
    Reason(
        r"which this loop carries to later iterations or past its end, is a tile_stack",
        "a carried tile stack (`wp.tile_stack`)",
        "documented limit: a stack shared by the block, which no per-thread record can restore (Newton's mesh-SDF "
        "contacts' `edge_stack`)",
    ),
    Reason(
        r"which this loop carries to later iterations or past its end, is a (tile\b|<warp\._src\.types\.tile)",
        "a carried tile",
        "documented limit: a tile is a block's shared value, which no per-thread record can restore",
    ),
    Reason(
        r"which this loop carries to later iterations or past its end, is a \w+: the replay restores",
        "a carried struct",
        "documented limit: carry the struct's fields in locals of their own (Newton's test metrics)",
    ),
    Reason(
        r"is first assigned inside this loop and read after it",
        "a float first assigned in a loop and read after it",
        "right: Warp's backward zeroes the adjoints of a loop's own locals at each replayed trip; assign it before "
        "the loop",
    ),
    Reason(
        r"helper returning memory",
        "a helper returning an array",
        "documented limit: the planner cannot tell which array the helper's return names (Warp's fixed-array tests)",
    ),
    Reason(
        r"'wp\.tile_view'",
        "a tile view (`wp.tile_view`)",
        "documented limit: a view aliases its tile, which the dataflow cannot follow",
    ),
    Reason(
        r"must be copied (into the rewritten module|beside the rewritten kernel), but it uses",
        "a helper the command line cannot copy beside the kernel",
        "documented limit of the command line (a name of a factory around the helper); `wp_rewrite` rewrites these",
    ),
    Reason(
        r"no launch types known for its generic parameter",
        "a generic kernel no caller's types are known for",
        "not compiled: Warp compiles a generic kernel per overload, which its launch makes; give its factory call "
        "the types its callers pass (`launch_types` in factories.py)",
    ),
)
VERDICTS = {reason.label: reason.verdict for reason in REASONS}


def reason_of(detail: str) -> str:
    """The label of the first reason whose pattern the refusal or error matches."""
    return next((r.label for r in REASONS if re.search(r.pattern, detail)), f"unknown: {detail.strip()[-300:]}")


Summary = dict[str, Counter]  # result -> Counter of reason labels ("" for rewritten)


def summarize(outcomes: list[Outcome]) -> dict[tuple[str, str], Summary]:
    """Outcomes counted per (tree, way), per result, per reason."""
    summary: dict[tuple[str, str], Summary] = {}
    for outcome in outcomes:
        by_result = summary.setdefault((outcome.tree, outcome.way), {})
        label = "" if outcome.result == REWRITTEN else reason_of(outcome.detail)
        by_result.setdefault(outcome.result, Counter())[label] += 1
    return summary


EXPECTED: dict[tuple[str, str], Summary] = {
    ("newton", "wp_rewrite"): {
        "rewritten": Counter({"": 126}),
        "left as plain Warp": Counter(
            {
                "a value returned from inside a loop Warp does not unroll, of a type the rewrite does not lower": 14,
                "a carried local of a vector or matrix type Warp does not export by name": 3,
                "a carried struct": 1,
                "a call of an overloaded helper the source does not tell": 3,
                "a local a loop carries whose type the source does not tell": 5,
            }
        ),
        "original fails": Counter({"a module importing a package not installed here (scipy, pxr, torch, PIL)": 6}),
    },
    ("newton", "wp-rewrite"): {
        "rewritten": Counter({"": 146}),
        "left as plain Warp": Counter(
            {
                "a builtin the table does not have (`type(v)`)": 1,
                "a local a loop carries whose type the source does not tell": 13,
                "an array made from a raw address": 1,
                "a value returned from inside a loop Warp does not unroll, of a type the rewrite does not lower": 14,
                "a carried local of a vector or matrix type Warp does not export by name": 3,
                "a helper the command line cannot copy beside the kernel": 1,
            }
        ),
        "original fails": Counter({"a module importing a package not installed here (scipy, pxr, torch, PIL)": 6}),
    },
    ("warp/examples", "wp_rewrite"): {
        "rewritten": Counter({"": 13}),
        "left as plain Warp": Counter({"a float first assigned in a loop and read after it": 1, "a carried tile": 1}),
        "rewritten, generic: not compiled": Counter({"a generic kernel no caller's types are known for": 2}),
        "original fails": Counter({"a module importing a package not installed here (scipy, pxr, torch, PIL)": 3}),
    },
    ("warp/examples", "wp-rewrite"): {
        "rewritten": Counter({"": 15}),
        "left as plain Warp": Counter(
            {
                "a local a loop carries whose type the source does not tell": 4,
                "a float first assigned in a loop and read after it": 1,
            }
        ),
        "original fails": Counter({"a module importing a package not installed here (scipy, pxr, torch, PIL)": 5}),
    },
    ("warp/tests", "wp_rewrite"): {
        "rewritten, generic: not compiled": Counter({"a generic kernel no caller's types are known for": 7}),
        "rewritten": Counter({"": 90}),
        "original fails": Counter({"Warp's deterministic mode refuses the original kernel too": 3}),
        "refused": Counter(
            {
                "a function called through a local or a parameter, handed an array": 2,
                "a thread-local array (`wp.zeros` in a kernel)": 1,
                "plain read or write of a target of float atomics whose returns are used": 10,
            }
        ),
        "left as plain Warp": Counter(
            {
                "a thread-local array (`wp.zeros` in a kernel)": 3,
                "a helper returning an array": 1,
                "a local a loop carries whose type the source does not tell": 2,
                "a carried tile": 1,
                "a tile view (`wp.tile_view`)": 1,
            }
        ),
    },
    ("warp/tests", "wp-rewrite"): {
        "rewritten": Counter({"": 93}),
        "refused": Counter(
            {
                "a function called through a local or a parameter, handed an array": 2,
                "a thread-local array (`wp.zeros` in a kernel)": 1,
                "plain read or write of a target of float atomics whose returns are used": 6,
            }
        ),
        "left as plain Warp": Counter(
            {
                "a local a loop carries whose type the source does not tell": 9,
                "a helper returning an array": 1,
                "a thread-local array (`wp.zeros` in a kernel)": 4,
                "a tile view (`wp.tile_view`)": 3,
            }
        ),
    },
}


def render(expected: dict[tuple[str, str], Summary] = EXPECTED) -> str:
    """The tables of docs/realcode.md: counts per tree and way, then every reason with its counts and verdict."""
    lines = [
        "| real code | way | rewritten + compiled | rewritten, generic: not compiled | refused | left as plain Warp "
        "| original does not compile either | crashes |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (tree, way), by_result in expected.items():
        counted = (REWRITTEN, GENERIC, REFUSED, LEFT, ORIGINAL_FAILS)
        counts = [sum(by_result.get(result, Counter()).values()) for result in counted]
        crashes = sum(by_result.get(CRASH, Counter()).values())
        lines.append(f"| {tree} ({VERSIONS[tree]}) | {WAYS[way]} | {' | '.join(map(str, counts))} | {crashes} |")
    lines += ["", "| reason | kernels (tree, way) | verdict |", "|---|---|---|"]
    by_label: dict[str, list[str]] = {}
    for (tree, way), by_result in expected.items():
        for result in (GENERIC, REFUSED, LEFT, ORIGINAL_FAILS, CRASH):
            for label, count in by_result.get(result, Counter()).items():
                kind = "" if result == REFUSED else f" {result}"
                by_label.setdefault(label, []).append(f"{count} {tree} `{way}`{kind}")
    for label, where in sorted(by_label.items()):
        lines.append(f"| {label} | {'; '.join(where)} | {VERDICTS.get(label, 'no verdict yet')} |")
    return "\n".join(lines) + "\n"


DOCUMENT = Path(__file__).parents[2] / "docs" / "realcode.md"
BEGIN, END = "<!-- ledger.render() -->\n", "<!-- /ledger.render() -->\n"  # the lines around the tables there


def shown(text: str) -> str:
    """The tables a text of docs/realcode.md shows between its markers."""
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)]


def write() -> None:
    """Put ``render()`` between the markers of docs/realcode.md."""
    text = DOCUMENT.read_text()
    DOCUMENT.write_text(text.replace(BEGIN + shown(text) + END, BEGIN + render() + END))


if __name__ == "__main__":
    write()
