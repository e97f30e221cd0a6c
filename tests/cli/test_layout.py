"""rewrite.layout: generated lines laid out as ruff format lays them out, without ruff. Each case is a line and the
lines it becomes at a line length; ruff itself checks that it would write them so (the dev extra installs it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from warp_rewrite.cli.layout import QuoteStyle, laid_out, quoted, statement_lines

# (line length, the line, what it becomes)
SPLIT = [
    (
        32,
        "x = compute(alpha, beta, gamma, delta)",
        """
        x = compute(
            alpha, beta, gamma, delta
        )
        """,
    ),
    (
        30,
        "x = compute(alpha_value, beta_value, gamma_value)",
        """
        x = compute(
            alpha_value,
            beta_value,
            gamma_value,
        )
        """,
    ),
    (  # a single argument gets no comma
        40,
        "slot = runtime.recorded(a_long_name_of_records_here)",
        """
        slot = runtime.recorded(
            a_long_name_of_records_here
        )
        """,
    ),
    (  # the statement's own brackets break where the first line then fits
        40,
        "if ready and runtime.record(value, records, thread):",
        """
        if ready and runtime.record(
            value, records, thread
        ):
        """,
    ),
    (  # else in parentheses, broken before each of the loosest operators
        44,
        "if runtime.record(value, records, thread) < limit:",
        """
        if (
            runtime.record(value, records, thread)
            < limit
        ):
        """,
    ),
    (
        60,
        "    return runtime.record_returned(wp.atomic_cas(values, i, a, b), records, c) == a",
        "    return (\n"
        "        runtime.record_returned(\n"
        "            wp.atomic_cas(values, i, a, b), records, c\n"
        "        )\n"
        "        == a\n"
        "    )",
    ),
    (  # an assignment tries its value on one line in parentheses before breaking it
        40,
        "create_soft_contacts = make_contact_kernel(False)",
        """
        create_soft_contacts = (
            make_contact_kernel(False)
        )
        """,
    ),
    (
        40,
        "launch_scale_by_previous = scale_by_previous_rewritten.launch",
        """
        launch_scale_by_previous = (
            scale_by_previous_rewritten.launch
        )
        """,
    ),
    (
        40,
        "out[tid] = runtime.shadowed(x[tid], records, thread)",
        """
        out[tid] = runtime.shadowed(
            x[tid], records, thread
        )
        """,
    ),
    (  # a conditional expression breaks before its if and else, in parentheses (Newton's tendon kernels)
        60,
        "        tension = runtime.record_if_room(seg_tension[left], tension_reads, coordinate3)"
        " if compliance > 0.0 else 0.0",
        "        tension = (\n"
        "            runtime.record_if_room(\n"
        "                seg_tension[left],\n"
        "                tension_reads,\n"
        "                coordinate3,\n"
        "            )\n"
        "            if compliance > 0.0\n"
        "            else 0.0\n"
        "        )",
    ),
    (
        50,
        "out[i] = first_value_name if flag_name else second_value",
        """
        out[i] = (
            first_value_name
            if flag_name
            else second_value
        )
        """,
    ),
    (  # where the value in parentheses does not fit either, ruff breaks the target's brackets (Newton's kernels.py)
        32,
        "values[first_index + second_index] = v",
        """
        values[
            first_index + second_index
        ] = v
        """,
    ),
    (
        32,
        "values[first_index + second_index + 1] = some_value",
        """
        values[
            first_index
            + second_index
            + 1
        ] = some_value
        """,
    ),
    (
        32,
        "arr[idx_one_two_three_four][j_five_six] = v_value",
        """
        arr[idx_one_two_three_four][
            j_five_six
        ] = v_value
        """,
    ),
    (
        40,
        "def twin(x: wp.array(dtype=float), records: wp.array(dtype=int)) -> int:",
        """
        def twin(
            x: wp.array(dtype=float),
            records: wp.array(dtype=int),
        ) -> int:
        """,
    ),
    (  # a definition's single parameter keeps its comma where the brackets break (a call's single argument does not)
        30,
        "def relax_sweeps_phases(record: bool):",
        """
        def relax_sweeps_phases(
            record: bool,
        ):
        """,
    ),
    (
        30,
        "def relax_phases(record: bool, store: bool):",
        """
        def relax_phases(
            record: bool, store: bool
        ):
        """,
    ),
    (
        50,
        '@wp.kernel(module="unique", module_options={"fast_math": True}, enable_backward=False)',
        """
        @wp.kernel(
            module="unique",
            module_options={"fast_math": True},
            enable_backward=False,
        )
        """,
    ),
    (  # a tuple of one item keeps its comma, broken or not
        30,
        'runtime.check_fingerprint("8f82", (a_kernel_named_at_length,))',
        """
        runtime.check_fingerprint(
            "8f82",
            (
                a_kernel_named_at_length,
            ),
        )
        """,
    ),
    (
        36,
        'runtime.check_fingerprint("8f82", (a_kernel_named_at_length,))',
        """
        runtime.check_fingerprint(
            "8f82",
            (a_kernel_named_at_length,),
        )
        """,
    ),
    (
        40,
        'runtime.check_fingerprint("8f82", (a_kernel_named_at_length,))',
        """
        runtime.check_fingerprint(
            "8f82", (a_kernel_named_at_length,)
        )
        """,
    ),
    (
        44,
        "elif runtime.record(value, records, thread) == 0:",
        """
        elif (
            runtime.record(value, records, thread)
            == 0
        ):
        """,
    ),
]


@pytest.mark.parametrize(("width", "line", "expected"), SPLIT, ids=[case[1][:40] for case in SPLIT])
def test_long_lines_are_split_as_ruff_splits_them(width, line, expected):
    expected = expected if expected.startswith(" ") else textwrap.dedent(expected).strip("\n")
    assert statement_lines(line, width) == expected
    assert ruff_formatted(expected, width) == expected


@pytest.mark.parametrize(
    "line",
    [
        "counts = {key: value for key, value in pairs_of_names if value}",  # a comprehension: not broken here
        "return first, second, third_of_them_all",  # a tuple without its parentheses
        "x = a.b(c).d(e).f(g)",  # a chain of calls: ruff's fluent layout
    ],
)
def test_lines_it_cannot_lay_out_are_left_to_the_caller(line):
    assert statement_lines(line, 20) is None


def test_strings_get_the_configured_quotes_where_nothing_is_escaped():
    text = "f('a', 'it\"s', \"b\")\n"
    assert quoted(text, QuoteStyle.DOUBLE) == 'f("a", \'it"s\', "b")\n'
    assert quoted(text, QuoteStyle.SINGLE) == "f('a', 'it\"s', 'b')\n"
    assert quoted(text, QuoteStyle.PRESERVE) == text
    docstring = 'def f():\n    """Why."""\n'
    assert quoted(docstring, QuoteStyle.SINGLE) == docstring  # ruff writes docstrings in double quotes


def test_a_block_is_laid_out_to_the_width_it_is_indented_to():
    text = "def k(a: int):\n    y = compute(alpha_value, beta_value)\n"
    assert laid_out(text, "", 40) == text
    assert laid_out(text, "        ", 40) == (
        "def k(a: int):\n    y = compute(\n        alpha_value, beta_value\n    )\n"
    )


def test_the_users_statements_over_several_lines_are_laid_out_again_at_their_new_indentation():
    """A statement kept as the user wrote it, over several lines, moves to another indentation in a generated
    block (Newton's geometry/kernels.py, one level in): ruff joins what now fits on one line, dropping the
    parentheses around a value, and keeps what a magic trailing comma holds broken. (A statement with a comment or
    a backslash inside is left as written.)"""
    written = textwrap.dedent("""\
        def k(a: int):
            fl_end = vertex_triangle_filtering_list_offsets[
                v_index + 1
            ]
            x = (
                v
            )
            y = compute(
                alpha,
                beta,
            )
            z = (first_long_name
                 + second)
            chained = thing.method(first_argument_here).other(
                second_argument
            )
        """)
    indent = "    "
    expected = ruff_formatted(textwrap.indent(written, indent), 120)
    assert textwrap.indent(laid_out(written, indent, 120), indent) == expected + "\n"
    assert "fl_end = vertex_triangle_filtering_list_offsets[v_index + 1]" in expected


def ruff_formatted(text: str, width: int) -> str:
    """``text`` as ruff format writes it (a compound statement's header given a body, a decorator a function)."""
    body = "\n    pass" if text.rstrip().endswith(":") else "\ndef f():\n    pass" if text.startswith("@") else ""
    source = textwrap.dedent(text) + body + "\n"
    indent = text[: len(text) - len(text.lstrip())]
    if indent:
        source = "def wrapper():\n" + textwrap.indent(source, indent)
    if source.startswith("elif"):
        source = "if ready:\n    pass\n" + source
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--line-length", str(width), "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if source.startswith("if ready:\n    pass\n"):
        formatted = formatted.removeprefix("if ready:\n    pass\n")
    if indent:
        formatted = formatted.removeprefix("def wrapper():\n")
        formatted = textwrap.indent(textwrap.dedent(formatted), indent)
    return formatted.removesuffix("\n").removesuffix(body)
