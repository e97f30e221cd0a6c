"""What the fuzzer is meant to generate, by name: a pattern over a kernel's source (or its arguments' layout).

``tests/fuzz/test_fuzz.py`` checks that the suite's fixed slice covers every feature; ``python -m tests.fuzz``
(``make fuzz``) prints how many of the kernels it checked exercised each.
"""

from __future__ import annotations

import re
from collections import Counter

from tests.fuzz.generator import FLOAT_OPS, INT_OPS, KernelCase

FEATURES = {
    **{f"int atomic_{op}": rf"s\d+ = wp\.atomic_{op}\(c\d" for op in INT_OPS},
    **{f"float atomic_{op}": rf"a\d+ = wp\.atomic_{op}\(f\d" for op in FLOAT_OPS},
    "int target with 4 indices": r"s\d+ = wp\.atomic_\w+\(c\d+, [^,]+, 0, 0, 0, ",
    "float target with 2 indices": r"a\d+ = wp\.atomic_\w+\(f\d+, [^,]+, 0, ",
    "vec3d target": r"f\d+: wp\.array\(dtype=wp\.vec3d\)",
    "if": r"\n\s+if (xv|tid|keys)",
    "for over a constant range": r"for k\d+ in range\((0, )?\d\)",
    "for over an array-read bound": r"for k\d+ in range\(trips\[tid\]\)",
    "nested for": r"\n( +)for k\d+ in range[^\n]*\n(\1 [^\n]*\n)*?\1 +for k\d+ in range",
    "break": r"\bbreak\b",
    "continue": r"\bcontinue\b",
    "while probe loop": r"while (True|done\d+ == 0):\n\s+prev\d+ = wp\.atomic_cas",
    "atomic in a while condition": r"while wp\.atomic_cas\(table\d+",
    "return from a helper's probe loop (int or tuple)": r"-> (int|tuple\[bool, int\]):\n    while True:",
    "Newton's hash insert (for-loop probe, active-slot counter)": r"n = wp\.atomic_add\(active, \d+, 1\)",
    "helper": r"@wp\.func",
    "helper two calls deep": r"@wp\.func\ndef \w+\([^\n]*\n(    [^\n]*\n)*?    [^\n]*fz_\d+_\d+_h\d+\(",
    "helper returning a slot": r"r\d+ = fz_\d+_\d+_h\d+\(",
    "int chain": r"i\d+ = s\d+ % \d\n\s+s\d+ = wp\.atomic",
    "slot indexing a float target": r"a\d+ = wp\.atomic_\w+\(f\d+, s\d+ % \d",
    "float chain": r"a\d+ = wp\.atomic_\w+\(f\d+, [^,]+, [^\n]*a\d+",
    "plain store at a slot": r"o\d+\[\w+, s\d+( - 1)?\] = ",
    "stored value built up with +=": r"v\d+ \+= xv\n(.*\n)*?\s+o\d+\[[^]]+\] \+?= v\d+",
    "float return in math": r"wp\.sin\(a\d+\)",
    "unconsumed augmented assignment": r"\n\s+[cf]\d+\[[^]]+\] [-+&|^]= ",
    "unconsumed bare call": r"\n\s+wp\.atomic_\w+\([cf]\d+",
    "int carried through a loop": r"n\d+ = n\d+ \+ s\d+",
    "float reassigned before it is read, in a loop and after it": r"\n\s+g\d+ = [^\n]*\n\s+y\[tid\] \+= g\d+ \*",
    # reads of written arrays, memory shared or laid out otherwise, calls of every kind
    "capacity check before a counter": r"\n\s+if c\d+\[[^]]+\] < \d+:\n\s+s\d+ = wp\.atomic_add",
    "int read-modify-write under a spin lock": r"seen\d+ = total\d+\[0\]\n\s+total\d+\[0\] = seen\d+ \+ tid",
    "float read-modify-write under a spin lock": r"total\d+\[0\] = seen\d+ \+ wp\.float64\(keys",
    "int read of another thread's write": r"wp\.float64\(w\d+\[\(tid \+ \d+\) % \d+\] % 5",
    "float read of another thread's write": r"y\[tid\] \+= w\d+\[\(tid \+ \d+\) % \d+\] \* xv",
    "float read of a write with a gradient (refused)": r"w\d+\[tid\] = xv \* ",
    "count the launch updates, read back (no atomic's return used)": r"\n\s+if u\d+\[\(tid \+ 1\) % \d\] > \d:",
    "float sum the launch updates, read back (no atomic's return used)": r"\(u\d+\[tid % \d\] \+ wp\.float64\(1\.0\)\)",
    # comparison reads, own writes at slots, append pools
    "early depth test on a target with exact returns": r"if d\d+ [<>] z\d+\[[^]]+\]:\n\s+zr\d+ = wp\.atomic_m",
    "early depth test in a helper": r"@wp\.func\ndef \w+\([^\n]*\n(    [^\n]*\n)*?\s+if d\d+ [<>] z\d+\[",
    "early depth test on a 2-D target": r"if d\d+ [<>] z\d+\[[^]]+, tid % 2\]:",
    "float return on a struct argument's field": r"a\d+ = wp\.atomic_\w+\(s0\.f\d",
    "overloaded helper": r"def (fz_\d+_\d+_take\d+)\(count: wp\.array\(dtype=wp(.|\n)*def \1\(",
    "generic helper instantiated for two widths": r"def fz_\d+_\d+_take\d+\(count: wp\.array\(dtype=Any\)",
    "counter of any dtype (dtype=Any), launched with int32": r"\bc\d+: wp\.array(\dd)?\(dtype=Any\)",
    "read back at a consumed slot": r"(q\d+) = wp\.atomic_add\(g\d+, 0, \d\)\n\s+g\d+\[\1\] = ",
    "append pool read below the launch's writes": r"pp\d+ = p\d+\[tid\]\n\s+b\d+ = wp\.atomic_add",
    "strided view argument": "layout=strided",
    "indexed array argument": "layout=indexed",
    "argument aliasing another (refused)": "alias_of=",
    "whole struct handed to a helper": r"@wp\.func\ndef \w+\([^\n]*s0: S_",
    "helper called through wp.static": r"wp\.static\(fz_\d+_\d+_h\d+\)\(",
    "helper default argument left out": r"bonus: int = 0\)[^\n]*:\n(.*\n)*?.*fz_\d+_\d+_h\d+\([^)\n]*\btid\)",
    "helper default argument passed by keyword": r"bonus=1\)",
}


def described(case: KernelCase) -> str:
    """The kernel's source, and a line per argument saying how it is laid out (which the source cannot show)."""
    arguments = [
        f"# {a.name}: layout={a.layout}" + (f" alias_of={a.alias_of}" if a.alias_of else "") for a in case.arrays
    ]
    return case.source + "\n" + "\n".join(arguments)


def exercised(cases: list[KernelCase]) -> Counter:
    """How many of ``cases`` exercise each feature."""
    counts = Counter(dict.fromkeys(FEATURES, 0))
    for case in cases:
        text = described(case)
        counts.update(name for name, pattern in FEATURES.items() if re.search(pattern, text))
    return counts
