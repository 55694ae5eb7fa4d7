"""Benchmarks of the tools themselves: the embedded server's overhead (`server`) and the load generator's
(`loadgen`), run as `mnist-bench bench server|loadgen` (`cli`).

Not for: sizing hardware or measuring a deployment (the sweep, `loadtest.measure`).
"""
