"""The tool ceiling's rule: whether the load generator and the path to the model, with a model that costs nothing,
carried a rate. One rule, read by the run that measures the twin (`loadtest.search`) and by the report.

A configuration's twin is the embedded server with the null backend (it answers the signature's shapes, so requests
and responses keep their real sizes), shaped as the configuration (cores, frontends, device owner, batching config),
driven by the same Locust processes at the same request batch and objective. It is measured after the searches it
checks, at `CHECK_RATIO` × the answer (or the search's upper end where that is higher). A twin's cell passes where:

- its schedule sent the rate asked, within `SCHEDULE_SHORT_ALLOWED` beyond Poisson's counting noise (`schedule_short`:
  a Locust process, or its users, missing makes a schedule of half the rate, which its server then serves in full;
  sends are counted as their calls are recorded, and recorded cells here counted 1-6% short of the rate asked at
  rates their servers carried, so the allowance is the verdicts' own for a late load generator);
- it served at least `CARRIED_SHARE` of what was offered: of the sends its schedule made (`served_of_sent`),
  beyond counting noise (`loadtest.judge.overload.shortfall`); perf_analyzer and Locust warn when the client falls
  behind; the share is ours;
- its dispatch lag p99 stayed within the cell's limit (the load generator kept its schedule), or the host probe on
  the load generator's cores explains it while its CPU was calm (`loadtest.judge.noise.host_explains_lateness`: the
  host's stalls held it, which no faster tool would undo; the answer's verdict names the host);
- its p99 stayed within the objective;
- it failed no request (the null backend's answers are checked for shape, not classes), and abandoned no call (one
  still in flight past the request timeout when the cell ended: `CellResult.abandoned_calls`);
- no validity flag says otherwise (`flag_failure`): its load generator's CPU saturated, or its throughput strayed
  from its schedule.

`CHECK_RATIO` is ours: a tool that carries twice the answer did not bound it, with room for the run's drift (15–70%
within minutes on the build machine). Anchors: Triton measures its own ceiling with an identity model
(`qa/L0_perf_nomodel`); perf_analyzer warns when over 1% of sends are more than 1 ms late.

Pure functions over `CellResult`s. Not for: running the twin (`loadtest.search`) or printing it (`loadtest.report`).
"""

from __future__ import annotations

from enum import StrEnum

from loadtest.evidence.records import CellResult, ValidityFlag
from loadtest.evidence.vocab import CellStatus, Flag, Role
from loadtest.judge.noise import host_explains_lateness
from loadtest.judge.overload import shortfall

CHECK_RATIO = 2.0  # the twin is checked at this many times the answer
CARRIED_SHARE = 0.99  # a twin carried its rate where its cell served at least this share of what was offered (not
# `report.answers.bound.SERVED_SHARE`, the share of the device alone under which the serving path bounded an answer)
SCHEDULE_SHORT_ALLOWED = 0.05  # its schedule may send this share under the rate asked (`verdicts.SHORT_ALLOWED`)
LOADGEN_BUSY_PERCENT = 90.0  # of one core, per Locust process: Locust warns above it
SERVER_BUSY_PERCENT = 90.0  # of the cores a twin's server may use: its own CPU stood, not the load generator


class Stood(StrEnum):
    """What stopped a twin's failing check (`who_stood`)."""

    LOAD_GENERATOR = "the load generator"
    TWIN_SERVER = "the twin's own server"  # the Python null server: a TF Serving container's path does not cross it
    UNKNOWN = ""


def is_twin(cell: CellResult) -> bool:
    """A tool-ceiling twin's cell: its check (role `tool_ceiling`) or a cell of its own search (the search's roles,
    `checks` naming the search it checks). It measures the tool, not a configuration, so no answer reads it."""
    return cell.search is not None and (cell.search.role == Role.TOOL_CEILING or bool(cell.search.checks))


def check_rate(answer_rps: float, upper_end_rps: float | None = None) -> float:
    """The rate a twin is checked at: `CHECK_RATIO` × the answer, or the search's upper end where that is higher."""
    return max(CHECK_RATIO * answer_rps, upper_end_rps or 0.0)


def twin_failure(cell: CellResult, p99_objective_ms: float) -> str:
    """Why a twin's cell did not carry its rate, in words; "" where it passed."""
    offered = cell.search.offered_rps if cell.search else None
    if cell.status != CellStatus.OK:
        return f"the cell did not run: {cell.failure_reason or cell.status}"
    if not offered:
        return "no rate was offered"
    if cell.requests and cell.ok_requests < cell.requests:
        return f"{cell.requests - cell.ok_requests} of {cell.requests} requests failed"
    short = schedule_short(cell)
    if short:
        return short
    if cell.abandoned_calls:
        return f"{cell.abandoned_calls} calls never completed (abandoned past the request timeout)"
    served, sent, span_s = served_of_sent(cell, offered)
    if shortfall(sent, served, 1 - CARRIED_SHARE) is not None:
        return f"served {served / span_s:.1f} of {sent / span_s:.1f} req/s offered (under {CARRIED_SHARE:.0%})"
    flagged = flag_failure(cell)
    if flagged:
        return flagged
    limit_ms = cell.load.dispatch_lag_limit_ms
    lag_ms = None if cell.dispatch_lag_p99_us is None else cell.dispatch_lag_p99_us / 1000
    if limit_ms is not None and lag_ms is not None and lag_ms > limit_ms and not host_explains_lateness(cell):
        return (f"dispatch lag p99 {lag_ms:.2f} ms over its {limit_ms:g} ms limit, which the host probe on its cores "
                "does not explain")
    if cell.latency_p99_ms is None or cell.latency_p99_ms > p99_objective_ms:
        return f"p99 {cell.latency_p99_ms} ms over the objective's {p99_objective_ms:g} ms"
    return ""


def flag_failure(cell: CellResult) -> str:
    """The cell's validity flags that say it did not carry its rate: its load generator's CPU saturated, or its
    throughput strayed from its schedule (`loadtest.evidence.stats.validity_flags`); late sends are the dispatch
    lag's rule (the host's stalls may explain them); "" where none."""
    return next((f"flagged {f.flag.value}: {f.reason}" for f in cell.flags
                 if f.flag == Flag.UNSTABLE or _cpu_saturated(f)), "")


def _cpu_saturated(flag: ValidityFlag) -> bool:
    """A `saturated` flag for the load generator's CPU ("... used 97% of a core"), not for its late sends."""
    return flag.flag == Flag.SATURATED and "load generator" in flag.reason and "used" in flag.reason


def served_of_sent(cell: CellResult, offered_rps: float) -> tuple[float, float, float]:
    """(requests served, requests offered, over seconds): against the sends its schedule put in its windows where
    it counted them (Poisson arrivals in a 2 s window stray ~4% from the nominal rate at 350 req/s: a twin served
    all of a schedule of 330 req/s, read against 350, fell 6% short), else against the nominal rate."""
    if not cell.window_scheduled_rps:
        return cell.throughput_rps * cell.load.duration_s, offered_rps * cell.load.duration_s, cell.load.duration_s
    window_s = cell.load.window_s
    windows = len(cell.window_scheduled_rps)
    return (sum(cell.window_throughput_rps[:windows]) * window_s, sum(cell.window_scheduled_rps) * window_s,
            windows * window_s)


def schedule_short(cell: CellResult) -> str:
    """`its schedule sent 1,000.0 of the 2,000.0 req/s asked`, where the sends it scheduled fell short of the rate
    asked by more than `SCHEDULE_SHORT_ALLOWED` and Poisson's counting noise; "" where they did not, or were not
    counted (records from before `window_scheduled_rps`)."""
    asked = cell.search.offered_rps if cell.search else None
    if not asked or not cell.window_scheduled_rps:
        return ""
    _, sent, span_s = served_of_sent(cell, asked)
    if shortfall(asked * span_s, sent, SCHEDULE_SHORT_ALLOWED) is None:
        return ""
    return (f"its schedule sent {sent / span_s:,.1f} of the {asked:,.1f} req/s asked "
            f"(under {1 - SCHEDULE_SHORT_ALLOWED:.0%})")


def twin_passed(cell: CellResult, p99_objective_ms: float) -> bool:
    """The twin carried the rate offered in this cell (`twin_failure` says why not)."""
    return not twin_failure(cell, p99_objective_ms)


def loadgen_busy(cell: CellResult) -> str:
    """`a Locust process at 96% of a core` where the load generator's CPU saturated; "" where it did not."""
    busiest = max(cell.loadgen_process_cpu_percent, default=0.0)
    if busiest >= LOADGEN_BUSY_PERCENT:
        return f"a Locust process at {busiest:.0f}% of a core"
    return next((f.reason for f in cell.flags if _cpu_saturated(f)), "")


def lag_over(cell: CellResult) -> str:
    """`dispatch lag p99 2.40 ms over its 2 ms limit`, or "" where within it (or not measured)."""
    limit_ms = cell.load.dispatch_lag_limit_ms
    lag_us = cell.dispatch_lag_p99_us
    if not limit_ms or lag_us is None or lag_us <= limit_ms * 1000:
        return ""
    return f"dispatch lag p99 {lag_us / 1000:.2f} ms over its {limit_ms:g} ms limit"


def who_stood(cell: CellResult) -> tuple[Stood, str]:
    """What stopped a twin's failing cell, and how: the load generator (its CPU, its dispatch lag over its limit
    that the host probe does not explain, or a schedule short of the rate asked) first, else the twin's own server
    where its CPU reached `SERVER_BUSY_PERCENT` of its cores (the Python server saturated before the load generator
    did); else unknown."""
    busy = loadgen_busy(cell)
    lag = lag_over(cell)
    if busy or (lag and not host_explains_lateness(cell)):
        return Stood.LOAD_GENERATOR, busy or lag
    short = schedule_short(cell)
    if short:
        return Stood.LOAD_GENERATOR, short
    cpu = cell.server_cpu_percent
    if cpu is not None and cpu >= SERVER_BUSY_PERCENT:
        cores = cell.server_cpu_cores
        of = "its cores" if not cores else f"{cores:g} core{'' if cores == 1 else 's'}"
        return Stood.TWIN_SERVER, f"its CPU at {cpu:.0f}% of {of}"
    return Stood.UNKNOWN, ""
