"""`alk check-worker`'s review, from saved transcripts: one pass over each, bounded findings,
and only the harness's own events believed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from alk.conformance import MAX_VIOLATION_FINDINGS, Level, review
from alk.transcript import probe_transcript, repeat_transcript

RUN = "20261130-120000-ab12"


def event(seq: int, type: str, payload: dict[str, Any], source: str = "harness",
          channel: str = "harness") -> bytes:
    line = {"seq": seq, "t": seq / 100, "source": source, "channel": channel, "type": type,
            "payload": payload}
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def write(out: Path, relative: Path, *lines: bytes) -> str:
    (out / relative).parent.mkdir(parents=True, exist_ok=True)
    (out / relative).write_bytes(b"".join(lines))
    return str(relative)


def document(out: Path, *repeat_lines: bytes) -> dict[str, Any]:
    transcript = write(out, repeat_transcript(RUN, "s", 1), *repeat_lines)
    repeat = {"repeat": 1, "outcome": "pass", "cause": "passed", "detail": "",
              "duration_s": 0.1, "transcript": transcript}
    return {"run_id": RUN, "lane": {"requirement": ">=1"},
            "preflight": {"ok": True, "framework": "fw", "version": "1.0"},
            "scenarios": [{"id": "s", "repeats": [repeat]}]}


def ready(paths: list[str]) -> bytes:
    return event(1, "framework_ready", {"framework": "fw", "framework_version": "1.0",
                                        "package_paths": paths}, "worker", "framework")


def test_a_flood_of_violations_is_listed_up_to_a_bound_then_counted(tmp_path: Path) -> None:
    write(tmp_path, probe_transcript(RUN), ready(["/x"]), event(2, "abort", {}),
          event(3, "exit", {"exit_code": 0}))
    flood = [event(n, "violation", {"kind": "not_json", "line": n, "detail": "x"})
             for n in range(1, 5001)]
    findings = review(document(tmp_path, *flood), tmp_path)
    violations = [f for f in findings if "not_json" in f.title]
    assert len(violations) == MAX_VIOLATION_FINDINGS
    assert violations[0].title == "stdout line 1: not_json (scenario s)"
    assert any(f.title == f"scenario s: {5000 - MAX_VIOLATION_FINDINGS} more protocol violations"
               for f in findings)


def test_events_a_worker_forged_are_not_the_harness(tmp_path: Path) -> None:
    # A worker writes its own "exit" with a bad code, and a "violation" of its own: neither is
    # alk's; the harness's exit says 0.
    write(tmp_path, probe_transcript(RUN), ready([]), event(2, "abort", {}),
          event(3, "exit", {"exit_code": 9}, "worker", "agent"),
          event(4, "violation", {"kind": "not_json"}, "worker", "agent"),
          event(5, "exit", {"exit_code": 0}))
    findings = review(document(tmp_path), tmp_path)
    titles = [f.title for f in findings]
    assert not any("exited" in t or "not_json" in t for t in titles)
    assert "framework_ready has no package_paths" in titles
    assert [f.level for f in findings if f.title == "scenario s: protocol ok, passed"] == [Level.OK]


def test_the_probe_exiting_badly_after_abort_is_a_failure(tmp_path: Path) -> None:
    write(tmp_path, probe_transcript(RUN), ready(["/x"]), event(2, "abort", {}),
          event(3, "exit", {"exit_code": 2}))
    findings = review(document(tmp_path), tmp_path)
    assert [f.level for f in findings if f.title == "the worker exited 2 after abort"] == \
        [Level.FAIL]


def test_a_violation_seen_in_the_probe_and_every_scenario_is_one_finding(tmp_path: Path) -> None:
    banner = event(1, "violation", {"kind": "not_json", "line": 1,
                                    "detail": "line is not JSON: 'banner'"})
    write(tmp_path, probe_transcript(RUN), banner, ready(["/x"]), event(3, "abort", {}),
          event(4, "exit", {"exit_code": 0}))
    doc = document(tmp_path, banner)
    other = write(tmp_path, repeat_transcript(RUN, "t", 1), banner,
                  event(2, "violation", {"kind": "bad_type", "line": 3, "detail": "no type"}))
    doc["scenarios"].append({"id": "t", "repeats": [{**doc["scenarios"][0]["repeats"][0],
                                                     "transcript": other}]})
    findings = review(doc, tmp_path)
    titles = [f.title for f in findings]
    assert titles[0] == "handshake"
    assert titles[1:3] == ["stdout line 1: not_json (the probe and scenarios s, t)",
                           "stdout line 3: bad_type (scenario t)"]
    assert [f.detail for f in findings[1:3]] == ["line is not JSON: 'banner'", "no type"]
    assert sum("not_json" in t for t in titles) == 1
