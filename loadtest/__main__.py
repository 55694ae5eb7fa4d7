"""`python -m loadtest`: the same command line as the `mnist-bench` console script (`loadtest.commands.main`)."""

import sys

from loadtest.commands.main import console

sys.exit(console())
