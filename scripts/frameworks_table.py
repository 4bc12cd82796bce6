"""The README's "Frameworks measured" tables, generated from runs, never written by hand.

How to measure again (one lane at a time: each runs its scenarios 20 times, a fresh worker
process a repeat; a lane that runs from a venv of its own needs it installed first, as its
`install` line says):

    .venv/bin/alk run --lane lanes/pydantic-ai.toml --repeats 20 -q
    .venv/bin/alk run --lane lanes/langgraph.toml --repeats 20 -q
    .venv/bin/alk run --lane lanes/openai-agents.toml --repeats 20 -q
    .venv/bin/alk run --lane lanes/smolagents.toml --repeats 20 -q
    .venv/bin/alk run --lane lanes/llamaindex.toml --repeats 20 -q
    .venv/bin/alk run --lane lanes/strands.toml --repeats 20 -q
    .venv/bin/alk run --lane lanes/autogen.toml --repeats 20 -q
    .venv/bin/python scripts/frameworks_table.py measure reports/RUN_ID/result.json ...
    .venv/bin/python scripts/frameworks_table.py render --write

The native-client lanes (anthropic, google-genai, pydantic-ai-anthropic, pydantic-ai-google,
langgraph-anthropic, adk) and the coding agents (claude-agent-sdk, claude-code, codex,
gemini-cli) are measured the same way; a lane the summary does not hold yet joins it with
`measure --add reports/RUN_ID/result.json`, the others' runs kept.

To measure again only some scenarios of a lane (those a change of alk's attribution could
move, say), run them with the lane's first run's seed and the same repeats, and put them in
place of the summary's (the lane's entry lists such runs under `remeasured`):

    .venv/bin/alk run --lane lanes/langgraph.toml --repeats 20 -j 1 --seed SEED \
        -s crash-after-effect -s malformed-output -q
    .venv/bin/python scripts/frameworks_table.py measure --update reports/RUN_ID/result.json

When they are measured again for another reason than their verdict (a lane that now runs
the shared definition of a scenario, or one it did not run before), say why: the README's
text names such runs apart from the others. A scenario the lane had not run is added:

    .venv/bin/python scripts/frameworks_table.py measure --update \
        --because "their lane now runs the shared definitions" reports/RUN_ID/result.json

`alk run` exits 1 when a scenario fails: that is a finding, not an error. `measure` takes the
seven runs' result.json (reports/RUN_ID/result.json) and writes docs/frameworks.json, a small
summary that is committed; `render` prints the tables from it and `render --write` replaces
README.md's block between `<!-- frameworks:start -->` and `<!-- frameworks:end -->` (and
nothing else). tests/unit/test_frameworks_table.py fails when that block is not what `render`
makes of docs/frameworks.json.

What the summary holds, per framework: the lane, the framework and version its worker
reported, the repeats asked for, the run's wall time and a repeat's median wall time. Per
scenario: the verdict, passed and scored repeats, the causes with their counts, and the model
calls and retries on the wire a repeat (the mean). For a scenario with a wire fault, what the
framework's stack did, from the harness's own model/call events in each transcript: in how many
repeats the fault fired; in how many the tool a faulted answer named (bad arguments) was run
anyway, and with what; in how many the next call was a retry (the same request again) or a new
request (the model asked again, after an error was handed back, for instance); the wait, from
the faulted call's arrival to the next call's (`t` less `ms`; a stall's wait includes the
stall), as the median over the repeats; for a 429, the lane's `retry_after_s` and in how many
repeats the wait was at least that (within 10 ms: alk stamps an event when its loop writes it).
When repeats failed: the commonest cause, how the worker's run ended (its result's stop reason
and whether its answer was empty), its first failed check and a short part of the detail, and
whose failure each was (`blame`: layer/cause and count, as alk attributed it). For a
scenario whose script has weighted choices (the likeliest does the work, in every lane): in how
many repeats the turn served was the likeliest choice, and how many of those passed.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tomllib
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "frameworks.json"
README = ROOT / "README.md"
START, END = "<!-- frameworks:start -->", "<!-- frameworks:end -->"
SCHEMA = "alk.frameworks/1"
# alk stamps an event when its loop writes it, a few milliseconds after the gateway saw it.
STAMP_SLACK_S = 0.01

# The tables, each a group of lanes that ran the same scenarios through one kind of client, and
# their columns' order; a lane not named here joins the first table when its lane serves the
# OpenAI family (or every family), the second otherwise, after the named ones, by name.
GROUPS = (
    ("openai", "Through their OpenAI clients",
     ("pydantic-ai", "langgraph", "openai-agents", "smolagents", "llamaindex", "strands",
      "autogen")),
    # The same frameworks in the same order, their tools served by alk (lanes/*-mcp.toml): the
    # table beside the first, where its own tools are the worker's.
    ("mcp", "Their tools served by alk over MCP, through each framework's own MCP client",
     ("pydantic-ai-mcp", "langgraph-mcp", "openai-agents-mcp", "smolagents-mcp",
      "llamaindex-mcp", "strands-mcp", "autogen-mcp")),
    ("typescript", "TypeScript frameworks, through their OpenAI clients",
     ("ai-sdk", "openai-agents-js", "mastra", "langgraph-js")),
    ("typescript-mcp", "TypeScript frameworks, their tools served by alk over MCP",
     ("ai-sdk-mcp", "openai-agents-js-mcp", "mastra-mcp", "langgraph-js-mcp")),
    ("native", "Through their Anthropic and Gemini clients",
     ("anthropic", "pydantic-ai-anthropic", "langgraph-anthropic", "google-genai",
      "pydantic-ai-google", "adk")),
    ("coding", "Coding agents", ("claude-agent-sdk", "claude-code", "codex", "gemini-cli")),
)
FRAMEWORKS = tuple(name for _, _, names in GROUPS for name in names)
# Rows: what a robust run does in each scenario, the fixed text of the second column.
AGENT_SCENARIOS = {
    "nominal": "two tool calls, then the answer",
    "tool-raises": "the tool's error goes to the model, which answers",
    "denied-tool": "the policy refuses the call; the model answers",
    "crash-after-effect": "killed after the effect and resumed: the report is not written twice",
    "malformed-output": "the parse error goes to the model, which calls again",
    "sampled": "passes the repeats that drew the turn doing the work (7 in 10); the "
               "others drew the lane's mistake, the agent's",
}
# The MCP lanes' (lanes/scenarios/tools.toml), in their file's order: each fault at alk's side
# of the session, then the crash.
MCP_SCENARIOS = {
    "nominal": AGENT_SCENARIOS["nominal"],
    "tool-error": "the error result goes to the model, which calls again",
    "tool-timeout": "gives up on the call that never answers; the model calls again",
    "tool-slow": "waits out the 2 s answer",
    "tool-malformed": "takes the result not in MCP's shape for an error: the report "
                      "written once",
    "crash-after-effect": AGENT_SCENARIOS["crash-after-effect"],
}
WIRE_SCENARIOS = {
    "wire-429": "waits the Retry-After (0.2 s), retries",
    "wire-500": "retries after a backoff",
    "wire-503": "retries after a backoff",
    "wire-reset": "retries",
    "wire-stall": "waits out the 2 s stall or times out, retries",
    "wire-truncated": "takes the cut answer for an error, retries",
    "wire-malformed": "takes the unparsable body for an error, retries",
    "wire-bad-args": "the parse error goes to the model, which asks again",
}
# The family's own faults, beside the shared ones (lanes/scenarios/anthropic.toml, gemini.toml).
WIRE_SCENARIOS |= {
    "anthropic-529": "retries the 529 overload as any 5xx",
    "anthropic-stream-error": "takes the error event after the 200 for the overload it "
                              "says, asks again",
    "anthropic-no-usage": "reads the answer that carries no usage, goes on",
    "anthropic-429-date": "waits the Retry-After given as a date (1 s), retries",
    "anthropic-no-retry": "obeys `x-should-retry: false` on the 503: no retry, no report",
    "gemini-429": "waits the retryDelay (1 s), retries",
    "gemini-safety": "takes the refusal: no report written, no second ask",
    "gemini-max-tokens": "does not take the cut answer for the last word: asks again",
    "gemini-stream-error": "takes the error chunk after the 200 for an error, asks again",
}
# The coding agents' scenarios (lanes/scenarios/coding.toml): the same ids where the question
# is the same, on a file task, with their own waits.
CODING_SCENARIOS = {
    "write-file": "the file written, exactly as asked",
    "fix-test": "reads the code, edits it, runs the test: it passes",
    "forbidden-path": "the write under protected/ refused; the agent answers",
    "wire-529": "retries the 529 overload",
    "wire-429": "waits the Retry-After (1 s), retries",
    "wire-500": "retries; the file written once",
    "wire-stream-error": "takes the error inside the 200 stream for an error, asks again",
    "wire-truncated": "takes the cut stream for an error, asks again",
    "wire-bad-args": "does not run the tool on broken arguments, asks again",
    "wire-malformed": "takes the unparsable stream for an error, asks again",
}
WIRE_PREFIXES = ("wire-", "anthropic-", "gemini-")
# The checks a failed repeat is described by, the first that failed in this order.
CHECK_ORDER = ("stop_reason", "tool_calls", "files", "output", "model_calls", "script_consumed")


# ---------------------------------------------------------------------------------------------
# measure


def read_events(path: Path) -> list[dict[str, Any]]:
    """A transcript's events (a line that does not parse is skipped)."""
    events = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("payload"), dict):
            events.append(event)
    return events


def attempts(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The events of each attempt: a harness `start` begins one."""
    split: list[list[dict[str, Any]]] = [[]]
    for event in events:
        if event.get("source") == "harness" and event.get("type") == "start" and split[-1]:
            split.append([])
        split[-1].append(event)
    return split


def is_call(event: dict[str, Any]) -> bool:
    return (event.get("source"), event.get("channel"), event.get("type")) == (
        "harness", "model", "call")


def arrival(event: dict[str, Any]) -> float:
    """When the gateway began to answer a call, on the transcript's clock."""
    return float(event["t"]) - float(event["payload"].get("ms") or 0) / 1000


def fault_facts(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first faulted call of the repeat, the next call in its attempt, and the tools run on
    the faulted answer: the worker's calls of the tool that answer named before a later answer
    named it again (a worker's events reach the transcript a little after the gateway's)."""
    for attempt in attempts(events):
        calls = [i for i, event in enumerate(attempt) if is_call(event)]
        faulted = next((i for i in calls if attempt[i]["payload"].get("fault")), None)
        if faulted is None:
            continue
        payload = attempt[faulted]["payload"]
        following = next((attempt[i] for i in calls if i > faulted), None)
        named = set(payload.get("tool_calls") or [])
        ran = []
        for event in attempt[faulted + 1:]:
            if is_call(event) and named & set(event["payload"].get("tool_calls") or []):
                break
            if ((event.get("source"), event.get("channel"), event.get("type")) ==
                    ("worker", "tool", "call") and event["payload"].get("name") in named):
                ran.append({"name": event["payload"]["name"],
                            "args": event["payload"].get("args")})
        return {
            "kind": payload["fault"], "call": payload.get("call"), "api": payload.get("api"),
            "stream": payload.get("stream"), "ran": ran[:1],
            "next": (None if following is None else
                     "retry" if following["payload"].get("retry") else "new"),
            "wait_s": (None if following is None else
                       round(arrival(following) - arrival(attempt[faulted]), 3)),
        }
    return None


def drawn_choice(script: list[Any], calls: list[dict[str, Any]]) -> tuple[float, bool] | None:
    """For a script with weighted choices: the likeliest choice's weight, and whether the
    repeat drew it (the turn the gateway served, matched to a choice by its tool or its text);
    None when that turn was never served."""
    index = next((i for i, turn in enumerate(script)
                  if isinstance(turn, dict) and isinstance(turn.get("choices"), list)), None)
    served = [c for c in calls if index is not None and c.get("turn") == index]
    if not served:
        return None
    choices = [c for c in script[index]["choices"] if isinstance(c, dict)]
    tools = served[0].get("tool_calls") or []
    drawn = next((c for c in choices if (c.get("tool") == tools[0] if tools else "text" in c)),
                 None)
    likeliest = max(choices, key=lambda c: c.get("weight", 0))
    return (likeliest.get("weight", 0), drawn is likeliest)


def repeat_facts(repeat: dict[str, Any], base: Path) -> dict[str, Any]:
    """What a repeat's transcript holds that the table reads."""
    events = read_events(base / repeat["transcript"])
    last = attempts(events)[-1]
    results = [e["payload"] for e in last
               if (e.get("source"), e.get("channel"), e.get("type")) == ("worker", "agent",
                                                                          "result")]
    checks = [e["payload"] for e in last
              if (e.get("source"), e.get("type")) == ("harness", "check")
              and e["payload"].get("ok") is False]
    calls = [e["payload"] for e in events if is_call(e)]
    model = repeat.get("model") or {"calls": len(calls),
                                    "retries": sum(bool(c.get("retry")) for c in calls)}
    script = next((e["payload"].get("scenario", {}).get("script") for e in events
                   if e.get("source") == "harness" and e.get("type") == "start"), None) or []
    sampled = any(isinstance(turn, dict) and "choices" in turn for turn in script)
    result = results[-1] if results else None
    return {
        "outcome": repeat["outcome"], "cause": repeat["cause"], "detail": repeat["detail"],
        "duration_s": repeat["duration_s"], "calls": model["calls"],
        "retries": model["retries"],
        "stop": None if result is None else str(result.get("stop_reason")),
        "empty": None if result is None else not str(result.get("output") or "").strip(),
        "checks": checks, "fault": fault_facts(events), "sampled": sampled,
        "drawn": drawn_choice(script, [e["payload"] for e in last if is_call(e)]),
    }


def short_detail(detail: str) -> str:
    """The part of a failure's detail that says what happened, in a line."""
    if " then " in detail:  # fault_unrecovered: what the fault was followed by
        detail = detail.split(" then ", 1)[1]
    detail = detail.split("; ", 1)[0]
    return detail if len(detail) <= 120 else detail[:119] + "…"


def failure_facts(failed: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The commonest way the scored repeats that did not pass failed."""
    if not failed:
        return None
    cause, count = Counter(r["cause"] for r in failed).most_common(1)[0]
    mine = [r for r in failed if r["cause"] == cause]
    stop = Counter(r["stop"] for r in mine).most_common(1)[0][0]
    first = mine[0]
    check = next((c for name in CHECK_ORDER for c in first["checks"]
                  if str(c.get("name", "")).startswith(name)), None)
    return {
        "cause": cause, "repeats": count, "stop": stop,
        "empty_answer": first["empty"],
        "check": None if check is None else {k: check.get(k) for k in
                                             ("name", "expected", "actual")},
        "detail": short_detail(first["detail"]),
    }


def retry_after(lane: dict[str, Any] | None, scenario_id: str) -> float | None:
    """The Retry-After a lane's scenario declared for its 429, if any."""
    for scenario in (lane or {}).get("scenarios", []):
        if scenario.get("id") == scenario_id:
            for fault in scenario.get("wire_faults", []):
                if fault.get("kind") == "http_429" and "retry_after_s" in fault:
                    return float(fault["retry_after_s"])
    return None


def wire_summary(facts: list[dict[str, Any]], after: float | None) -> dict[str, Any] | None:
    fired = [f["fault"] for f in facts if f["fault"] is not None]
    if not fired:
        return None
    waits = [f["wait_s"] for f in fired if f["wait_s"] is not None]
    first = fired[0]
    summary = {
        "fault": f"{first['kind']}@call{first['call']}", "api": first["api"],
        "stream": first["stream"], "fired": len(fired),
        "ran_tool": sum(bool(f["ran"]) for f in fired),
        "ran": next((f["ran"][0] for f in fired if f["ran"]), None),
        "retried": sum(f["next"] == "retry" for f in fired),
        "asked_again": sum(f["next"] == "new" for f in fired),
        "wait_s": round(statistics.median(waits), 3) if waits else None,
    }
    if first["kind"] == "http_429":
        summary["retry_after_s"] = after
        summary["honoured"] = (None if after is None else
                               sum(w >= after - STAMP_SLACK_S for w in waits))
    return summary


def scenario_summary(scenario: dict[str, Any], base: Path, lane: dict[str, Any] | None
                     ) -> dict[str, Any]:
    facts = [repeat_facts(r, base) for r in scenario["repeats"]]
    scored = [f for f in facts if f["outcome"] != "lane_infra"]
    stats = scenario["stats"]
    counts = stats["counts"]
    summary: dict[str, Any] = {
        "verdict": stats["verdict"], "passed": counts["passed"], "scored": counts["scored"],
        "void": counts["void"], "causes": dict(stats["causes"]),
        "calls": round(statistics.fmean(f["calls"] for f in facts), 2) if facts else None,
        "retries": round(statistics.fmean(f["retries"] for f in facts), 2) if facts else None,
    }
    voids = Counter(f["cause"] for f in facts if f["outcome"] == "lane_infra")
    if voids:
        summary["void_causes"] = dict(voids.most_common())
    wire = wire_summary(scored, retry_after(lane, scenario["id"]))
    if wire is not None:
        summary["wire"] = wire
    if any(f["sampled"] for f in facts):
        likeliest = [f for f in scored if f["drawn"] is not None and f["drawn"][1]]
        summary["drawn"] = {
            "weight": next((f["drawn"][0] for f in scored if f["drawn"] is not None), None),
            "likeliest": len(likeliest),
            "other": sum(f["drawn"] is not None and not f["drawn"][1] for f in scored),
            "likeliest_passed": sum(f["outcome"] == "pass" for f in likeliest)}
    failure = failure_facts([f for f in scored if f["outcome"] != "pass"])
    if failure is not None:
        summary["failure"] = failure
        # Whose failure each was (docs/causes.md's rule), as alk attributed it.
        summary["blame"] = dict(Counter(f"{f['outcome']}/{f['cause']}" for f in scored
                                        if f["outcome"] != "pass").most_common())
    return summary


def load_lane(document: dict[str, Any], base: Path) -> dict[str, Any] | None:
    """The lane file the run read, when it is still there (for what its faults declared)."""
    from alk.errors import LaneError
    from alk.lane.include import merged_tables  # its scenarios, a shared file's among them

    given = Path(document["lane"]["path"])
    for path in ([given] if given.is_absolute() else [base / given, ROOT / given]):
        try:
            return merged_tables(path)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, LaneError):
            continue
    return None


def seconds_between(started: str, finished: str | None) -> float | None:
    if not finished:
        return None
    return (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()


def measure_run(result_path: Path) -> dict[str, Any]:
    """One run's summary, from its result.json and the transcripts it names."""
    document = json.loads(result_path.read_text(encoding="utf-8"))
    depth = len(Path(document["paths"]["result"]).parts)
    base = result_path.resolve().parents[depth - 1]
    lane = load_lane(document, base)
    durations = [r["duration_s"] for s in document["scenarios"] for r in s["repeats"]]
    return {
        "lane": document["lane"]["name"],
        "framework": document["gate"]["framework"] or document["lane"]["framework"],
        "version": document["gate"]["version"],
        "run_id": document["run_id"], "alk_version": document["alk_version"],
        "status": document["status"], "seed": document["settings"]["seed"],
        "repeats": document["settings"]["repeats"],
        "run_s": seconds_between(document["started_at"], document["finished_at"]),
        "repeat_s": round(statistics.median(durations), 2) if durations else None,
        "family": ((lane or {}).get("model") or {}).get("family", "openai"),
        "scenarios": {s["id"]: scenario_summary(s, base, lane) for s in document["scenarios"]},
    }


def update(data: dict[str, Any], runs: list[dict[str, Any]],
           because: str | None = None) -> dict[str, Any]:
    """The summary with each run's scenarios put in place of its lane's (a run of some of a
    lane's scenarios, `alk run --scenario ...`): the lane's entry keeps its first run, and
    lists the runs that measured some of its scenarios again, with what they measured (and
    why, when the reason is not their verdict)."""
    frameworks = {entry["lane"]: entry for entry in data["frameworks"]}
    for run in runs:
        entry = frameworks.get(run["lane"])
        if entry is None:
            raise SystemExit(f"{run['lane']}: not in the summary; measure a whole run of it")
        if run["repeats"] != entry["repeats"]:
            raise SystemExit(f"{run['lane']}: run {run['run_id']} has {run['repeats']} repeats "
                             f"a scenario, the summary {entry['repeats']}: run it with "
                             f"--repeats {entry['repeats']}")
        entry["scenarios"] = {**entry["scenarios"], **run["scenarios"]}
        entry.setdefault("remeasured", []).append({
            key: run[key] for key in ("run_id", "alk_version", "status", "seed", "run_s",
                                      "repeat_s")} | {"scenarios": sorted(run["scenarios"])}
            | ({"because": because} if because else {}))
    return data


def lane_order(name: str) -> tuple[int, str]:
    return (FRAMEWORKS.index(name) if name in FRAMEWORKS else len(FRAMEWORKS), name)


def group_of(entry: dict[str, Any]) -> str:
    for key, _, names in GROUPS:
        if entry["lane"] in names:
            return key
    return "openai" if entry.get("family", "openai") == "openai" else "native"


def add(data: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary with the whole runs of lanes it does not hold yet added, in their order."""
    held = {entry["lane"] for entry in data["frameworks"]}
    again = sorted(held & {run["lane"] for run in runs})
    if again:
        raise SystemExit(f"{', '.join(again)}: already in the summary; measure some of its "
                         "scenarios again with --update, or all its lanes with measure")
    names = [run["lane"] for run in runs]
    if len(set(names)) < len(names):
        raise SystemExit("more than one run of a lane: give one run a lane")
    return {**data, "frameworks": sorted([*data["frameworks"], *runs],
                                         key=lambda r: lane_order(r["lane"]))}


def measure(paths: Iterable[Path]) -> dict[str, Any]:
    runs = [measure_run(path) for path in paths]
    for run in runs:
        if run["status"] != "complete":
            print(f"warning: run {run['run_id']} ({run['lane']}) is {run['status']}, not "
                  "complete", file=sys.stderr)
    names = [run["lane"] for run in runs]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise SystemExit(f"more than one run of {', '.join(twice)}: give one run a lane")
    return {"schema": SCHEMA, "frameworks": sorted(runs, key=lambda r: lane_order(r["lane"]))}


# ---------------------------------------------------------------------------------------------
# render


def seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def ending(failure: dict[str, Any]) -> str:
    """How the commonest failure ended, in a few words: the error the run stopped with, an
    answer left empty, or the first check that failed."""
    stop, check = failure["stop"], failure["check"]
    if stop is None and failure["detail"].startswith("timeout: no exit"):
        return "still waiting at the repeat's timeout"  # a hang: on the call, in the MCP lanes
    if stop is None:  # no result: the worker crashed or hung
        found = re.findall(r"\b([A-Z]\w*(?:Error|Exception|Exit))\b", failure["detail"])
        return failure["cause"] + (f" ({found[-1]})" if found else "")
    if stop.startswith("error:"):
        return f"raised {stop.removeprefix('error:')}"
    if failure["empty_answer"]:
        return "taken as an empty answer"
    if check is None:
        return f"{failure['cause']}: {failure['detail']}"
    name, expected, actual = check["name"], check["expected"], check["actual"]
    if name == "stop_reason":
        return f"stopped {actual}"
    if name.startswith("tool_calls."):
        tool = name.split(".", 1)[1]
        return f"{tool} never called" if actual == 0 else f"{tool} called {actual}×"
    if name.startswith("files[") and name.endswith(".json_length"):
        if isinstance(actual, int):
            return "effect written twice" if actual == 2 else f"effect written {actual}×"
        return "no effect written"
    if name.startswith("files[") and name.endswith(".exists"):
        return "effect written" if expected is False else "no effect written"
    if name == "script_consumed":
        return f"stopped with {actual}"
    if name == "model_calls":
        return f"{actual} model calls, not {expected}"
    return f"{name}: expected {expected}, got {actual}"


def share(part: int, whole: int) -> str:
    return "" if part == whole else f" in {part}/{whole}"


def wire_phrase(summary: dict[str, Any]) -> str:
    """What the stack did with the faulted answer and after it, and how failed repeats ended."""
    wire, failure = summary["wire"], summary.get("failure")
    fired = wire["fired"]
    subject = ""
    if wire["fault"].startswith("truncated_stream"):
        subject = "cut stream " if wire["stream"] else "cut body "
    wait = f" after {seconds(wire['wait_s'])}" if wire["wait_s"] is not None else ""
    did = []
    if wire.get("ran_tool"):
        ran = wire["ran"]
        args = json.dumps(ran["args"], ensure_ascii=False)
        args = args if len(args) <= 40 else args[:39] + "…"
        did.append(f"ran {ran['name']}{share(wire['ran_tool'], fired)} with `{args}`")
    if wire["retried"]:
        did.append(f"retried{share(wire['retried'], fired)}{wait}")
        after, honoured = wire.get("retry_after_s"), wire.get("honoured")
        if after is not None and honoured is not None:
            did[-1] += (", Retry-After honoured" if honoured == fired else
                        ", Retry-After ignored" if honoured == 0 else
                        f", Retry-After honoured in {honoured}/{fired}")
    if wire["asked_again"]:
        did.append(f"model asked again{share(wire['asked_again'], fired)}")
    if not wire["retried"] and not wire["asked_again"]:
        did.append("model not asked again" if wire["fault"].startswith("bad_tool_args")
                   else "not retried")
    # A tool run on the faulted answer says why its checks failed; an error or an empty
    # answer says more than a check.
    if failure is None or (wire.get("ran_tool") and failure["stop"] == "accepted"
                           and not failure["empty_answer"]):
        return subject + ", ".join(did)
    if summary["passed"] == 0:
        return f"{subject}{ending(failure)}, " + ", ".join(did)
    return subject + ", ".join(did) + f"; {failure['repeats']} {ending(failure)}"


# Whose failure it is, in a cell: docs/causes.md's layers.
LAYER_WORDS = {"framework_runtime": "framework", "agent": "agent"}


def blamed(blame: dict[str, int]) -> str:
    """The layers and causes of the failed repeats, e.g. `framework: effect_repeated`; with
    counts when there is more than one."""
    by_layer: dict[str, list[str]] = {}
    for key, count in blame.items():
        layer, _, cause = key.partition("/")
        by_layer.setdefault(LAYER_WORDS.get(layer, layer), []).append(
            cause if len(blame) == 1 else f"{cause} ×{count}")
    return "; ".join(f"{layer}: {', '.join(causes)}" for layer, causes in by_layer.items())


def cell(summary: dict[str, Any] | None) -> str:
    """A framework's result in one scenario: the verdict, passed of scored, whose failure it
    was, and the finding."""
    if summary is None:
        return "—"
    head = f"{summary['verdict']} {summary['passed']}/{summary['scored']}"
    if summary.get("blame"):
        head += f" ({blamed(summary['blame'])})"
    if summary["void"]:
        head += f" ({summary['void']} void: {', '.join(summary.get('void_causes', {}))})"
    drawn, failure = summary.get("drawn"), summary.get("failure")
    if "wire" in summary:
        text = f"{head}{', ' if failure is None else ': '}{wire_phrase(summary)}"
    elif drawn is not None and drawn["likeliest_passed"] == drawn["likeliest"] == summary[
            "passed"]:
        text = f"{head}, as drawn ({drawn['likeliest']} drew the {drawn['weight']:g} turn)"
    elif drawn is not None and failure is not None:
        text = (f"{head}: {drawn['likeliest_passed']} of the {drawn['likeliest']} that drew "
                f"the {drawn['weight']:g} turn passed; {ending(failure)}")
    else:
        text = head if failure is None else f"{head}: {ending(failure)}"
    return text.replace("|", "\\|")


def table(frameworks: list[dict[str, Any]], rows: dict[str, str], title: str) -> list[str]:
    names = [f["lane"] for f in frameworks]
    lines = [f"| {title} | a robust run | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]
    for sid, robust in rows.items():
        cells = [cell(f["scenarios"].get(sid)) for f in frameworks]
        lines.append(f"| `{sid}` | {robust} | " + " | ".join(cells) + " |")
    return lines


def rows_of(frameworks: list[dict[str, Any]], group: str = "openai"
            ) -> tuple[dict[str, str], dict[str, str]]:
    """The agent and the wire scenarios measured, the known ones first, in a fixed order."""
    seen = {sid for f in frameworks for sid in f["scenarios"]}
    known = (CODING_SCENARIOS if group == "coding" else MCP_SCENARIOS if group.endswith("mcp")
             else {**AGENT_SCENARIOS, **WIRE_SCENARIOS})
    agent = {sid: text for sid, text in known.items()
             if sid in seen and not sid.startswith(WIRE_PREFIXES)}
    wire = {sid: text for sid, text in known.items()
            if sid in seen and sid.startswith(WIRE_PREFIXES)}
    for sid in sorted(seen - set(agent) - set(wire)):
        (wire if sid.startswith(WIRE_PREFIXES) else agent)[sid] = ""
    return agent, wire


def listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def render(data: dict[str, Any]) -> str:
    """The Markdown between the README's markers."""
    frameworks = data["frameworks"]
    if not frameworks:
        return "No framework measured yet.\n"
    groups = [(key, title, [f for f in frameworks if group_of(f) == key])
              for key, title, _ in GROUPS]
    groups = [(key, title, members) for key, title, members in groups if members]
    lines: list[str] = []
    for key, title, members in groups:
        agent, wire = rows_of(members, key)
        if len(groups) > 1:
            lines += [f"**{title}**", ""]
        lines += table(members, agent, "scenario") + [""]
        if wire:
            lines += table(members, wire, "wire fault") + [""]
    lines.pop()
    counts = Counter(f["repeats"] for f in frameworks)
    usual = counts.most_common(1)[0][0]
    fewer = [f"{n} in {listing([f['lane'] for f in frameworks if f['repeats'] == n])}"
             for n in sorted(counts) if n != usual]
    versions = listing([f"{f['framework']} {f['version']}" for f in frameworks])
    costs = listing([f"{f['lane']} {seconds(f['repeat_s'])}" for f in frameworks
                     if f["repeat_s"] is not None])
    runs = listing([f"{f['lane']} {f['run_s'] / 60:.0f} min" for f in frameworks
                    if f["run_s"] is not None])
    lines += ["", (
        f"Measured: {versions}; {usual} repeats of each scenario"
        f"{' (' + '; '.join(fewer) + ')' if fewer else ''}, "
        f"alk {listing(sorted({f['alk_version'] for f in frameworks}))}. A cell is the "
        "verdict and the repeats passed of those scored, then what the transcripts show: on "
        "the wire, whether the next call repeated the faulted request (retried) or was a new "
        "one (the model asked again) and the median wait from the faulted call to it, and a "
        "tool run on a faulted answer; when repeats failed, how the commonest failure ended; "
        "for `sampled`, how many repeats drew the likelier turn. In brackets, whose failure "
        "it was, by docs/causes.md's rule (framework: the framework's runtime, after alk's "
        "kill or fault or on model turns alk served meaning them right; agent: the model's "
        "choice, here the mistake the lane planted), and its cause."
        f"{remeasured_note(frameworks)} A repeat's median wall time, a "
        f"fresh worker process each, on 2 cores shared with other work: {costs}; a lane's "
        f"whole run: {runs}. The runs' ids and "
        "seeds, the causes and the calls a repeat are in `docs/frameworks.json`.")]
    return "\n".join(lines) + "\n"


def remeasured_note(frameworks: list[dict[str, Any]]) -> str:
    """What was measured again, and with what, when a lane's entry was updated."""
    runs = [(f["lane"], r) for f in frameworks for r in f.get("remeasured", [])]
    if not runs:
        return ""
    again = [(lane, r) for lane, r in runs if "because" not in r]
    note = ""
    if again:
        scenarios = sum(len(r["scenarios"]) for _, r in again)
        versions = listing(sorted({r["alk_version"] for _, r in again}))
        note += (f" The {scenarios} scenarios that did not pass every repeat were run again "
                 f"with alk {versions} ({plural(len(again), 'run')}, one lane at a time, each "
                 "with its first run's seed, so the same sampled draws).")
    # Runs made for another reason, told apart by it, in the order they were first made (a
    # run's id begins with its start time).
    for because in dict.fromkeys(r["because"] for _, r in sorted(runs, key=lambda x: x[1][
            "run_id"]) if "because" in r):
        made = [(lane, r) for lane, r in runs if r.get("because") == because]
        scenarios = sum(len(r["scenarios"]) for _, r in made)
        lanes = listing(list(dict.fromkeys(lane for lane, _ in made)))
        versions = listing(sorted({r["alk_version"] for _, r in made}))
        note += (f" Measured later, because {because}: {plural(scenarios, 'scenario')} of "
                 f"{lanes} ({plural(len(made), 'run')} with alk {versions}, each with its "
                 "lane's first run's seed).")
    return (note + " A scenario measured more than once shows its latest run, the others "
            "their first runs': `remeasured` in `docs/frameworks.json` names the runs.")


def replace_block(text: str, block: str) -> str:
    """README's text with the block between the markers replaced, and nothing else."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"README.md has no {START} … {END} block")
    head = text[:start + len(START)]
    return f"{head}\n{block}{text[end:]}"


def block_of(text: str) -> str:
    """What README's text holds between the markers."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {START} … {END} block")
    return text[start + len(START):end].removeprefix("\n")


def dump(data: dict[str, Any]) -> str:
    """The summary as JSON, a line per scenario of each framework: short, and easy to diff."""
    def line(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    frameworks = []
    for framework in data["frameworks"]:
        head = ", ".join(f"{line(key)}: {line(value)}" for key, value in framework.items()
                         if key != "scenarios")
        scenarios = ",\n".join(f"    {line(sid)}: {line(summary)}"
                                for sid, summary in framework["scenarios"].items())
        frameworks.append(f"  {{{head},\n   \"scenarios\": {{\n{scenarios}\n   }}}}")
    return (f"{{\"schema\": {line(data['schema'])}, \"frameworks\": [\n"
            + ",\n".join(frameworks) + "\n]}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    measuring = commands.add_parser("measure", help="summarize runs into docs/frameworks.json")
    measuring.add_argument("results", nargs="+", type=Path, metavar="RESULT_JSON")
    measuring.add_argument("--out", type=Path, default=DATA)
    measuring.add_argument("--update", action="store_true",
                           help="put the runs' scenarios in place of their lanes' in the "
                                "summary (--out), keeping the rest")
    measuring.add_argument("--add", action="store_true",
                           help="add the whole runs of lanes the summary (--out) does not "
                                "hold yet, keeping the rest")
    measuring.add_argument("--because", metavar="TEXT",
                           help="with --update: why they were measured again, when not for "
                                "their verdict (the README's text says it)")
    rendering = commands.add_parser("render", help="print the README's tables")
    rendering.add_argument("--data", type=Path, default=DATA)
    rendering.add_argument("--write", action="store_true",
                           help="replace README.md's block between the markers")
    rendering.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    if getattr(args, "because", None) is not None and not args.update:
        parser.error("--because goes with --update")
    if args.command == "measure" and args.add and args.update:
        parser.error("--add is for lanes not measured yet, --update for those that were")
    if args.command == "measure" and args.add:
        data = add(json.loads(args.out.read_text(encoding="utf-8")),
                   [measure_run(path) for path in args.results])
        args.out.write_text(dump(data), encoding="utf-8")
        print(f"added {len(args.results)} run(s) to {args.out}")
        return 0
    if args.command == "measure" and args.update:
        data = update(json.loads(args.out.read_text(encoding="utf-8")),
                      [measure_run(path) for path in args.results], args.because)
        args.out.write_text(dump(data), encoding="utf-8")
        print(f"updated {args.out} from {len(args.results)} run(s)")
        return 0
    if args.command == "measure":
        data = measure(args.results)
        args.out.write_text(dump(data), encoding="utf-8")
        print(f"wrote {args.out} ({len(data['frameworks'])} frameworks)")
        return 0
    block = render(json.loads(args.data.read_text(encoding="utf-8")))
    if not args.write:
        sys.stdout.write(block)
        return 0
    text = args.readme.read_text(encoding="utf-8")  # read just now: others edit the rest
    args.readme.write_text(replace_block(text, block), encoding="utf-8")
    print(f"replaced the block in {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
