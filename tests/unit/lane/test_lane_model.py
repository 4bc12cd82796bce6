"""alk.lane's gateway fields: the `[model]` table in each mode, script turns the gateway must
serve, a scenario's `wire_faults` and its expected `model_calls`. Every message is pinned whole,
as a lane author reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import alk_here
from helpers.lane_files import WHERE, lane_error, lane_toml, scenario, write

from alk.cost import TokenBudget
from alk.errors import LaneError
from alk.gateway.script import FAULT_KINDS
from alk.lane.load import lane_warnings, load_lane
from alk.records import Scenario
from alk.served_model import ModelSetup, WireFault

SCRIPT_MODEL = '[model]\nmode = "script"'
UNBOUNDED = 2**31 - 1


def model_lane(model: str = SCRIPT_MODEL, extra: str = "", expect: str = "") -> str:
    """A lane whose `[model]` table is `model` (TOML lines, "" for none) and whose one scenario
    has `extra` fields and an `[scenarios.expect]` of `expect`."""
    return lane_toml(scenario(extra=extra, expect=expect), raw=model)


def read_scenario(root: Path, **lane: str) -> Scenario:
    """The one scenario of `model_lane(**lane)`, loaded."""
    [read] = load_lane(write(root, model_lane(**lane))).scenarios
    return read


def model_table(**fields: str) -> str:
    return "\n".join(["[model]", *(f"{key} = {value!r}".replace("'", '"')
                                   for key, value in fields.items())])


# --- [model], mode by mode -----------------------------------------------------------------


def test_no_model_table_means_the_worker_brings_its_own(root: Path) -> None:
    assert load_lane(write(root, model_lane(model=""))).model is None


def test_script_mode_needs_nothing_and_names_a_default_model(root: Path) -> None:
    assert load_lane(write(root, model_lane())).model == ModelSetup("script", "alk-script")
    named = model_table(mode="script", name="gpt-4o-mini")
    assert load_lane(write(root, model_lane(named))).model.name == "gpt-4o-mini"


def test_replay_mode_reads_a_cassette_under_the_lane_root(root: Path) -> None:
    (root / "tapes").mkdir()
    (root / "tapes" / "a.jsonl").write_text("")
    lane = load_lane(write(root, model_lane(model_table(mode="replay",
                                                        cassette="tapes/a.jsonl"))))
    assert lane.model == ModelSetup("replay", cassette=lane.root / "tapes" / "a.jsonl")


def test_proxy_mode_reads_its_upstream_key_variable_and_recording(root: Path) -> None:
    lane = load_lane(write(root, model_lane(model_table(
        mode="proxy", upstream="https://api.example.com/v1", key_env="PROVIDER_KEY",
        name="gpt-4o-mini", record="tapes/new.jsonl"))))
    assert lane.model == ModelSetup("proxy", name="gpt-4o-mini",
                                    upstream="https://api.example.com/v1",
                                    key_env="PROVIDER_KEY",
                                    record=lane.root / "tapes" / "new.jsonl", family="openai")
    # The recording is optional; it need not exist yet.
    bare = model_table(mode="proxy", upstream="http://127.0.0.1:9", key_env="K", name="m")
    assert load_lane(write(root, model_lane(bare))).model.record is None


def test_proxy_mode_needs_the_providers_model_name(root: Path) -> None:
    # Without it the worker would ask the provider for alk-script, and fail as the agent.
    unnamed = model_table(mode="proxy", upstream="http://127.0.0.1:9", key_env="K")
    assert "model.name is required in mode 'proxy'" in lane_error(root, model_lane(unnamed))


@pytest.mark.parametrize("fields, message", [
    pytest.param({"name": "x"}, "model.mode is required: one of 'script', 'replay', 'proxy'",
                 id="mode-missing"),
    pytest.param({"mode": "live"},
                 "model.mode must be one of 'script', 'replay', 'proxy', got 'live'",
                 id="mode-unknown"),
    pytest.param({"mode": "replay"}, "model.cassette is required", id="replay-no-cassette"),
    pytest.param({"mode": "replay", "cassette": " "}, "model.cassette must not be empty",
                 id="replay-empty-cassette"),
    pytest.param({"mode": "proxy", "key_env": "K"}, "model.upstream is required",
                 id="proxy-no-upstream"),
    pytest.param({"mode": "proxy", "upstream": "https://api.example.com"},
                 "model.key_env is required", id="proxy-no-key_env"),
    pytest.param({"mode": "proxy", "upstream": "api.example.com/v1", "key_env": "K"},
                 "model.upstream must be an http(s) URL such as 'https://api.example.com/v1' "
                 "(OpenAI's base URL ends in /v1; Anthropic's and Gemini's do not), "
                 "got 'api.example.com/v1'", id="upstream-no-scheme"),
    pytest.param({"mode": "proxy", "upstream": "ftp://files.example.com", "key_env": "K"},
                 "model.upstream must be an http(s) URL such as 'https://api.example.com/v1' "
                 "(OpenAI's base URL ends in /v1; Anthropic's and Gemini's do not), "
                 "got 'ftp://files.example.com'", id="upstream-not-http"),
    pytest.param({"mode": "proxy", "upstream": "https:///v1", "key_env": "K"},
                 "model.upstream must be an http(s) URL such as 'https://api.example.com/v1' "
                 "(OpenAI's base URL ends in /v1; Anthropic's and Gemini's do not), "
                 "got 'https:///v1'", id="upstream-no-host"),
    pytest.param({"mode": "proxy", "upstream": "https://h", "key_env": "PROVIDER-KEY"},
                 "model.key_env must be an environment variable name, got 'PROVIDER-KEY'",
                 id="key_env-dash"),
    pytest.param({"mode": "proxy", "upstream": "https://h", "key_env": "1KEY"},
                 "model.key_env must be an environment variable name, got '1KEY'",
                 id="key_env-digit-first"),
    pytest.param({"mode": "script", "cassette": "a.jsonl"},
                 "model.cassette has no use in mode 'script' (it needs nothing more)",
                 id="script-with-cassette"),
    pytest.param({"mode": "script", "key_env": "K"},
                 "model.key_env has no use in mode 'script' (it needs nothing more)",
                 id="script-with-key_env"),
    pytest.param({"mode": "replay", "cassette": "a.jsonl", "upstream": "https://h"},
                 "model.upstream has no use in mode 'replay' (it needs cassette)",
                 id="replay-with-upstream"),
    pytest.param({"mode": "replay", "cassette": "a.jsonl", "record": "b.jsonl"},
                 "model.record has no use in mode 'replay' (it needs cassette)",
                 id="replay-with-record"),
    pytest.param({"mode": "proxy", "upstream": "https://h", "key_env": "K",
                  "cassette": "a.jsonl"},
                 "model.cassette has no use in mode 'proxy' (it needs key_env, record, upstream)",
                 id="proxy-with-cassette"),
    pytest.param({"mode": "script", "name": ""},
                 "model.name must be a model name of 1 to 100 characters, got ''",
                 id="name-empty"),
    pytest.param({"mode": "script", "name": "m" * 101},
                 f"model.name must be a model name of 1 to 100 characters, got {'m' * 101!r}",
                 id="name-too-long"),
])
def test_bad_model_tables(root: Path, fields: dict[str, str], message: str) -> None:
    (root / "a.jsonl").write_text("")  # a cassette that exists: only the rule under test fails
    assert lane_error(root, model_lane(model_table(**fields))) == f"{WHERE}: {message}"


BUDGETED = '[model]\nmode = "proxy"\nname = "m"\nupstream = "https://h"\nkey_env = "K"\n'


def test_max_tokens_reads_a_run_and_a_repeat_budget(root: Path) -> None:
    both = load_lane(write(root, model_lane(BUDGETED + "max_tokens = { run = 9000, repeat = 300 }")))
    assert both.model.max_tokens == TokenBudget(run=9000, repeat=300)
    one = load_lane(write(root, model_lane(BUDGETED + "max_tokens = { repeat = 300 }")))
    assert one.model.max_tokens == TokenBudget(run=None, repeat=300)
    assert load_lane(write(root, model_lane(BUDGETED))).model.max_tokens is None


@pytest.mark.parametrize("value, message", [
    ("9000", "model.max_tokens must be a table such as max_tokens = { run = 200000, repeat = "
             "20000 }"),
    ("{}", "model.max_tokens is empty: give run, repeat or both"),
    ("{ runs = 5 }", "model.max_tokens unknown field 'runs' (did you mean 'run'?)"),
    ("{ run = 0 }", "model.max_tokens.run must be a whole number of tokens from 1 to "
                    "1,000,000,000,000 (leave it out for no budget), got 0"),
    ("{ repeat = 1.5 }", "model.max_tokens.repeat must be a whole number, got a number (1.5)"),
    ("{ repeat = true }", "model.max_tokens.repeat must be a whole number, got a boolean"),
])
def test_bad_max_tokens(root: Path, value: str, message: str) -> None:
    error = lane_error(root, model_lane(BUDGETED + f"max_tokens = {value}"))
    assert error.startswith(f"{WHERE}: {message}"), error


def test_max_tokens_has_no_use_with_a_scripted_model(root: Path) -> None:
    error = lane_error(root, model_lane('[model]\nmode = "script"\nmax_tokens = { run = 5 }'))
    assert error == f"{WHERE}: model.max_tokens has no use in mode 'script' (it needs nothing more)"


def test_a_cassette_that_is_not_a_file_names_the_lane_root(root: Path) -> None:
    (root / "tapes").mkdir()
    message = lane_error(root, model_lane(model_table(mode="replay", cassette="tapes")))
    assert message == (f"{WHERE}: model.cassette names 'tapes', which is not a file under "
                       f"{root.resolve()} (record one with mode = \"proxy\" and record = ...)")
    missing = lane_error(root, model_lane(model_table(mode="replay", cassette="gone.jsonl")))
    assert missing.startswith(f"{WHERE}: model.cassette names 'gone.jsonl', which is not a file")


def test_an_unknown_model_field_suggests_the_close_one(root: Path) -> None:
    message = lane_error(root, model_lane(model_table(mode="script", moed="x")))
    assert message.startswith(f"{WHERE}: model unknown field 'moed' (did you mean 'mode'?); "
                              "allowed: answer_tool, cassette, family, key_env, max_tokens, mode, name, "
                              "record, upstream")


# --- script turns: served by the gateway, so checked only under [model] --------------------

TURN_PROBLEMS = [
    pytest.param("{ foo = 1 }", "must hold tool (a tool call), text (an answer) or choices",
                 id="no-kind"),
    pytest.param('{ tool = "" }', "tool must be a tool's name", id="tool-empty"),
    pytest.param("{ tool = 3 }", "tool must be a tool's name", id="tool-not-text"),
    pytest.param('{ tool = "t", args = {}, raw = "{}" }', "holds args or raw, not both",
                 id="args-and-raw"),
    pytest.param('{ tool = "t", args = [1] }', "args must be a table (the call's arguments)",
                 id="args-list"),
    pytest.param('{ tool = "t", raw = { a = 1 } }',
                 "raw must be a string (the arguments' text as sent)", id="raw-table"),
    pytest.param('{ tool = "t", argz = {} }', "has unknown field(s) argz", id="tool-extra"),
    pytest.param("{ text = 5 }", "text must be a string", id="text-number"),
    pytest.param('{ text = "hi", b = 1, a = 2 }', "has unknown field(s) a, b", id="text-extra"),
    pytest.param('{ choices = [], text = "x", weight = 1 }',
                 "with choices holds nothing else, got text, weight", id="choices-extra"),
    pytest.param("{ choices = [] }",
                 "choices must be a non-empty list of turns, each with a weight",
                 id="choices-empty"),
    pytest.param('{ choices = "a" }',
                 "choices must be a non-empty list of turns, each with a weight",
                 id="choices-text"),
    pytest.param('{ choices = [ { weight = 1, text = "a" }, "b" ] }',
                 "choices[1] must be a table", id="choice-not-table"),
    pytest.param('{ choices = [ { text = "a" } ] }',
                 "choices[0].weight must be a positive number, got None", id="weight-missing"),
    pytest.param('{ choices = [ { weight = 0, text = "a" } ] }',
                 "choices[0].weight must be a positive number, got 0", id="weight-zero"),
    pytest.param('{ choices = [ { weight = -0.5, text = "a" } ] }',
                 "choices[0].weight must be a positive number, got -0.5", id="weight-negative"),
    pytest.param('{ choices = [ { weight = true, text = "a" } ] }',
                 "choices[0].weight must be a positive number, got True", id="weight-bool"),
    pytest.param('{ choices = [ { weight = "1", text = "a" } ] }',
                 "choices[0].weight must be a positive number, got '1'", id="weight-text"),
    pytest.param('{ choices = [ { weight = 1, text = "a" }, { weight = 1, tool = "" } ] }',
                 "choices[1] tool must be a tool's name", id="choice-bad-turn"),
    pytest.param('{ choices = [ { weight = 1 } ] }',
                 "choices[0] must hold tool (a tool call), text (an answer) or choices",
                 id="choice-empty-turn"),
]


@pytest.mark.parametrize("turn, problem", TURN_PROBLEMS)
def test_a_turn_the_gateway_cannot_serve_is_a_lane_error_only_under_model(
        root: Path, turn: str, problem: str) -> None:
    extra = f'script = [ {{ text = "first" }}, {turn} ]'
    assert lane_error(root, model_lane(extra=extra)) == (
        f"{WHERE}: scenarios[0].script[1] {problem}")
    # A worker that scripts its own model may give its turns any shape.
    assert len(read_scenario(root, model="", extra=extra).script) == 2


def test_turns_the_gateway_can_serve_load_as_written(root: Path) -> None:
    extra = ('script = [ { tool = "lookup", args = { order = 742 } }, { tool = "t", raw = "{" },'
             ' { tool = "t" }, { choices = [ { weight = 0.8, text = "yes" },'
             ' { weight = 1, tool = "t", args = {} } ] }, { text = "done" } ]')
    read = read_scenario(root, extra=extra)
    assert read.script[3] == {"choices": [{"weight": 0.8, "text": "yes"},
                                          {"weight": 1, "tool": "t", "args": {}}]}
    assert len(read.script) == 5


# --- wire_faults ---------------------------------------------------------------------------


def test_wire_faults_are_read_with_their_defaults(root: Path) -> None:
    extra = ('wire_faults = [ { kind = "http_500" }, { call = 2, kind = "http_429", '
             'retry_after_s = 0.5 }, { call = 3, kind = "stall", seconds = 2 }, '
             '{ call = 4, kind = "stall" } ]')
    read = read_scenario(root, extra=extra)
    assert read.wire_faults == (WireFault(1, "http_500"),
                                WireFault(2, "http_429", retry_after_s=0.5),
                                WireFault(3, "stall", seconds=2.0),
                                WireFault(4, "stall"))


def test_a_status_fault_reads_its_retry_after_date_and_should_retry(root: Path) -> None:
    read = read_scenario(root, extra='wire_faults = [ { kind = "http_500", retry_after_s = 90, '
                                     'retry_after_date = true, should_retry = false } ]')
    assert read.wire_faults == (WireFault(call=1, kind="http_500", retry_after_s=90.0,
                                          retry_after_date=True, should_retry=False),)


def test_every_fault_kind_is_accepted(root: Path) -> None:
    faults = ", ".join(f'{{ call = {i}, kind = "{kind}" }}'
                       for i, kind in enumerate(FAULT_KINDS, 1))
    read = read_scenario(root, extra=f"wire_faults = [ {faults} ]")
    assert tuple(fault.kind for fault in read.wire_faults) == FAULT_KINDS


KINDS_QUOTED = ", ".join(map(repr, FAULT_KINDS))


@pytest.mark.parametrize("fault, message", [
    pytest.param('{ kind = "http_418" }',
                 f"kind must be one of {KINDS_QUOTED}, got 'http_418'", id="kind-unknown"),
    pytest.param("{ call = 2 }", f"kind is required: one of {', '.join(FAULT_KINDS)}",
                 id="kind-missing"),
    pytest.param('{ kind = "stall", retry_after_s = 1 }',
                 "retry_after_s belongs to a status fault (http_408, http_429, http_500, "
                 "http_503, http_529), not stall", id="retry-after-stall"),
    pytest.param('{ kind = "bad_tool_args", should_retry = false }',
                 "should_retry belongs to a status fault (http_408, http_429, http_500, "
                 "http_503, http_529), not bad_tool_args", id="should-retry-not-status"),
    pytest.param('{ kind = "http_503", retry_after_date = true }',
                 "retry_after_date needs retry_after_s: the delay the date is that far ahead "
                 "of the answer", id="date-without-delay"),
    pytest.param('{ kind = "http_503", should_retry = "no" }',
                 "should_retry must be true or false, got a string ('no')",
                 id="should-retry-not-bool"),
    pytest.param('{ kind = "http_429", seconds = 1 }',
                 "seconds belongs to stall only, not http_429", id="seconds-429"),
    pytest.param('{ kind = "connection_reset", seconds = 1 }',
                 "seconds belongs to stall only, not connection_reset", id="seconds-reset"),
    pytest.param('{ kind = "http_429", retry_after_s = 0 }',
                 "retry_after_s must be a positive number, got 0", id="retry-after-zero"),
    pytest.param('{ kind = "stall", seconds = -1 }',
                 "seconds must be a positive number, got -1", id="seconds-negative"),
    pytest.param('{ kind = "http_500", call = 0 }', "call must be a whole number ≥ 1, got 0",
                 id="call-zero"),
    pytest.param('{ kind = "http_500", call = -2 }', "call must be a whole number ≥ 1, got -2",
                 id="call-negative"),
    pytest.param('{ kind = "http_500", call = 1.5 }',
                 "call must be a whole number, got a number (1.5)", id="call-fraction"),
])
def test_bad_wire_faults(root: Path, fault: str, message: str) -> None:
    extra = f'wire_faults = [ {{ kind = "http_503" }}, {fault} ]'
    assert lane_error(root, model_lane(extra=extra)) == (
        f"{WHERE}: scenarios[0].wire_faults[1].{message}")


def test_wire_faults_need_the_model_table(root: Path) -> None:
    extra = 'wire_faults = [ { kind = "http_500" } ]'
    assert lane_error(root, model_lane(model="", extra=extra)) == (
        f"{WHERE}: scenarios[0].wire_faults needs the lane's [model] table: only alk's gateway "
        "injects faults on the wire (add [model] with mode = \"script\")")


# --- expect.model_calls --------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    ("0", (0, 0)),
    ("3", (3, 3)),
    ("{ min = 2 }", (2, UNBOUNDED)),
    ("{ max = 4 }", (0, 4)),
    ("{ min = 1, max = 3 }", (1, 3)),
    ("{ min = 2, max = 2 }", (2, 2)),
])
def test_model_calls_forms(root: Path, value: str, expected: tuple[int, int]) -> None:
    assert read_scenario(root, expect=f"model_calls = {value}").expect.model_calls == expected


def test_model_calls_are_unchecked_unless_given(root: Path) -> None:
    assert read_scenario(root).expect.model_calls is None


@pytest.mark.parametrize("value, shown", [
    ("{ min = 3, max = 2 }", "{'min': 3, 'max': 2}"),
    ("-1", "-1"),
    ("{ min = -1 }", "{'min': -1}"),
    ("{ max = -1 }", "{'max': -1}"),
    ("true", "True"),
    ("{ min = true }", "{'min': True}"),
    ("1.5", "1.5"),
    ('"3"', "'3'"),
    ("{}", "{}"),
    ("{ min = 1, most = 2 }", "{'min': 1, 'most': 2}"),
])
def test_bad_model_calls(root: Path, value: str, shown: str) -> None:
    assert lane_error(root, model_lane(expect=f"model_calls = {value}")) == (
        f"{WHERE}: scenarios[0].expect.model_calls must be a whole number ≥ 0 or "
        f"{{ min = N, max = M }} with min ≤ max, got {shown}")


def test_model_calls_need_the_model_table(root: Path) -> None:
    assert lane_error(root, model_lane(model="", expect="model_calls = 3")) == (
        f"{WHERE}: scenarios[0].expect.model_calls needs the lane's [model] table: only calls "
        "the gateway served are counted")


# --- what a lane holds that its model mode never uses ------------------------------------------

PROXY = model_table(mode="proxy", upstream="https://api.example.com/v1", key_env="K", name="m")
SCRIPTED = 'script = [ { text = "done" } ]'


def test_a_script_in_proxy_mode_is_warned_about_naming_the_scenarios(root: Path) -> None:
    scenarios = (scenario("nominal", extra=SCRIPTED) + scenario("no-script")
                 + scenario("counted", extra=SCRIPTED, expect="script_consumed = true"))
    lane = load_lane(write(root, lane_toml(scenarios, raw=PROXY)))
    assert lane_warnings(lane) == [
        f"{WHERE}: model.mode = 'proxy': the upstream answers every model call, so the "
        "`script` of scenarios 'nominal', 'counted' is ignored and `expect.script_consumed` of "
        "scenario 'counted' counts the answers against a script that is not served; remove "
        "them from those scenarios, or keep the scripted scenarios in a lane of their own with "
        'mode = "script"']


def test_a_script_in_replay_mode_is_warned_about_too(root: Path) -> None:
    (root / "tapes").mkdir()
    (root / "tapes" / "a.jsonl").write_text("")
    replay = model_table(mode="replay", cassette="tapes/a.jsonl")
    [warning] = lane_warnings(load_lane(write(root, model_lane(replay, extra=SCRIPTED))))
    assert warning.startswith(f"{WHERE}: model.mode = 'replay': the cassette answers every "
                              "model call, so the `script` of scenario 'a' is ignored;")


@pytest.mark.parametrize("model", [SCRIPT_MODEL, ""], ids=["script-mode", "no-model"])
def test_a_script_that_is_served_or_played_is_not_warned_about(root: Path, model: str) -> None:
    text = model_lane(model, extra=SCRIPTED, expect="script_consumed = true")
    assert lane_warnings(load_lane(write(root, text))) == []
    # Nor is a proxy lane without scripts.
    assert lane_warnings(load_lane(write(root, model_lane(PROXY)))) == []


def test_a_recording_that_names_a_folder_is_a_lane_error(root: Path) -> None:
    (root / "cassettes").mkdir()
    proxy = model_table(mode="proxy", upstream="https://api.example.com/v1", key_env="K",
                        name="m", record="cassettes")
    assert lane_error(root, model_lane(proxy)) == (
        f"{WHERE}: model.record names 'cassettes', a folder under {root.resolve()}: name the "
        "cassette file to write, such as 'cassettes/NAME.jsonl'")


def test_alk_lanes_prints_the_warning_beside_the_listing(root: Path) -> None:
    write(root, lane_toml(scenario("nominal", extra=SCRIPTED), raw=PROXY))
    listed = alk_here("lanes", cwd=root, columns=200)
    assert listed.returncode == 0 and "demo" in listed.stdout
    assert listed.stderr.startswith(f"warning: {WHERE}: model.mode = 'proxy': the upstream "
                                    "answers every model call, so the `script` of scenario "
                                    "'nominal' is ignored;")


def test_a_lane_may_name_the_one_family_its_model_serves(root: Path) -> None:
    lane = load_lane(write(root, model_lane(model_table(mode="script", family="anthropic"))))
    assert lane.model.family == "anthropic"
    assert load_lane(write(root, model_lane(model_table(mode="script")))).model.family is None
    with pytest.raises(LaneError, match=r"model\.family.*must be one of 'openai', 'anthropic', "
                                        r"'gemini', got 'claude'"):
        load_lane(write(root, model_lane(model_table(mode="script", family="claude"))))
