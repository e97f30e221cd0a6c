import sys
from pathlib import Path

import warp as wp

sys.path.insert(0, str(Path(__file__).parent))
wp.config.quiet = True
wp.init()
