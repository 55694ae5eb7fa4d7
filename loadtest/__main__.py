"""`python -m loadtest`: the same command line as the `mnist-bench` console script (`loadtest.main`)."""

import sys

from loadtest.main import main

sys.exit(main())
