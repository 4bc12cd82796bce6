"""benchmarks/coverage.py, tiny and seeded: that it runs on alk's functions, and its exact
arithmetic (the stopping points of an adaptive run sum to 1; repeats to see a failure by hand).
The coverage it measures is the script's to print, not the suite's to assert."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def coverage():
    spec = importlib.util.spec_from_file_location("coverage_script",
                                                  ROOT / "benchmarks" / "coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_runs_small_and_prints_each_section(coverage, capsys) -> None:
    assert coverage.main(["--draws", "4", "--only", "clustered,icc,robustness,failures"]) == 0
    out = capsys.readouterr().out
    for heading in ("## clustered interval", "## ICC(1) F interval", "## fault robustness",
                    "## repeats to see a failure"):
        assert heading in out
    # 1 failure in 20: 59 repeats at 5%, 336 at the Wilson lower bound 0.0089.
    line = next(line for line in out.splitlines() if line.startswith("1 in 20"))
    assert line.split()[3:5] == ["59", "336"]


def test_the_stopping_points_are_every_way_the_rule_ends(coverage) -> None:
    for p in (0.03, 0.5, 0.97):
        for sampled in (False, True):
            points = coverage.stopping_points(p, sampled)
            assert math.isclose(sum(points.values()), 1.0, rel_tol=1e-12)
    # Scripted, always passing: stops at 20 of 20 (Wilson 20/20 is 0.161 wide: under 0.2).
    points = coverage.stopping_points(1.0, False)
    assert {point: c for point, c in points.items() if c > 0} == {(20, 20): 1.0}


def test_the_pairwise_truths_by_hand(coverage) -> None:
    # Two paths, each half the time: distinct tool counts {a: 1/2, b: 1/2} and {c: 1/2, b: 1/2}.
    # Their JS distance (base 2) is sqrt(1/2) (half the mass is shared); a path and itself, 0.
    frequencies = [coverage.tool_frequencies(p) for p in (("a:ok", "b:ok"), ("c:ok", "b:ok"))]
    assert coverage.js_distance(*frequencies) == pytest.approx(math.sqrt(0.5))
    assert coverage.pair_truth((0.5, 0.5), lambda i, j: float(i != j)) == 0.5
    assert coverage.levenshtein_similarity(("a", "b"), ("c", "b")) == 0.5
