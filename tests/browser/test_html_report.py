"""The HTML report of a real run, in headless Chromium: `alk run` on a lane whose worker puts
markup that would run in every string it controls, then the page it wrote, opened from disk.

It must make no request but for itself, log no error, draw every chart with its data, expand
a transcript on a click, and show the worker's markup as text without running any of it. It
saves screenshots to reports/screenshots/ for a person to look at.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

TESTS = Path(__file__).resolve().parents[1]
LANE = TESTS / "lanes" / "html_hostile.toml"
SCREENSHOTS = TESTS.parent / "reports" / "screenshots"
VIEWPORT = {"width": 1280, "height": 900}
# What every payload of the worker tries: set this global, and the page's title.
PWNED = "window.__alk_pwned"
# Each chart drawn: the marks Plotly made, and what the chart's data says they should be.
COUNT_MARKS = """() => [...document.querySelectorAll('div.chart')].map(div => {
  const block = document.querySelector(`script[data-chart="${div.id}"]`);
  const data = JSON.parse(block.textContent).figure.data;
  const size = t => (t.ids || t.x || t.y || []).length;
  const expected = {
    bars: data.filter(t => t.type === 'bar').reduce((n, t) => n + size(t), 0),
    lines: data.filter(t => t.type === 'scatter').length,
    markers: data.filter(t => t.type === 'scatter' && (t.mode || '').includes('markers'))
                 .reduce((n, t) => n + size(t), 0),
    boxes: data.filter(t => t.type === 'box').length,
    box_points: data.filter(t => t.type === 'box' && t.boxpoints === 'all')
                    .reduce((n, t) => n + size(t), 0),
    slices: data.filter(t => t.type === 'icicle').reduce((n, t) => n + size(t), 0)};
  const drawn = {
    bars: div.querySelectorAll('.barlayer .point').length,
    lines: div.querySelectorAll('.scatterlayer .trace').length,
    markers: div.querySelectorAll('.scatterlayer .point').length,
    boxes: div.querySelectorAll('.boxlayer .trace').length,
    box_points: div.querySelectorAll('.boxlayer .point').length,
    slices: div.querySelectorAll('g.slice').length};
  return {id: div.id, svg: div.querySelectorAll('svg.main-svg').length, expected, drawn};
})"""


@dataclass
class Loaded:
    page: Any
    url: str
    run_id: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _run(folder: Path, *lanes: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "alk", "run",
                           *(arg for lane in lanes for arg in ("--lane", str(lane))), "-n", "4",
                           "--seed", "1"], cwd=folder, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "100"})
    assert done.returncode == 1, done.stdout + done.stderr
    [page] = folder.glob("reports/*/report.html")
    return page


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report.html a real `alk run` wrote: answers passes, wavers is flaky, crashes fails
    and voided is void."""
    return _run(tmp_path_factory.mktemp("html-report"), LANE)


@pytest.fixture(scope="module")
def two_lanes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page of one run of two lanes: html_hostile, and a copy of it by another name."""
    folder = tmp_path_factory.mktemp("html-report-two")
    copy = folder / "html_other.toml"
    copy.write_text(LANE.read_text().replace('name = "html_hostile"', 'name = "html_other"')
                    .replace('"workers/html_hostile.py"',
                             f'"{TESTS / "workers" / "html_hostile.py"}"'))
    return _run(folder, LANE, copy)


def network(loaded: Loaded) -> list[str]:
    """What the page asked for beyond itself: a chart's PNG download reads a blob: the page
    made, which is no request to anywhere."""
    return [url for url in loaded.requests if not url.startswith(("blob:", "data:"))]


def _open(browser: Any, report: Path) -> Loaded:
    page = browser.new_page(viewport=VIEWPORT, accept_downloads=True)
    loaded = Loaded(page, report.as_uri(), report.parent.name)
    page.on("request", lambda request: loaded.requests.append(request.url))
    page.on("console", lambda message: loaded.errors.append(f"console: {message.text}")
            if message.type == "error" else None)
    page.on("pageerror", lambda error: loaded.errors.append(f"page error: {error}"))
    page.goto(loaded.url)
    # The page's script marks the document once every chart's promise has settled.
    page.wait_for_selector("html[data-charts-drawn]", state="attached", timeout=10_000)
    return loaded


@pytest.fixture(scope="module")
def loaded(browser: Any, report: Path) -> Iterator[Loaded]:
    loaded = _open(browser, report)
    yield loaded
    loaded.page.close()


def test_the_page_fetches_nothing_and_logs_no_error(loaded: Loaded) -> None:
    loaded.page.mouse.move(400, 300)  # over the page, where a handler would fire on hover
    assert loaded.requests == [loaded.url] == network(loaded)
    assert loaded.errors == []
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    loaded.page.screenshot(path=SCREENSHOTS / "report.png", full_page=True)


def test_every_chart_is_drawn_with_its_data(loaded: Loaded) -> None:
    charts = loaded.page.evaluate(COUNT_MARKS)
    assert loaded.page.get_attribute("html", "data-charts-drawn") == str(len(charts))
    # pass rate, pass^k, failures, durations and wavers' divergence: the run has them all
    assert {chart["id"] for chart in charts} >= {"chart-pass-rate", "chart-pass-k",
                                                 "chart-failures", "chart-durations"}
    assert any(chart["expected"]["slices"] for chart in charts)  # a divergence tree
    for chart in charts:
        assert chart["svg"] >= 1, chart
        assert sum(chart["expected"].values()) > 0, chart
        assert chart["drawn"] == chart["expected"], chart


def test_k_and_counts_of_repeats_are_ticked_on_whole_numbers(loaded: Loaded) -> None:
    # 4 repeats: left to itself, Plotly would tick k and the failure counts at 0.5, 1.5, ….
    ticks = loaded.page.evaluate("""() => Object.fromEntries(
      ['chart-pass-k', 'chart-failures'].map(id => [id, [...document.querySelectorAll(
        `#${id} .xaxislayer-above .xtick text`)].map(t => t.textContent)]))""")
    for chart, labels in ticks.items():
        assert len(labels) >= 2 and all(label.isdigit() for label in labels), (chart, labels)


def test_a_chart_downloads_as_a_png_within_the_pages_policy(loaded: Loaded) -> None:
    page = loaded.page
    page.hover("#chart-pass-rate")
    with page.expect_download(timeout=10_000) as download:
        page.click("#chart-pass-rate .modebar-btn")
    assert download.value.suggested_filename.endswith(".png")
    assert loaded.errors == [] and network(loaded) == [loaded.url]


def test_the_workers_markup_shows_as_text_and_never_runs(loaded: Loaded) -> None:
    page = loaded.page
    assert page.evaluate(f"typeof {PWNED}") == "undefined"
    assert page.title() == f"alk · {loaded.run_id}"
    # Only the page's own elements: no image, no handler, no javascript: link, two scripts.
    assert page.evaluate("""() => ({
      images: document.querySelectorAll('img').length,
      handlers: [...document.querySelectorAll('*')].filter(
        e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
      links: document.querySelectorAll('a[href^="javascript"]').length,
      scripts: document.querySelectorAll('script:not([type="application/json"])').length,
      bold: document.querySelectorAll('b').length})""") == {
        "images": 0, "handlers": 0, "links": 0, "scripts": 2, "bold": 0}
    text = page.inner_text("body")
    for shown in ('RuntimeError: <script>window.__alk_pwned="exception"',  # a crash's detail
                  'got "<script>window.__alk_pwned=\\"output\\"',  # the harness quoting it
                  "<b onmouseover=\"window.__alk_pwned='fw'\">html-hostile</b>",  # its name
                  '{"claimed": "<script>window.__alk_pwned=\\"claimed\\"',  # its claim
                  "retry<script>window.__alk_pwned=\"retry\""):  # a tool name, diverging
        assert shown in text


def test_a_transcript_expands_on_a_click(loaded: Loaded) -> None:
    page = loaded.page
    transcript = page.locator("tr.under.out-fail details.transcript").first
    events = transcript.locator("ol.events > li.ev")
    assert events.count() > 0 and not events.first.is_visible()
    transcript.locator("summary").first.click()
    assert transcript.get_attribute("open") is not None
    assert events.first.is_visible()
    assert transcript.locator("li.ev.harness").count() > 0  # alk's own, set apart
    assert 'window.__alk_pwned="stderr"' in transcript.inner_text()
    assert page.evaluate(f"typeof {PWNED}") == "undefined"
    assert loaded.errors == [] and network(loaded) == [loaded.url]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    transcript.screenshot(path=SCREENSHOTS / "transcript.png")


def test_the_charts_point_at_the_failures(loaded: Loaded) -> None:
    page = loaded.page
    drawn = page.evaluate("""() => ({
      shaded: document.querySelectorAll('#chart-pass-rate .layer-below .shapelayer path').length,
      names: [...document.querySelectorAll('#chart-pass-rate .ytick text')].map(t => t.textContent),
      bands: [...document.querySelectorAll('#chart-pass-k .scatterlayer .fills path')]
               .filter(p => (p.getAttribute('d') || '').length > 2).length,
      failing: [...document.querySelectorAll('#chart-failures .ytick text')]
                 .map(t => t.textContent)})""")
    # wavers (flaky) and crashes (0%) break the rule: shaded, and marked ✗ by their names.
    assert drawn["shaded"] == 2
    assert sorted(name.strip() for name in drawn["names"]) == ["answers", "✗ crashes",
                                                               "✗ wavers"]
    assert drawn["bands"] == 4  # three scenarios' and the lane mean's 95% intervals
    # Failures by layer and cause: only the scenarios that failed have a row.
    assert sorted(name.strip() for name in drawn["failing"]) == ["crashes", "voided", "wavers"]


def test_a_failure_in_needs_attention_leads_to_its_repeat(loaded: Loaded) -> None:
    page = loaded.page
    link = page.locator("section.attention .failures a").first
    target = link.get_attribute("href")
    assert target and target.startswith("#")
    link.click()
    assert page.evaluate("location.hash") == target
    row = page.locator(target)
    assert row.count() == 1 and "crashes" in row.inner_text()
    assert loaded.errors == [] and network(loaded) == [loaded.url]


def test_a_run_of_two_lanes_reads_matrix_attention_lanes_then_charts(browser: Any,
                                                                    two_lanes: Path) -> None:
    loaded = _open(browser, two_lanes)
    try:
        page = loaded.page
        order = page.evaluate("""() => ['#matrix-title', '#attention-title', '#lane-0',
          '#lane-1', '#charts-title'].map(s => document.querySelector(s)
          .getBoundingClientRect().top + window.scrollY)""")
        assert order == sorted(order)
        charts = page.evaluate(COUNT_MARKS)
        for chart in charts:
            assert chart["drawn"] == chart["expected"], chart
        assert loaded.errors == [] and network(loaded) == [loaded.url]
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / "report-two-lanes.png", full_page=True)
    finally:
        loaded.page.close()
