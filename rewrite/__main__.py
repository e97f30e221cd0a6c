import sys

from warp_rewrite.cli import main

sys.exit(main())
