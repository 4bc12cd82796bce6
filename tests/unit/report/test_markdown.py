"""alk.report.markdown: report.md from documents alk made itself (`run_lane` with a scripted
runner), read as the renderers that show it read it: GitHub's own (cmark-gfm, through
`cmarkgfm`, with raw HTML let through so that any slips show) and markdown-it-py (CommonMark
with GFM tables)."""

from __future__ import annotations

import dataclasses
import os
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from markdown_it import MarkdownIt

from alk.records import Outcome
from alk.report.format import rerun_command as command
from alk.report.markdown import MAX_CHARS, REPEATS_PER_CAUSE, run_markdown
from alk.result.document import RunDocument
from alk.result.rule import PassRule
from alk.stats.pass_k import pass_hat_k_at

from helpers import documents
from helpers.documents import NEVER_READY, RUN, flaky, made, observation, passing
from helpers.rulings import CHANGED, UNCHANGED, rerun, ruled, three_lanes

pytestmark = pytest.mark.usefixtures("private_temp")

FOLDER = Path("reports") / RUN


def github(text: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)


def commonmark(text: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(text)


RENDERERS = pytest.mark.parametrize("render", [github, commonmark], ids=["github", "commonmark"])


class Page(HTMLParser):
    """The rendered page: its elements with their attributes, its text inside and outside
    code, and its table rows as lists of cell texts."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.code: list[str] = []
        self.prose: list[str] = []
        self.rows: list[list[str]] = []
        self._open: list[str] = []
        self._cell: list[str] | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag in ("hr", "br", "img", "input"):
            return
        self._open.append(tag)
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None
        if tag in self._open:
            while self._open.pop() != tag:
                pass

    def handle_data(self, data):
        (self.code if "code" in self._open else self.prose).append(data)
        if self._cell is not None:
            self._cell.append(data)

    @property
    def links(self) -> list[str]:
        return [attrs["href"] or "" for tag, attrs in self.elements if tag == "a"]

    def table(self, header_first: str) -> list[list[str]]:
        """The rows of the table whose header's first cell is this, header excluded."""
        rows, inside = [], False
        for row in self.rows:
            if row and row[0] == header_first:
                inside = True
                continue
            if inside and len(row) and row[0] in ("rule", "scenario"):
                break
            if inside:
                rows.append(row)
        return rows


def test_the_top_states_the_run_its_lane_framework_and_version_and_the_rule_it_breaks(tmp_path):
    text = run_markdown([documents.run(tmp_path)], tmp_path)
    first, lane, _, rule, *_ = text.splitlines()
    assert first == f"## ❌ FAIL · alk run `{RUN}`"
    assert lane == ("- lane `orders` · `pydantic-ai` `1.0.3` (requires `>=1.0,<2`) · "
                    "20 repeats × 3 scenarios")
    described = PassRule().describe()
    assert rule == (f"**Rule:** {described[0].upper()}{described[1:]}. **Not met**: "
                    "1 scenario breaks it: `nominal`.")


def test_one_repeat_of_one_scenario_is_said_in_the_singular(tmp_path):
    document = made(tmp_path, observation(0.3), repeats=1, nominal=passing(1))
    assert run_markdown([document], tmp_path).splitlines()[1].endswith(
        " · 1 repeat × 1 scenario")


@pytest.mark.parametrize("changed, since", [(True, CHANGED), (False, UNCHANGED)])
def test_a_rerun_says_at_the_top_what_it_reruns_and_whether_the_worker_changed(
        tmp_path, changed, since):
    text = run_markdown([rerun(documents.run(tmp_path), worker_changed=changed)], tmp_path)
    title, _, _, said, _, rule, *_ = text.splitlines()
    assert title.startswith("## ❌ FAIL") and rule.startswith("**Rule:**")
    assert said == f"**Rerun of `20261128-090000-ff00aa/orders` `nominal` repeat 4**: {since}."
    assert "rerun of" not in run_markdown([documents.run(tmp_path)], tmp_path).lower()


@RENDERERS
def test_the_table_has_a_row_per_scenario_those_breaking_the_rule_first(tmp_path, render):
    document = documents.run(tmp_path)
    page = Page(render(run_markdown([document], tmp_path)))
    rows = page.table("rule")
    nominal = document.scenario("nominal").stats
    hat = pass_hat_k_at(nominal, 5)
    assert rows == [
        ["✗", "nominal", "flaky", "17/20", "85% [64–95]", "0%", f"{hat.value:.0%}"],
        ["–", "remote", "void", "0/0", "—", "100%", "—"],
        ["✓", "tool_error", "pass", "20/20", "100% [84–100]", "0%", "100%"]]


def test_each_failed_or_void_repeat_has_its_detail_transcript_link_and_rerun(tmp_path):
    document = documents.run(tmp_path)
    text = run_markdown([document], tmp_path)
    page = Page(github(text))
    links = set(page.links)
    for scenario in ("nominal", "remote"):
        bad = [r for r in document.scenario(scenario).repeats if not r.passed]
        listed = bad if scenario == "nominal" else bad[:REPEATS_PER_CAUSE]
        for repeat in listed:
            [line] = [line for line in text.splitlines()
                      if f"`{command(RUN, scenario, repeat.repeat)}`" in line]
            assert line.startswith(f"  - repeat {repeat.repeat} · `{repeat.detail}` · ")
            [target] = [link for link in links if link.endswith(
                f"/{scenario}/repeat-{repeat.repeat:02d}.jsonl")]
            # The link, from the report's folder, reaches the repeat's transcript.
            assert os.path.normpath(FOLDER / target) == os.path.normpath(repeat.transcript)
        for repeat in bad[len(listed):]:
            assert command(RUN, scenario, repeat.repeat) not in text
    assert "  - … and 17 more: see [report.html](report.html)" in text
    assert "- **framework_runtime** `nonzero_exit` · 2 repeats" in text
    assert "- **void** `exited_before_ready` · 20 repeats" in text


def test_under_a_threshold_a_flaky_scenario_meets_the_rule_and_the_run_passes(tmp_path):
    document = ruled(tmp_path, PassRule(0.5), nominal=flaky(), tool_error=passing(20))
    text = run_markdown([document], tmp_path)
    assert text.startswith(f"## ✅ PASS · alk run `{RUN}`")
    assert "**Rule:** Each scenario's pass rate must be at least 50.0%" in text
    assert "**Met.**" in text
    rows = Page(commonmark(text)).table("rule")
    assert rows[0][:3] == ["✓", "nominal", "flaky"]
    # Its failed repeats are still there to read.
    assert command(RUN, "nominal", 4) in text


def test_a_run_with_an_unscored_scenario_is_void_and_names_it(tmp_path):
    document = made(tmp_path, observation(0.3), nominal=passing(20),
                    remote=[NEVER_READY] * 20)
    text = run_markdown([document], tmp_path)
    assert text.startswith(f"## ⚠️ VOID · alk run `{RUN}`")
    assert "**Void**: no scenario breaks it, but nothing was scored in `remote`." in text
    mostly = documents.mostly_void(tmp_path)
    unflaky = dataclasses.replace(mostly, scenarios=mostly.scenarios[1:])  # nominal left out
    assert ("**Void**: no scenario breaks it, but some repeats were void (not scored)."
            in run_markdown([unflaky], tmp_path))


def test_a_refused_worker_says_why_nothing_was_scored(tmp_path):
    document = documents.refused(tmp_path)
    text = run_markdown([document], tmp_path)
    assert (f"  - preflight refused the worker, nothing was scored: `version_unsupported` "
            f"`{document.gate.detail}`") in text
    assert "`0.9.1`" in text.splitlines()[1]


def test_a_run_of_three_lanes_has_the_matrix_and_a_table_per_lane(tmp_path):
    lanes = three_lanes(tmp_path)
    text = run_markdown(lanes, tmp_path)
    page = Page(github(text))
    assert text.startswith(f"## ❌ FAIL · alk run `{RUN}`\n- lane `pydantic-ai`")
    assert ("3 scenarios break it: `nominal` (`pydantic-ai`), `tool_error` (`langgraph`), "
            "`tool_error` (`openai-agents`).") in text
    header = next(row for row in page.rows if row[0] == "scenario")
    assert header == ["scenario", "pydantic-ai", "langgraph", "openai-agents"]
    matrix = page.table("scenario")
    passed = "✓ pass 100% [84–100]"
    assert matrix == [["nominal", "✗ flaky 85% [64–95]", passed, passed],
                      ["tool_error", passed, "✗ fail 0% [0–16]", "✗ flaky 95% [76–99]"],
                      ["remote", "– void —", passed, passed]]
    for name in ("pydantic-ai", "langgraph", "openai-agents"):
        assert f"### lane `{name}`" in text
    assert len([row for row in page.rows if row[0] == "rule"]) == 3
    # A lane's repeat reruns in its own lane, and links to its own transcripts.
    assert f"`{command(f'{RUN}/langgraph', 'tool_error', 1)}`" in text
    assert (f"[transcript](../../transcripts/{RUN}/langgraph/tool_error/repeat-01.jsonl)"
            in text)
    assert "#### `tool_error` in `langgraph`: fail, 0/20 scored passed" in text
    # reports/R/ holds group.json and a folder per lane: the footer links each lane's record.
    records = [href for href in page.links if href.endswith("result.json")]
    assert records == [f"{name}/result.json"
                       for name in ("pydantic-ai", "langgraph", "openai-agents")]
    assert all((tmp_path / "reports" / RUN / href).is_file() for href in records)
    assert text.endswith("the records: [`pydantic-ai/result.json`](pydantic-ai/result.json), "
                         "[`langgraph/result.json`](langgraph/result.json), "
                         "[`openai-agents/result.json`](openai-agents/result.json)\n")


HOSTILE = ("<img src=x onerror=alert(1)> | pipes | **bold** [link](javascript:alert(1)) "
           "``` `` ` ticks\nnext line\n# heading\n- item\n<script>alert(1)</script> "
           "@octocat #123 https://example.com www.example.com :smile: &amp; \\* \x1b[31m "
           "\u202eevil")


def hostile(document: RunDocument) -> RunDocument:
    """Worker text and lane names at their worst: every repeat that did not pass with this
    detail; the worker's framework and version; a scenario id and the lane's name with a pipe,
    backticks and markup (a lane file's names are not the worker's, but cheap to make safe)."""
    scenarios = []
    for scenario in document.scenarios:
        sid = HOSTILE_ID if scenario.id == "nominal" else scenario.id
        scenarios.append(dataclasses.replace(scenario, id=sid, repeats=tuple(
            dataclasses.replace(r, scenario=sid, detail=r.detail if r.passed else HOSTILE,
                                transcript=r.transcript.replace("/nominal/", f"/{sid}/"))
            for r in scenario.repeats)))
    return dataclasses.replace(
        document, scenarios=tuple(scenarios),
        lane=dataclasses.replace(document.lane, name="orders`|<i>x</i>"),
        gate=dataclasses.replace(document.gate, framework="`<svg onload=alert(1)>@fw`",
                                 version=" 1.0 `` #9 | <b> "))


# A scenario id whose transcript's path would end a link, and whose rerun command is long.
HOSTILE_ID = "nominal (x) y|`x`<b>@me#1</b> and-a-name-long-enough-to-be-cut-anywhere-else"


ALLOWED = {"h2", "h3", "h4", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td",
           "code", "a", "strong", "hr"}


@RENDERERS
def test_hostile_text_renders_as_literal_text_and_no_element_comes_from_it(tmp_path, render):
    # The details here come from a real run: a worker whose answer and stderr are hostile.
    bad = observation(1.0, result={"output": HOSTILE, "stop_reason": "accepted",
                                   "end_state": {}})
    crash = observation(1.0, result=None, exit_code=1, stderr_tail="Traceback:\n" + HOSTILE)
    real = made(tmp_path, observation(0.3), repeats=5, nominal=[bad] * 3 + passing(2),
                other=[crash] * 5)
    for document in (real, hostile(real)):
        text = run_markdown([document], tmp_path)
        page = Page(render(text))
        assert {tag for tag, _ in page.elements} <= ALLOWED
        for tag, attrs in page.elements:
            allowed = {"href"} if tag == "a" else {"style", "align"} if tag in ("th",
                                                                               "td") else set()
            assert set(attrs) <= allowed, (tag, attrs)
        # Every link is one of alk's: a transcript under the run's folder, or the page.
        for href in page.links:
            assert href in ("report.html", "result.json") or href.startswith(
                f"../../transcripts/{RUN}/"), href
        # GitHub links no mention or issue inside code: none may be outside.
        prose = "".join(page.prose)
        assert "@" not in prose and "#" not in prose, prose
        code = "\n".join(page.code)
        for literal in ("<img src=x onerror=alert(1)>", "| pipes |", "**bold**",
                        "[link](javascript:alert(1))", "``` `` ` ticks", "@octocat #123",
                        "<script>alert(1)</script>", "\\x1b[31m", "\\u202eevil"):
            assert literal in code, literal
        # Each table row keeps its seven cells, whatever a name holds.
        assert {len(row) for row in page.rows if row and row[0] in ("rule", "✗", "✓", "–")
                } == {7}
    # The names, shown as they are (GitHub reads an escaped pipe in a cell as a pipe).
    text = run_markdown([hostile(real)], tmp_path)
    page = Page(render(text))
    assert HOSTILE_ID in [row[1] for row in page.table("rule")]
    # Backticks and spaces at the ends of a value stay in its span.
    assert "`<svg onload=alert(1)>@fw`" in page.code and " 1.0 `` #9 | <b> " in page.code
    assert command(RUN, HOSTILE_ID, 1) in page.code  # whole: a cut command reruns nothing
    assert any(href.endswith("/repeat-01.jsonl") and "%3Cb%3E" in href for href in page.links)
    assert "\nnext line" not in text  # a line break cannot start a block of its own


@pytest.mark.slow
def test_a_huge_run_stays_under_the_comment_limit_and_says_what_it_left_out(tmp_path):
    real = documents.three_lanes(tmp_path)[1]  # tool_error: 20 crashes
    crashed = real.scenario("tool_error")
    many = tuple(dataclasses.replace(crashed, id=f"scenario-{i:03d}", repeats=tuple(
        dataclasses.replace(r, scenario=f"scenario-{i:03d}", detail="x" * 100_000)
        for r in crashed.repeats)) for i in range(600))
    text = run_markdown([dataclasses.replace(real, scenarios=many)], tmp_path)
    assert len(text) < MAX_CHARS
    assert "more scenarios: see [report.html](report.html)" in text  # the table's rows
    assert "more scenarios with failed or void repeats not shown here" in text
    assert max(len(line) for line in text.splitlines()) < 1_000
    page = Page(github(text))
    assert {tag for tag, _ in page.elements} <= ALLOWED
    rows = page.table("rule")
    assert len(rows) > 200 and all(len(row) == 7 for row in rows)
    assert text.endswith("[report.html](report.html) · the record: [result.json](result.json)\n")


def test_a_repeat_without_a_transcript_has_no_link_but_its_rerun(tmp_path):
    document = documents.run(tmp_path)
    nominal = document.scenario("nominal")
    repeats = tuple(r if r.passed else dataclasses.replace(r, transcript="")
                    for r in nominal.repeats)
    document = dataclasses.replace(document, scenarios=(
        dataclasses.replace(nominal, repeats=repeats), *document.scenarios[1:]))
    text = run_markdown([document], tmp_path)
    [line] = [line for line in text.splitlines() if command(RUN, "nominal", 4) in line]
    assert "[transcript]" not in line
    assert any(r.outcome is Outcome.FRAMEWORK_RUNTIME for r in repeats)


def test_the_statistics_come_last_each_only_where_it_means_something(tmp_path: Path) -> None:
    # Three scenarios of 20 scored repeats: the ICC and the clustered interval mean something.
    doc = made(tmp_path / "a", observation(0.3), nominal=flaky(), tool_error=passing(20),
               steady=passing(20))
    text = run_markdown([doc], tmp_path / "a")
    order = [text.index(title) for title in ("| rule | scenario |", "### What failed and why",
                                             "### Statistics")]
    assert order == sorted(order)
    icc, clustered = doc.aggregate.icc, doc.aggregate.clustered_rate
    assert icc.value is not None and clustered is not None
    stats = text[text.index("### Statistics"):]
    assert (f"clustered pass rate {clustered.value * 100:.1f}% [{clustered.low * 100:.1f}–"
            f"{clustered.high * 100:.1f}] · ICC {icc.value:.2f}") in stats
    assert "ICC" not in stats.split("withheld")[-1] and "fault robustness (no faulted" in stats
    # One scenario of two repeats: nothing means anything, and it says so.
    one = made(tmp_path / "b", observation(0.3), repeats=2, nominal=passing(2))
    stats = run_markdown([one], tmp_path / "b").split("### Statistics", 1)[1]
    assert "ICC 0" not in stats and "consistency:" not in stats
    assert ("withheld: ICC, design effect and clustered interval (they need 3 scenarios of 5+ "
            "scored repeats; the run has 0); consistency") in stats


def test_a_proxy_run_says_what_it_cost_and_why_its_budget_stopped_it(tmp_path):
    document = documents.budget_stopped(tmp_path)
    text = run_markdown([document], tmp_path)
    assert ("\n  - tokens: 12,340 in · 2,870 out over 10 repeats (provider usage)\n"
            "  - budget 15,000 a run · 2,000 a repeat · 1 call refused · 2 answers had no "
            f"usage\n  - {document.cost.stopped}\n") in text
    # A scripted model's run has no cost to show: its usage is an estimate.
    assert "tokens:" not in run_markdown([documents.run(tmp_path)], tmp_path)


BASE = "https://ci.example.com/jobs/7/artifacts/"


def test_a_link_base_makes_every_link_absolute_under_the_served_out_folder(tmp_path):
    # Pasted into a pull request, a relative link leads nowhere: each one, put under the URL at
    # which the --out folder is served, names the file's own place in that folder.
    lanes = three_lanes(tmp_path)
    relative = Page(github(run_markdown(lanes, tmp_path))).links
    absolute = Page(github(run_markdown(lanes, tmp_path, link_base=BASE))).links
    assert len(absolute) == len(relative) > 3
    for before, after in zip(relative, absolute):
        inside = os.path.normpath(FOLDER / before)
        assert after == BASE + Path(inside).as_posix(), (before, after)
        assert before == "report.html" or (tmp_path / inside).exists()  # none is written here
    assert f"{BASE}transcripts/{RUN}/langgraph/tool_error/repeat-01.jsonl" in absolute
    assert f"{BASE}reports/{RUN}/report.html" in absolute


@pytest.mark.parametrize("base", ["ci.example.com/x", "ftp://ci.example.com/x", "https://",
                                  "https://ci.example.com/a b", "https://ci.example.com/(x)",
                                  "https://ci.example.com/x?job=7", "https://x/#top",
                                  "javascript:alert(1)//x"])
def test_a_link_base_that_is_not_a_plain_http_url_is_refused_with_an_example(tmp_path, base):
    from alk.errors import UsageError

    with pytest.raises(UsageError, match=r"--link-base: expected the http\(s\) URL .* e\.g\. "
                                         r"https://ci\.example\.com/jobs/123/artifacts"):
        run_markdown([documents.passed(tmp_path)], tmp_path, link_base=base)


def test_what_to_do_fits_the_fault_each_failure_followed(tmp_path):
    from test_html import faulted

    text = run_markdown([faulted(documents.run(tmp_path))], tmp_path)
    # Both advices, each once: the tool fault's about tool errors, the 429's about retries.
    assert text.count("what to do: A tool raised and the run ended there") == 1
    assert text.count("Read the transcript's model/call events around the wire fault") == 1
