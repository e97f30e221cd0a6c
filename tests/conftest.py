import logging
import os
import sys
from pathlib import Path

import warp as wp

sys.path.insert(0, str(Path(__file__).parent))
wp.config.log_level = logging.WARNING  # no init banner, no per-module load lines
wp.init()


def pytest_collection_modifyitems(items):
    """Tests marked ``after_everything`` (the CUDA compile of every module the suite generated) run last."""
    items.sort(key=lambda item: item.get_closest_marker("after_everything") is not None)


# The devices tests taking a ``device`` argument run on: WP_REWRITE_DEVICES=cpu,cuda:0 on a GPU machine.
DEVICES = os.environ.get("WP_REWRITE_DEVICES", "cpu").split(",")


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", DEVICES)
