"""The report's HTML opened in headless Chromium with no console error, no request leaving the
page, plots visible on a screenshot, the answer on the first screen, and every chart shown at its own size with
no text over it (the texts inside a chart are checked apart in matplotlib's boxes: `charts/test_assembly.py`).

Playwright drives Debian's `chromium` (installed by `make browser`, which `make test` runs; the
test installs nothing itself and fails, not skips, without it).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib import image as mpimg
from playwright.sync_api import Browser, Page, sync_playwright

from loadtest.report.charts.style import png

pytestmark = [pytest.mark.integration, pytest.mark.untimed]

SCALE = 0.5  # screenshot scale: the whole page, at half size
FIRST_SCREEN = {"width": 1280, "height": 800}  # a laptop's browser window: what is seen before scrolling


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Debian's chromium is not installed: run `make browser` (apt-get install chromium)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


@dataclass
class Seen:
    """What a page did while it loaded: errors of each kind, every request, its images."""

    errors: list[tuple[str, str]] = field(default_factory=list)  # (kind, text)
    requests: list[str] = field(default_factory=list)
    images: list[list[float]] = field(default_factory=list)  # [complete, naturalWidth, x, y, w, h]


def watch(page: Page, seen: Seen) -> None:
    """Console errors and asserts, uncaught exceptions, failed loads, and every request."""
    page.on("console", lambda m: seen.errors.append(("console", m.text)) if m.type in ("error", "assert") else None)
    page.on("pageerror", lambda exc: seen.errors.append(("exception", str(exc))))
    page.on("requestfailed", lambda r: seen.errors.append(("failed load", r.url)))
    page.on("request", lambda r: seen.requests.append(r.url))


def render(browser: Browser, html: Path, shot: Path) -> Seen:
    """Open `html`, collect what it did, screenshot the whole page at SCALE."""
    context = browser.new_context(viewport={"width": 1280, "height": 1600}, device_scale_factor=SCALE)
    try:
        page = context.new_page()
        seen = Seen()
        watch(page, seen)
        page.goto(html.resolve().as_uri(), wait_until="load")
        seen.images = page.evaluate(
            "Array.from(document.images).map(i => {const r = i.getBoundingClientRect();"
            "return [i.complete, i.naturalWidth, r.x + scrollX, r.y + scrollY, r.width, r.height]})")
        page.screenshot(path=str(shot), full_page=True)
        return seen
    finally:
        context.close()


def coloured_share(pixels: np.ndarray) -> float:
    """Share of pixels with a clearly saturated colour (plot lines and markers, not text)."""
    rgb = pixels[..., :3].astype(float)
    return float(((rgb.max(axis=-1) - rgb.min(axis=-1)) > 0.25).mean())


def test_html_renders_in_chromium_with_plots_and_no_console_errors(built, browser, tmp_path):
    shot = tmp_path / "report.png"
    seen = render(browser, built[0], shot)
    assert seen.errors == []
    assert all(u.startswith(("file:", "data:")) for u in seen.requests), seen.requests
    assert len(seen.images) == 4 and all(ok and w > 0 for ok, w, *_ in seen.images)
    pixels = mpimg.imread(shot)
    assert pixels.shape[0] > 1000 and pixels.std() > 0.05  # not blank
    for _, _, x, y, w, h in seen.images:  # each plot's area on the screenshot is drawn in colour
        area = pixels[int(y * SCALE):int((y + h) * SCALE), int(x * SCALE):int((x + w) * SCALE)]
        assert area.size and coloured_share(area) > 0.003, (x, y, coloured_share(area))


def test_chromium_check_catches_console_errors(browser, tmp_path):
    """The checks above can fail: a page with a script error and a broken image is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><img src="missing.png"><script>console.error("boom");'
                   "undefined_function();</script></body></html>")
    seen = render(browser, bad, tmp_path / "bad.png")
    kinds = {kind for kind, _ in seen.errors}
    assert {"console", "exception", "failed load"} <= kinds


def on_first_screen(browser: Browser, html: Path, text: str) -> tuple[bool, float, float]:
    """Whether `text` is visible, wholly inside the window at load (no scrolling), and where the first image
    starts and ends (inf without one)."""
    context = browser.new_context(viewport=FIRST_SCREEN)
    try:
        page = context.new_page()
        page.goto(html.resolve().as_uri(), wait_until="load")
        found = page.get_by_text(text).first
        box = found.bounding_box() if found.count() else None
        inside = (box is not None and found.is_visible() and box["y"] >= 0
                  and box["y"] + box["height"] <= FIRST_SCREEN["height"])
        top, bottom = page.evaluate("document.images.length ? [document.images[0].getBoundingClientRect().y, "
                                    "document.images[0].getBoundingClientRect().bottom] : [Infinity, Infinity]")
        return inside, float(top), float(bottom)
    finally:
        context.close()


def test_the_card_and_its_chart_are_on_the_first_screen(bought, built, browser):
    """The card (its title, its table, its comparison line), then one chart (each configuration's answer beside the
    device alone), all seen before scrolling on a 1280×800 screen; the other plots come after the answer. The card
    is the hand-made twin fixture's (`bought`): FOR BUYING, with what bounded each row and its tool ceiling."""
    title, top, bottom = on_first_screen(browser, bought[0], "FOR BUYING — TF Serving containers and the embedded")
    assert title and 0 < top < bottom <= FIRST_SCREEN["height"]  # the chart, whole, on the first screen
    for text in ("the production server", "≥ 12,500.0 req/s (2× the answer)", "batching: CPU ×1.49 (×1.38–×1.54)"):
        assert on_first_screen(browser, bought[0], text)[0], text  # the card's last row and its comparison
    no_search, first_image, _ = on_first_screen(browser, built[0], "no capacity search in these results")
    assert no_search and first_image > 300  # without a search there is no chart: the plots come after the answer


def test_first_screen_check_catches_text_below_the_fold(browser, tmp_path):
    """The check above can fail: text under a tall block, or hidden, is not on the first screen."""
    low = tmp_path / "low.html"
    low.write_text('<html><body><div style="height:1200px"></div><p>batching gain ×2</p></body></html>')
    assert on_first_screen(browser, low, "batching gain ×2") == (False, float("inf"), float("inf"))
    hidden = tmp_path / "hidden.html"
    hidden.write_text('<html><body><p style="visibility:hidden">batching gain ×2</p></body></html>')
    assert not on_first_screen(browser, hidden, "batching gain ×2")[0]


READABLE = 0.9  # a chart drawn at less than this share of its pixels shrinks its 7-8 pt labels below ~9 px

CHART_BOXES = """() => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.x, r.y + scrollY, r.width, r.height]; };
  const charts = Array.from(document.images).map(i => [i.alt, i.naturalWidth, ...box(i)]);
  const texts = Array.from(document.querySelectorAll('h1, h2, p, th, td, li')).filter(e => e.innerText.trim())
    .map(e => [e.innerText.trim().slice(0, 60), ...box(e)]);
  return [charts, texts];
}"""


def charts_on(browser: Browser, html: Path) -> tuple[list, list]:
    """Each chart's name, natural width and box, and every text block's start and box, on a 1280 px wide window."""
    context = browser.new_context(viewport=FIRST_SCREEN)
    try:
        page = context.new_page()
        page.goto(html.resolve().as_uri(), wait_until="load")
        charts, texts = page.evaluate(CHART_BOXES)
        return charts, texts
    finally:
        context.close()


def boxes_overlap(a, b) -> bool:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    return min(ax + aw, bx + bw) - max(ax, bx) > 1 and min(ay + ah, by + bh) - max(ay, by) > 1


@pytest.fixture(scope="module")
def paired(tmp_path_factory) -> Path:
    """The report of the paired H200 run (every chart drawn from real records)."""
    from loadtest.report import page as report
    from tests.support.paths import ANALYSIS_FIXTURES

    out = tmp_path_factory.mktemp("h200-paired")
    shutil.copy(ANALYSIS_FIXTURES / "h200-paired" / "results.jsonl", out / "results.jsonl")
    return report.run([out / "results.jsonl"])[0]


def test_charts_read_at_1280_px_and_no_text_lies_over_them(paired, searched, browser):
    """At 1280 px every chart is shown at (nearly) its own size, so its labels keep the sizes
    `charts/test_assembly.py` checked apart in matplotlib's boxes, and no heading, caption or table text lies over a
    chart."""
    for html in (paired, searched[0]):
        charts, texts = charts_on(browser, html)
        assert len(charts) >= 6, html
        for name, natural, *box in charts:
            assert box[2] >= READABLE * natural, (html.name, name, box[2], natural)
            over = [text for text, *other in texts if boxes_overlap(box, other)]
            assert over == [], (html.name, name, over)
        for i, (_, _, *box) in enumerate(charts):
            assert not any(boxes_overlap(box, other) for _, _, *other in charts[i + 1:]), html.name


def test_chart_check_catches_a_shrunk_chart_and_text_over_it(browser, tmp_path):
    """The check above can fail: a chart squeezed to a third of its width, and a caption pulled over it."""
    from loadtest.report.page import png_data_uri

    fig, ax = plt.subplots(figsize=(9, 3))
    ax.plot([0, 1], [0, 1])
    src = png_data_uri(png(fig))
    bad = tmp_path / "bad.html"
    bad.write_text(f'<html><body><img alt="a" src="{src}" style="width:300px">'
                   '<p style="margin-top:-60px">over the chart</p></body></html>')
    [(_, natural, *box)], texts = charts_on(browser, bad)
    assert box[2] < READABLE * natural
    assert any(boxes_overlap(box, other) for _, *other in texts)
