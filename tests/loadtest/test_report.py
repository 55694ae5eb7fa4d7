"""The report from hand-made fixture results: tables, never overwriting, comparison deltas, and
the HTML opened in headless Chromium (Debian's `chromium`, installed here when absent) with no
console error, no request leaving the page, and plots visible on a screenshot."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import websocket
from matplotlib import image as mpimg

from loadtest.analysis import report

FIXTURES = Path(__file__).parent / "fixtures"
RUNS = ("cpu-run", "gpu-run", "cpu-run-b")


@pytest.fixture
def runs(tmp_path) -> dict[str, Path]:
    """Copies of the fixture runs, so reports written beside them land in tmp_path."""
    out = {}
    for name in RUNS:
        shutil.copytree(FIXTURES / name, tmp_path / name)
        out[name] = tmp_path / name / "results.jsonl"
    return out


@pytest.fixture
def built(runs) -> tuple[Path, Path]:
    return report.run([str(runs["cpu-run"]), str(runs["gpu-run"]), "--compare", str(runs["cpu-run-b"])])


def table(md: str, title: str) -> list[list[str]]:
    """Rows (cells stripped) of the Markdown table under `## title`."""
    section = md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")][2:]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines]


def test_report_written_beside_first_results_and_never_overwritten(runs):
    first = report.run([str(runs["cpu-run"])])
    assert first == (runs["cpu-run"].parent / "report.html", runs["cpu-run"].parent / "report.md")
    before = first[0].read_bytes()
    second = report.run([str(runs["cpu-run"])])
    assert second == (runs["cpu-run"].parent / "report-2.html", runs["cpu-run"].parent / "report-2.md")
    assert first[0].read_bytes() == before
    elsewhere = report.run([str(runs["cpu-run"]), "--out", str(runs["cpu-run"].parent / "out")])
    assert elsewhere[0] == runs["cpu-run"].parent / "out" / "report.html" and elsewhere[1].is_file()


def test_cpu_vs_gpu_table_at_equal_request_batch_size(built):
    md = built[1].read_text()
    rows = {(r[0], r[1], r[2]): r for r in table(md, "CPU vs GPU at equal request batch size")}
    # Peak VALID throughput: CPU off/1 peaks at c=16 (1350; c=32 is invalid), GPU at c=16 (4600).
    assert rows[("1", "off", "closed")][3] == "1,350.0" and rows[("1", "off", "closed")][6] == "4,600.0"
    assert rows[("1", "off", "closed")][9] == "3.41x"  # 4600 / 1350
    assert rows[("32", "off", "closed")][9] == "15.56x"  # 2800*32 / (180*32)
    assert rows[("32", "latency", "closed")][3] == "4,160.0"  # c=8: 130*32; c=16/32 invalid
    assert rows[("32", "latency", "closed")][9] == "22.31x"  # 2900*32 / 4160
    assert rows[("1", "off", "open")][8] == "not measured" and rows[("1", "off", "open")][9] == "—"


def test_invalid_and_failed_cells_listed_with_reasons(built):
    md = built[1].read_text()
    rows = table(md, "Invalid and failed cells")
    assert len(rows) == 6  # 5 in the CPU run, 1 in the GPU run; none dropped
    reasons = {r[-1] for r in rows}
    assert "failed: server stopped answering: UNAVAILABLE for 12.0 s" in reasons
    assert "unstable: window throughput CV 0.31 > 0.10" in reasons
    assert all(r[3] == "NO" for r in rows)
    every = built[0].read_text().split("<h2>Every cell</h2>", 1)[1]
    assert every.count('<tr class="failed">') == 1 and every.count('<tr class="invalid">') == 5


def test_every_table_says_what_was_measured(built):
    md = built[1].read_text()
    for title in ("Peak valid throughput per series", "CPU vs GPU at equal request batch size",
                  "Invalid and failed cells"):
        caption = md.split(f"## {title}\n\n", 1)[1].split("\n", 1)[0]
        assert "embedded server on cpu (Intel(R) Xeon(R) Platinum 8375C" in caption
        assert "TF Serving container on gpu (NVIDIA H100 80GB HBM3; image=tensorflow/serving" in caption
        assert "latency (batch_timeout_micros=2000" in caption


def test_comparison_deltas(built):
    rows = table(built[1].read_text(), "Comparison with another run")
    by = {(r[0], r[1], r[2], r[3]): r for r in rows}
    # A = 1300 images/s, p99 30 ms; B (10% faster run) = 1430 images/s, p99 30/1.1 = 27.273 ms.
    row = by[("cpu embedded server", "off", "1", "concurrency 8")]
    assert row[4:10] == ["1,430.0", "1,300.0", "-9.1%", "27.27", "30.00", "+10.0%"]
    gpu = by[("gpu TF Serving container", "off", "1", "concurrency 8")]
    assert gpu[4] == "—" and gpu[6] == "—" and gpu[10] == "absent"


def test_cli_errors_are_one_line(runs, tmp_path, capsys):
    assert report.main([str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "results file not found" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert report.main([str(empty)]) == 2
    assert "no cells" in capsys.readouterr().err


def test_html_is_self_contained(built):
    page = built[0].read_text()
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert page.count('src="data:image/png;base64,') == 3  # throughput, latency, batch sizes


# ----------------------------------------------------------------------------- Chromium


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium, installed with apt-get when absent; a failed install fails the test."""
    path = shutil.which("chromium")
    if path is None:
        install = subprocess.run("apt-get update && apt-get install -y chromium", shell=True,
                                 capture_output=True, text=True, timeout=900)
        path = shutil.which("chromium")
        if path is None:
            pytest.fail(f"could not install chromium (apt-get exit {install.returncode}): "
                        f"{install.stderr.strip().splitlines()[-1:] or install.stdout[-300:]}")
    return path


class DevTools:
    """A minimal Chrome DevTools Protocol client over one page's websocket."""

    def __init__(self, ws_url: str):
        self.ws = websocket.create_connection(ws_url, timeout=30)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]
            self.events.append(msg)

    def wait_for(self, method: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(method)
            self.events.append(json.loads(self.ws.recv()))


@pytest.fixture(scope="module")
def browser(chromium, tmp_path_factory):
    """One headless Chromium for the module, driven over the DevTools protocol."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--remote-debugging-port=0", "--window-size=1280,1600",
         "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            assert proc.poll() is None, f"chromium exited with {proc.returncode}"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def is_error(event: dict) -> bool:
    """A console error or assert, an uncaught exception, or a browser log error (failed load)."""
    method, params = event.get("method"), event.get("params", {})
    return ((method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"))
            or method == "Runtime.exceptionThrown"
            or (method == "Log.entryAdded" and params["entry"]["level"] == "error"))


def render(port: int, page: Path, shot: Path) -> dict:
    """Open `page`, collect console errors and outgoing requests, screenshot the whole page."""
    new_tab = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(new_tab, timeout=10) as r:
        target = json.loads(r.read())
    tools = DevTools(target["webSocketDebuggerUrl"])
    try:
        for domain in ("Runtime", "Log", "Page", "Network"):
            tools.call(f"{domain}.enable")
        tools.call("Page.navigate", url=page.resolve().as_uri())
        tools.wait_for("Page.loadEventFired")
        images = tools.call("Runtime.evaluate", returnByValue=True, expression=(
            "Array.from(document.images).map(i => {const r = i.getBoundingClientRect();"
            "return [i.complete, i.naturalWidth, r.x + scrollX, r.y + scrollY, r.width, r.height]})"
        ))["result"]["value"]
        size = tools.call("Page.getLayoutMetrics")["cssContentSize"]
        scale = 0.5
        data = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                                "scale": scale})["data"]
        shot.write_bytes(base64.b64decode(data))
        errors = [e for e in tools.events if is_error(e)]
        requests = [e["params"]["request"]["url"] for e in tools.events
                    if e.get("method") == "Network.requestWillBeSent"]
        return {"errors": errors, "requests": requests, "images": images, "scale": scale}
    finally:
        tools.ws.close()


def coloured_share(pixels: np.ndarray) -> float:
    """Share of pixels with a clearly saturated colour (plot lines and markers, not text)."""
    rgb = pixels[..., :3].astype(float)
    return float(((rgb.max(axis=-1) - rgb.min(axis=-1)) > 0.25).mean())


def test_html_renders_in_chromium_with_plots_and_no_console_errors(built, browser, tmp_path):
    shot = tmp_path / "report.png"
    seen = render(browser, built[0], shot)
    assert seen["errors"] == []
    assert all(u.startswith(("file:", "data:")) for u in seen["requests"]), seen["requests"]
    assert len(seen["images"]) == 3 and all(ok and w > 0 for ok, w, *_ in seen["images"])
    pixels = mpimg.imread(shot)
    assert pixels.shape[0] > 1000 and pixels.std() > 0.05  # not blank
    for _, _, x, y, w, h in seen["images"]:  # each plot's area on the screenshot is drawn in colour
        s = seen["scale"]
        area = pixels[int(y * s):int((y + h) * s), int(x * s):int((x + w) * s)]
        assert area.size and coloured_share(area) > 0.003, (x, y, coloured_share(area))


def test_chromium_check_catches_console_errors(browser, tmp_path):
    """The checks above can fail: a page with a script error and a broken image is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><img src="missing.png"><script>console.error("boom");'
                   "undefined_function();</script></body></html>")
    seen = render(browser, bad, tmp_path / "bad.png")
    kinds = {e["method"] for e in seen["errors"]}
    assert {"Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded"} <= kinds


def test_report_without_valid_cells_or_batch_metrics(tmp_path):
    """A run where nothing is valid and the server exposed no batch sizes still reports it all."""
    from dataclasses import replace

    from loadtest.records import ValidityFlag, append_result, read_results

    path = tmp_path / "run" / "results.jsonl"
    for cell in read_results(FIXTURES / "cpu-run" / "results.jsonl")[:3]:
        append_result(path, replace(cell, valid=False, server_batch_sizes={}, server_batch_size_mean=None,
                                    flags=[ValidityFlag("unstable", "windows differ by 18%")]))
    html_path, md_path = report.run([str(path)])
    page = html_path.read_text()
    assert page.count('src="data:image/png;base64,') == 2
    assert "No server-side batch sizes were recorded" in page
    rows = table(md_path.read_text(), "Peak valid throughput per series")
    assert rows[0][2] == "no valid cell"
    assert len(table(md_path.read_text(), "Invalid and failed cells")) == 3


def test_report_of_a_run_whose_every_cell_failed(tmp_path):
    """An interrupted first cell leaves only zeros to plot; the report still lists it."""
    from dataclasses import replace

    from loadtest.records import ValidityFlag, append_result, read_results

    path = tmp_path / "run" / "results.jsonl"
    cell = read_results(FIXTURES / "cpu-run" / "results.jsonl")[0]
    append_result(path, replace(cell, status="failed", failure_reason="interrupted (Ctrl-C)", valid=False,
                                throughput_rps=0.0, throughput_ips=0.0, latency_p50_ms=None,
                                latency_p99_ms=None, flags=[ValidityFlag("failed", "interrupted (Ctrl-C)")]))
    html_path, md_path = report.run([str(path)])
    assert html_path.read_text().count('src="data:image/png;base64,') >= 2
    rows = table(md_path.read_text(), "Invalid and failed cells")
    assert len(rows) == 1 and "interrupted (Ctrl-C)" in " ".join(rows[0])
