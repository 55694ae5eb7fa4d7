"""Where a device run's server spends its time, and what the machine's own GPU round trip is.

- `profile`: the server started again near the capacity found, on the same cores and backend, under
  open-loop load from `mnist-bench loadtest`, sampled with py-spy (`record --format raw`: collapsed
  stacks, which speedscope and flame-graph tools read; then one `dump` of every thread) and its top
  functions summarised. py-spy needs ptrace: where it cannot attach (a container without the
  capability, Yama's `ptrace_scope`) the reason is recorded and the run goes on.
- `profile_target`: what to profile: the configuration whose capacity served the most images/s, at 90% of it.
- `torch_round_trip`: PyTorch's own host → GPU → host round trip (a tiny tensor made on the GPU, one
  add, copied back), the median of 200 after a warm-up, in a child process: a reference that tells a
  slow machine from a slow runtime. "PyTorch not installed" or "no CUDA" otherwise.

Standard library only (`run.py` imports it before its wheels are installed; the load and the probes
run in child processes with the bundle's environment). Not for: the searches or the files in `--out`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from loadtest.bundle.processes import Echoed, find_below, wait_for

MODEST_RPS = 20.0  # the profile's load when no capacity was found

ROUND_TRIP_PROBE = """
import json, statistics, time
try:
    import torch
except ImportError:
    print(json.dumps({"note": "PyTorch not installed"})); raise SystemExit
if not torch.cuda.is_available():
    print(json.dumps({"note": "no CUDA", "torch": torch.__version__})); raise SystemExit
def trip():
    t = time.perf_counter()
    (torch.ones((1, 28, 28, 1), device="cuda") + 1).cpu()
    return (time.perf_counter() - t) * 1e6
for _ in range(50):
    trip()
times = sorted(trip() for _ in range(200))
print(json.dumps({"median_us": round(statistics.median(times), 1), "p99_us": round(times[197], 1), "runs": 200,
                  "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                  "what": "torch.ones((1, 28, 28, 1), device='cuda') + 1, then .cpu()"}))
"""


def torch_round_trip(env: dict[str, str], timeout_s: float = 120.0) -> dict:
    """PyTorch's GPU round trip here (median µs of 200), or a note saying why there is none."""
    try:
        done = subprocess.run([sys.executable, "-c", ROUND_TRIP_PROBE], env=env, capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"note": f"the probe did not finish within {timeout_s:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"note": f"the probe failed: {(done.stderr.strip().splitlines() or ['no output'])[-1]}"}
    return json.loads(lines[-1])


def ptrace_scope() -> str:
    """Yama's ptrace_scope ("0"..."3"), or why it is not known."""
    try:
        return Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        return "no Yama (not restricted by it)"


def top_functions(collapsed: str, count: int = 15) -> dict[str, Any]:
    """From py-spy's raw (collapsed) stacks: the functions most often on top of a stack (self) and
    most often anywhere in one (inclusive), each with its share of the samples."""
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack or not samples.isdigit():
            continue
        frames = stack.split(";")
        total += int(samples)
        own[frames[-1]] += int(samples)
        for frame in set(frames):
            anywhere[frame] += int(samples)

    def ranked(counter: Counter[str]) -> list[dict]:
        return [{"function": f, "samples": n, "share": round(n / total, 3)} for f, n in counter.most_common(count)]

    return {"samples": total, "self": ranked(own), "inclusive": ranked(anywhere)}


def py_spy(binary: str, server_pid: int, duration_s: float, stacks: Path, dump: Path) -> dict:
    """Sample the server for `duration_s` (raw stacks into `stacks`), then dump its threads into `dump`."""
    record = [binary, "record", "--pid", str(server_pid), "--duration", str(round(duration_s)), "--format", "raw",
              "--rate", "100", "--output", str(stacks)]
    try:
        done = subprocess.run(record, capture_output=True, text=True, timeout=duration_s + 30)
    except subprocess.TimeoutExpired:
        return {"ok": False, "why": f"py-spy record did not finish within {duration_s + 30:.0f} s"}
    if done.returncode != 0 or not stacks.is_file():
        why = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        return {"ok": False, "why": f"py-spy could not sample the server: {why}", "ptrace_scope": ptrace_scope()}
    result: dict[str, Any] = {"ok": True, "stacks": stacks.name, "top": top_functions(stacks.read_text())}
    try:
        dumped = subprocess.run([binary, "dump", "--pid", str(server_pid)], capture_output=True, text=True, timeout=30)
        dump.write_text(dumped.stdout + dumped.stderr)
        result["dump"] = dump.name
    except subprocess.TimeoutExpired:
        result["dump"] = "py-spy dump did not finish within 30 s"
    return result


def profile_plan(base_plan: str, batch: int, rate_rps: float, measure_s: float) -> str:
    """The device plan with one open-loop cell at `rate_rps` and a longer window."""
    lines = []
    for line in base_plan.splitlines():
        key = line.split("=")[0].strip()
        if key == "measure_s":
            line = f"measure_s = {measure_s}"
        elif key == "warmup_s":
            line = "warmup_s = 2.0"
        elif key == "batch_sizes":
            line = f"batch_sizes = [{batch}]"
        elif key == "concurrency":
            line = "concurrency = []"
        elif key == "rates_rps":
            line = f"rates_rps = [{rate_rps:.1f}]"
        lines.append(line)
    return "\n".join(lines) + "\n"


def profile(load: Echoed, binary: str | None, duration_s: float, out: Path, start_timeout_s: float,
            timeout_s: float) -> dict:
    """py-spy on the server that `load` (`mnist-bench loadtest --serve ...`, just started) runs, once its
    load has begun; then the load's end (stopped after `timeout_s` in all)."""
    started = time.monotonic()
    server = wait_for(lambda: find_below(load.proc.pid, "serving.server"), start_timeout_s, load.alive)
    loaded = wait_for(lambda: find_below(load.proc.pid, "locust"), start_timeout_s, load.alive) if server else None
    result: dict[str, Any]
    if server is None or loaded is None:
        result = {"ok": False, "why": "the profiled server or its load did not start"}
    elif binary is None:
        result = {"ok": False, "why": "py-spy is not installed (no wheel in the bundle)"}
    else:
        time.sleep(2.0)  # the load's warm-up
        result = py_spy(binary, server, duration_s, out / "profile-stacks.txt", out / "profile-dump.txt")
    result["load_exit_code"] = load.wait(timeout_s - (time.monotonic() - started))
    result["load"] = [line for line in load.lines if "req/s, p50" in line][-1:]
    return result


def profile_target(capacities: list[dict], kept: list[dict] | None) -> tuple[str, str, int, float]:
    """(device, profile, request batch, rate): the configuration whose capacity (each search's answer line, as
    `device_run` reads them) served the most images/s, at 90% of it; else the plan's first search kept (cpu-off
    at batch 1 without one) at a modest rate."""
    best = None
    for answer in capacities:
        rate = re.match(r"(?:at least )?([\d.]+) req/s", answer["answer"])
        if rate and (best is None or float(rate[1]) * int(answer["batch"]) > best[0]):
            best = (float(rate[1]) * int(answer["batch"]), answer["server"], int(answer["batch"]), float(rate[1]))
    if best is not None:
        device, _, profile = best[1].partition("-")
        return device, profile, best[2], 0.9 * best[3]
    first = (kept or [{"device": "cpu", "profile": "off", "batch": 1}])[0]
    return first["device"], first["profile"], first["batch"], MODEST_RPS
