"""The result document, `reports/RUN_ID/result.json` (schema `alk.result/1`).

It holds everything needed to re-render a run, and it is what `alk run --json` prints and what
the terminal report is drawn from, so that `alk report RUN_ID` shows exactly what `alk run`
showed. It is written atomically and redacted as a whole.
"""

from __future__ import annotations

import json
import resource
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

from alk import __version__
from alk.errors import RunNotFoundError, TranscriptError
from alk.files import write_atomically
from alk.records import ExitCode, Execution, Plan, RepeatResult, Verdict
from alk.redaction import Redactor
from alk.stats import summarize_lane, summarize_scenario
from alk.transcript import run_transcripts

SCHEMA = "alk.result/1"
RESULT_NAME = "result.json"


def result_path(out_dir: Path, run_id: str) -> Path:
    return out_dir / "reports" / run_id / RESULT_NAME


def build_document(plan: Plan, execution: Execution, *, status: str, started_at: datetime,
                   finished_at: datetime | None, resumed: Sequence[Mapping[str, Any]] = (),
                   run_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`resumed`: when and after how many finished repeats the run was resumed; `run_settings`:
    how it ran (`jobs`, `executor`), which never changes what it measured."""
    lane = plan.lane
    by_scenario: dict[str, list[RepeatResult]] = {s.id: [] for s in plan.scenarios}
    # In repeat order, however the repeats finished (at once, or some before a resume).
    place = {scenario.id: index for index, scenario in enumerate(plan.scenarios)}
    ordered = sorted(execution.repeats, key=lambda r: (r.repeat, place.get(r.scenario, 0)))
    for result in ordered:
        by_scenario[result.scenario].append(result)
    stats = [summarize_scenario(sid, results, plan.repeats)
             for sid, results in by_scenario.items()]
    scenarios = []
    for scenario_stats in stats:
        entry = scenario_stats.to_dict()
        scenario = next(s for s in plan.scenarios if s.id == scenario_stats.id)
        # A fully scripted scenario (a fixed model script, no faults) should take one path;
        # turns sampled from weighted choices are meant to vary.
        entry["scripted"] = (bool(scenario.script) and not scenario.faults
                             and not scenario.wire_faults and scenario.kill_at is None
                             and not any("choices" in turn for turn in scenario.script))
        entry["repeats"] = [_repeat(r) for r in by_scenario[scenario_stats.id]]
        entry["model"] = _model_totals(by_scenario[scenario_stats.id])
        scenarios.append(entry)
    preflight = execution.preflight
    if execution.void is not None:
        gate = {"ok": False, "cause": execution.void.cause, "detail": execution.void.detail}
    else:
        gate = {"ok": preflight.ok if preflight else None,
                "cause": preflight.cause if preflight else None,
                "detail": preflight.detail if preflight else ""}
    gate.update(framework=preflight.framework if preflight else None,
                version=preflight.version if preflight else None)
    return {
        "schema": SCHEMA,
        "run_id": plan.run_id,
        "status": status,
        "alk_version": __version__,
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": finished_at.isoformat(timespec="seconds") if finished_at else None,
        "lane": {
            "name": lane.name, "description": lane.description, "path": str(lane.path),
            "framework": lane.framework, "requirement": lane.requirement,
            "reported_framework": gate["framework"], "reported_version": gate["version"],
        },
        "settings": {"repeats": plan.repeats, "timeout_s": plan.timeout_s, "seed": plan.seed,
                     "scenarios": [s.id for s in plan.scenarios],
                     "limits": plan.limits.applied(), **(run_settings or {})},
        "resumed": [dict(entry) for entry in resumed],
        "preflight": gate,
        # Every framework and version a worker reported: the probe's and each attempt's.
        "identities": _identities(preflight, ordered),
        # alk's own footprint: a worker's output must never make it grow (docs/security.md).
        "harness": {"peak_rss_mb": round(_own_peak_rss_kb() / 1024, 1)},
        "paths": {"result": str(Path("reports") / plan.run_id / RESULT_NAME),
                  "transcripts": str(run_transcripts(plan.run_id)),
                  "workspaces": str(execution.workspaces) if execution.workspaces else None},
        "scenarios": scenarios,
        "aggregate": summarize_lane(stats).to_dict(),
    }


def _identities(probe: Any, repeats: list[RepeatResult]) -> list[dict[str, Any]]:
    counts: dict[tuple[str | None, str | None], int] = {}
    if probe is not None and (probe.framework or probe.version):
        counts[(probe.framework, probe.version)] = 0
    for result in repeats:
        for identity in dict.fromkeys(result.identities):
            counts[identity] = counts.get(identity, 0) + 1
    return [{"framework": f, "version": v, "repeats": n} for (f, v), n in counts.items()]


def _own_peak_rss_kb() -> int:
    # VmHWM is this process's own; ru_maxrss would include the peak of whatever started alk
    # (a test runner, say), as a child's counter starts from its parent's.
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes there, KiB elsewhere


def _repeat(result: RepeatResult) -> dict[str, Any]:
    return {
        "repeat": result.repeat, "seed": result.seed, "outcome": result.outcome.value,
        "cause": result.cause, "detail": result.detail, "duration_s": result.duration_s,
        "exit_code": result.exit_code, "signal": result.signal, "timed_out": result.timed_out,
        "peak_rss_mb": result.peak_rss_mb, "peak_tmpfs_mb": result.peak_tmpfs_mb,
        "cpu_s": result.cpu_s,
        "containment": result.containment, "network": result.network,
        "filesystem": result.filesystem, "attempts": result.attempts,
        "identities": [{"framework": f, "version": v} for f, v in result.identities],
        "path_hash": result.path_hash, "trajectory_hash": result.trajectory_hash,
        "violations": result.violations, "trajectory": list(result.trajectory),
        "claimed": result.claimed, "transcript": result.transcript, "sha256": result.sha256,
        "model": dict(result.model) if result.model is not None else None,
    }


def _model_totals(results: list[RepeatResult]) -> dict[str, Any] | None:
    """A scenario's model calls as alk's gateway saw them, over its repeats (None without
    one): what the report shows beside the verdict."""
    seen = [r.model for r in results if r.model is not None]
    if not seen:
        return None
    return {"repeats": len(seen), "calls": sum(m["calls"] for m in seen),
            "retries": sum(m["retries"] for m in seen),
            "tokens": sum(m["prompt_tokens"] + m["completion_tokens"] for m in seen)}


def write_document(path: Path, document: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """Writes atomically (a reader never sees half a file) and returns the redacted document."""
    # Strict JSON (no NaN or Infinity, which jq, browsers and Go reject), ASCII only: no
    # control or bidi character a worker sent reaches a terminal that shows the file.
    text = json.dumps(_redacted(document, redactor), ensure_ascii=True, allow_nan=False,
                      indent=1, default=str)
    write_atomically(path, (text + "\n").encode("ascii"))
    return json.loads(text)


# Fields whose values are alk's own codes (an outcome, a cause, a verdict, a level). With the
# document's keys, they are alk's fixed vocabulary, never made from a secret: a lane whose secret
# happens to spell one (MODE=pass) must not get "[REDACTED]_rate" and a "[REDACTED]" verdict.
_CODE_FIELDS = frozenset({"schema", "status", "outcome", "cause", "verdict", "containment",
                          "network", "filesystem"})
# The one place a worker shapes keys: its own claim, any JSON it likes.
_WORKERS_OWN = "claimed"


def _redacted(value: Any, redactor: Redactor, field: str = "") -> Any:
    """The document with every secret masked in what it quotes, and alk's own words kept."""
    if field == _WORKERS_OWN:
        return redactor.redact_value(value)
    if isinstance(value, dict):
        return {key: _redacted(item, redactor, key) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(item, redactor, field) for item in value]
    if isinstance(value, str) and field in _CODE_FIELDS:
        return value
    return redactor.redact_value(value)


def read_document(out_dir: Path, run_id: str) -> dict[str, Any]:
    path = result_path(out_dir, run_id)
    if not path.is_file() and (path.parent / "group.json").is_file():
        lanes = sorted(p.parent.name for p in path.parent.glob(f"*/{RESULT_NAME}"))
        raise RunNotFoundError(f"run '{run_id}' holds several lanes: name one as "
                               f"{run_id}/LANE (its lanes: {', '.join(lanes) or 'none yet'})")
    if not path.is_file():
        raise RunNotFoundError(f"no result for run '{run_id}': {path} does not exist "
                               "(run ids are the folder names under reports/)")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TranscriptError(f"{path}: not a readable result document: {exc}") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        found = document.get("schema") if isinstance(document, dict) else None
        raise TranscriptError(f"{path}: schema {found!r} is not {SCHEMA!r}; "
                              "this alk cannot render it")
    return document


def latest_run_id(out_dir: Path) -> str:
    reports = out_dir / "reports"
    # A run of several lanes is a folder of lanes with a group.json (alk.api.run_lanes).
    runs = sorted({p.parent.name for name in (RESULT_NAME, "group.json")
                   for p in reports.glob(f"*/{name}")}) if reports.is_dir() else []
    if not runs:
        raise RunNotFoundError(f"no runs in {reports}/; start one with `alk run --lane NAME`")
    return runs[-1]


def exit_code(document: dict[str, Any]) -> ExitCode:
    """FAIL when a scenario failed or was flaky; else VOID when anything could not be scored
    (a void repeat, a void scenario, a void run), so that 19 void repeats beside one pass are
    never read as green; else PASS."""
    verdicts = {scenario["verdict"] for scenario in document["scenarios"]}
    if verdicts & {Verdict.FAIL.value, Verdict.FLAKY.value}:
        return ExitCode.FAIL
    if not verdicts or Verdict.VOID.value in verdicts or document["aggregate"]["counts"]["void"]:
        return ExitCode.VOID
    return ExitCode.PASS
