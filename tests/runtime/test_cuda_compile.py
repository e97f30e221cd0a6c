"""Every module the suite generates compiles for CUDA, without a GPU: Warp's NVRTC.

This test runs after every other one (see conftest.py), so it finds every Warp module the suite made in this
process (``make test`` runs the fuzz slice, ``tests/fuzz``, in a process of its own, with this test too): the API's
generated modules (``wp_rewrite.<module>``, their ``.detached`` and ``.max_records<N>`` variants: record, replay and
helper clones), the modules emitted by the command line, the fuzz slice's, and the runtime's own (the exact backward,
whose overloads are declared up front); and, made here if the other tests did not, every pattern kernel's, both
variants.

What is compiled, and why that is enough (the whole suite's modules twice would take five minutes of the ten):

- every module for sm_75, to PTX: the oldest architecture Warp's NVRTC targets (it takes the float64 ticket
  lock), and what catches generated code that does not compile for CUDA at all;
- the runtime and the pattern kernels' modules for sm_90 too, to CUBIN, so that ptxas also checks the inline
  PTX of the 128-bit compare-and-swap. Generated code is the same text for every architecture; only the
  runtime's native snippets (in every module with exact float returns, as in the patterns') and Warp's own
  headers differ by architecture;
- of the fuzz slices' batches, the first one (fifty random kernels; the others repeat what it generates, and
  the ``max_records`` slice's room compiled in is the test modules' too), none of their command line copies
  (``fuzz_batch_..._cli``: the same generated text, beside random originals Warp may not compile for CUDA), and of
  the runtime copies the command line writes beside emitted modules, none (byte for byte the runtime's own).

NVRTC writes its diagnostics to the process's stderr, which the test captures for the failure message.
"""

import os
import tempfile

import pytest
import warp as wp

from warp_rewrite import runtime, wp_rewrite

SM_90_TOO = ("warp_rewrite.runtime.exact_kernels", "wp_rewrite.tests.support.patterns")  # see above


def _nvrtc() -> set[int]:
    context = wp._src.context.runtime
    return set(getattr(context, "nvrtc_supported_archs", ()) or ())


def _generated_modules() -> dict[str, wp._src.context.Module]:
    """The Warp modules holding generated kernels or the runtime, by name (see above for what is left out)."""
    modules, fuzz_batch = {}, None
    for name, module in sorted(wp._src.context.user_modules.items()):
        keys = [kernel.key for kernel in module.kernels.values()]
        generated = any(key.endswith(("_record", "_replay")) for key in keys)
        if name.split(".")[0] == "wp_rewrite_runtime" or not (
            generated or name.startswith(("wp_rewrite", runtime.__name__))
        ):
            continue
        if name.startswith("fuzz_batch_") and name.endswith("_cli"):
            continue
        if name.startswith("wp_rewrite.fuzz_batch_"):
            if fuzz_batch is not None:
                continue
            fuzz_batch = name
        modules[name] = module
    return modules


def _representative_set() -> None:
    from tests.support import patterns

    for kernel in (value for value in vars(patterns).values() if isinstance(value, wp.Kernel)):
        rewritten = wp_rewrite(kernel)
        if rewritten.pair is not None:
            rewritten.detached()


def _compile(module: wp._src.context.Module, arch: int, use_ptx: bool) -> str | None:
    """Compile ``module`` for ``arch`` into a fresh folder (Warp skips a binary it finds); the error, or None."""
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryFile(mode="w+") as captured:
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            module._compile(output_dir=folder, output_arch=arch, use_ptx=use_ptx)
            return None
        except Exception as error:  # reported with NVRTC's own diagnostics
            os.dup2(saved, 2)
            captured.seek(0)
            return f"{error}\n{captured.read()[-4000:]}"
        finally:
            os.dup2(saved, 2)
            os.close(saved)


@pytest.mark.after_everything
@pytest.mark.skipif(not {75, 90} <= _nvrtc(), reason="Warp's NVRTC cannot target sm_75 and sm_90 here")
def test_every_generated_module_compiles_for_sm75_and_sm90():
    _representative_set()  # made already by the suite's other tests, unless this one runs alone
    modules = _generated_modules()
    failures = {}
    for name, module in sorted(modules.items()):
        for arch, use_ptx in [(75, True), *([(90, False)] if name in SM_90_TOO else [])]:
            error = _compile(module, arch, use_ptx)
            if error is not None:
                failures[f"{name} (sm_{arch})"] = error
    assert not failures, "\n\n".join(f"{name}: {error}" for name, error in failures.items())
    assert set(SM_90_TOO) <= set(modules) and any(name.endswith(".detached") for name in modules)
