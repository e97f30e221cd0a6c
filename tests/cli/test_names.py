"""Every name of a rewritten module-level kernel launches the rewrite: the block ends with
``compact = compact_rewritten``, so aliases, default arguments, kernels handed to other functions and other
modules' imports of it launch both phases through ``wp.launch``; launches the rewritten launch cannot take are left
as written, with a warning naming their line. Gradients are checked against finite differences of the original.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import warp as wp

from tests.support.emitted import import_file
from tests.support.harness import Case, check, f64, i32
from warp_rewrite import wp_rewrite
from warp_rewrite.cli.main import main

N = 8
X = np.array([0.7, -1.3, 1.9, 0.4, -0.6, 1.1, 2.3, -2.1])

SIM = """import warp as wp


@wp.kernel
def compact(x: wp.array[wp.float64], count: wp.array[wp.int32], out: wp.array[wp.float64]):
    tid = wp.tid()
    if x[tid] > wp.float64(0.0):
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[tid] * x[tid]


alias = compact


def launch_given(kernel, x, count, out):
    wp.launch(kernel, x.shape[0], inputs=[x, count, out])


def with_default(x, count, out, kernel=compact):
    wp.launch(kernel, x.shape[0], inputs=[x, count, out])


def through_alias(x, count, out):
    wp.launch(alias, x.shape[0], inputs=[x, count, out])


def handed_on(x, count, out):
    launch_given(compact, x, count, out)


def unpacked(x, count, out):
    options = {"device": "cpu"}
    wp.launch(compact, x.shape[0], inputs=[x, count, out], **options)


def starred(x, count, out):
    arguments = (x.shape[0], [x, count, out])
    wp.launch(compact, *arguments)


def adjoint_by_position(x, count, out):
    wp.launch(compact, x.shape[0], [x, count, out], [], [x.grad, count, out.grad], [], None, None, True)


def adjoint_by_keyword(x, count, out):
    wp.launch(compact, x.shape[0], inputs=[x, count, out], adj_inputs=[x.grad, count, out.grad], adjoint=True)


def not_adjoint(x, count, out):
    wp.launch(compact, x.shape[0], inputs=[x, count, out], adjoint=False)
"""
DRIVER = """import warp as wp

from sim_names import compact


def step(x, count, out):
    wp.launch(compact, x.shape[0], inputs=[x, count, out])
"""


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory):
    """A folder with sim_names.py (to rewrite), the same as original_names.py, and driver_names.py importing it."""
    folder = tmp_path_factory.mktemp("names")
    (folder / "original_names.py").write_text(SIM)
    path = folder / "sim_names.py"
    path.write_text(SIM)
    (folder / "driver_names.py").write_text(DRIVER)
    return folder, path


@pytest.fixture(scope="module")
def modules(rewritten):
    folder, path = rewritten
    assert main([str(path), "--in-place", "-q"]) == 0
    return import_file(path, "sim_names"), import_file(folder / "original_names.py", "original_names")


def test_the_block_rebinds_the_kernels_name_and_keeps_the_original(modules):
    emitted, _ = modules
    text = Path(emitted.__file__).read_text()
    assert "\ncompact = compact_rewritten  # every name of compact now launches both phases\n" in text
    assert isinstance(emitted.compact, emitted.wp_rewrite_runtime.RewrittenKernel)
    assert emitted.alias is emitted.compact and emitted.compact is emitted.compact_rewritten
    assert isinstance(emitted.compact.kernel, wp.Kernel)
    original = emitted.compact.kernel
    # the emitted file's module holds the original and the generated kernels alike
    assert emitted.compact.key == emitted.compact.replay_kernel.key and emitted.compact.module is original.module
    assert emitted.compact.func is original.func
    with pytest.raises(AttributeError):
        emitted.compact.no_such_attribute  # noqa: B018
    assert wp_rewrite(emitted.compact).kernel is original  # rewritten again from the original


@pytest.mark.parametrize(
    "program", ["with_default", "through_alias", "handed_on", "unpacked", "starred", "not_adjoint", "driver"]
)
def test_every_name_of_the_kernel_launches_the_rewrite(modules, rewritten, program):
    emitted, original = modules
    folder, _ = rewritten
    driver = import_file(folder / "driver_names.py", "driver_names") if program == "driver" else None

    def run(args, launcher):
        if program == "driver":  # the other module imports the emitted one's compact; the original launches itself
            if launcher.__name__ == "launch_original":
                wp.launch(original.compact, N, inputs=args, device="cpu")
            else:
                driver.step(*args)
            return
        getattr(original if launcher.__name__ == "launch_original" else emitted, program)(*args)

    def make():
        return [f64(X, True), i32([0]), wp.zeros(N, dtype=wp.float64, requires_grad=True)]

    check(Case(None, N, make, [2], [0], program=run))


def test_launches_the_rewritten_launch_cannot_take_are_kept_with_a_warning(tmp_path, capsys):
    path = tmp_path / "sim.py"
    path.write_text(SIM)
    assert main([str(path), "-o", str(tmp_path / "out.py")]) == 0
    err = capsys.readouterr().err
    text = (tmp_path / "out.py").read_text()
    lines = SIM.splitlines()

    def line_of(fragment: str) -> int:
        return next(number for number, line in enumerate(lines, start=1) if fragment in line)

    for fragment in ["None, None, True)", "adjoint=True)", "**options)", "*arguments)"]:
        call = next(line for line in lines if fragment in line)
        assert call + "\n" in text  # as written
        assert f"{path}:{line_of(fragment)}:5: warning: this wp.launch of kernel 'compact' " in err
    assert "is an adjoint launch (True for adjoint), which the rewritten kernel cannot take" in err
    assert "passes **options, which wp-rewrite cannot match to launch_compact's parameters" in err
    assert "passes *arguments, which" in err
    assert "launch_compact(x.shape[0], inputs=[x, count, out], adjoint=False)" in text
    assert err.count("warning:") == 4


@pytest.mark.parametrize("program", ["adjoint_by_position", "adjoint_by_keyword"])
def test_an_adjoint_launch_left_as_written_runs_the_rewrites_adjoint(modules, program):
    """The name is the rewrite's, and a rewritten kernel takes ``adjoint=True`` as Warp's tools launch it: the
    gradients are those of the rewrite on a tape, not the original's adjoint of a replay without records."""
    emitted, _ = modules
    x, count, out = f64(X, True), i32([0]), wp.zeros(N, dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(emitted.compact, N, inputs=[x, count, out])
    tape.backward(grads={out: wp.ones(N, dtype=wp.float64)})
    expected = x.grad.numpy().copy()
    assert np.any(expected != 0)
    x, count, out = f64(X, True), i32([0]), wp.zeros(N, dtype=wp.float64, requires_grad=True)
    out.grad.fill_(1.0)
    getattr(emitted, program)(x, count, out)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)
