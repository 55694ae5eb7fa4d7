"""The report's HTML opened in headless Chromium with no console error, no request leaving the
page, and plots visible on a screenshot."""

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


