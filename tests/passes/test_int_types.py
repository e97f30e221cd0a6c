"""passes/int_types.py: which locals are ints, settled over loop-carried updates.

Nothing here compiles or launches a kernel.
"""

import ast

import warp as wp

from tests.support.pass_sources import Unit, parameter_types, parse
from warp_rewrite.passes.int_types import IntLocals


def test_int_locals_settle_on_loop_carried_updates():
    kernel = parse("""
        def k(keys: wp.array[wp.int32], n: int, x: wp.array[float]):
            slot = keys[0] % n
            done = int(0)
            v = x[0]
            while done == 0:
                slot = (slot + 1) % n
                done = 1
                v = v * 2.0
    """)
    kinds = IntLocals(kernel, parameter_types(Unit(ast.unparse(kernel)))).locals
    assert kinds["slot"] is wp.int32 and kinds["done"] is wp.int32 and "v" not in kinds
