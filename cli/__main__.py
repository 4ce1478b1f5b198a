"""`python -m cli`: the same as the `memgrid` command."""

import sys

from cli.main import run

sys.exit(run())
