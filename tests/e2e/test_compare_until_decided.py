"""`alk compare A B --until-decided` through alk's command line, on real workers: A runs the
reference worker (the report task passes every time), B a worker right on even seeds only, so
B is truly worse. The looks extend both saved runs in place until the regression is decided;
the decision, the looks, the α spent and the repeats are what the design says.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from scipy.stats import fisher_exact, norm

from alk.plan import repeat_seed

from helpers.cli import alk_here

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SEED = 7

LANE = """name = "{name}"
description = "The report task, on {name}."
framework = "{framework}"
version = ">=1.0,<2"
command = ["{{python}}", "workers/{worker}"]
timeout_s = 10
repeats = 10

[[scenarios]]
id = "nominal"
task = "Prepare the report for order 742 of tenant shopping-a"
[scenarios.expect]
stop_reason = "accepted"
output_contains = "742"
"""


def spent(t: float) -> float:
    """O'Brien–Fleming-type spending at α = 0.05, from scipy's normal law."""
    return 2 * (1 - norm.cdf(norm.ppf(0.975) / math.sqrt(t)))


def folder(tmp_path: Path) -> Path:
    (tmp_path / "lanes").mkdir()
    (tmp_path / "workers").mkdir()
    shutil.copy(ROOT / "workers" / "reference_worker.py", tmp_path / "workers")
    shutil.copy(TESTS / "workers" / "flaky.py", tmp_path / "workers")
    for name, framework, worker in (("before", "alk-reference", "reference_worker.py"),
                                    ("after", "flaky", "flaky.py")):
        (tmp_path / "lanes" / f"{name}.toml").write_text(
            LANE.format(name=name, framework=framework, worker=worker))
    return tmp_path


def run_id(output: str) -> str:
    return json.loads(output)["run_id"]


def saved(cwd: Path, lane: str) -> str:
    done = alk_here("run", "--lane", f"lanes/{lane}.toml", "--seed", SEED, "-j", 2, "--json",
                    cwd=cwd)
    assert done.returncode in (0, 1), done.stderr
    return run_id(done.stdout)


def result(cwd: Path, run: str) -> dict:
    return json.loads((cwd / "reports" / run / "result.json").read_text())


def test_until_decided_extends_both_runs_until_the_regression_is_decided(tmp_path):
    cwd = folder(tmp_path)
    before, after = saved(cwd, "before"), saved(cwd, "after")
    passed_b = result(cwd, after)["scenarios"][0]["stats"]["counts"]["passed"]
    # The sequential gate's first look spends almost nothing (α(1/3) = 0.0007): 10/10 →
    # about 5/10 (one-sided p near 0.016) is decided at a later look.
    assert passed_b > 0 and fisher_exact([[passed_b, 10 - passed_b], [10, 0]],
                                         alternative="less").pvalue > spent(1 / 3)
    # Looks at 10, 20, 30 repeats a run (t = 1/3, 2/3, 1), one scenario: its boundary is
    # each look's increment of α.
    done = alk_here("compare", before, after, "--until-decided", "--max-repeats", 30,
                    "--round", 10, "-j", 2, "--json", "--fail-on-regression", cwd=cwd)
    assert done.returncode == 1, done.stderr
    comparison = json.loads(done.stdout)
    looks = comparison["sequence"]
    [nominal] = comparison["scenarios"]
    a, b = result(cwd, before), result(cwd, after)
    counts_a = a["scenarios"][0]["stats"]["counts"]
    counts_b = b["scenarios"][0]["stats"]["counts"]
    n = counts_a["completed"]
    assert counts_b["completed"] == n and n in (10, 20, 30)
    taken = n // 10
    assert looks["taken"] == taken and looks["planned"] == 3
    assert looks["decided_at"] == [taken]
    assert looks["alpha_spent"] == pytest_approx(spent(taken / 3))
    expected = [spent(1 / 3)] + [spent((j + 1) / 3) - spent(j / 3) for j in range(1, taken)]
    assert looks["boundaries"] == pytest_approx(expected)
    assert (looks["added_a"], looks["added_b"]) == (n - 10, n - 10)
    # Regressed at the look where the one-sided p first fell within its boundary.
    assert nominal["change"] == "regressed" and comparison["change"] == "regressed"
    p = fisher_exact([[counts_b["passed"], counts_b["scored"] - counts_b["passed"]],
                      [counts_a["passed"], counts_a["scored"] - counts_a["passed"]]],
                     alternative="less").pvalue
    assert p <= expected[-1]
    assert f"B worse at look {taken}" in nominal["reason"]
    assert taken > 1
    # The extended runs are saved runs: every repeat in result.json, each with a fresh seed.
    for document in (a, b):
        repeats = document["scenarios"][0]["repeats"]
        assert [r["repeat"] for r in repeats] == list(range(1, n + 1))
        assert [r["seed"] for r in repeats] == [repeat_seed(SEED, "nominal", k)
                                                for k in range(1, n + 1)]
        assert document["status"] == "complete" and document["settings"]["repeats"] == n
    shown = alk_here("report", after, cwd=cwd)
    assert f"{n} repeats per scenario" in shown.stdout


def test_a_lane_file_changed_since_the_run_is_refused(tmp_path):
    cwd = folder(tmp_path)
    before, after = saved(cwd, "before"), saved(cwd, "after")
    lane = cwd / "lanes" / "before.toml"
    lane.write_text(lane.read_text().replace("timeout_s = 10", "timeout_s = 11"))
    done = alk_here("compare", before, after, "--until-decided", "--max-repeats", 30, cwd=cwd)
    assert done.returncode != 0
    message = " ".join((done.stdout + done.stderr).split())
    assert "lanes/before.toml: the lane file changed since run" in message
    assert "restore the file" in message
    # Nothing was run: both runs keep their 10 repeats.
    assert len(result(cwd, before)["scenarios"][0]["repeats"]) == 10
    lane.unlink()
    gone = alk_here("compare", before, after, "--until-decided", cwd=cwd)
    assert gone.returncode != 0 and "cannot be loaded" in " ".join(
        (gone.stdout + gone.stderr).split())


def pytest_approx(value):
    import pytest

    return pytest.approx(value, rel=1e-9)
