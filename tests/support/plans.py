"""Capacity plans for the end-to-end tests that search one embedded null-backend server at request batch 1: the same
[run], [grid] and [servers] every such test needs, with its own name, window and server flags (and, where it pins
them, the load generator's and the server's cores)."""

from __future__ import annotations

import json
from pathlib import Path


def null_server_plan(path: Path, exported_model, name: str, server_flags: tuple[str, ...], *, measure_s: float,
                     loadgen_cpus: str | None = None, server_cpus: str | None = None,
                     dispatch_lag_limit_ms: float = 5.0) -> Path:
    """Write the plan to `path`: one `cpu`/`off` embedded server with `server_flags`, shape-checked, one Locust
    process, sends late past 5 ms counted late (a shared 2-core machine's own wake-ups are not these tests' subject),
    a load generator whose sends lag past `dispatch_lag_limit_ms` at p99 read as its limit."""
    run = [f'name = "{name}"', "[run]", "warmup_s = 0.5", f"measure_s = {measure_s}", "window_s = 0.5",
           "processes = 1", 'check = "shape"', "late_threshold_ms = 5.0",
           f"dispatch_lag_limit_ms = {dispatch_lag_limit_ms}",
           f'samples = "{exported_model.samples_path}"']
    run += [f'loadgen_cpus = "{loadgen_cpus}"'] if loadgen_cpus is not None else []
    launch = ["[servers.launch]", 'kind = "embedded"', f'models_dir = "{exported_model.output_dir}"']
    launch += [f'server_cpus = "{server_cpus}"'] if server_cpus is not None else []
    launch += [f"server_flags = {json.dumps(list(server_flags))}"]
    rest = ["[grid]", "batch_sizes = [1]", "concurrency = [4]", "[servers]",
            'configs = [{ device = "cpu", batching = "off" }]']
    path.write_text("\n".join(run + rest + launch) + "\n")
    return path
