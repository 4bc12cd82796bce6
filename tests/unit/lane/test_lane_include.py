"""alk.lane.include: a lane that takes its scenarios from a shared scenario file
(`scenarios_from`), with its own in place of some, more of its own, and some skipped; the
lane's sha256 over both files; `[model] answer_tool`; and every message a lane author can get.
The repository's framework lanes share one file, checked last."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from alk.errors import LaneError
from alk.lane.include import merged_tables
from alk.lane.load import list_lanes, load_lane
from alk.records import SharedScenarios

from helpers.lane_files import WHERE, lane_error, lane_toml, scenario, write

SHARED = "lanes/scenarios/shared.toml"
FROM = "scenarios/shared.toml"  # as the lane names it: relative to the lane file's folder
SHARED_WHERE = f"{SHARED} (scenarios_from of {WHERE})"
SCRIPT = 'script = [ { tool = "look", args = { n = 1 } }, { text = "done" } ]'


def shared(root: Path, text: str) -> Path:
    path = root / SHARED
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def three(root: Path) -> Path:
    return shared(root, scenario("a", "Task a") + scenario("b", "Task b") +
                  scenario("c", "Task c", expect='stop_reason = "accepted"'))


def sharing(own: str = "", **top) -> str:
    return lane_toml(own, scenarios_from=FROM, **top)


# --- what a lane takes -----------------------------------------------------------------------


def test_a_lane_runs_the_shared_scenarios_in_their_order(root: Path) -> None:
    three(root)
    lane = load_lane(write(root, sharing()))

    assert [(s.id, s.task) for s in lane.scenarios] == [("a", "Task a"), ("b", "Task b"),
                                                        ("c", "Task c")]
    assert lane.scenarios[2].expect.stop_reason == "accepted"
    assert lane.shared == SharedScenarios(root / SHARED)


def test_its_own_replace_by_id_in_place_add_after_and_skip(root: Path) -> None:
    three(root)
    own = scenario("b", "Its own b") + scenario("z", "Only the lane's")
    lane = load_lane(write(root, sharing(own, skip_scenarios=["a"])))

    assert [(s.id, s.task) for s in lane.scenarios] == [("b", "Its own b"), ("c", "Task c"),
                                                        ("z", "Only the lane's")]
    # Replaced whole: the file's b had no expectation to keep either way; c's is the file's.
    assert lane.shared == SharedScenarios(root / SHARED, replaced=("b",), added=("z",),
                                          skipped=("a",))
    assert lane.shared.own("b") and lane.shared.own("z") and not lane.shared.own("c")


def test_a_shared_scenario_reads_as_the_same_one_written_in_the_lane(root: Path) -> None:
    body = scenario("a", extra=SCRIPT + '\nfaults = [ { point = "tool", error = "x" } ]',
                    expect='tool_calls = { look = 1 }')
    shared(root, body)
    inline = load_lane(write(root, lane_toml(body), name="inline")).scenarios
    assert load_lane(write(root, sharing())).scenarios == inline


def test_the_digest_covers_the_scenario_file(root: Path) -> None:
    path = write(root, sharing())
    three(root)
    first = load_lane(path).sha256
    shared(root, (root / SHARED).read_text() + "# a comment: the bytes changed\n")
    assert load_lane(path).sha256 != first  # a resumed run is told the lane changed

    alone = write(root, lane_toml(), name="alone")  # a lane with no scenario file: as before
    assert load_lane(alone).sha256 == hashlib.sha256(alone.read_bytes()).hexdigest()


def test_a_folder_of_scenario_files_beside_the_lanes_is_no_lane(root: Path) -> None:
    three(root)
    write(root, sharing())
    lanes, errors = list_lanes(root / "lanes")
    assert ([lane.name for lane in lanes], errors) == (["demo"], [])


def test_merged_tables_gives_the_scenarios_a_lane_runs(root: Path) -> None:
    three(root)
    data = merged_tables(write(root, sharing(scenario("b", "Its own b"), skip_scenarios=["c"])))
    assert [(s["id"], s["task"]) for s in data["scenarios"]] == [("a", "Task a"),
                                                                ("b", "Its own b")]


# --- a list of scenario files -----------------------------------------------------------------


OTHER = "lanes/scenarios/other.toml"
OTHER_FROM = "scenarios/other.toml"


def two(root: Path) -> None:
    three(root)
    other = root / OTHER
    other.write_text(scenario("x", "Task x") + scenario("y", "Task y"), encoding="utf-8")


def test_a_list_runs_each_files_scenarios_in_turn(root: Path) -> None:
    two(root)
    own = scenario("y", "Its own y") + scenario("z", "Only the lane's")
    lane = load_lane(write(root, lane_toml(own, scenarios_from=[FROM, OTHER_FROM],
                                           skip_scenarios=["b"])))

    assert [(s.id, s.task) for s in lane.scenarios] == [
        ("a", "Task a"), ("c", "Task c"), ("x", "Task x"), ("y", "Its own y"),
        ("z", "Only the lane's")]
    assert lane.shared == SharedScenarios(root / SHARED, replaced=("y",), added=("z",),
                                          skipped=("b",), more=(root / OTHER,))
    assert lane.shared.paths == (root / SHARED, root / OTHER)


def test_a_list_of_one_is_the_file_itself_and_the_digest_covers_every_file(root: Path) -> None:
    two(root)
    alone = load_lane(write(root, lane_toml(scenarios_from=FROM), name="alone"))
    listed = load_lane(write(root, lane_toml(scenarios_from=[FROM]), name="listed"))
    assert (listed.scenarios, listed.shared) == (alone.scenarios, alone.shared)

    path = write(root, lane_toml(scenarios_from=[FROM, OTHER_FROM]))
    first = load_lane(path).sha256
    (root / OTHER).write_text((root / OTHER).read_text() + "# changed\n", encoding="utf-8")
    assert load_lane(path).sha256 != first  # the second file is the lane's too


@pytest.mark.parametrize(("value", "other", "message"), [
    ([], None, f"{WHERE}: scenarios_from must name at least one scenario file"),
    ([FROM, 3], None, f"{WHERE}: scenarios_from[1] must be a scenario file's path, got 3"),
    ([FROM, FROM], None, f"{WHERE}: scenarios_from[1] names '{FROM}' twice"),
    (3, None, f"{WHERE}: scenarios_from must be a string or a list, got a whole number (3)"),
    ([FROM, OTHER_FROM], scenario("b", "Another b"),
     f"{OTHER} (scenarios_from of {WHERE}): scenarios[0].id 'b' is also scenarios[1] of "
     f"{SHARED}; a scenario id is in one scenario file only"),
    ([FROM, "scenarios/none.toml"], None,
     f"{WHERE}: scenarios_from names 'scenarios/none.toml', which cannot be read at "
     "lanes/scenarios/none.toml (No such file or directory); the path is relative to the lane "
     "file's folder"),
])
def test_a_wrong_list_is_refused_naming_the_entry(root: Path, value, other: str | None,
                                                  message: str) -> None:
    three(root)
    if other is not None:
        (root / OTHER).write_text(other, encoding="utf-8")
    assert lane_error(root, lane_toml(scenarios_from=value)) == message


def test_a_skip_of_no_files_scenario_names_every_file(root: Path) -> None:
    two(root)
    assert lane_error(root, lane_toml(scenarios_from=[FROM, OTHER_FROM],
                                      skip_scenarios=["q"])) == (
        f"{WHERE}: skip_scenarios[0] must name a scenario of {SHARED}, {OTHER}, got 'q'; its "
        "scenarios: a, b, c, x, y")


# --- answer_tool -----------------------------------------------------------------------------


ANSWER = '[model]\nmode = "script"\nanswer_tool = { name = "final_answer", arg = "answer" }'


def test_answer_tool_makes_each_text_turn_a_call_of_it(root: Path) -> None:
    choices = ('script = [ { choices = [ { weight = 0.7, tool = "look" }, '
               '{ weight = 0.3, mistake = true, text = "no" } ] }, { text = "done" } ]')
    shared(root, scenario("a", extra=choices))
    [read] = load_lane(write(root, sharing(raw=ANSWER))).scenarios

    assert read.script == (
        {"choices": [{"weight": 0.7, "tool": "look"},
                     {"weight": 0.3, "mistake": True, "tool": "final_answer",
                      "args": {"answer": "no"}}]},
        {"tool": "final_answer", "args": {"answer": "done"}})


@pytest.mark.parametrize(("model", "message"), [
    ('[model]\nmode = "replay"\ncassette = "c.jsonl"\nanswer_tool = { name = "f", arg = "a" }',
     "model.answer_tool has no use in mode 'replay' (it needs cassette)"),
    ('[model]\nmode = "script"\nanswer_tool = { name = "f" }',
     "model.answer_tool.arg is required"),
    ('[model]\nmode = "script"\nanswer_tool = { name = "f", arg = "a b" }',
     "model.answer_tool.arg must be a tool's argument (letters, digits, '.', '_' or '-'), "
     "got 'a b'"),
])
def test_a_wrong_answer_tool_is_refused(root: Path, model: str, message: str) -> None:
    (root / "c.jsonl").write_text("")
    assert lane_error(root, lane_toml(raw=model)) == f"{WHERE}: {message}"


# --- when it is wrong --------------------------------------------------------------------------


@pytest.mark.parametrize(("shared_text", "top", "message"), [
    (None, {}, f"{WHERE}: scenarios_from names 'scenarios/shared.toml', which cannot be read at "
               f"lanes/{FROM} (No such file or directory); the path is relative to the lane "
               "file's folder"),
    (scenario("a") + 'framework = "x"\n', {},
     f"{SHARED_WHERE}: scenarios[0] unknown field 'framework'; allowed: baseline, expect, "
     "faults, id, input, kill_at, max_attempts, script, task, tool_faults, wire_faults"),
    ('framework = "x"\n' + scenario("a"), {},
     f"{SHARED_WHERE}: framework: a scenario file holds only [[scenarios]] and the [[tools]] "
     "they call; lane fields belong in each lane that names it"),
    ('scenarios_from = "other.toml"\n' + scenario("a"), {},
     f"{SHARED_WHERE}: scenarios_from: a scenario file names no other (one level only); move "
     "those scenarios into this file, or have the lane name that file instead"),
    ("", {}, f"{SHARED_WHERE}: scenarios must hold at least one [[scenarios]] table"),
    (scenario("a") + scenario("a"), {},
     f"{SHARED_WHERE}: scenarios[1].id 'a' is a duplicate; scenario ids must be unique"),
    (scenario("a", extra="kill_at = 3"), {},
     f"{SHARED_WHERE}: scenarios[0].kill_at must be a table, got a whole number (3)"),
    (scenario("a") + scenario("b"), {"skip_scenarios": ["x"]},
     f"{WHERE}: skip_scenarios[0] must name a scenario of {SHARED}, got 'x'; its scenarios: "
     "a, b"),
    (scenario("a") + scenario("b"), {"skip_scenarios": ["a", "a"]},
     f"{WHERE}: skip_scenarios[1] names 'a' twice"),
    (scenario("a"), {"skip_scenarios": ["a"]},
     f"{WHERE}: skip_scenarios leaves no scenario: {SHARED} has only a"),
    (scenario("a", extra='baseline = "b"\nfaults = [ { point = "tool" } ]') + scenario("b"),
     {"skip_scenarios": ["b"]},
     f"{SHARED_WHERE}: scenarios[0].baseline 'b' names no scenario of the lane; expected one "
     "of a"),
])
def test_a_wrong_scenario_file_or_include_names_the_file_and_field(
        root: Path, shared_text: str | None, top: dict, message: str) -> None:
    if shared_text is not None:
        shared(root, shared_text)
    assert lane_error(root, sharing(**top)) == message


def test_the_lanes_own_scenarios_are_checked_in_the_lane(root: Path) -> None:
    shared(root, scenario("a") + scenario("b"))
    assert lane_error(root, sharing(scenario("a"), skip_scenarios=["a"])) == (
        f"{WHERE}: skip_scenarios names 'a', which the lane's own [[scenarios]] also gives: "
        "skip it or give it, not both")
    assert lane_error(root, sharing(scenario("z") + scenario("z"))) == (
        f"{WHERE}: scenarios[1].id 'z' is a duplicate; scenario ids must be unique")
    assert lane_error(root, sharing(scenario("a", task=""))) == (
        f"{WHERE}: scenarios[0].task must not be empty")


def test_skip_needs_a_scenario_file_and_a_lane_cannot_include_itself(root: Path) -> None:
    assert lane_error(root, lane_toml(skip_scenarios=["a"])) == (
        f"{WHERE}: skip_scenarios needs scenarios_from: it names scenarios of the scenario "
        "file the lane takes its scenarios from")
    assert lane_error(root, lane_toml(scenarios_from="demo.toml")) == (
        f"{WHERE}: scenarios_from names the lane file itself; name a file of [[scenarios]] "
        "only (lanes/scenarios/NAME.toml, say)")


def test_a_scenario_file_that_is_no_file_is_refused_before_it_is_read(root: Path) -> None:
    # A FIFO would block the read for ever; a folder is no scenario file either.
    (root / "lanes" / "scenarios").mkdir()
    os.mkfifo(root / "lanes" / "scenarios" / "pipe.toml")
    for name in ("scenarios", "scenarios/pipe.toml"):
        assert lane_error(root, lane_toml(scenarios_from=name)) == (
            f"{WHERE}: scenarios_from names lanes/{name}, which is not a file; name a file of "
            "[[scenarios]] (lanes/scenarios/NAME.toml, say)")


def test_a_scenario_file_given_as_a_lane_says_what_it_is(root: Path) -> None:
    three(root)
    with pytest.raises(LaneError) as caught:
        load_lane(root / SHARED)
    assert str(caught.value) == (
        f"{SHARED}: is a scenario file (only [[scenarios]]), not a lane: a lane names it with "
        "scenarios_from = \"...\"; run such a lane instead")


# --- this repository's lanes -------------------------------------------------------------------


ROOT = Path(__file__).resolve().parents[3]
FRAMEWORKS = ("autogen", "langgraph", "llamaindex", "openai-agents", "pydantic-ai",
              "smolagents", "strands", "ai-sdk", "openai-agents-js", "mastra",
              "langgraph-js")


def test_the_framework_lanes_share_one_scenario_file() -> None:
    lanes = [load_lane(ROOT / "lanes" / f"{name}.toml") for name in FRAMEWORKS]
    assert {lane.shared.path.resolve() for lane in lanes if lane.shared} == {
        ROOT / "lanes" / "scenarios" / "frameworks.toml"}
    assert all(lane.shared for lane in lanes)
    # Every one runs every shared scenario as it is: none replaced, skipped or added, so the
    # README's table compares the frameworks on the same definitions.
    assert [(lane.name, lane.shared.replaced, lane.shared.skipped, lane.shared.added)
            for lane in lanes] == [(name, (), (), ()) for name in FRAMEWORKS]
    shared = [s.id for s in load_lane(ROOT / "lanes" / "pydantic-ai.toml").scenarios]
    assert all([s.id for s in lane.scenarios] == shared for lane in lanes)


# The lanes that speak a provider's own API: the shared file, then their family's.
NATIVE = {"anthropic": "anthropic", "pydantic-ai-anthropic": "anthropic",
          "langgraph-anthropic": "anthropic", "google-genai": "gemini",
          "pydantic-ai-google": "gemini"}


def test_the_native_lanes_run_the_shared_file_and_their_familys_whole() -> None:
    scenarios = ROOT / "lanes" / "scenarios"
    shared = [s.id for s in load_lane(ROOT / "lanes" / "pydantic-ai.toml").scenarios]
    for name, family in NATIVE.items():
        lane = load_lane(ROOT / "lanes" / f"{name}.toml")
        assert lane.model.family == family, name
        assert [p.resolve() for p in lane.shared.paths] == [scenarios / "frameworks.toml",
                                                            scenarios / f"{family}.toml"]
        assert (lane.shared.replaced, lane.shared.skipped, lane.shared.added) == ((), (), ())
        own = [s.id for s in lane.scenarios][len(shared):]
        assert [s.id for s in lane.scenarios][:len(shared)] == shared
        assert own and all(sid.startswith(f"{family}-") for sid in own), (name, own)


def test_smolagents_runs_the_shared_scripts_ending_with_its_final_answer() -> None:
    by_id = {s.id: s for s in load_lane(ROOT / "lanes" / "pydantic-ai.toml").scenarios}
    for scenario in load_lane(ROOT / "lanes" / "smolagents.toml").scenarios:
        assert scenario.script[:-1] == by_id[scenario.id].script[:-1] or scenario.sampled
        assert scenario.script[-1] == {"tool": "final_answer", "args": {
            "answer": by_id[scenario.id].script[-1]["text"]}}
