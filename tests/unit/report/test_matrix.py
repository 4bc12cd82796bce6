"""alk.report.matrix: the lane × scenario matrix of a run of several lanes, from documents alk
made itself (`run_lane` with scripted runners), rendered as an 80-column terminal shows it."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from alk.api import RunOptions, RunSetup, run_lane
from alk.records import Expectations, Scenario
from alk.report.matrix import lane_matrix
from alk.result.document import RunDocument

from helpers.scripted import PASSING, ScenarioRunner, ready

pytestmark = pytest.mark.usefixtures("private_temp")

WRONG = dataclasses.replace(PASSING, result={**PASSING.result, "output": "bye"})
BROKEN = OSError(28, "No space left on device")  # alk's own failure: a void repeat
TOO_OLD = dataclasses.replace(PASSING, ready=ready("0.1"))
# Every lane of this repository: what `alk run --lane 'lanes/*.toml'` puts side by side.
ALL_LANES = ("reference", "pydantic-ai", "langgraph", "openai-agents", "smolagents",
             "llamaindex", "strands", "autogen", "anthropic", "google-genai",
             "pydantic-ai-anthropic", "pydantic-ai-google", "langgraph-anthropic", "adk",
             "claude-agent-sdk", "claude-code", "codex", "gemini-cli", "ai-sdk",
             "openai-agents-js", "mastra", "langgraph-js", "openai-agents-mcp",
             "pydantic-ai-mcp", "langgraph-mcp", "smolagents-mcp", "llamaindex-mcp",
             "strands-mcp", "autogen-mcp", "ai-sdk-mcp", "openai-agents-js-mcp", "mastra-mcp",
             "langgraph-js-mcp")


def document(tmp_path, make_lane, name: str, probe=PASSING, **scripts) -> RunDocument:
    lane = make_lane(name=name, scenarios=tuple(
        Scenario(sid, f"task {sid}", {}, Expectations(output_equals="hi")) for sid in scripts))
    repeats = max(len(script) for script in scripts.values()) or 10
    return run_lane(lane, RunOptions(repeats=repeats, seed=1),
                    RunSetup(out_dir=tmp_path / name, runner=ScenarioRunner(probe, **scripts),
                             environ={"PATH": "/bin"})).document


def render(documents, width: int = 80, crop: bool = True) -> list[str]:
    out = io.StringIO()
    Console(width=width, file=out).print(lane_matrix(documents), crop=crop)
    return out.getvalue().splitlines()


def cells(lines: list[str], first: str) -> list[str]:
    """The row that begins with `first`, cut into its cells (columns are 2+ spaces apart)."""
    [line] = [line for line in lines if line.startswith(first + " ")]
    return re.split(r"\s{2,}", line.strip())


@pytest.fixture
def three(tmp_path, make_lane) -> list[RunDocument]:
    return [
        document(tmp_path, make_lane, "pydantic-ai", nominal=[PASSING] * 10,
                 **{"tool-raises": [WRONG] * 10, "sampled": [PASSING] * 7 + [WRONG] * 3}),
        document(tmp_path, make_lane, "langgraph", nominal=[PASSING] * 10,
                 **{"tool-raises": [PASSING] * 9 + [WRONG], "malformed-output": [BROKEN] * 10}),
        document(tmp_path, make_lane, "openai-agents", probe=TOO_OLD,
                 nominal=[], **{"tool-raises": []}),
    ]


def test_a_row_a_scenario_of_any_lane_in_order_and_a_cell_its_verdict_rate_interval(three):
    lines = render(three)
    assert lines[0].rstrip() == "lanes × scenarios: verdict, pass % [95% interval]"
    assert cells(lines, "scenario") == ["scenario", "pydantic-ai", "langgraph", "openai-agents"]
    rows = [line.split()[0] for line in lines[3:] if line.strip()]
    assert rows == ["nominal", "tool-raises", "sampled", "malformed-output", "void"]
    # Wilson intervals of 10/10, 0/10, 7/10 and 9/10.
    assert cells(lines, "nominal") == ["nominal", "pass 100 [72–100]", "pass 100 [72–100]",
                                       "void (preflight)"]
    assert cells(lines, "tool-raises") == ["tool-raises", "fail 0 [0–28]", "flaky 90 [60–98]",
                                           "void (preflight)"]
    # A lane without the scenario shows a dash; a void scenario has no rate to show.
    assert cells(lines, "sampled") == ["sampled", "flaky 70 [40–89]", "—", "—"]
    assert cells(lines, "malformed-output") == ["malformed-output", "—", "void", "—"]


def test_cells_are_the_documents_own_figures(three):
    lines = render(three)
    for entry in three[0].scenarios:
        low, high = entry.stats.ci
        assert cells(lines, entry.id)[1] == (f"{entry.verdict} {entry.stats.pass_rate:.0%} "
                                             f"[{low:.0%}–{high:.0%}]").replace("%", "")


def test_three_lanes_fit_80_columns_whole(three):
    lines = render(three, crop=False)
    assert max(map(cell_len, lines)) <= 80
    # title, header, rule, 4 rows, the void row
    assert len([line for line in lines if line.strip()]) == 8


def test_every_lane_of_this_repository_shows_whole_at_80_columns(tmp_path, make_lane):
    lanes = Path(__file__).resolve().parents[3] / "lanes"
    assert sorted(ALL_LANES) == sorted(path.stem for path in lanes.glob("*.toml"))
    documents = [document(tmp_path, make_lane, name, nominal=[PASSING] * 10,
                          **{"crash-after-effect": [WRONG] * 10}) for name in ALL_LANES]
    lines = render(documents, crop=False)
    assert max(map(cell_len, lines)) <= 80
    text = "\n".join(lines)
    for name in (*ALL_LANES, "crash-after-effect", "pass 100 [72–100]", "fail 0 [0–28]"):
        assert name in text


def test_void_repeats_are_a_rate_under_a_cell_and_for_each_lane(three, tmp_path, make_lane):
    # 1 of 3 scenarios void in langgraph (10 of 30 repeats); nothing ran in openai-agents.
    assert cells(render(three), "void") == ["void", "0%", "33%", "—"]
    half = document(tmp_path, make_lane, "half", nominal=[PASSING] * 6 + [BROKEN] * 4,
                    sampled=[PASSING] * 10)
    lines = render([half, three[0]])
    at = lines.index(next(line for line in lines if line.startswith("nominal ")))
    # The pass rate of 6 scored repeats, and under it the 4 of 10 that were void.
    assert cells(lines, "nominal")[1] == "pass 100 [61–100]"
    assert lines[at + 1].split() == ["void", "40%"]
    assert lines[at + 2].startswith("sampled ")  # no void, no line
    assert cells(lines, "void") == ["void", "20%", "0%"]


def test_what_a_document_holds_is_shown_as_text_never_as_markup_or_escapes(three):
    hostile = dataclasses.replace(
        three[0], lane=dataclasses.replace(three[0].lane, name="x\x1b]0;owned\x07"),
        scenarios=tuple(dataclasses.replace(entry, id=f"[bold]{entry.id}")
                        for entry in three[0].scenarios))
    text = "\n".join(render([hostile, three[1]], width=120))
    assert "\x1b" not in text and "\x07" not in text
    assert "[bold]nominal" in text and "x\\x1b]0;owned\\x07" in text
