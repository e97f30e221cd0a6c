"""The README and docs/ say what the code does: their python examples run, their links resolve, every lint code has
a page, and the API and CLI references match the real signatures and options.

A fenced block is run when its info string is exactly ``python``; ``python fragment`` marks one that is not meant to
run on its own (it names files or values the page only describes). The runnable blocks of one page run in order, as
one file, on the CPU.
"""

from __future__ import annotations

import inspect
import re
import runpy
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest
import warp as wp

import warp_rewrite
from warp_rewrite.cli.lint import CODES, rule_url
from warp_rewrite.cli.main import _parser, main, parse_arguments

REPO = Path(__file__).parents[2]
README = REPO / "README.md"
RULES = REPO / "docs" / "rules"
PAGES = [README, *sorted((REPO / "docs").rglob("*.md"))]
README_LINES = 250  # a newcomer reads it through; the rest belongs in docs/


@dataclass(frozen=True)
class Block:
    info: str  # the fence's info string: "python", "python fragment", "sh", ...
    code: str
    heading: str  # the last heading above the block

    @property
    def runs(self) -> bool:
        return self.info == "python"


def blocks(page: Path) -> list[Block]:
    found, heading = [], ""
    for match in re.finditer(r"^(#+ [^\n]*)$|^```([^\n]*)\n(.*?)^```$", page.read_text(), re.M | re.S):
        if match[1]:
            heading = match[1].lstrip("#").strip()
        else:
            found.append(Block(match[2].strip(), match[3], heading))
    return found


def relative(page: Path) -> str:
    return str(page.relative_to(REPO))


# --- the python examples run ---------------------------------------------------------------------------------------


@pytest.fixture
def launches_as_before():
    """An example may turn ``rewrite_launches()`` on: the rest of the suite runs with it off, as it does."""
    yield
    warp_rewrite.rewrite_launches(False)


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.runs for b in blocks(p))], ids=relative)
def test_the_python_examples_run(page, tmp_path, launches_as_before):
    example = tmp_path / f"{page.stem.replace('-', '_')}_example.py"
    example.write_text("\n\n".join(block.code for block in blocks(page) if block.runs))
    runpy.run_path(str(example), run_name=f"docs_{page.stem.replace('-', '_')}")


def test_every_python_block_runs_or_is_marked_a_fragment():
    infos = {block.info for page in PAGES for block in blocks(page) if block.info.startswith(("py", "python"))}
    assert infos <= {"python", "python fragment"}, infos


# --- the README ----------------------------------------------------------------------------------------------------


def test_the_readme_is_short():
    assert len(README.read_text().splitlines()) <= README_LINES


def test_the_quick_start_is_two_commands():
    (quick_start,) = [block for block in blocks(README) if block.heading == "Quick start"]
    commands = [line.split("#")[0].strip() for line in quick_start.code.splitlines()]
    assert commands == ["make demo", "make test"]


# --- links ---------------------------------------------------------------------------------------------------------


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lowercase, punctuation dropped, spaces as dashes."""
    headings = re.findall(r"^#+ (.*)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_links_point_at_files_and_headings_that_exist(page):
    text = re.sub(r"^```.*?^```$", "", page.read_text(), flags=re.M | re.S)  # no links in code
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{relative(page)} links to {target}, which does not exist"
        if anchor:
            assert anchor in anchors(linked), f"{relative(page)} links to {target}: no such heading"


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_the_repository_files_named_exist(page):
    """Paths written as code (`rewrite/pipeline.py`) name files of the repository: a rename must update the docs."""
    named = re.findall(r"`((?:rewrite|passes|tests|bench|examples|docs)/[\w./-]+)`", page.read_text())
    assert [path for path in named if not (REPO / path).exists()] == []


# --- a page per lint code ------------------------------------------------------------------------------------------

SECTIONS = ["What it does", "Why is this a problem?", "Example", "How to fix it"]
NEEDS_ANOTHER_FILE = {"WR004"}  # its example launches a kernel that another, rewritten file defines


def test_every_code_has_a_page_and_every_page_a_code():
    assert {page.stem for page in RULES.glob("*.md")} == set(CODES)


@pytest.mark.parametrize("code", sorted(CODES))
def test_each_page_says_what_why_an_example_and_the_fix(code):
    page = RULES / f"{code}.md"
    text = page.read_text()
    assert text.startswith(f"# {code}: ")
    assert re.findall(r"^## (.*)$", text, re.M) == SECTIONS
    if code != "E999":  # which noqa does not silence
        assert f"# noqa: {code}" in text


@pytest.mark.parametrize("code", sorted(set(CODES) - NEEDS_ANOTHER_FILE))
def test_each_pages_example_is_reported_with_its_code(code, tmp_path, capsys):
    example = next(block for block in blocks(RULES / f"{code}.md") if block.heading == "Example")
    path = tmp_path / "example.py"
    path.write_text(example.code)
    main(["--check", "--select", "ALL", str(path)])
    assert f": {code} " in capsys.readouterr().out


@pytest.mark.parametrize("code", sorted(CODES))
def test_each_findings_url_opens_its_page(code):
    url = urlparse(rule_url(code))
    assert url.scheme == "file" and Path(url2pathname(url.path)).read_text().startswith(f"# {code}: ")


def test_the_cli_reference_links_every_codes_page():
    cli = (REPO / "docs" / "cli.md").read_text()
    assert all(f"[`{code}`](rules/{code}.md)" in cli for code in CODES)


# --- the API reference: the real signatures ------------------------------------------------------------------------

API = REPO / "docs" / "api.md"


def unannotated(target) -> str:
    """The signature as the reference writes it: no annotations, no ``self``."""
    signature = inspect.signature(target)
    parameters = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    if parameters and parameters[0].name == "self":
        parameters = parameters[1:]
    return str(signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty))


def documented() -> dict[str, str | None]:
    """Each heading of the API reference: the object's name, and the signature it shows (None: none shown)."""
    headings = re.findall(r"^### `([\w.]+)(\(.*\))?`$", API.read_text(), re.M)
    return {name: signature or None for name, signature in headings}


def resolve(name: str):
    target = warp_rewrite
    for part in name.split("."):
        target = getattr(target, part)
    return target


def test_the_api_reference_documents_every_public_name():
    assert set(warp_rewrite.__all__) <= set(documented())


@pytest.mark.parametrize("name", [name for name, signature in documented().items() if signature])
def test_the_api_reference_shows_the_real_signature(name):
    assert documented()[name] == unannotated(resolve(name))


@wp.kernel
def compact(x: wp.array(dtype=float), count: wp.array(dtype=int), out: wp.array(dtype=float)):
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[wp.tid()]


def test_the_attributes_documented_exist():
    """The list items that start with attributes (``- `.kernel`: ...``, ``- `.a`, `.b`: ...``)."""
    listed = re.findall(r"^- (`\.[^:]*):", API.read_text(), re.M)
    attributes = [attribute for item in listed for attribute in re.findall(r"`\.(\w+)`", item)]
    assert len(attributes) >= 8
    rewritten = warp_rewrite.wp_rewrite(compact)
    assert [attribute for attribute in attributes if not hasattr(rewritten, attribute)] == []


# --- the CLI reference: the parser's options -----------------------------------------------------------------------


def documented_options() -> dict[str, str | None]:
    """Each option of the reference's table (its first column): option string -> metavar (None: a flag)."""
    text = (REPO / "docs" / "cli.md").read_text()
    table = text[text.index("## Options") :].split("\n## ", 1)[0]
    options = {}
    for row in re.findall(r"^\| (`.*?) \|", table, re.M):
        for spelled in re.findall(r"`([^`]+)`", row):
            name, _, metavar = spelled.partition(" ")
            options[name] = metavar or None
    return options


def test_the_cli_reference_lists_every_option_with_its_metavar():
    expected = {}
    for action in _parser()._actions:
        takes_value = action.nargs != 0
        metavar = "FORMAT" if action.choices and action.option_strings else action.metavar
        for spelled in action.option_strings or [action.metavar]:
            expected[spelled] = metavar if takes_value and action.option_strings else None
    assert documented_options() == expected


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.info == "sh" for b in blocks(p))], ids=relative)
def test_the_command_lines_shown_are_valid(page):
    """Every ``wp-rewrite ...`` line of a shell block parses (its files are the page's own examples)."""
    lines = [
        line.split("  #")[0].split() for block in blocks(page) if block.info == "sh" for line in block.code.splitlines()
    ]
    commands = [words[1:] for words in lines if words and words[0] == "wp-rewrite"]
    assert commands
    for command in commands:
        parse_arguments(command)


def test_the_cli_reference_names_every_output_format():
    (output_format,) = [a for a in _parser()._actions if "--output-format" in a.option_strings]
    text = (REPO / "docs" / "cli.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `--output-format"))
    assert all(f"`{choice}`" in row for choice in output_format.choices)
