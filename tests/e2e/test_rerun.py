"""`alk rerun`, `alk runs`, the --fail-under gate and `alk report --open`, through the real
command line on real workers."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

from alk.plan import repeat_seed

TESTS = Path(__file__).resolve().parents[1]


def flaky_copy(folder: Path) -> Path:
    """The flaky lane and its worker in a folder of the test's own, to change them at will."""
    (folder / "lanes").mkdir(parents=True)
    (folder / "workers").mkdir()
    shutil.copy(TESTS / "lanes" / "flaky.toml", folder / "lanes" / "flaky.toml")
    shutil.copy(TESTS / "workers" / "flaky.py", folder / "workers" / "flaky.py")
    return folder / "lanes" / "flaky.toml"


def mixed_seed(repeats: int = 4) -> int:
    """A run seed whose first repeats of `nominal` both pass (even) and fail (odd)."""
    return next(s for s in range(100)
                if len({repeat_seed(s, "nominal", r) % 2 for r in range(1, repeats + 1)}) == 2)


def documents(cwd: Path) -> dict[str, dict]:
    return {path.parent.name: json.loads(path.read_text())
            for path in (cwd / "reports").glob("*/result.json")}


def start_message(cwd: Path, transcript: str) -> dict:
    """The start message as the worker got it, but for the seconds it had left (`deadline_s`,
    which depends on how long this start took)."""
    for line in (cwd / transcript).read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "start":
            return {k: v for k, v in event["payload"].items() if k != "deadline_s"}
    raise AssertionError(f"{transcript}: no start message")


def test_a_failed_repeat_reruns_exactly_and_says_what_changed(tmp_path, alk):
    lane = flaky_copy(tmp_path)
    seed = mixed_seed()
    first = alk("run", "--lane", lane, "-n", 4, "--seed", seed, cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    [(run_id, document)] = documents(tmp_path).items()
    repeats = document["scenarios"][0]["repeats"]
    failed = next(r for r in repeats if r["outcome"] != "pass")
    passed = next(r for r in repeats if r["outcome"] == "pass")
    # Every report of the run names the command that reproduces the failed repeat.
    command = f"alk rerun {run_id} nominal {failed['repeat']}"
    assert command in first.stdout

    again = alk("rerun", run_id, "nominal", failed["repeat"], cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    rerun_id, rerun = next((rid, d) for rid, d in documents(tmp_path).items() if rid != run_id)
    [repeat] = rerun["scenarios"][0]["repeats"]
    assert (repeat["outcome"], repeat["cause"], repeat["seed"], repeat["repeat"]) == (
        failed["outcome"], failed["cause"], failed["seed"], failed["repeat"])
    # The worker got the very start message it got then, the original run id included.
    assert start_message(tmp_path, repeat["transcript"]) == start_message(
        tmp_path, failed["transcript"])
    assert rerun["settings"]["rerun_of"] == {"run_id": run_id, "scenario": "nominal",
                                             "repeat": failed["repeat"], "worker_changed": False,
                                             "lane_changed": False}
    assert "unchanged since" in again.stdout and f"rerun of    {run_id} nominal" in again.stdout

    # A passing repeat reruns as a pass: the rerun's exit code is the new repeat's.
    assert alk("rerun", run_id, "nominal", passed["repeat"], cwd=tmp_path).returncode == 0

    # A changed worker is run, and said: the rerun checks a fix, it is no reproduction.
    worker = tmp_path / "workers" / "flaky.py"
    worker.write_text(worker.read_text().replace('"999"', '"742"'))
    fixed = alk("rerun", run_id, "nominal", failed["repeat"], cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "changed since: this checks the worker as it is now" in fixed.stdout
    newest = max(documents(tmp_path).items())[1]
    assert newest["settings"]["rerun_of"]["worker_changed"] is True

    # A changed lane is refused (it would not be the same repeat), unless asked for anyway.
    lane.write_text(lane.read_text().replace("timeout_s = 5", "timeout_s = 6"))
    refused = alk("rerun", run_id, "nominal", failed["repeat"], cwd=tmp_path)
    assert refused.returncode == 2
    assert "the lane file changed since" in refused.stderr and "--anyway" in refused.stderr
    anyway = alk("rerun", run_id, "nominal", failed["repeat"], "--anyway", cwd=tmp_path)
    assert anyway.returncode == 0 and "changed since (--anyway)" in anyway.stdout
    newest = documents(tmp_path)[max(documents(tmp_path))]
    assert newest["settings"]["rerun_of"]["lane_changed"] is True
    report = (tmp_path / "reports" / max(documents(tmp_path)) / "report.md").read_text()
    assert "the lane file (run --anyway) changed since it ran" in report

    # Not found: a repeat the run never had.
    missing = alk("rerun", run_id, "nominal", 99, cwd=tmp_path)
    assert missing.returncode == 2 and "has no repeat 99" in missing.stderr

    # `alk runs` lists them newest first, reruns saying what they reran.
    listed = alk("runs", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)["runs"]
    assert [entry["run_id"] for entry in runs] == sorted(documents(tmp_path), reverse=True)
    assert runs[-1]["run_id"] == run_id and runs[-1]["rerun_of"] is None
    assert runs[-1]["exit_code"] == 1 and runs[-1]["scored"] == 4
    assert all(entry["rerun_of"].startswith(f"{run_id} nominal ") for entry in runs[:-1])
    shown = alk("runs", "--limit", 2, cwd=tmp_path, env={"COLUMNS": "80"})
    assert shown.stdout.count("rerun of") == 2 and run_id + " " not in shown.stdout.splitlines()[0]


def test_fail_under_sets_the_exit_code_by_the_rate_or_its_lower_bound(tmp_path, alk):
    lane = flaky_copy(tmp_path)
    # Seeds whose 4 repeats pass 3 times (a pass rate of 75%): find one.
    seed = next(s for s in range(500)
                if sum(repeat_seed(s, "nominal", r) % 2 == 0 for r in range(1, 5)) == 3)
    by_default = alk("run", "--lane", lane, "-n", 4, "--seed", seed, cwd=tmp_path)
    assert by_default.returncode == 1
    assert " ".join(by_default.stdout.split()).startswith(
        "FAIL nominal broke the rule (every scored repeat passes): 1 of 4 scored repeats "
        "failed")
    under = alk("run", "--lane", lane, "-n", 4, "--seed", seed, "--fail-under", 0.7,
                cwd=tmp_path)
    assert under.returncode == 0, under.stdout
    assert " ".join(under.stdout.split()).startswith(
        "PASS the scenario met the rule (pass rate ≥ 70.0%)")
    over = alk("run", "--lane", lane, "-n", 4, "--seed", seed, "--fail-under", 0.8,
               cwd=tmp_path)
    assert over.returncode == 1 and " ".join(over.stdout.split()).startswith(
        "FAIL nominal broke the rule (pass rate ≥ 80.0%): 1 of 4 scored repeats failed")
    # 3/4's Wilson lower bound is about 30%: the lower bound clears 0.25, not 0.7.
    lower = alk("run", "--lane", lane, "-n", 4, "--seed", seed, "--fail-under", 0.7,
                "--fail-under-lower", cwd=tmp_path)
    assert lower.returncode == 1
    low = alk("run", "--lane", lane, "-n", 4, "--seed", seed, "--fail-under", 0.25,
              "--fail-under-lower", cwd=tmp_path)
    assert low.returncode == 0, low.stdout
    rules = sorted((d["settings"]["rule"]["fail_under"] or 0, d["settings"]["rule"]["lower"])
                   for d in documents(tmp_path).values())
    assert rules == [(0, False), (0.25, True), (0.7, False), (0.7, True), (0.8, False)]
    bad = alk("run", "--lane", lane, "--fail-under", 95, cwd=tmp_path)
    assert bad.returncode == 2 and "expected a pass rate from 0 to 1" in bad.stderr
    alone = alk("run", "--lane", lane, "--fail-under-lower", cwd=tmp_path)
    assert alone.returncode == 2 and "give both" in alone.stderr


def test_report_open_hands_the_page_to_the_browser(tmp_path, alk):
    lane = flaky_copy(tmp_path)
    assert alk("run", "--lane", lane, "-n", 1, "--seed", 2, cwd=tmp_path).returncode in (0, 1)
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    done = alk("report", "--open", cwd=tmp_path, env={"BROWSER": str(browser)})
    assert done.returncode == 0, done.stderr
    [run_id] = documents(tmp_path)
    page = (tmp_path / "reports" / run_id / "report.html").resolve()
    assert page.is_file()
    assert opened.read_text().strip() == page.as_uri()
    # With no browser at all, it says where the page is instead.
    nowhere = alk("report", "--open", cwd=tmp_path,
                  env={"BROWSER": "", "PATH": "/nonexistent", "DISPLAY": ""})
    assert nowhere.returncode == 0
    assert f"no browser to open here: open reports/{run_id}/report.html" in nowhere.stderr


def test_a_rerun_of_a_rerun_reproduces_the_first_run_from_any_folder(tmp_path, alk):
    lane = flaky_copy(tmp_path / "project")
    project = lane.parent.parent
    assert alk("run", "--lane", "lanes/flaky.toml", "-n", 2, "--seed", mixed_seed(2),
               cwd=project).returncode == 1
    [(run_id, document)] = documents(project).items()
    failed = next(r for r in document["scenarios"][0]["repeats"] if r["outcome"] != "pass")
    # From another folder, with --out: the lane is found where the run found it.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    once = alk("rerun", run_id, "nominal", failed["repeat"], "--out", project, cwd=elsewhere)
    assert once.returncode == 1, once.stdout + once.stderr
    first_rerun = max(documents(project))
    twice = alk("rerun", first_rerun, "nominal", failed["repeat"], cwd=project)
    assert twice.returncode == 1, twice.stdout + twice.stderr
    second = documents(project)[max(documents(project))]
    # Both name the first run: in their record, and in the start message the worker got.
    assert second["settings"]["rerun_of"]["run_id"] == run_id
    [repeat] = second["scenarios"][0]["repeats"]
    assert start_message(project, repeat["transcript"]) == start_message(
        project, failed["transcript"])
    # Its lane file gone, a rerun says which file and what to do.
    lane.unlink()
    gone = alk("rerun", run_id, "nominal", failed["repeat"], cwd=project)
    assert gone.returncode == 2 and "the lane file of run" in gone.stderr, gone.stderr
