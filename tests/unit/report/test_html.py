"""alk.report.html: the run page's facts from the documents alk made (counts, the rule, the
commands that rerun failed and void repeats, relative transcript links, bounded transcript
views), hostile worker text kept out of the markup, and the compare page.

The page is read back with `html.parser`, as a browser's parser would split it: elements,
attributes, text and script bodies apart. The browser itself is tests/browser's.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from alk import api
from alk.causes import CATALOGUE, Cause
from alk.compare import compare_runs
from alk.records import Outcome, Verdict
from alk.report.format import rerun_command
from alk.report.html import excerpts, page
from alk.report.html import run_page as run_page_module
from alk.report.html.compare_page import compare_page
from alk.report.html.page import json_for_script
from alk.report.html.run_page import run_page, run_page_pieces
from alk.result.document import RunDocument

from helpers import documents
from helpers.rulings import CHANGED, UNCHANGED, rerun
from helpers.scripted import ScenarioRunner

# Markup that would run if the page let it: every worker string in these tests holds it.
HOSTILE = ('<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
           '" onmouseover="window.pwned=3" x="</script><!-- <a href="javascript:alert(1)">a</a>')
# A framework's name is kept to 128 characters: the lane's must be short enough to match.
FRAMEWORK = '<b onmouseover="window.pwned=4">fw</b>'
# The elements and attributes the templates make: anything else came from worker text.
TAGS = {"html", "head", "meta", "title", "style", "body", "header", "main", "footer", "section",
        "article", "figure", "figcaption", "div", "p", "h1", "h2", "h3", "span", "strong",
        "dl", "dt", "dd", "table", "thead", "tbody", "tfoot", "tr", "th", "td", "a", "ol", "ul",
        "li", "code", "pre", "details", "summary", "script"}
ATTRIBUTES = {"lang", "charset", "http-equiv", "content", "name", "class", "id", "href", "role",
              "aria-hidden", "aria-label", "aria-labelledby", "scope", "colspan", "type",
              "data-chart"}


class Page(HTMLParser):
    """A page split as a browser splits it: elements with their attributes, the text, and
    each script's body."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: tuple[dict[str, str | None], list[str]] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag == "script":
            self._script = (dict(attrs), [])

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script[0], "".join(self._script[1])))
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script[1].append(data)
        else:
            self.text.append(data)

    @property
    def words(self) -> str:
        return " ".join(" ".join(self.text).split())


class HostileRunner(ScenarioRunner):
    """Scripted repeats whose transcripts hold the worker's hostile events, as a real worker's
    would: a tool call named with markup, and a line of stderr."""

    def run(self, request, gate, transcript):
        if request.start is not None:
            transcript.worker("tool", "call", {"name": HOSTILE, "args": {"q": HOSTILE}})
            transcript.worker("stderr", "line", {"text": HOSTILE})
        return super().run(request, gate, transcript)


def hostile(observation, **fields):
    return dataclasses.replace(observation, ready={"framework": FRAMEWORK,
                                                   "framework_version": "1.0.3"}, **fields)


def made(out: Path, **by_scenario: list) -> RunDocument:
    """A real document of a lane whose framework is named with markup; its transcripts on
    disk under `out`."""
    lane = dataclasses.replace(documents.lane(tuple(by_scenario)), framework=FRAMEWORK)
    runner = HostileRunner(hostile(documents.observation(0.3)), **by_scenario)
    done = api.run_lane(lane,
                        api.RunOptions(repeats=len(next(iter(by_scenario.values()))), seed=7),
                        api.RunSetup(out_dir=out, runner=runner, environ=documents.SECRET_ENV))
    return done.document


def flaky() -> list:
    """Six repeats: four pass, one crashes with markup in its stderr, one answers with markup
    and claims success in markup, on another tool path (steps named with markup)."""
    passing = [hostile(o) for o in documents.passing(4)]
    crash = hostile(documents.CRASHED, stderr_tail=f"RuntimeError: {HOSTILE}\n")
    wrong = hostile(documents.WRONG, trajectory=(f"{HOSTILE}:error", "lookup_order:ok"),
                    result={"output": HOSTILE, "stop_reason": "accepted", "end_state": {},
                            "verification": {"ok": HOSTILE}})
    return passing[:2] + [crash] + passing[2:3] + [wrong] + passing[3:]


@pytest.fixture
def run(tmp_path: Path, private_temp: None) -> tuple[RunDocument, Path]:
    """nominal is flaky, steady passes, remote is void in every repeat."""
    document = made(tmp_path, nominal=flaky(),
                    steady=[hostile(o) for o in documents.passing(6)],
                    remote=[hostile(documents.NEVER_READY)] * 6)
    return document, tmp_path


def page_of(documents_: list[RunDocument], out: Path) -> tuple[str, Page]:
    text = run_page(documents_, out)
    return text, Page(text)


def header(text: str) -> str:
    """The page's top: what a reader sees first."""
    start = text.index('<header class="top">')
    return text[start:text.index("</header>", start)]


def section(text: str, title_id: str) -> str:
    start = text.index(f'id="{title_id}"')
    return text[start:text.index("</section>", start)]


def test_the_answer_at_the_top_is_the_documents(run) -> None:
    document, out = run
    text, page = page_of([document], out)
    aggregate = document.aggregate
    low, high = aggregate.ci
    words = page.words
    assert "✗ the run breaks the rule" in words
    assert f"Rule: {document.settings.rule.describe()}." in words
    assert f"{aggregate.pass_rate * 100:.1f}% [{low * 100:.1f}–{high * 100:.1f}]" in words
    assert (f"{aggregate.counts.passed} of {aggregate.counts.scored} scored repeats" in words
            and f"{aggregate.counts.void} of {aggregate.counts.completed} repeats not scored"
            in words)
    for badge in ("≈ 1 flaky", "✓ 1 pass", "∅ 1 void"):  # a verdict by symbol, not colour
        assert badge in words
    assert f"worker reported {FRAMEWORK} 1.0.3" in words
    # What needs attention: the scenario that breaks the rule, then the void one.
    attention = Page(section(text, "attention-title")).words
    assert attention.index("nominal breaks the rule: 2 of 6") < attention.index(
        "remote void: 6 of 6 repeats not scored")
    assert "steady" not in attention


def test_attention_names_each_failure_its_repeats_layer_cause_and_detail(run) -> None:
    document, out = run
    text, _ = page_of([document], out)
    attention = Page(section(text, "attention-title")).words
    nominal = document.scenario("nominal")
    assert nominal is not None
    bad = [r for r in nominal.repeats if not r.passed]
    assert bad, "the fixture's nominal has failed repeats"
    for repeat in bad:  # each failed repeat is named with its cause and its detail
        assert f"{repeat.outcome}/{repeat.cause}" in attention
        assert " ".join(repeat.detail.split()) in attention
    first = min(bad, key=lambda r: r.repeat)
    assert f"rerun: {rerun_command(document.run_id, 'nominal', first.repeat)}" in attention
    # The void scenario's one way of failing, named as void.
    remote = document.scenario("remote")
    assert remote is not None
    assert f"repeats 1, 2, 3, 4, 5 … (6 in all): void/{remote.repeats[0].cause}" in attention
    # Then the page's order: the answer, the tables, needs attention, the charts.
    at = [text.index(marker) for marker in ('<p class="answer">', 'class="scenarios"',
                                            'id="attention-title"', 'id="charts-title"')]
    assert at == sorted(at)


def test_attention_says_what_to_do_about_a_cause_once(tmp_path: Path,
                                                      private_temp: None) -> None:
    crashed = [hostile(documents.CRASHED)] * 3
    text, _ = page_of([made(tmp_path, a=crashed, b=crashed)], tmp_path)
    attention = Page(section(text, "attention-title")).words
    assert attention.count("nonzero_exit: ") == 1
    assert attention.count("framework_runtime/nonzero_exit") == 2  # each failure still named


def test_attention_lists_rule_breakers_by_rate_then_flaky_then_void(tmp_path: Path,
                                                                    private_temp: None) -> None:
    bad = [hostile(documents.CRASHED)] * 2
    document = made(tmp_path, void=[hostile(documents.NEVER_READY)] * 4,
                    half=[hostile(o) for o in documents.passing(2)] + bad,
                    worst=bad * 2,
                    most=[hostile(o) for o in documents.passing(3)] + bad[:1])
    # Under a threshold of 60%, `most` (75%) is flaky but meets it; `half` and `worst` break it.
    document = dataclasses.replace(document, settings=dataclasses.replace(
        document.settings, rule=dataclasses.replace(document.settings.rule, fail_under=0.6)))
    attention = Page(section(run_page([document], tmp_path), "attention-title")).words
    order = [name for name in ("worst", "half", "most", "void") if name in attention]
    assert order == ["worst", "half", "most", "void"]
    assert sorted(order, key=attention.index) == order
    assert "worst breaks the rule: 0.0% (pass rate)" in attention
    assert "most flaky: 3 of 4 passed" in attention


def test_failed_and_void_repeats_carry_their_rerun_command_and_passes_none(run) -> None:
    document, out = run
    _, page = page_of([document], out)
    words = page.words
    for scenario in document.scenarios:
        for repeat in scenario.repeats:
            shown = f"rerun: {rerun_command(document.run_id, scenario.id, repeat.repeat)}"
            assert (shown in words) is (not repeat.passed), (scenario.id, repeat.repeat)
    assert sum(not r.passed for s in document.scenarios for r in s.repeats) == 8


def test_every_repeat_links_its_transcript_relative_to_the_report_folder(run) -> None:
    document, out = run
    _, page = page_of([document], out)
    folder = out / "reports" / document.run_id
    links = [attrs["href"] for tag, attrs in page.elements
             if tag == "a" and attrs.get("href", "").endswith(".jsonl")]
    expected = [f"../../{r.transcript}" for s in document.scenarios for r in s.repeats]
    assert links == expected
    assert all((folder / link).resolve().is_file() for link in links)


def test_each_transcript_is_inline_with_alks_events_set_apart(run) -> None:
    document, out = run
    text, page = page_of([document], out)
    events = re.findall(r'<li class="ev ch-(\w+)( harness)?', text)
    repeats = sum(len(s.repeats) for s in document.scenarios)
    # Each repeat's tool call and stderr line in the worker's colour, alk's spawn apart.
    assert events.count(("tool", "")) == events.count(("stderr", "")) == repeats
    assert ("harness", " harness") in events
    assert text.count('<details class="transcript">') == repeats


def test_worker_text_never_becomes_markup(run) -> None:
    document, out = run
    text, page = page_of([document], out)
    assert {tag for tag, _ in page.elements} <= TAGS
    for tag, attrs in page.elements:
        assert set(attrs) <= ATTRIBUTES, (tag, attrs)
        for value in attrs.values():
            assert "<" not in (value or "") and "javascript:" not in (value or ""), (tag, attrs)
    # The markup shows as text: its name, its steps, its claim, its stderr, the detail.
    words = page.words
    assert words.count(HOSTILE) >= 10
    assert f"RuntimeError: {HOSTILE}" in words
    assert 'the worker claimed: {"ok": "<script>window.pwned=1</script><img src=x' in words
    # Two scripts run, Plotly's and the page's, each allowed by its hash; the rest is data.
    running = [body for attrs, body in page.scripts if attrs.get("type") is None]
    assert len(running) == 2
    [policy] = [attrs["content"] for tag, attrs in page.elements
                if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"]
    assert policy.startswith("default-src 'none'; ")
    allowed = re.findall(r"'sha256-([A-Za-z0-9+/=]+)'", policy)
    assert sorted(allowed) == sorted(
        base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() for body in running)
    for attrs, body in page.scripts:
        if attrs.get("type") == "application/json":
            assert "<" not in body and ">" not in body and "&" not in body
            json.loads(body)


def test_json_for_a_script_block_cannot_end_it() -> None:
    value = {"name": "</script><script>alert(1)</script><!-- & \u2028"}
    text = json_for_script(value)
    assert not set(text) & {"<", ">", "&", "\u2028"}
    assert json.loads(text) == value


def test_a_64_mib_transcript_is_embedded_as_a_bounded_view(run) -> None:
    document, out = run
    crashed = next(r for s in document.scenarios for r in s.repeats
                   if r.outcome is Outcome.FRAMEWORK_RUNTIME)
    path = out / crashed.transcript
    line = json.dumps({"seq": 0, "t": 0.1, "source": "worker", "channel": "stderr",
                       "type": "line", "payload": {"text": "x" * 900}})
    count = 64 * 2**20 // (len(line) + 1)
    path.write_text("".join(line.replace('"seq": 0', f'"seq": {n}', 1) + "\n"
                            for n in range(1, count + 1)))
    assert path.stat().st_size > 63 * 2**20
    text, _ = page_of([document], out)
    view = section_of_repeat(text, crashed.scenario, crashed.repeat)
    shown = [int(n) for n in re.findall(r'<span class="seq">(\d+)</span>', view)]
    assert shown[0] == 1 and shown[-1] == count  # its first events, and its very last
    assert len(shown) <= excerpts.HEAD_EVENTS + excerpts.TAIL_EVENTS
    assert sum(len(m) for m in re.findall(r"<li class=\"ev.*?</li>", view, re.S)) < (
        excerpts.REPEAT_EMBED_CHARS * 2)
    [gap] = [Page(item).words for item in re.findall(r'<li class="gap">.*?</li>', view)]
    head = [n for n in shown if n < count // 2]
    assert head == list(range(1, len(head) + 1))
    assert re.fullmatch(rf"… events {len(head) + 1}–{shown[len(head)] - 1} left out here "
                        r"\(64\.\d MiB not read, more not embedded; the file is 64\.\d MiB\): "
                        "open the file for every event", gap), gap
    # The page stays the size of one without it: Plotly's bundle and a little more.
    assert len(text.encode()) < len(html_bundle()) + 2 * 2**20


def section_of_repeat(text: str, scenario: str, repeat: int) -> str:
    start = text.index(f"transcript of {scenario} repeat {repeat} ")
    return text[start:text.index("</details>\n</td></tr>", start)]


def html_bundle() -> str:
    from alk.report.html.figure import plotly_js

    return plotly_js()


def test_the_pages_budget_goes_to_failed_and_void_repeats_first(
        run, monkeypatch: pytest.MonkeyPatch) -> None:
    document, out = run
    # Room for the failed and void repeats' views, and not one character more.
    root = (out / "transcripts").resolve()
    needed = sum(excerpts._view(out / r.transcript, root, excerpts.REPEAT_EMBED_CHARS)["chars"]
                 for s in document.scenarios for r in s.repeats if not r.passed)
    monkeypatch.setattr(excerpts, "PAGE_EMBED_CHARS", needed)
    text, _ = page_of([document], out)
    for scenario in document.scenarios:
        for repeat in scenario.repeats:
            view = section_of_repeat(text, scenario.id, repeat.repeat)
            if not repeat.passed:
                assert '<li class="ev' in view, (scenario.id, repeat.repeat)
            elif scenario.verdict is Verdict.PASS:
                assert "not embedded: the page" in view and '<li class="ev' not in view


def test_a_transcript_outside_the_runs_folder_is_not_read(run) -> None:
    document, out = run
    secret = out / "elsewhere.jsonl"
    secret.write_text(json.dumps({"seq": 1, "type": "line", "payload": {"text": "private"}})
                      + "\n")
    scenario = document.scenarios[0]
    moved = dataclasses.replace(scenario.repeats[0], transcript="transcripts/../elsewhere.jsonl")
    document = dataclasses.replace(document, scenarios=(dataclasses.replace(
        scenario, repeats=(moved, *scenario.repeats[1:])), *document.scenarios[1:]))
    _, page = page_of([document], out)
    assert "private" not in page.words
    assert "not read: the path is outside the run's transcripts folder" in page.words


def test_several_lanes_get_the_lane_by_scenario_matrix(tmp_path: Path,
                                                       private_temp: None) -> None:
    lanes = documents.three_lanes(tmp_path)
    text, _ = page_of(lanes, tmp_path)
    matrix = section(text, "matrix-title")
    header = Page(matrix[:matrix.index("</thead>")]).words
    assert header.endswith("scenario pydantic-ai langgraph openai-agents-sdk")
    rows = [Page(row).words for row in re.findall(r"<tr><th scope=\"row\">.*?</tr>", matrix,
                                                   re.S)]
    assert rows[0].startswith("nominal ≈ flaky 85.0% [64.0–94.8] ✓ pass 100.0% [83.9–100.0] "
                              "✓ pass")
    assert [row.split()[0] for row in rows] == ["nominal", "tool_error", "remote", "void"]
    # A heat map as well as words: each cell carries its verdict's tint.
    cells = re.findall(r'<td class="cell-(\w+)">', matrix)
    assert cells == ["flaky", "pass", "pass", "pass", "fail", "flaky", "void", "pass", "pass"]
    one = tmp_path / "one"
    assert 'id="matrix-title"' not in run_page([documents.run(one)], one)


def test_each_failure_in_attention_links_its_repeats_row_and_the_top_links_attention(
        run) -> None:
    document, out = run
    text, page = page_of([document], out)
    ids = {attrs.get("id") for _, attrs in page.elements}
    attention = section(text, "attention-title")
    targets = [attrs["href"] for tag, attrs in Page(attention).elements
               if tag == "a" and attrs.get("href", "").startswith("#") and "-r" in attrs["href"]]
    assert targets and all(target[1:] in ids for target in targets)
    nominal = document.scenario("nominal")
    first = min(r.repeat for r in nominal.repeats if not r.passed)
    assert f"repeat {first} and its transcript" in Page(attention).words
    top = Page(header(text))
    assert ("a", {"href": "#attention-title"}) in top.elements
    assert "2 scenarios need attention" in top.words


def test_several_lanes_read_matrix_then_attention_then_each_lane(tmp_path: Path,
                                                                 private_temp: None) -> None:
    text = run_page(documents.three_lanes(tmp_path), tmp_path)
    at = [text.index(marker) for marker in ('id="matrix-title"', 'id="attention-title"',
                                            'class="scenarios"', 'id="charts-title"')]
    assert at == sorted(at)


def test_several_lanes_are_summed_up_a_line_each_at_the_top(tmp_path: Path,
                                                             private_temp: None) -> None:
    lanes = documents.three_lanes(tmp_path)
    top = Page(header(run_page(lanes, tmp_path))).words
    for document in lanes:
        aggregate = document.aggregate
        low, high = aggregate.ci
        void = aggregate.void_rate * 100
        assert (f"{document.lane.name} · pydantic-ai 1.0.3 · pass rate "
                f"{aggregate.pass_rate * 100:.1f}% [{low * 100:.1f}–{high * 100:.1f}] · "
                f"void {void:.0f}%") in top, (document.lane.name, top)
    one = tmp_path / "one"
    assert "pass rate" not in Page(header(run_page([documents.run(one)], one))).words


@pytest.mark.parametrize("changed, since", [(True, CHANGED), (False, UNCHANGED)])
def test_a_rerun_says_at_the_top_what_it_reruns_and_whether_the_worker_changed(
        run, changed: bool, since: str) -> None:
    document, out = run
    top = Page(header(run_page([rerun(document, worker_changed=changed)], out))).words
    assert (f"{'⚠' if changed else '↻'} Rerun of 20261128-090000-ff00aa/orders nominal "
            f"repeat 4 : {since}.") in top  # words: a space between elements
    assert "Rerun of" not in Page(run_page([document], out)).words


def test_the_compare_page_states_each_change_its_numbers_and_the_rule(
        tmp_path: Path, private_temp: None) -> None:
    a = documents.made(tmp_path / "a", documents.observation(0.3),
                       nominal=documents.passing(20), steady=documents.passing(20))
    b = documents.made(tmp_path / "b", documents.observation(0.3),
                       nominal=documents.passing(12) + [documents.CRASHED] * 8,
                       steady=documents.passing(20))
    comparison = compare_runs(a, dataclasses.replace(b, run_id="20261130-093000-cd34e5"))
    page = Page(compare_page(comparison, tmp_path))
    words = page.words
    nominal = comparison.scenarios[0]
    assert "B against A: ▼ regressed" in words
    low, high = nominal.difference.low * 100, nominal.difference.high * 100
    assert (f"nominal 100.0% 20/20 60.0% 12/20 −40 [−{abs(low):.0f}, −{abs(high):.0f}]"
            in words)
    assert "Fisher's exact test, one-sided" in words and "±10 points" in words
    assert not [s for _, s in page.scripts]  # no chart: no script at all
    assert not [attrs for tag, attrs in page.elements if tag == "a"]  # no run page to link
    # Where each run's page was written, the compare page (in B's folder) links it.
    for run_id in (a.run_id, comparison.b.run_id):
        written = tmp_path / "reports" / run_id / "report.html"
        written.parent.mkdir(parents=True)
        written.write_text("a run's page")
    linked = Page(compare_page(comparison, tmp_path))
    hrefs = [attrs["href"] for tag, attrs in linked.elements if tag == "a"]
    assert hrefs == [f"../{a.run_id}/report.html", "report.html"]
    folder = tmp_path / "reports" / comparison.b.run_id
    assert all((folder / href).is_file() for href in hrefs)


def test_a_refused_worker_is_said_at_the_top(tmp_path: Path, private_temp: None) -> None:
    document = documents.refused(tmp_path)
    words = Page(run_page([document], tmp_path)).words
    assert ("∅ Nothing ran ( version_unsupported ): alk stopped before the first repeat, so "
            f"nothing was scored. {document.gate.detail} What to do: "
            f"{CATALOGUE[Cause.VERSION_UNSUPPORTED].action} Then run the lane again.") in words
    assert "∅ the run is void: something could not be scored" in words


def test_a_run_that_never_started_writes_a_small_page_of_why_and_what_to_do(
        tmp_path: Path, private_temp: None) -> None:
    """Issue 25: a run refused before any repeat wrote the whole page, Plotly's bundle and
    empty tables and sections; it says why nothing ran and what to do, and no more."""
    document = documents.refused(tmp_path)
    written = api.write_reports([document], tmp_path)
    [html_file] = [path for path in written.paths if path.name == "report.html"]
    assert html_file.stat().st_size < 32_000
    text = html_file.read_text()
    parsed = Page(text)
    assert parsed.scripts == []  # no chart, so no bundle and no script
    words = parsed.words
    assert "Not run: nominal , tool_error ." in words  # each id a code element
    for absent in ("Needs attention", "need attention", "Every repeat", "Charts",
                   "pass rate [95% interval]", "Lanes × scenarios"):
        assert absent not in words, absent
    # Two lanes, neither of which ran: each says why, and nothing else is drawn either.
    other = dataclasses.replace(document, lane=dataclasses.replace(document.lane, name="b"))
    words = Page(run_page([document, other], tmp_path)).words
    assert words.count("∅ Nothing ran (") == 2
    assert "Lanes × scenarios" not in words and "Every repeat" not in words


def test_a_lane_refused_beside_one_that_ran_keeps_the_full_page(tmp_path: Path,
                                                                private_temp: None) -> None:
    ran = documents.run(tmp_path / "a")
    refused = documents.refused(tmp_path / "b")
    refused = dataclasses.replace(refused, lane=dataclasses.replace(refused.lane, name="old"))
    words = Page(run_page([ran, refused], tmp_path)).words
    assert "Nothing ran ( version_unsupported )" in words
    assert "Needs attention" in words and "Every repeat" in words


def test_a_table_too_long_lists_failed_and_void_repeats_first_and_says_so(
        run, monkeypatch: pytest.MonkeyPatch) -> None:
    document, out = run
    monkeypatch.setattr(run_page_module, "TABLE_ROWS", 10)
    text, page = page_of([document], out)
    listed = re.findall(r"transcript of (\w+) repeat (\d+) ", text)
    assert len(listed) == 10
    failed = [(s.id, str(r.repeat)) for s in document.scenarios for r in s.repeats
              if not r.passed]
    assert set(failed) <= set(listed)
    assert ("8 of 18 repeats are not listed here (at most 10, failed and void ones first; 0 of "
            "those left out did not pass): result.json holds every one") in page.words


def test_at_most_so_many_scenarios_are_set_side_by_side_and_the_rest_counted(
        run, monkeypatch: pytest.MonkeyPatch) -> None:
    document, out = run
    assert "differ from their first step" in Page(run_page([document], out)).words
    monkeypatch.setattr(run_page_module, "DIVERGENCE_PAIRS", 0)
    words = Page(run_page([document], out)).words
    assert "… and 1 more scenario whose repeats diverge: their transcripts are below." in words
    assert "differ from their first step" not in words


# The page in pieces as they are made (`page.stream`): Plotly's bundle read from its file.
BUNDLE = Path(str(page._bundle_path()))


def test_the_pieces_are_the_page_and_none_is_large(run) -> None:
    document, out = run
    pieces = list(run_page_pieces([document], out))
    assert b"".join(pieces).decode() == run_page([document], out)
    assert max(map(len, pieces)) <= 2 * page.PIECE_BYTES
    assert BUNDLE.read_bytes() in b"".join(pieces)  # the bundle as its file holds it


def test_the_policy_allows_the_bundle_by_the_digest_of_its_file(run) -> None:
    text = run_page([run[0]], run[1])
    digest = base64.b64encode(hashlib.sha256(BUNDLE.read_bytes()).digest()).decode()
    assert f"sha256-{digest}" in text


def test_a_script_that_would_end_its_element_is_never_embedded() -> None:
    page._check_script([b"var a = 1; </scr", b"x"])
    with pytest.raises(ValueError, match="</script"):
        page._check_script([b"var a = 1; </scr", b"IPT>"])



def test_the_model_column_says_what_the_gateway_refused_past_its_bounds() -> None:
    shown = run_page_module._model_calls
    assert shown({"calls": 2, "retries": 1, "over_bounds": 3}) == "2 (1 retried, 3 refused)"
    assert shown({"calls": 2, "retries": 0}) == "2"
    assert shown(None) == "—"


def test_a_proxy_run_says_what_it_cost(tmp_path: Path, private_temp: None) -> None:
    document = documents.budget_stopped(tmp_path)
    words = Page(run_page([document], tmp_path)).words
    assert "tokens: 12,340 in · 2,870 out over 10 repeats (provider usage)" in words
    assert document.cost.stopped in words
    assert "tokens:" not in Page(run_page([documents.run(tmp_path)], tmp_path)).words


def faulted(document: RunDocument) -> RunDocument:
    """`document` with its first scenario's failed repeats failing as fault_unrecovered, in
    turn after a raising tool and after a 429 on the wire: one cause, advice that differs by
    the fault."""
    details = ("the worker injected tool#2; then wrong_stop_reason: expected x",
               "the gateway injected http_429@call1 and no model call after it was answered "
               "in full; then wrong_stop_reason: expected x")
    first = document.scenarios[0]
    failed = [r for r in first.repeats if r.scored and not r.passed]
    assert len(failed) >= 2, "the fixture's first scenario has two failed repeats"
    turn = {r.repeat: details[i % 2] for i, r in enumerate(failed)}
    repeats = tuple(dataclasses.replace(r, outcome=Outcome.FRAMEWORK_RUNTIME,
                                        cause="fault_unrecovered", detail=turn[r.repeat])
                    if r.repeat in turn else r for r in first.repeats)
    return dataclasses.replace(document, scenarios=(dataclasses.replace(first, repeats=repeats),
                                                    *document.scenarios[1:]))


def test_attention_advice_fits_the_fault_each_failure_followed(run) -> None:
    document, out = run
    text, _ = page_of([faulted(document)], out)
    attention = Page(section(text, "attention-title")).words
    # A raising tool is told about tool errors, the 429 about retries; each advice once.
    assert attention.count("fault_unrecovered: A tool raised") == 1
    assert attention.count("fault_unrecovered: Read the transcript's model/call events") == 1
    assert "Retry-After" not in attention.split("fault_unrecovered: Read")[0]
