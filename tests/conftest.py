import logging
import sys
from pathlib import Path

import warp as wp

sys.path.insert(0, str(Path(__file__).parent))
wp.config.log_level = logging.WARNING  # no init banner, no per-module load lines
wp.init()
