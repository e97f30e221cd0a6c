"""The command line knows the types the API knows: a struct imported from another file of the package (its
unsigned int array fields are int targets, not float ones), and locals made by bit operations on values it cannot
see (``1 << wp.static(N)``). A package is written into a temporary folder, rewritten in place, imported, checked
against finite differences; and both front ends generate the same source for its kernels."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest
import warp as wp

from tests.api.test_frontends import both_sources
from tests.cli.test_cli import N, X
from tests.support.emitted import run_cli, through, zeros
from tests.support.harness import Case, check, f64, i32
from warp_rewrite.pipeline import RewriteOptions

TYPES = """\
import warp as wp

SPARE_BIT = 3


@wp.struct
class Pool:
    bits: wp.array[wp.uint32]
    keys: wp.array[wp.uint64]
    best: wp.array[wp.uint64]
"""

# The struct reaches each kernel file another way: relative, absolute as a module, re-exported by the package.
IMPORTS = {
    "relative": "from .types_ import SPARE_BIT, Pool\n",
    "module": "import pool_pkg.types_ as types_\nfrom pool_pkg.types_ import SPARE_BIT\n",
    "package": "from . import Pool, SPARE_BIT\n",
}

KERNELS = """\


@wp.func
def take_bit(pool: {pool}, word: int, bit: int) -> int:
    mask = wp.uint32(1) << wp.uint32(bit)
    old = wp.atomic_or(pool.bits, word, mask)
    if old & mask == wp.uint32(0):
        return 1
    return 0


@wp.kernel
def scale_by_taken_bit(x: wp.array[wp.float64], pool: {pool}, out: wp.array[wp.float64]):
    tid = wp.tid()
    won = take_bit(pool, 0, tid % 3)
    out[tid] = x[tid] * x[tid] * wp.float64(won + 1)


@wp.func
def insert_key(pool: {pool}, key: wp.uint64) -> int:
    slot = int(key % wp.uint64(pool.keys.shape[0]))
    if pool.keys[slot] == key:
        return slot
    old = wp.atomic_cas(pool.keys, slot, wp.uint64(0), key)
    if old == wp.uint64(0) or old == key:
        return slot
    return -1


@wp.kernel
def scale_by_slot(x: wp.array[wp.float64], pool: {pool}, out: wp.array[wp.float64]):
    tid = wp.tid()
    slot = insert_key(pool, wp.uint64(tid % 5 + 1))
    if slot >= 0:
        best = wp.atomic_max(pool.best, slot, wp.uint64(tid))
        out[tid] = x[tid] * wp.float64(slot + 1) + wp.float64(best)


@wp.kernel
def weigh_by_wins(x: wp.array[wp.float64], scores: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    won_mask = int(0)
    for d in range(scores.shape[0]):
        score = (tid * (d + 3)) % 5
        if wp.atomic_max(scores, d, score) < score:
            won_mask |= 1 << d
        else:
            won_mask |= 1 << wp.static(SPARE_BIT)
    out[tid] = x[tid] * x[tid] * wp.float64(won_mask + 1)
"""


def kernels_source(way: str) -> str:
    pool = "types_.Pool" if way == "module" else "Pool"
    return "import warp as wp\n\n" + IMPORTS[way] + KERNELS.format(pool=pool)


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """``pool_pkg``: the struct in ``types_.py`` (re-exported by the package), one kernel file per way of importing
    it, each as written (``original_<way>``) and rewritten in place (``kernels_<way>``)."""
    root = tmp_path_factory.mktemp("types")
    folder = root / "pool_pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("from .types_ import SPARE_BIT, Pool\n")
    (folder / "types_.py").write_text(TYPES)
    for way in IMPORTS:
        (folder / f"original_{way}.py").write_text(kernels_source(way))
        (folder / f"kernels_{way}.py").write_text(kernels_source(way))
    sys.path.insert(0, str(root))
    try:
        yield folder
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == "pool_pkg" or m.startswith("pool_pkg.")]:
            del sys.modules[name]


@pytest.mark.parametrize("way", list(IMPORTS))
def test_an_imported_struct_and_bit_operations_are_typed_as_the_api_types_them(package, way, capsys):
    """Before: 'wp.atomic_or() on a float target', 'a plain read of pool.keys, whose float atomic returns need
    exact gradients' (the imported struct's fields unknown) and 'won_mask ... is not an int'."""
    status, _, err = run_cli(capsys, package / f"kernels_{way}.py", "--in-place")
    assert status == 0, err
    assert "rewrote 3 kernels (scale_by_taken_bit, scale_by_slot, weigh_by_wins)" in err
    module = importlib.import_module(f"pool_pkg.kernels_{way}")
    types_ = importlib.import_module("pool_pkg.types_")

    def pool(module, args):
        made = types_.Pool()
        made.bits = args[1]
        made.keys, made.best = args[2], args[3]
        return [args[0], made, args[4]]

    def pool_arguments():
        bits = wp.array(np.array([0b010], dtype=np.uint32), dtype=wp.uint32, device="cpu")
        keys = wp.array(np.zeros(7, dtype=np.uint64), dtype=wp.uint64, device="cpu")
        best = wp.array(np.zeros(7, dtype=np.uint64), dtype=wp.uint64, device="cpu")
        return [f64(X, True), bits, keys, best, zeros(N)]

    for name in ("scale_by_taken_bit", "scale_by_slot"):
        check(Case(None, N, pool_arguments, [4], [0], program=through(module, name, N, pool)))
    make = lambda: [f64(X, True), i32([2, 0, 1]), zeros(N)]  # noqa: E731
    check(Case(None, N, make, [2], [0], program=through(module, "weigh_by_wins", N)))


@pytest.mark.parametrize("way", list(IMPORTS))
@pytest.mark.parametrize("kernel", ["scale_by_taken_bit", "scale_by_slot", "weigh_by_wins"])
def test_both_front_ends_generate_the_same_source(package, way, kernel):
    module = importlib.import_module(f"pool_pkg.original_{way}")
    api, cli = both_sources(getattr(module, kernel), package / f"original_{way}.py", RewriteOptions())
    assert api is not None and not api.startswith("RewriteError")
    assert api == cli
