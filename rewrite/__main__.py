import sys

from rewrite.cli import main

sys.exit(main())
