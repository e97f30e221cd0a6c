"""rewrite.printing: unchanged statements printed from the user's source, the rest by ast.unparse."""

import ast
import textwrap

from warp_rewrite.printing import unparse_keeping_text

SOURCE = textwrap.dedent('''
    def kernel(a: float, b: int):
        x = foo(a,  # the user's comment and layout stay
                b)
        if a > 0.0:
            y = 1
        elif b:
            y = 2
        s = 'é' + a  # bytes, not characters, count the columns
        t = """two
      lines"""
        u = bar(a,
    \tb)
        v = "one \\
    string"
        return y
''').lstrip()


def parsed() -> ast.FunctionDef:
    return ast.parse(SOURCE).body[0]


def test_unchanged_statements_keep_their_text_changed_ones_are_unparsed():
    function = parsed()
    originals = dict.fromkeys(function.body[:-1], SOURCE)
    function.body = [*function.body[:-1], ast.Return(ast.Name("z", ast.Load()))]  # a statement the pass made
    expected = textwrap.dedent("""
        def kernel(a: float, b: int):
            x = foo(a,  # the user's comment and layout stay
                    b)
            if a > 0.0:
                y = 1
            elif b:
                y = 2
            s = 'é' + a
            t = 'two\\n  lines'
            u = bar(a, b)
            v = 'one string'
            return z""")
    assert unparse_keeping_text(function, originals) == expected.lstrip()


def test_an_elif_is_unparsed_its_unchanged_statements_keep_their_text():
    function = parsed()
    branch = function.body[1]
    elif_branch = branch.orelse[0]
    originals = dict.fromkeys([elif_branch, elif_branch.body[0]], SOURCE)
    printed = unparse_keeping_text(function, originals)
    assert "    elif b:\n        y = 2\n" in printed
    assert ast.dump(ast.parse(printed)) == ast.dump(ast.parse(SOURCE))


def test_the_tree_is_left_as_it_was():
    function = parsed()
    before = ast.dump(function, include_attributes=True)
    unparse_keeping_text(function, dict.fromkeys(function.body, SOURCE))
    assert ast.dump(function, include_attributes=True) == before


def test_statements_after_a_form_feed_are_printed_from_their_own_lines():
    """Python's parser counts only \\n, \\r\\n and \\r as line ends; ``str.splitlines`` also splits at a form feed
    (common between sections of a file), which once printed every later statement from the line above it."""
    source = "x = 0\n\x0c\ndef kernel(a: float):\n    y = (a +\n         1.0)\n    return y\n"
    function = ast.parse(source).body[1]
    assert unparse_keeping_text(function, dict.fromkeys(function.body, source)).splitlines()[1:] == [
        "    y = (a +",
        "         1.0)",
        "    return y",
    ]


def test_a_kept_statements_blank_lines_stay_empty():
    """An unchanged ``if`` with a blank line in its body, printed one level deeper (Newton's rasterized
    collisions): the blank line gets no indentation (ruff's W293)."""
    source = "def kernel(a: float):\n    if a > 0.0:\n        b = a\n\n        c = b\n    return a\n"
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    wrapper = ast.parse("def wrapper():\n    pass\n").body[0]
    assert isinstance(wrapper, ast.FunctionDef)
    loop = ast.parse("for i in r:\n    pass\n").body[0]
    assert isinstance(loop, ast.For)
    loop.body = [function.body[0]]
    wrapper.body = [loop]
    printed = unparse_keeping_text(wrapper, {function.body[0]: source})
    assert "        if a > 0.0:\n            b = a\n\n            c = b" in printed
