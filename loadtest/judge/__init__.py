"""Verdicts on what was measured: confidence, pass or fail, overload, noise, a search's conclusion (pure)."""
