"""Run the CPU-vs-GPU comparison from a device bundle, offline, in a budget: `python3 run.py --out DIR`.

Its defaults fit one 10-minute call on a lent machine: GPU and CPU, request batches 1 and 32, batching
`off` and the device's profile, all four up at once and searched paired (8 searches of at most 33.5 s
each), no py-spy profile (`--profile-s 20` adds one); `--target-rps` adds the sizing line (replicas and
cost, from `--prices`, by default `loadtest/prices.example.toml`).

Copied into the bundle as `run.py` (`loadtest.bundle.build`); runs on the bundle's machine with its
own Python and the standard library only until it has installed the bundle (its helpers, also
standard library only, are the project's `loadtest.bundle` modules):

1. installs `wheels/` into `site/` with no index (`pip install --no-index --no-deps --target`);
2. finds which asked devices can serve (`gpu` where PyTorch sees one, else why not), records versions, the
   bundle's source (`project/SOURCE.json`) and PyTorch's own GPU round trip (`loadtest.bundle.machine`);
3. a smoke test of the first device's profile (on a GPU: its owner and runtime), at most 60 s
   (`loadtest.bundle.smoke`): the run stops there, saying why, when it fails; what it measured sizes
   Locust's share of the cores and, when the server took longer to start than `--start-s`, the plan's start;
4. plans the capacity searches to what is left of `--budget-min` (`loadtest.bundle.budget`) and says
   what it left out and why;
5. one paired `mnist-bench capacity` run: every configuration kept up at once (the embedded server on
   `SERVER_FLAGS`, on the first cores, Locust on the rest), their cells interleaved at each request batch
   with a reference cell showing the machine's drift (`--sequential`: one run per configuration, one after
   the other); killed at its planned time if it overruns; every result line copied into
   `--out/results.jsonl` as it appears;
6. writes the report (its figures go into `device-run.json`; the decision it opens with, and each answer
   beside the device alone, are said on the console), then profiles the best configuration found with
   py-spy (`--profile-s`) under load at ~90% of its capacity (`loadtest.bundle.profiling`).

`--shapes auto|1,2,4` makes the call a replica-shape sweep of its own instead (`loadtest.bundle.shape_sweep_call`): the
CPU configurations searched by `capacity --shapes`, on the shapes that fit the budget (the plan names the others).

`--out` gets at most 8 files and no folder (`loadtest.bundle.run_outputs.OUT_FILES`); `device-run.json`
is rewritten after every step, so a run killed at the machine's limit still explains itself. The
subprocesses' own files go to `--work` (default: `work/<UTC time>/` in the bundle).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

BUNDLE = Path(__file__).resolve().parent
PROJECT = BUNDLE / "project"
SITE = BUNDLE / "site"
if (PROJECT / "loadtest" / "bundle").is_dir():  # as the bundle's run.py: its helpers are the project's
    sys.path.insert(0, str(PROJECT))

from loadtest.bundle import budget, profiling, run_outputs, shape_sweep_call, smoke  # noqa: E402
from loadtest.bundle.machine import gpu_problem, round_trip_env, source, versions  # noqa: E402
from loadtest.bundle.processes import Echoed, stop  # noqa: E402
from loadtest.bundle.run_args import (  # noqa: E402
    EXAMPLE_PRICES,
    REPORT_S,
    SERVER_FLAGS,
    WARMUP_S,
    after_searches_s,
    core_split,
    costs,
    parse,
    reference_s,
)

ANSWER = re.compile(r"^capacity: (?P<server>\S+), request batch (?P<batch>\d+): (?P<answer>.*)$")


class Stopped(Exception):
    """The run was sent SIGTERM (or SIGINT): stop the step under way, keep what was written."""


def install() -> bool:
    """The bundle's wheels into `site/`, once, from the bundle alone; False when they already were."""
    marker = SITE / ".installed"
    if marker.is_file():
        return False
    wheels = sorted(str(p) for p in (BUNDLE / "wheels").glob("*.whl"))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target", str(SITE),
               *wheels]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"installing the bundle's wheels failed: {done.stderr.strip()[-800:]}")
    marker.write_text(f"{len(wheels)} wheels\n")
    return True


def environment() -> dict[str, str]:
    """The project, its protos and the installed wheels ahead of the image's packages; Keras on JAX."""
    path = [str(SITE), str(PROJECT), str(BUNDLE / "protos"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p), "KERAS_BACKEND": "jax",
            "PYTHONUNBUFFERED": "1", "PATH": os.pathsep.join((str(SITE / "bin"), os.environ.get("PATH", "")))}


def sizing_flags(args: argparse.Namespace, batches: list[int] | None = None) -> list[str]:
    """`--goal RATE:P99:BATCH` a batch (online at 1, batch targets above), `--target-rps N --prices FILE
    --spare-instances K`: the card's sizing, as `capacity` and `report` take it."""
    prices = args.prices.resolve() if args.prices is not None else PROJECT / EXAMPLE_PRICES
    goals = [f"--goal={args.target_rps:g}:{args.p99_objective_ms if b == 1 else args.batch_p99_objective_ms:g}:{b}"
             for b in (batches if batches is not None else [int(b) for b in args.batches.split(",")])]
    return ["--target-rps", f"{args.target_rps:g}", "--prices", str(prices),
            "--spare-instances", str(args.spare_instances), *goals]


def write_plan(path: Path, args: argparse.Namespace, loadgen_cores: int, models: Path = PROJECT / "models") -> Path:
    """The plan every cell runs with: servers on the first cores, Locust on the last `loadgen_cores`."""
    server_cpus, loadgen_cpus, processes = core_split(loadgen_cores)
    lines = ['name = "device-bundle"', "[run]", f"warmup_s = {WARMUP_S}", f"measure_s = {args.measure_s}",
             "window_s = 0.5", f"processes = {processes}", 'protocol = "grpc"', 'arrival = "poisson"',
             'check = "classes"', "request_timeout_s = 10.0", "late_threshold_ms = 2.0",
             f'samples = "{models / "mnist-samples.npz"}"']
    if loadgen_cpus:
        lines.append(f'loadgen_cpus = "{loadgen_cpus}"')
    lines += ["[grid]", "batch_sizes = [1]", "concurrency = [4]", "rates_rps = []", "[servers.launch]",
              'kind = "embedded"']
    if server_cpus:
        lines.append(f'server_cpus = "{server_cpus}"')
    path.write_text("\n".join(lines) + "\n")
    return path


class SmokeFailed(Exception):
    """The smoke test failed: the run stops before any search."""


class DeviceRun:
    """One run: its arguments, deadline, console, record and results copier."""

    def __init__(self, args: argparse.Namespace):
        self.args, self.started = args, time.monotonic()
        self.deadline = self.started + args.budget_min * 60
        args.out.mkdir(parents=True, exist_ok=True)
        self.work = args.work or BUNDLE / "work" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.work.mkdir(parents=True, exist_ok=True)
        self.console = run_outputs.Console(args.out / "run.log")
        self.record = run_outputs.RunRecord(args.out / "device-run.json", status="running",
                                        utc_start=datetime.now(UTC).isoformat(timespec="seconds"),
                                        argv=sys.argv[1:], budget_s=args.budget_min * 60, source=source(PROJECT),
                                        seconds={}, exit_codes={}, skipped={}, left_out=[], capacities=[])
        self.copier = run_outputs.ResultsCopier(self.work / "results", args.out / "results.jsonl")
        self.env = environment()
        self.child: Echoed | None = None
        self.child_name = ""
        self.last_lines: list[str] = []
        self.last_seen_at: list[float] = []
        self.record.write()

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def say(self, line: str) -> None:
        self.console.say(line)

    def timed(self, name: str, started: float) -> None:
        self.record["seconds"][name] = round(time.monotonic() - started, 1)
        self.record.write()

    def command(self, name: str, command: list[str], timeout_s: float, echoed: bool = True) -> int:
        """Run a `python -m loadtest ...` command, echoed (else its output only said when it fails); 124 when
        stopped at `timeout_s`."""
        self.say(f"run.py: {name}: {' '.join(command[2:])} (at most {timeout_s:.0f} s)")
        started = time.monotonic()
        say = self.say if echoed else (lambda line: None)
        self.child, self.child_name = Echoed(command, say, cwd=PROJECT, env=self.env), name
        code = self.child.wait(timeout_s)
        self.last_lines, self.last_seen_at = self.child.lines, self.child.seen_at
        answers = {(m["server"], m["batch"]): m.groupdict() for m in map(ANSWER.match, self.child.lines) if m}
        self.record["capacities"] += list(answers.values())  # a run with several searches repeats them at its end
        self.child = None
        if code is None:
            self.say(f"run.py: {name} stopped at its time limit ({timeout_s:.0f} s)")
        self.record["exit_codes"][name] = 124 if code is None else code
        if not echoed and code != 0:
            for line in self.last_lines[-20:]:
                self.say(line)
        self.timed(name, started)
        return self.record["exit_codes"][name]

    def prepare(self) -> list[str]:
        """Install, probe; the devices that can serve."""
        started = time.monotonic()
        self.say(f"run.py: installing the bundle's wheels ({'done' if not install() else 'installed now'})")
        self.timed("install", started)
        started = time.monotonic()
        self.record["versions"] = versions(self.env)
        devices = []
        for device in self.args.devices.split(","):
            problem = gpu_problem(self.env) if device == "gpu" else ""
            if problem:
                self.record["skipped"][device] = problem
                self.say(f"run.py: {device} skipped: {problem}")
            else:
                devices.append(device)
        self.record["torch_round_trip"] = profiling.torch_round_trip(self.env, min(120.0, self.left_s() / 4))
        self.say(f"run.py: PyTorch's GPU round trip: {json.dumps(self.record['torch_round_trip'])}")
        self.env.update(round_trip_env(self.record["torch_round_trip"]))
        self.timed("probes", started)
        return devices

    def smoke(self, devices: list[str]) -> int:
        """The smoke test on the first device's profile (`loadtest.bundle.smoke`); SmokeFailed when it fails. The
        cores Locust gets for the searches: `--loadgen-cores`, else sized by what the smoke measured."""
        quarter = core_split(self.args.loadgen_cores)[2]
        if not devices:
            return quarter
        device, started = devices[0], time.monotonic()
        plan = self.work / "smoke-plan.toml"
        plan.write_text(smoke.smoke_plan(write_plan(self.work / "base-plan.toml", self.args, quarter).read_text()))
        command = [sys.executable, "-m", "loadtest", "loadtest", "--plan", str(plan), f"--serve={device}/{device}",
                   SERVER_FLAGS, "--models-dir", str(PROJECT / "models"), "--results-dir", str(self.work / "smoke"),
                   "--no-report"]
        code = self.command("smoke", command, min(self.args.smoke_s, self.left_s()))
        found = smoke.judge(smoke.read_cells(self.work / "smoke"), f"{device}-{device}", device,
                            None if code == 124 else code, self.last_lines,
                            smoke.start_seconds(self.last_lines, self.last_seen_at))
        self.args.start_s = max(self.args.start_s, found.start_s or 0.0)  # planned: the smoke's start if longer
        self.record["smoke"] = found.to_dict()
        self.timed("smoke", started)
        if not found.ok:
            raise SmokeFailed(f"smoke test of {found.server} failed, no search run: {found.why}")
        self.say(f"run.py: smoke test passed: {found.summary()}")
        cores = len(os.sched_getaffinity(0))
        count, why = smoke.loadgen_cores(found, cores, self.args.loadgen_cores, quarter)
        self.record["cores"] = {"loadgen": count, "of": cores, "why": why}
        self.say(f"run.py: Locust gets {count} of {cores} cores ({why})")
        return count

    def plan(self, devices: list[str]) -> budget.Plan:
        batches = [int(b) for b in self.args.batches.split(",") if b]
        profiles = {d: ["off", d] for d in devices}
        if self.args.sequential:
            wanted = budget.candidates(devices, profiles, batches)
            plan = budget.plan_to_budget(wanted, costs(self.args, len(devices)), self.left_s())
        else:
            configurations = [(d, p) for d in devices for p in profiles[d]]
            plan = budget.plan_paired(configurations, batches, costs(self.args, len(devices)), self.left_s(),
                                      reference_s(self.args))
        for line in plan.describe():
            self.say(f"run.py: plan: {line}")
        self.record["plan"] = plan.to_dict()
        self.record["left_out"] = plan.to_dict()["left_out"]
        self.record.write()
        return plan

    def searches(self, plan: budget.Plan, plan_file: Path) -> None:
        if plan.paired:
            self.paired_searches(plan, plan_file)
            return
        for device, profile, batches in plan.configurations():
            reserve = plan.costs.reserve_s + plan.costs.margin * self.left_s()
            fit = budget.batches_that_fit(len(batches), plan.costs, self.left_s() - reserve)
            for batch in batches[fit:]:
                self.record["left_out"].append({"device": device, "profile": profile, "batch": batch,
                                                "reason": "no time left at run time"})
            if not fit:
                continue
            command = self.capacity_command(plan_file, f"{device}-{profile}", [f"{device}/{profile}"], batches[:fit])
            self.command(f"{device}-{profile}", command,
                         min(plan.costs.per_start_s + fit * plan.costs.per_search_s, self.left_s() - reserve))
            if self.args.tune_minutes > 0 and profile != "off":
                self.tune(device, plan_file, batches[0])

    def paired_searches(self, plan: budget.Plan, plan_file: Path) -> None:
        """One paired `mnist-bench capacity` over every configuration and batch kept (all up at once, their cells
        interleaved, the reference cell around them), stopped at its planned time; then the tuning, per device."""
        serves = [f"{device}/{profile}" for device, profile, _ in plan.configurations()]
        reserve = plan.costs.reserve_s + plan.costs.margin * self.left_s()
        command = self.capacity_command(plan_file, "paired", serves, plan.batches())
        self.command("paired", command, min(plan.planned_s, self.left_s() - reserve))
        tuned = dict.fromkeys(d for d, profile, _ in plan.configurations() if profile != "off")
        for device in tuned if self.args.tune_minutes > 0 else ():
            self.tune(device, plan_file, plan.batches()[0])

    def capacity_command(self, plan_file: Path, name: str, serves: list[str], batches: list[int]) -> list[str]:
        """`mnist-bench capacity` for `serves` (device/profile) at `batches`, with `SERVER_FLAGS`."""
        a = self.args
        return [sys.executable, "-m", "loadtest", "capacity", "--plan", str(plan_file),
                "--p99-ms", str(a.p99_objective_ms), *(f"--serve={s}" for s in serves), SERVER_FLAGS, "--models-dir",
                str(PROJECT / "models"), "--results-dir", str(self.work / "results" / name), "--max-steps",
                str(a.max_steps), "--max-minutes", str(a.max_minutes), "--max-rate-s", str(a.max_rate_s),
                "--confidence", str(a.confidence), "--unmet-ok", "--no-report", *(f"--batch={b}" for b in batches),
                *(() if a.tool_ceiling else ("--no-tool-ceiling",)),
                *sizing_flags(a, batches)]

    def tune(self, device: str, plan_file: Path, batch: int) -> None:
        """`mnist-bench tune` on the device: the BatchingParameters with the highest capacity, from its profile."""
        a = self.args
        command = [sys.executable, "-m", "loadtest", "tune", "--plan", str(plan_file),
                   "--p99-ms", str(a.p99_objective_ms), "--device", device, "--batch", str(batch),
                   "--budget-min", str(a.tune_minutes), SERVER_FLAGS, "--models-dir", str(PROJECT / "models"),
                   "--results-dir", str(self.work / "results" / f"{device}-tune"), "--max-steps", str(a.max_steps)]
        self.command(f"{device}-tune", command, min(a.tune_minutes * 60 + a.start_s + 60, self.left_s()))

    def report(self) -> None:
        results = sorted(str(p) for p in (self.work / "results").rglob("results.jsonl"))
        if not results:
            self.say("run.py: no results to report")
            self.record["exit_codes"]["report"] = 1
            return
        command = [sys.executable, "-m", "loadtest", "report", *results,
                   "--out", str(self.work / "report"), *sizing_flags(self.args)]
        profile_s = after_searches_s(self.args, 0) - REPORT_S
        # not echoed: its first sentences are the capacity run's end, already said
        if self.command("report", command, max(self.left_s() - profile_s, REPORT_S), echoed=False) == 0:
            shutil.copy2(self.work / "report" / "report.md", self.args.out / "report.md")

    def profile(self, plan_file: Path) -> None:
        a = self.args
        needed_s = a.start_s + a.profile_s + 20.0
        if a.profile_s <= 0 or self.left_s() < needed_s:
            why = "--profile-s 0" if a.profile_s <= 0 else f"{self.left_s():.0f} s left, it needs {needed_s:.0f} s"
            self.record["profile"] = {"ok": False, "why": f"not profiled: {why}"}
            return
        device, profile, batch, rate = profiling.profile_target(self.record["capacities"],
                                                                self.record.get("plan", {}).get("kept"))
        plan = self.work / "profile-plan.toml"
        plan.write_text(profiling.profile_plan(plan_file.read_text(), batch, rate, a.profile_s + 8.0))
        command = [sys.executable, "-m", "loadtest", "loadtest", "--plan", str(plan), "--serve", f"{device}/{profile}",
                   SERVER_FLAGS, "--models-dir", str(PROJECT / "models"), "--results-dir",
                   str(self.work / "profile"), "--no-report"]
        binary = shutil.which("py-spy", path=self.env["PATH"])
        self.say(f"run.py: profile: {device}-{profile} at request batch {batch}, {rate:.1f} req/s, py-spy "
                 f"{binary or 'missing'}, {a.profile_s:g} s")
        started = time.monotonic()
        self.child, self.child_name = Echoed(command, self.say, cwd=PROJECT, env=self.env), "profile"
        result = profiling.profile(self.child, binary, a.profile_s, a.out, a.start_s * 3, self.left_s())
        self.child = None
        self.record["profile"] = {"server": f"{device}-{profile}", "batch": batch, "rate_rps": round(rate, 1),
                                  **result}
        self.say(f"run.py: profile: {'written' if result.get('ok') else result.get('why')}")
        self.timed("profile", started)

    def run(self) -> int:
        devices = self.prepare()
        loadgen_cores = self.smoke(devices)
        if self.args.shapes:  # a call of its own: the CPU configurations' replica-shape sweep
            plan_file = write_plan(self.args.out / "device-plan.toml", self.args, loadgen_cores)
            return shape_sweep_call.sweep(self, plan_file)
        plan = self.plan(devices)
        plan_file = write_plan(self.args.out / "device-plan.toml", self.args, loadgen_cores)
        self.copier.start()
        try:
            self.searches(plan, plan_file)
        finally:
            self.copier.stop()
        self.record["results_lines"] = self.copier.lines
        self.report()
        self.record.update(run_outputs.figures_record(self.work / "report" / "figures.json"))
        # one capacity run (paired) said the decision at its end; runs one after the other each said their own
        decision = () if plan.paired else self.record.get("decision", ())
        for line in [*decision, *run_outputs.answer_lines(self.record.get("by_configuration", {}))]:
            self.say(f"run.py: {line}")
        self.profile(plan_file)
        codes = self.record["exit_codes"]
        return 0 if codes and any(k not in ("report",) for k in codes) and all(c == 0 for c in codes.values()) else 1

    def finish(self, code: int, status: str) -> int:
        self.record.update_and_write(status=status, exit_code=code, seconds_total=round(
            time.monotonic() - self.started, 1), within_budget=time.monotonic() <= self.deadline)
        files = ", ".join(sorted(p.name for p in self.args.out.iterdir()))
        self.say(f"run.py: {status}, exit {code}, {self.record['seconds_total']} s of {self.record['budget_s']:.0f} s; "
                 f"{self.copier.lines} result lines; files: {files}")
        self.console.close()
        return code


def stopped(signum: int, frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    run = DeviceRun(args)
    signal.signal(signal.SIGTERM, stopped)
    try:
        return run.finish(run.run(), "finished")
    except (Stopped, KeyboardInterrupt) as exc:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if run.child is not None:
            stop(run.child.proc, interrupt=isinstance(exc, Stopped))
            run.record["exit_codes"][run.child_name] = f"stopped by {exc or 'SIGINT'}"
        run.copier.stop()
        return run.finish(143, f"stopped by {exc or 'SIGINT'}: what was measured is kept")
    except (RuntimeError, SmokeFailed) as exc:
        run.say(f"run.py: {exc}")
        return run.finish(1, f"failed: {exc}")


if __name__ == "__main__":
    sys.exit(main())
