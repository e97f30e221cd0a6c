import logging
import os

import pytest
import warp as wp

wp.config.log_level = logging.WARNING  # no init banner, no per-module load lines
wp.init()

# The real-code suite (make realcode) installs Newton and takes minutes: collected only when named
# (``pytest tests/realcode``).
collect_ignore = ["realcode"]


@pytest.fixture(autouse=True, scope="session")
def every_generated_kernel_is_checked():
    """Check every kernel the suite rewrites, through the API or the command line: its replay reads only memory
    the launch does not write or records (``replay_reads``), its record kernel is the original plus record stores
    and its count kernel the record kernel less writes nothing reads back (``record_kernels``), every array Warp
    sees it write is in its plan's written set (``written_arrays``), and it calls only the ABI's runtime names
    (``generated_names``)."""
    from tests.support.generated_names import unlisted_runtime_names
    from tests.support.record_kernels import count_kernel_differences, record_kernel_differences
    from tests.support.replay_reads import unrecorded_reads
    from tests.support.written_arrays import unseen_writes
    from warp_rewrite import pipeline

    rewrite_kernel = pipeline.rewrite_kernel

    def checked(frontend, *options):
        generated = rewrite_kernel(frontend, *options)
        if generated is not None:
            problems = unrecorded_reads(frontend, generated)
            assert not problems, f"kernel '{generated.kernel}': unrecorded reads in its replay:\n" + "\n".join(problems)
            differences = record_kernel_differences(frontend, generated) + count_kernel_differences(frontend, generated)
            assert not differences, f"kernel '{generated.kernel}': record kernel:\n" + "\n".join(differences)
            unseen = unseen_writes(frontend, generated)
            assert not unseen, f"kernel '{generated.kernel}': writes the plan missed:\n" + "\n".join(unseen)
            unlisted = unlisted_runtime_names(frontend, generated)
            assert not unlisted, f"kernel '{generated.kernel}': runtime names not in the ABI:\n" + "\n".join(unlisted)
        return generated

    pipeline.rewrite_kernel = checked
    yield
    pipeline.rewrite_kernel = rewrite_kernel


def pytest_collection_modifyitems(items):
    """Tests marked ``after_everything`` (the CUDA compile of every module the suite generated) run last."""
    items.sort(key=lambda item: item.get_closest_marker("after_everything") is not None)


# The devices tests taking a ``device`` argument run on: WP_REWRITE_DEVICES=cpu,cuda:0 on a GPU machine.
DEVICES = os.environ.get("WP_REWRITE_DEVICES", "cpu").split(",")


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", DEVICES)
