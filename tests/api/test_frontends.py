"""The API and the command line run one pipeline: for the same kernel they generate the same source.

The API reads a kernel from Warp's objects (``warp_rewrite.live_frontend``), the command line from its file without
importing it (``warp_rewrite.cli.static_frontend``); everything after that is ``warp_rewrite.pipeline``. Given the same
names to avoid, both must print the same record and replay kernels and the same launch spec, for every pattern
kernel of the suite and for fuzzed kernels: the same but for where the kernels go (a file's generated kernels
repeat its kernel's ``@wp.kernel(module=..., module_options=...)``; the API puts them into a Warp module of its
own with the kernel's module options) and how locations print (the command line as its paths were given).
"""

import tempfile
from pathlib import Path

import pytest
import warp as wp

from tests.fuzz.generator import generate_kernel, module_source
from tests.fuzz.runner import load_batch
from tests.support import patterns
from warp_rewrite import RewriteError, wp_rewrite
from warp_rewrite.cli.emit import _bound_names, _module_names
from warp_rewrite.cli.project import Project
from warp_rewrite.cli.static_frontend import StaticFrontend
from warp_rewrite.cli.static_module import StaticModule
from warp_rewrite.live_frontend import LiveFrontend
from warp_rewrite.pipeline import RewriteOptions, rewrite_kernel

FUZZED = 60


def both_sources(kernel: wp.Kernel, path: Path, options: RewriteOptions) -> tuple[str | None, str | None]:
    """What each front end's pipeline makes of ``kernel`` (defined in ``path``), or its refusal."""
    module = StaticModule.parse(path, str(path), path.read_text())
    project = Project({path.resolve(): module})
    definition = next(n for n in module.tree.body if getattr(n, "name", None) == kernel.key)
    taken = _bound_names(module.tree)
    names, _ = _module_names(module, taken)
    static = StaticFrontend(module, project, definition, names, set(taken))
    static.placement = {}
    live = LiveFrontend(kernel, set())
    live.taken |= static.taken  # the same names to avoid on both sides
    static.taken |= live.taken
    results = []
    for frontend in (live, static):
        try:
            generated = rewrite_kernel(frontend, options)
            text = None if generated is None else generated.source + repr(generated.spec)
            results.append(text and text.replace(f"{Path.cwd()}/", ""))
        except RewriteError as error:
            results.append(f"RewriteError: {error.problem}")
    return results[0], results[1]


PATTERN_KERNELS = [name for name, value in vars(patterns).items() if isinstance(value, wp.Kernel)]


@pytest.mark.parametrize("name", PATTERN_KERNELS)
@pytest.mark.parametrize("detach_returns", [False, True])
def test_pattern_kernels_generate_the_same_source(name, detach_returns):
    api, cli = both_sources(getattr(patterns, name), Path(patterns.__file__), RewriteOptions(None, detach_returns))
    assert api == cli


@pytest.fixture(scope="module")
def fuzzed():
    """A batch of fuzzed kernels in one file, imported (for the API) and read (for the command line)."""
    cases = [generate_kernel(2027, index) for index in range(FUZZED)]
    with tempfile.TemporaryDirectory(prefix="wp-frontends-") as directory:
        module = load_batch(cases, Path(directory))
        path = Path(module.__file__)
        assert path.read_text() == module_source(cases)
        yield cases, module, path


@pytest.mark.parametrize("index", range(FUZZED))
def test_fuzzed_kernels_generate_the_same_source(fuzzed, index):
    cases, module, path = fuzzed
    api, cli = both_sources(getattr(module, cases[index].name), path, RewriteOptions())
    assert api == cli


def test_debug_switch_prints_what_each_stage_made_in_order(monkeypatch, capsys):
    from warp_rewrite import pipeline

    monkeypatch.setattr(pipeline, "DEBUG", True)
    rewrite_kernel(LiveFrontend(patterns.compact_positive, set()))
    err = capsys.readouterr().err
    headers = [f"--- wp-rewrite: kernel 'compact_positive' after stage '{stage.name}' ---" for stage in pipeline.STAGES]
    assert [err.index(header) for header in headers] == sorted(err.index(header) for header in headers)
    assert "wp.atomic_add on 'count' -> slot_records" in err and "def compact_positive_replay(" in err


@wp.kernel
def append_while_under_budget(count: wp.array[int], x: wp.array[float], out: wp.array[float]):
    tid = wp.tid()
    if count[0] < 4:
        out[wp.atomic_add(count, 0, 1)] = x[tid] * x[tid]


def test_the_live_frontends_type_probe_warns_about_nothing(capfd):
    """The live front end builds the kernel once with Warp's array-access verification on, to learn which arrays Warp
    sees written (``LiveFrontend.built_adjoint``); what that makes Warp warn about (an array written after it was
    read, here the counter) is the probe's own: a user rewriting such a kernel saw it where plain Warp says nothing."""
    capfd.readouterr()
    assert wp_rewrite(append_while_under_budget).pair is not None
    assert "is being written to after it has been read" not in capfd.readouterr().err
