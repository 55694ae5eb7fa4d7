"""`python -m loadtest`: the same command line as the `mnist-bench` console script (`loadtest.commands.main`)."""

import sys

from loadtest.commands.main import main

sys.exit(main())
