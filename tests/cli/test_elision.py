"""``rewrite/cli/elision.py``: which bodies ``--check`` leaves out before the parse, and that its findings are those of
a full parse (before/after pairs, then the same tree checked both ways)."""

from __future__ import annotations

import ast
import io
import json
import random
import sys
from pathlib import Path

import pytest

import warp_rewrite.cli.static_module
from tests.support.masked_names import unmasked_names
from warp_rewrite.cli.elision import elide
from warp_rewrite.cli.main import main

REPO = Path(__file__).parents[2]

HOST_AND_KERNEL = '''import warp as wp


def build(n):
    """A builder: def inside a string
def not_a_function():
    is not code."""
    total = (n +
        1)
    return total


def launcher():
    wp.launch(k, 1, inputs=[None])


def options():
    wp.get_module(__name__).options["enable_backward"] = False


@wp.kernel(
    enable_backward=False,
)
def k(x: wp.array[float]):
    x[0] = 1.0
'''

# ``build``'s and ``launcher``'s bodies left out (the launch kept as text); the options change and the kernel kept.
HOST_AND_KERNEL_ELIDED = """import warp as wp


def build(n):
 ...







def launcher():
 ...


def options():
    wp.get_module(__name__).options["enable_backward"] = False


@wp.kernel(
    enable_backward=False,
)
def k(x: wp.array[float]):
    x[0] = 1.0
"""


def test_plain_bodies_become_a_placeholder_and_every_line_stays_where_it_was():
    elision = elide(HOST_AND_KERNEL)
    assert elision is not None
    assert elision.text == HOST_AND_KERNEL_ELIDED
    assert [(b.definition, b.first, b.last) for b in elision.bodies] == [(4, 5, 12), (13, 14, 16)]
    assert elision.bodies[1].launches == ("(k, 1, inputs=[None])",)


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n\tx = 1\n\treturn x\n",  # tabs in indentation
        "def f():\r\n    x = 1\r\n    return x\r\n",  # \r line endings
        'def f():\n    return f"{x:{"a"}}"\n',  # quotes nested in an f-string (Python 3.12)
    ],
)
def test_the_scanner_gives_up_on_a_file_it_cannot_read_as_python_does(source):
    assert elide(source) is None


@pytest.mark.parametrize(
    "source",
    [
        "def f(): return 1\n",  # a body on the def's own line
        "def f():\n    return (1 +\n2)\n",  # brackets continued at the def's column
        "import warp as wp\n\n@wp.func\ndef h():\n    return 1\n",  # a helper
    ],
)
def test_the_scanner_keeps_a_body_it_is_unsure_of_or_a_check_reads(source):
    elision = elide(source)
    assert elision is not None
    assert (elision.text, elision.bodies) == (source, ())


def test_tabs_inside_a_string_do_not_make_the_scanner_give_up():
    source = 'def f():\n    return """\n\t<mujoco>\n\t</mujoco>"""\n\n\ndef g():\n    pass\n'
    elision = elide(source)
    assert elision is not None
    assert elision.text == "def f():\n ...\n\n\n\n\ndef g():\n ...\n"


def test_a_function_made_a_kernel_by_a_call_keeps_its_body():
    source = "import warp as wp\n\n\ndef body(x):\n    x[0] = 1.0\n\n\nk = wp.kernel(enable_backward=False)(body)\n"
    elision = elide(source)
    assert elision is not None
    assert elision.bodies == ()


def _check(tree: Path, monkeypatch, elided: bool) -> str:
    """What ``--check --select ALL`` prints as JSON on ``tree``, with bodies left out or parsed in full."""
    with monkeypatch.context() as patch:
        if not elided:
            patch.setattr(warp_rewrite.cli.static_module, "elide", lambda text: None)
        held: list[object] = []
        out = io.StringIO()
        patch.setattr(sys, "stdout", out)
        main(["--check", str(tree), "--select", "ALL", "--output-format", "json", "-q", "--exit-zero"], held)
    return out.getvalue()


MAKER_AND_FACTORY = """import warp as wp
from warp import Kernel as Make


@wp.func
def bump(c: wp.array[int]) -> int:
    return wp.atomic_add(c, 0, 1)


def get_bump():
    helper = bump
    return helper


def getkernel(func):
    return wp.Kernel(func=func)


def plain(c: wp.array[int], out: wp.array[int]):
    out[0] = wp.atomic_add(c, 0, 1)


def later(c: wp.array[int], out: wp.array[int]):
    out[0] = wp.atomic_add(c, 0, 1)


def made_later():
    return Make(later)


k = getkernel(plain)


@wp.kernel
def uses_factory(c: wp.array[int], out: wp.array[int]):
    out[0] = wp.static(get_bump())(c)
"""

REWRITTEN_OLD = """import warp as wp


@wp.kernel
def compact(c: wp.array[int], out: wp.array[int]):
    out[wp.atomic_add(c, 0, 1)] = 1


# ---- wp-rewrite: generated from kernel 'compact' above ----
compact_rewritten = compact
launch_compact = compact_rewritten.launch
# ---- wp-rewrite: end of the code generated from kernel 'compact' ----
"""

LAUNCHES_IT = """import warp as wp
from sim import compact


def run(c, out):
    wp.launch(compact, 1, inputs=[c, out])


def run_keyword(c, out):
    wp.launch(
        kernel=compact,
        dim=1,
        inputs=[c, out],
    )
"""


def test_findings_are_those_of_a_full_parse(tmp_path, monkeypatch):
    """Makers, a member alias, a helper factory read through ``wp.static``, a block of an old version launched from
    left-out bodies (WR004): the same findings, byte for byte."""
    (tmp_path / "makers.py").write_text(MAKER_AND_FACTORY)
    (tmp_path / "sim.py").write_text(REWRITTEN_OLD)
    (tmp_path / "tests_of_sim.py").write_text(LAUNCHES_IT)
    elided, full = _check(tmp_path, monkeypatch, True), _check(tmp_path, monkeypatch, False)
    assert elided == full
    codes = sorted((f["code"], Path(f["filename"]).name) for f in json.loads(full))
    assert ("WR001", "makers.py") in codes and ("WR003", "makers.py") in codes
    assert codes.count(("WR004", "tests_of_sim.py")) == 2


@pytest.mark.parametrize("tree", [REPO / "tests", REPO / "examples"], ids=["tests", "examples"])
def test_findings_on_this_repository_are_those_of_a_full_parse(tree, monkeypatch):
    assert _check(tree, monkeypatch, True) == _check(tree, monkeypatch, False)


# What review found (inputs where a left-out body or an unparsed file hid a finding), each checked both ways.
ATOMIC_IN_AN_F_STRING = """import warp as wp


@wp.func
def label(c: wp.array(dtype=int)) -> str:
    return f"slot {wp.atomic_add(c, 0, 1)}"
"""
LAUNCH_IN_AN_F_STRING = """import warp as wp
from sim import compact

print(f"{wp.launch(compact, 1, inputs=[None, None])}")


def run(c, out):
    print(f"{wp.launch(compact, 1, inputs=[c, out])}")
"""
LAUNCH_AFTER_A_SET_OF_A_DICT = """import warp as wp
from sim import compact


def host(x, w):
    return f"{ {{}.get(1)} } {wp.launch(compact, 1)} {x:{w}}"
"""
FULLWIDTH_LETTERS = '''"""Kernel code."""
import warp as wp


def configure():
    wp.get_module("sims").\uff4fptions["enable_backward"] = False


@wp.\uff4bernel(module="sims")
def compact(count: wp.array(dtype=int), out: wp.array(dtype=float)):
    slot = wp.\uff41tomic_add(count, 0, 1)
    out[slot] = 1.0
'''


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"helper.py": ATOMIC_IN_AN_F_STRING}, [("WR002", "helper.py")]),
        ({"top.py": LAUNCH_IN_AN_F_STRING, "sim.py": REWRITTEN_OLD}, [("WR004", "top.py")] * 2 + [("WR006", "sim.py")]),
        ({"top.py": LAUNCH_AFTER_A_SET_OF_A_DICT, "sim.py": REWRITTEN_OLD}, [("WR004", "top.py"), ("WR006", "sim.py")]),
        ({"fullwidth.py": FULLWIDTH_LETTERS}, [("WR101", "fullwidth.py")]),
        ({"fullwidth.py": FULLWIDTH_LETTERS.replace('"""Kernel code."""\n', "")}, [("WR101", "fullwidth.py")]),
        (
            {"empty_body.py": "import warp as wp\n\n\ndef helper():\n    # todo\n\nx = wp.launch\n"},
            [("E999", "empty_body.py")],
        ),
    ],
    ids=[
        "atomic in an f-string",
        "launch in an f-string",
        "launch in an f-string after a set display",
        "fullwidth letters",
        "fullwidth letters only",
        "a body of comments only",
    ],
)
def test_code_python_reads_where_the_scanner_sees_a_string_or_nothing_counts(tmp_path, monkeypatch, files, expected):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "other.py").write_text("import warp as wp\n")
    elided, full = _check(tmp_path, monkeypatch, True), _check(tmp_path, monkeypatch, False)
    assert elided == full
    assert sorted((f["code"], Path(f["filename"]).name) for f in json.loads(full)) == sorted(expected)


def test_the_code_in_an_f_strings_fields_is_kept_on_the_line_where_each_field_ends():
    source = 'def f(c):\n    return f"""{c}\n{wp.launch(k,\n 1)}"""\n'
    elision = elide(source)
    assert elision is not None
    assert elision.code == "def f(c):\n    return f_(c)\n\x00\n\x00(wp.launch(k,  1))\n"
    assert elision.bodies[0].launches == ("(k,  1)",)


@pytest.mark.parametrize(
    ("string", "masked"),
    [
        ('f"{ {{}.get(1)} } {wp.launch(k, 1)} {x:{w}}"', "f_( {{}.get(1)} )(wp.launch(k, 1))(x w)"),
        ('f"{{{x}}} {x!r:>{w}.{p}f} {x=} {x:=10}"', "f_(x)(x w p)(x=)(x)"),
        ("f\"{f'{y}'} {d['}']} {a[1:2]} {(lambda: 1)()}\"", "f_(f_(y))(d[_])(a[1:2])((lambda: 1)())"),
        ('f"\\N{EM DASH} \\{x}"', "f_(x)"),
        ('rf"\\N{x}"', "rf_(x)"),
        ('f"{x:{{}"', None),  # not Python 3.11: the scanner gives up
        ('f"""{a  # 3.12 lets a field hold a comment\n + wp.launch(k)}"""', "f_\n\x00(a    + wp.launch(k))"),
    ],
)
def test_an_f_strings_fields_are_read_as_python_reads_them(string, masked):
    elision = elide(f"s = {string}\n")
    assert (elision.code if elision is not None else None) == (None if masked is None else f"s = {masked}\n")


@pytest.mark.parametrize("tree", [REPO / "tests", REPO / "examples", REPO / "rewrite"], ids=str)
def test_the_masked_code_names_every_name_of_the_tree(tree):
    missing = {str(path): names for path in sorted(tree.rglob("*.py")) if (names := unmasked_names(path.read_text()))}
    assert missing == {}


def _random_f_string(chooser: random.Random) -> str:
    """An f-string of literal text, escaped braces and fields (conversions, specs with fields, nested strings and
    f-strings, displays, slices, lambdas in their code): the forms ``_with_fields`` reads."""

    def expression(depth: int) -> str:
        forms = [
            "x",
            "wp.launch(k, 1)",
            "d['}{']",
            "{1: x}[1]",
            "a[1:2]",
            "(lambda: y)()",
            "{x}",
            "f'{y}'",
            "{{}.get(x)}",
        ]
        if depth < 2:
            forms += [f"g({expression(depth + 1)})", f"[{expression(depth + 1)}]", f"{{ {expression(depth + 1)} }}"]
        return chooser.choice(forms)

    pieces = []
    for _ in range(chooser.randint(1, 4)):
        pieces.append(chooser.choice(["a ", "{{", "}}", "\\N{BULLET}", "\n"]))
        conversion = chooser.choice(["", "=", "!r", "!s"])
        spec = chooser.choice(["", ":>10", ":{w}", ":>{w}.{p}f", ":=^8"])
        pieces.append("{ " + expression(0) + conversion + spec + "}")  # (``{ {`` is a display, ``{{`` an escape)
    quote = chooser.choice(['"""', "'''"])
    return "f" + quote + "".join(pieces).replace("'", '"' if quote == "'''" else "'") + quote


def test_random_f_strings_keep_the_names_of_their_fields():
    chooser = random.Random(22)
    checked = 0
    for _ in range(3000):
        text = f"s = {_random_f_string(chooser)}\n"
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        checked += 1
        assert unmasked_names(text) == set(), text
    assert checked > 1000
