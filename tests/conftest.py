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
    """Check every kernel the suite rewrites, through the API or the command line (tests/support/invariants.py)."""
    from tests.support.invariants import checking_every_generated_kernel

    with checking_every_generated_kernel():
        yield


def pytest_collection_modifyitems(items):
    """Tests marked ``after_everything`` (the CUDA compile of every module the suite generated) run last."""
    items.sort(key=lambda item: item.get_closest_marker("after_everything") is not None)


# The devices tests taking a ``device`` argument run on: WP_REWRITE_DEVICES=cpu,cuda:0 on a GPU machine.
DEVICES = os.environ.get("WP_REWRITE_DEVICES", "cpu").split(",")


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", DEVICES)
