"""Benchmark of the embedded server's gRPC frontend processes (`--workers`): throughput, CPU per request, hand-off.

`mnist-bench bench workers` prints, all measured within this one run on the cores it is given:

1. Closed-loop throughput of `--workers 2` against `--workers 1`, both servers pinned to the same cores
   (default 0,1) and h2load pinned to one of them (default 1) with 16 connections x 8 streams, request
   batch 1, batching off: `--rounds` interleaved pairs (1 then 2 frontends), the ratio of each pair and
   their median; the null backend (the serving path alone) first, then the real model, where 2 frontends
   handing every request to one owner (`--device_owner always`) are measured beside them: what batching
   off on a CPU should do is chosen by this figure.
2. CPU time per request of every server process (supervisor, frontends, owner) at one offered rate, 70%
   of what one frontend sustained in part 1 (h2load open loop), 2 frontends over 1, interleaved pairs.
3. The hand-off from a frontend to the device owner and back, one request at a time: a real owner
   process (null backend) and this process as its frontend; the round trip less the owner's own phases.

Not for: the load test's own generator (`loadtest.benchmarks.loadgen`) or a single server's costs
(`loadtest.benchmarks.serving_path.overhead`).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from loadtest.benchmarks.h2load import H2loadError, grpc_frame, h2load_command, run_h2load
from loadtest.benchmarks.serving_path.payloads import predict_payloads
from serving.deploy.process import ServerHandle, process_cpu_s, start_server

MODEL = "mnist"
CLIENTS, STREAMS = 16, 8
LOAD_SHARE = 0.7  # part 2's offered rate, as a share of one frontend's closed-loop rate
Print = Callable[[str], None]


@dataclass(frozen=True)
class WorkersOptions:
    model_base_path: Path = Path("models/mnist")
    samples: Path = Path("models/mnist-samples.npz")
    server_cpu: str = "0,1"
    client_cpu: str = "1"
    duration_s: float = 4.0
    warmup_s: float = 1.0
    rounds: int = 3
    handoff_calls: int = 3000


# The servers compared: 1 frontend, 2 frontends (each running the model itself, batching off), and 2 frontends
# handing every request to one owner process (what batching or a GPU needs; measured to choose the default).
LAYOUTS = {"1 frontend": ("--workers", "1"), "2 frontends": ("--workers", "2"),
           "2 frontends + owner": ("--workers", "2", "--device_owner", "always")}


@contextmanager
def servers(options: WorkersOptions, backend: str, layouts: tuple[str, ...]) -> Iterator[dict[str, ServerHandle]]:
    """One server of `backend` per layout, batching off, all up, all pinned to the server cores."""
    with ExitStack() as stack:
        yield {layout: stack.enter_context(start_server(
            "--model_name", MODEL, "--model_base_path", str(options.model_base_path.resolve()), *LAYOUTS[layout],
            "--device_floor_s", "0", backend=backend, cpu=options.server_cpu, timeout_s=300)) for layout in layouts}


def closed_loop_rps(server: ServerHandle, body: Path, options: WorkersOptions) -> float:
    command = h2load_command(server.grpc_target, body, duration_s=options.duration_s, warmup_s=options.warmup_s,
                             clients=CLIENTS, streams=STREAMS, cpu=options.client_cpu)
    result = run_h2load(command, timeout_s=options.duration_s + options.warmup_s + 60)
    if result.failed:
        raise H2loadError(f"{result.failed} of {result.requests} requests failed against {server.grpc_target}")
    return result.rps


def cpu_us_per_request(server: ServerHandle, body: Path, rate: float, options: WorkersOptions) -> float:
    """The server's CPU time (all its processes) per request answered, at `rate` req/s offered open loop."""
    command = h2load_command(server.grpc_target, body, duration_s=options.duration_s, warmup_s=0.0,
                             clients=CLIENTS, streams=STREAMS, rps=rate / CLIENTS, cpu=options.client_cpu)
    before = process_cpu_s(server.proc.pid)
    result = run_h2load(command, timeout_s=options.duration_s + 60)
    used = process_cpu_s(server.proc.pid) - before
    if result.failed or not result.succeeded:
        raise H2loadError(f"{result.failed} of {result.requests} requests failed against {server.grpc_target}")
    return 1e6 * used / result.succeeded


def throughput_part(options: WorkersOptions, backend: str, body: Path, echo: Print,
                    layouts: tuple[str, ...] = ("1 frontend", "2 frontends")) -> tuple[float, dict]:
    """Interleaved rounds of every layout; returns the median ratio of 2 frontends to 1 and the 1-frontend rate
    (for part 2). Any other layout is printed as a ratio to 2 frontends."""
    rates: dict[str, list[float]] = {layout: [] for layout in layouts}
    with servers(options, backend, layouts) as up:
        for round_ in range(options.rounds):
            for layout in layouts:
                rates[layout].append(closed_loop_rps(up[layout], body, options))
            echo(f"  {backend}: round {round_ + 1}: " + ", ".join(f"{layout} {rates[layout][-1]:,.0f} req/s"
                                                               for layout in layouts))
    ratios = [two / one for one, two in zip(rates["1 frontend"], rates["2 frontends"])]
    median = statistics.median(ratios)
    echo(f"  {backend}: 2 frontends / 1 frontend, median of {options.rounds} pairs: x{median:.2f} "
         f"(x{min(ratios):.2f}-x{max(ratios):.2f})")
    for layout in layouts[2:]:
        other = [b / a for a, b in zip(rates["2 frontends"], rates[layout])]
        echo(f"  {backend}: {layout} / 2 frontends, median: x{statistics.median(other):.2f} "
             f"(x{min(other):.2f}-x{max(other):.2f})")
    return median, {"one_frontend_rps": statistics.median(rates["1 frontend"]), "ratios": ratios}


def cpu_part(options: WorkersOptions, body: Path, rate: float, echo: Print) -> float:
    ratios = []
    with servers(options, "null", ("1 frontend", "2 frontends")) as up:
        for round_ in range(options.rounds):
            one = cpu_us_per_request(up["1 frontend"], body, rate, options)
            two = cpu_us_per_request(up["2 frontends"], body, rate, options)
            ratios.append(two / one)
            echo(f"  round {round_ + 1}: at {rate:,.0f} req/s, CPU per request: 1 frontend {one:.0f} us, "
                 f"2 frontends {two:.0f} us, x{two / one:.2f}")
    median = statistics.median(ratios)
    echo(f"  CPU per request, 2 frontends / 1 frontend, median of {options.rounds} pairs: x{median:.2f} "
         f"(x{min(ratios):.2f}-x{max(ratios):.2f})")
    return median


def echo_main(address: str) -> None:
    """A bare echo on the owner link's kind of socket: the host's own floor for a round trip between processes."""
    from serving.pool.messages import Receiver, listen

    server = listen(address)
    conn, _ = server.accept()
    receiver = Receiver(conn)
    while (message := receiver.recv()) is not None:
        conn.send(message)


@contextmanager
def _process(target, *args) -> Iterator[None]:
    process = multiprocessing.get_context("spawn").Process(target=target, args=args)
    process.start()
    try:
        yield
    finally:
        process.terminate()
        process.join(30)


def handoff_us(options: WorkersOptions) -> tuple[list[float], list[float]]:
    """Hand-offs (µs) of requests one at a time to a real owner process and back, interleaved in blocks of 100
    with bare echoes of a message of the same size over the same kind of socket; the first tenth of each
    dropped (warm-up)."""
    import numpy as np

    from serving.pool.control import Launch, OwnerAddress, OwnerStart
    from serving.pool.link import OwnerLink
    from serving.pool.messages import Receiver, Request, connect
    from serving.pool.roles import child_main
    from serving.pool.slab import Slab, TensorRef, segment_prefix, sweep
    from serving.server.handling.core import ServerConfig
    from serving.server.handling.metrics import HANDOFF
    from serving.server.handling.model_source import ModelEntry

    config = ServerConfig(models=(ModelEntry(MODEL, options.model_base_path.resolve()),), backend="null",
                          device_floor_s=0.0, frontends=2, log_level="WARNING")
    folder = Path(tempfile.mkdtemp(prefix="bench-owner-"))
    prefix = segment_prefix(os.getpid())
    owner = OwnerStart(config, OwnerAddress(str(folder / "owner.sock"), prefix), os.getpid())
    receive, send = multiprocessing.get_context("spawn").Pipe(duplex=False)
    inputs = {"images": np.zeros((1, 784), np.float32)}
    message = Request(1, 0, "", MODEL, 1, "serving_default", 1, ("scores",),
                      (TensorRef("images", "<f4", (1, 784), 0, 3136),)).to_bytes()
    handoffs: list[float] = []
    echoes: list[float] = []
    with _process(child_main, Launch.of(owner), send), \
            _process(echo_main, str(folder / "echo.sock")):
        receive.recv()
        link = OwnerLink(str(folder / "owner.sock"), Slab(prefix, 0), 0)
        echo = _connected(folder / "echo.sock", connect)
        echo_receiver = Receiver(echo)
        try:
            if not link.connect(timeout_s=30):
                raise RuntimeError("the owner did not accept a connection within 30 s")
            gc.freeze()  # as a frontend does after start-up (--gc_freeze)
            for _ in range(max(1, options.handoff_calls // 100)):
                for _ in range(100):
                    started = time.perf_counter()
                    _, phases = link.call(MODEL, 1, "serving_default", 1, ["scores"], inputs)
                    own = sum(p for i, p in enumerate(phases) if i != HANDOFF)
                    handoffs.append(1e6 * ((time.perf_counter() - started) - own))
                for _ in range(100):
                    started = time.perf_counter()
                    echo.send(message)
                    echo_receiver.recv()
                    echoes.append(1e6 * (time.perf_counter() - started))
        finally:
            link.close()
            link.slab.close()
            echo.close()
            sweep(prefix)
    return handoffs[len(handoffs) // 10:], echoes[len(echoes) // 10:]


def _connected(path: Path, connect):
    deadline = time.monotonic() + 30
    while True:
        try:
            return connect(str(path))
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def run(options: WorkersOptions, echo: Print = print) -> dict:
    """All three parts; returns their figures."""
    body = Path(tempfile.mkdtemp(prefix="bench-workers-")) / "request.grpc"
    body.write_bytes(grpc_frame(predict_payloads(MODEL, 1, options.samples)[0]))
    echo(f"1. closed loop, request batch 1, batching off; servers on cores {options.server_cpu}, h2load on core "
         f"{options.client_cpu} ({CLIENTS} connections x {STREAMS} streams)")
    null_ratio, null = throughput_part(options, "null", body, echo)
    model_ratio, _ = throughput_part(options, "savedmodel", body, echo, tuple(LAYOUTS))
    rate = LOAD_SHARE * null["one_frontend_rps"]
    echo(f"2. CPU time of every server process per request answered, open loop at {LOAD_SHARE:.0%} of one "
         "frontend's rate (null backend)")
    cpu_ratio = cpu_part(options, body, rate, echo)
    echo("3. hand-off frontend -> owner -> frontend, one request at a time (null backend)")
    handoffs, echoes = handoff_us(options)
    handoff = statistics.median(handoffs)
    echo(f"  median {handoff:.1f} us, p90 {statistics.quantiles(handoffs, n=10)[-1]:.1f} us over {len(handoffs)} calls "
         f"(target: median <= 50 us); in the same minutes a bare echo between two processes over the same socket "
         f"kind took {statistics.median(echoes):.1f} us (the host's floor for any hand-off)")
    return {"null_ratio": null_ratio, "model_ratio": model_ratio, "cpu_ratio": cpu_ratio, "handoff_median_us": handoff}


__all__ = ["WorkersOptions", "run"]
