"""Benchmarks of the embedded server's own serving path: overhead, runtimes, frontends (`workers`)."""
