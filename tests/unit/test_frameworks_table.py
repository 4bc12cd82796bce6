"""scripts/frameworks_table.py: the README's "Frameworks measured" block is exactly what `render`
makes of the committed docs/frameworks.json (so it cannot be edited by hand), and `measure`
reads from a run's transcripts what the framework's stack did under a wire fault."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("frameworks_table",
                                               ROOT / "scripts" / "frameworks_table.py")
assert _spec is not None and _spec.loader is not None
table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table)


def test_the_readme_block_is_the_render_of_the_committed_summary():
    data = json.loads((ROOT / "docs" / "frameworks.json").read_text(encoding="utf-8"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert table.block_of(readme) == table.render(data), (
        "README.md's frameworks block is not generated from docs/frameworks.json: run "
        "`python scripts/frameworks_table.py render --write`")


def test_render_write_replaces_the_block_between_the_markers_and_nothing_else(tmp_path):
    data = tmp_path / "frameworks.json"
    data.write_text(json.dumps({"schema": table.SCHEMA, "frameworks": []}))
    readme = tmp_path / "README.md"
    before, after = "# Title\n\ntext above\n", "\ntext below\n"
    readme.write_text(f"{before}{table.START}\nan old table\n{table.END}{after}")
    assert table.main(["render", "--data", str(data), "--write", "--readme", str(readme)]) == 0
    assert readme.read_text() == (f"{before}{table.START}\nNo framework measured yet.\n"
                                  f"{table.END}{after}")


# A run made by hand, a repeat a scenario: a 429 whose retry came 0.25 s after it (the events'
# `t` less their `ms`); a cut stream that ended the run with an error; bad tool arguments the
# tool was run with anyway (after a late event of the tool before), or handed back to the
# model; and a sampled turn that drew the unlikelier choice.
def call(t: float, number: int, status: int | None, ms: float, *, retry: bool = False,
         fault: str | None = None, stream: bool = False, tools: tuple[str, ...] = (),
         turn: int | None = None) -> dict:
    return {"t": t, "source": "harness", "channel": "model", "type": "call",
            "payload": {"call": number, "api": "chat", "stream": stream, "status": status,
                        "ms": ms, "turn": turn, "retry": retry, "fault": fault,
                        "tool_calls": list(tools), "text_chars": 0, "tokens": None}}


def event(source: str, channel: str, kind: str, **payload) -> dict:
    return {"t": 2.0, "source": source, "channel": channel, "type": kind, "payload": payload}


def tool(name: str, **args) -> dict:
    return event("worker", "tool", "call", name=name, args=args)


def result(stop: str, output: str = "") -> dict:
    return event("worker", "agent", "result", output=output, stop_reason=stop)


def failed(name: str, expected, actual) -> dict:
    return event("harness", "harness", "check", name=name, ok=False, expected=expected,
                 actual=actual)


SAMPLED = [{"tool": "lookup_order"},
           {"choices": [{"weight": 0.7, "tool": "write_report"},
                        {"weight": 0.3, "text": "There is no report to write"}]}]
MADE = {  # scenario → (script, events, cause, detail)
    "wire-429": ([], [call(1.0003, 1, 429, 0.3, fault="http_429"),
                      call(1.28, 2, 200, 30.0, retry=True, turn=0), call(1.3, 3, 200, 0.2),
                      result("accepted", "Report for order 742 written")], "passed", ""),
    "wire-truncated": ([], [call(1.0, 1, 200, 0.2, stream=True, turn=0),
                            call(1.1, 2, 200, 0.2, fault="truncated_stream", stream=True),
                            result("error:APIConnectionError"),
                            failed("stop_reason", "accepted", "error:APIConnectionError")],
                       "fault_unrecovered",
                       "the gateway injected truncated_stream@call2 and no model call after "
                       "it was answered in full; then wrong_stop_reason: stop_reason: expected "
                       "\"accepted\", got \"error:APIConnectionError\"; files: missing"),
    "wire-bad-args": ([], [call(1.0, 1, 200, 0.2, tools=("lookup_order",), turn=0),
                           call(1.1, 2, 200, 0.2, fault="bad_tool_args",
                                tools=("write_report",)),
                           tool("lookup_order", order="742"), tool("write_report", order=None),
                           call(1.2, 3, 200, 0.2, tools=("write_report",), turn=1),
                           tool("write_report", order="742"), result("accepted", "written"),
                           failed("tool_calls.write_report", 1, 2)],
                      "fault_mishandled", ("the gateway injected bad_tool_args@call2; the "
                                           "framework went on past it and the run failed; "
                                           "then wrong_tool_calls: tool_calls.write_report: "
                                           "expected 1, got 2")),
    "wire-bad-args-handed-back": ([], [
        call(1.0, 1, 200, 0.2, tools=("lookup_order",), turn=0),
        tool("lookup_order", order="742"),
        call(1.1, 2, 200, 0.2, fault="bad_tool_args", tools=("write_report",)),
        call(1.2, 3, 200, 0.2, tools=("write_report",), turn=1),
        tool("write_report", order="742"), result("accepted", "written")], "passed", ""),
    "sampled": (SAMPLED, [call(1.0, 1, 200, 0.2, tools=("lookup_order",), turn=0),
                          call(1.1, 2, 200, 0.2, turn=1), result("accepted", "no report"),
                          failed("files[lab-output/effects.json].json_length", 1, "missing")],
                "wrong_files", "files[lab-output/effects.json].json_length: expected 1"),
}


def made_run(tmp_path: Path) -> Path:
    # A stand-in, not alk's: kept two folders down, where the check of the result documents
    # alk writes in a test (tests/conftest.py) does not look.
    tmp_path = tmp_path / "stand-in" / "out"
    scenarios = []
    for sid, (script, events, cause, detail) in MADE.items():
        path = tmp_path / "transcripts" / "RUN" / sid / "repeat-01.jsonl"
        path.parent.mkdir(parents=True)
        start = event("harness", "harness", "start", scenario={"id": sid, "script": script})
        path.write_text("".join(json.dumps({"seq": seq, **e}) + "\n"
                                for seq, e in enumerate([start, *events], 1)) + "not json\n")
        ok = cause == "passed"
        scenarios.append({
            "id": sid, "stats": {
                "verdict": "pass" if ok else "fail",
                "counts": {"requested": 1, "completed": 1, "void": 0, "scored": 1,
                           "passed": int(ok)},
                "causes": [[cause, 1]]},
            "repeats": [{"outcome": "pass" if ok else "agent" if cause.startswith("wrong_")
                         else "framework_runtime", "cause": cause,
                         "detail": detail, "duration_s": 2.5, "model": None,
                         "transcript": f"transcripts/RUN/{sid}/repeat-01.jsonl"}]})
    (tmp_path / "lanes").mkdir(parents=True)
    (tmp_path / "lanes" / "made.toml").write_text(
        '[[scenarios]]\nid = "wire-429"\n'
        'wire_faults = [ { call = 1, kind = "http_429", retry_after_s = 0.2 } ]\n')
    document = {
        "run_id": "RUN", "alk_version": "0.1.0", "status": "complete",
        "started_at": "2026-11-30T12:00:00+00:00", "finished_at": "2026-11-30T12:01:30+00:00",
        "lane": {"name": "made", "path": "lanes/made.toml", "framework": "made"},
        "gate": {"framework": "made-agents", "version": "1.2.3"},
        "settings": {"seed": 7, "repeats": 1},
        "paths": {"result": "reports/RUN/result.json"}, "scenarios": scenarios}
    result_path = tmp_path / "reports" / "RUN" / "result.json"
    result_path.parent.mkdir(parents=True)
    result_path.write_text(json.dumps(document))
    return result_path


def test_measure_reads_what_the_stack_did_from_the_calls_and_the_tools_it_ran(tmp_path):
    [framework] = table.measure([made_run(tmp_path)])["frameworks"]
    assert (framework["framework"], framework["version"], framework["run_s"]) == (
        "made-agents", "1.2.3", 90.0)
    limit = framework["scenarios"]["wire-429"]
    # From the 429's arrival (1.0003 - 0.0003) to the retry's (1.28 - 0.03): 0.25 s.
    assert limit["wire"] == {"fault": "http_429@call1", "api": "chat", "stream": False,
                             "fired": 1, "ran_tool": 0, "ran": None, "retried": 1,
                             "asked_again": 0, "wait_s": 0.25, "retry_after_s": 0.2,
                             "honoured": 1}
    assert (limit["calls"], limit["retries"]) == (3, 1)
    assert table.cell(limit) == "pass 1/1, retried after 0.25 s, Retry-After honoured"

    cut = framework["scenarios"]["wire-truncated"]
    assert cut["wire"]["retried"] == cut["wire"]["asked_again"] == 0
    assert cut["failure"]["stop"] == "error:APIConnectionError"
    assert cut["failure"]["detail"] == ('wrong_stop_reason: stop_reason: expected "accepted", '
                                        'got "error:APIConnectionError"')
    assert table.cell(cut) == ("fail 0/1 (framework: fault_unrecovered): cut stream raised "
                               "APIConnectionError, not retried")

    # The tool the bad answer named ran with what the framework made of its arguments; the
    # lookup reported late, and the write the next answer asked for, are not counted.
    bad = framework["scenarios"]["wire-bad-args"]
    assert (bad["wire"]["ran_tool"], bad["wire"]["ran"], bad["wire"]["asked_again"]) == (
        1, {"name": "write_report", "args": {"order": None}}, 1)
    assert table.cell(bad) == ('fail 0/1 (framework: fault_mishandled): ran write_report '
                               'with `{"order": null}`, model asked again')

    handed_back = framework["scenarios"]["wire-bad-args-handed-back"]
    assert (handed_back["wire"]["ran_tool"], handed_back["wire"]["asked_again"]) == (0, 1)
    assert table.cell(handed_back) == "pass 1/1, model asked again"

    sampled = framework["scenarios"]["sampled"]
    assert sampled["drawn"] == {"weight": 0.7, "likeliest": 0, "other": 1,
                                "likeliest_passed": 0}
    # Whose failure it was, as alk attributed it: the lane's mistake, the agent's.
    assert sampled["blame"] == {"agent/wrong_files": 1}
    assert table.cell(sampled) == "fail 0/1 (agent: wrong_files), as drawn (0 drew the 0.7 turn)"


def test_blame_names_each_layer_and_its_causes_with_counts_when_they_differ():
    assert table.blamed({"framework_runtime/effect_repeated": 19}) == \
        "framework: effect_repeated"
    assert table.blamed({"framework_runtime/effect_repeated": 16,
                         "framework_runtime/state_lost": 3, "agent/wrong_files": 1}) == (
        "framework: effect_repeated ×16, state_lost ×3; agent: wrong_files ×1")


def test_update_puts_a_runs_scenarios_in_place_of_its_lanes_and_says_so(tmp_path):
    """A run of some of a lane's scenarios measured again replaces those, keeps the rest, and
    the README's text names what was run again."""
    result_path = made_run(tmp_path)
    data = table.measure([result_path])
    again = table.measure_run(result_path)
    again["run_id"], again["scenarios"] = "AGAIN", {"sampled": {
        **again["scenarios"]["sampled"], "passed": 1, "verdict": "pass"}}
    kept = data["frameworks"][0]["scenarios"]["wire-429"]
    [entry] = table.update(data, [again])["frameworks"]
    assert entry["run_id"] == "RUN" and entry["scenarios"]["wire-429"] is kept
    assert entry["scenarios"]["sampled"]["passed"] == 1
    assert entry["remeasured"] == [{"run_id": "AGAIN", "alk_version": "0.1.0",
                                    "status": "complete", "seed": 7, "run_s": 90.0,
                                    "repeat_s": 2.5, "scenarios": ["sampled"]}]
    assert ("The 1 scenarios that did not pass every repeat were run again with alk 0.1.0 "
            "(1 run, one lane at a time") in table.render(data)
    with pytest.raises(SystemExit, match="made: run AGAIN has 5 repeats a scenario, the "
                                         "summary 1: run it with --repeats 1"):
        table.update(data, [{**again, "repeats": 5}])
    with pytest.raises(SystemExit, match="other: not in the summary"):
        table.update(data, [{**again, "lane": "other"}])


def test_update_adds_a_scenario_the_lane_had_not_run_and_says_why_it_ran_again(tmp_path):
    """A lane that takes the shared definitions runs again for that reason, not its verdicts:
    the README's text says so, apart from the runs made again for their verdicts, and a
    scenario it had not run is added to its entry."""
    result_path = made_run(tmp_path)
    data = table.measure([result_path])
    first = table.measure_run(result_path)
    verdict = {**first, "run_id": "VERDICT", "scenarios": {
        "sampled": first["scenarios"]["sampled"]}}
    shared = {**first, "run_id": "SHARED", "scenarios": {
        "wire-429": first["scenarios"]["wire-429"],
        "malformed-output": {**first["scenarios"]["sampled"], "passed": 1}}}
    assert "malformed-output" not in data["frameworks"][0]["scenarios"]
    table.update(data, [verdict])
    [entry] = table.update(data, [shared], because="it now runs the shared ones")["frameworks"]
    assert entry["scenarios"]["malformed-output"]["passed"] == 1
    assert [(r["run_id"], r.get("because")) for r in entry["remeasured"]] == [
        ("VERDICT", None), ("SHARED", "it now runs the shared ones")]
    assert entry["remeasured"][1]["scenarios"] == ["malformed-output", "wire-429"]
    text = table.render(data)
    assert ("The 1 scenarios that did not pass every repeat were run again with alk 0.1.0 "
            "(1 run, one lane at a time, each with its first run's seed, so the same sampled "
            "draws). Measured later, because it now runs the shared ones: 2 scenarios of "
            "made (1 run with alk 0.1.0, each with its lane's first run's seed). A scenario "
            "measured more than once shows its latest run") in text
    # Saved and read back, the reason stays with its run.
    out = tmp_path / "frameworks.json"
    out.write_text(table.dump(data))
    assert json.loads(out.read_text())["frameworks"][0]["remeasured"][1]["because"] == (
        "it now runs the shared ones")
    with pytest.raises(SystemExit):
        table.main(["measure", "--because", "why", "--out", str(out), str(result_path)])


def test_add_puts_new_lanes_in_their_table_and_refuses_one_already_measured(tmp_path):
    """A lane measured for the first time joins the summary beside the runs kept; a lane that
    serves another family than OpenAI's has a table of its own, and so do the coding agents."""
    result_path = made_run(tmp_path)
    data = table.measure([result_path])
    run = table.measure_run(result_path)
    assert run["family"] == "openai"  # the made lane names none: every family is served
    native = {**run, "lane": "made-anthropic", "family": "anthropic"}
    coding = {**run, "lane": "codex"}  # named in GROUPS: a coding agent, whatever its family
    out = tmp_path / "frameworks.json"
    out.write_text(table.dump(table.add(data, [native, coding])))
    entries = json.loads(out.read_text())["frameworks"]
    assert [(e["lane"], table.group_of(e)) for e in entries] == [
        ("codex", "coding"), ("made", "openai"), ("made-anthropic", "native")]
    text = table.render({"schema": table.SCHEMA, "frameworks": entries})
    titles = [line for line in text.splitlines() if line.startswith("**")]
    assert titles == ["**Through their OpenAI clients**",
                      "**Through their Anthropic and Gemini clients**", "**Coding agents**"]
    [header] = [line for line in text.splitlines()[text.splitlines().index(titles[1]):]
                if line.startswith("| scenario")][:1]
    assert header == "| scenario | a robust run | made-anthropic |"
    with pytest.raises(SystemExit, match="made: already in the summary"):
        table.add(data, [run])
    # One table needs no title: the block reads as it did with one kind of client.
    assert "**" not in table.render(data)


def test_a_wait_shorter_than_retry_after_is_not_honoured(tmp_path):
    result_path = made_run(tmp_path)
    lane = result_path.parents[2] / "lanes" / "made.toml"
    lane.write_text(lane.read_text().replace("0.2", "0.3"))
    [framework] = table.measure([result_path])["frameworks"]
    assert framework["scenarios"]["wire-429"]["wire"]["honoured"] == 0
    assert table.cell(framework["scenarios"]["wire-429"]).endswith("Retry-After ignored")


def gateway_lane(tmp_path: Path) -> Path:
    """tests/lanes/gateway.toml (the openai package's client, no network), its scenario replaced
    by a 429 with Retry-After and a streamed answer cut mid-message."""
    text = (ROOT / "tests" / "lanes" / "gateway.toml").read_text(encoding="utf-8")
    head = text[:text.index("[[scenarios]]")].replace(
        '"workers/provider_client.py"', json.dumps(str(ROOT / "tests" / "workers" /
                                                      "provider_client.py")))
    script = """script = [ { tool = "lookup_order", args = { order = "742" } },
           { tool = "write_report", args = { order = "742" } },
           { text = "Report for order 742 written" } ]
[scenarios.expect]
stop_reason = "accepted"
files = [ { path = "lab-output/effects.json", json_length = 1 } ]
"""
    path = tmp_path / "gateway.toml"
    path.write_text(head + f"""[[scenarios]]
id = "wire-429"
task = "Prepare the report for order 742"
input = {{ api = "chat", stream = false }}
wire_faults = [ {{ call = 1, kind = "http_429", retry_after_s = 0.2 }} ]
{script}
[[scenarios]]
id = "wire-truncated"
task = "Prepare the report for order 742"
input = {{ api = "chat", stream = true }}
wire_faults = [ {{ call = 2, kind = "truncated_stream" }} ]
{script}""")
    return path


@pytest.mark.slow
def test_measure_of_a_real_run_finds_a_retried_429_and_a_cut_stream_not_retried(tmp_path):
    pytest.importorskip("openai")
    from alk.runner.isolation import Network, detect

    if Network.NONE not in detect().networks:
        pytest.skip("no network namespaces on this machine")
    done = subprocess.run([sys.executable, "-m", "alk", "run", "--lane",
                           str(gateway_lane(tmp_path)), "-n", "1", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "120"})
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    [result_path] = (tmp_path / "reports").glob("*/result.json")
    out = tmp_path / "frameworks.json"
    assert table.main(["measure", str(result_path), "--out", str(out)]) == 0
    [framework] = json.loads(out.read_text())["frameworks"]
    assert (framework["lane"], framework["framework"], framework["repeats"]) == (
        "gateway", "openai-client", 1)
    limit, cut = framework["scenarios"]["wire-429"], framework["scenarios"]["wire-truncated"]
    assert (limit["verdict"], limit["passed"], limit["scored"]) == ("pass", 1, 1)
    wire = limit["wire"]
    assert (wire["fault"], wire["fired"], wire["retried"], wire["honoured"]) == (
        "http_429@call1", 1, 1, 1)
    # The openai client waits retry-after-ms (200 ms), not its own backoff.
    assert 0.2 - table.STAMP_SLACK_S <= wire["wait_s"] < 0.45, wire
    assert (limit["calls"], limit["retries"]) == (4, 1)
    assert (cut["verdict"], cut["causes"]) == ("fail", {"fault_unrecovered": 1})
    assert (cut["wire"]["fault"], cut["wire"]["stream"], cut["wire"]["retried"],
            cut["wire"]["asked_again"]) == ("truncated_stream@call2", True, 0, 0)
    assert cut["failure"]["stop"] == "error:APIConnectionError"
    assert table.cell(cut) == ("fail 0/1 (framework: fault_unrecovered): cut stream raised "
                               "APIConnectionError, not retried")
