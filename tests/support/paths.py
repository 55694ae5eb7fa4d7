"""Where the repository is, for tests that run its commands as a user would."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The console script `pip install -e .` puts beside this interpreter: what a user runs.
MNIST_BENCH = (str(Path(sys.executable).with_name("mnist-bench")),)
ANALYSIS_FIXTURES = REPO / "tests" / "loadtest" / "report" / "fixtures"  # hand-made results of three runs
