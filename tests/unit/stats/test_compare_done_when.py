"""Issue 24's "done when" for `alk compare`: in a 14-scenario lane shaped like the framework
lanes, one scenario went from 19/20 to 14/20. The fixed gate says what it could not see; the
sequential gate (`--until-decided`) runs more repeats of both saved runs until it decides.

The worker is scripted (no process starts): each scenario's `input.fail` lists the repeat
numbers, modulo 20, that answer wrongly, so that the extra repeats keep each run's true rate
(95% and 70% for the scenario that changed).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from scipy.stats import fisher_exact, norm

from alk import api
from alk.compare import Change, compare_runs
from alk.report.compare_view import compare_view
from alk.report.html.compare_page import compare_page
from alk.stats import gate_power

from helpers import documents
from helpers.scripted import ScriptedRunner
from helpers.views import render

ALWAYS = list(range(20))
# The framework lanes' shape (docs/frameworks.json): ten that pass, two that fail, `sampled`.
STEADY = {**{f"pass-{i}": [] for i in range(10)}, "fails-1": ALWAYS, "fails-2": ALWAYS}


class ByRepeat(ScriptedRunner):
    """Passes a repeat unless its number, modulo 20, is in its scenario's `input.fail`."""

    def __init__(self) -> None:
        super().__init__()

    def answer(self, request):
        if request.start is None:
            return documents.observation(0.3)
        scenario, number = request.start["scenario"], request.start["repeat"]
        wrong = number % 20 in scenario["input"]["fail"]
        return documents.WRONG if wrong else documents.observation(1.0)


def lane_file(root: Path, name: str, changed: list[int], sampled: list[int]) -> Path:
    fails = {"changed": changed, **STEADY, "sampled": sampled}
    blocks = [f'[[scenarios]]\nid = "{sid}"\ntask = "Look up order 742"\n'
              f"input = {{ fail = {json.dumps(fail)} }}\n"
              '[scenarios.expect]\noutput_contains = "open"\n' for sid, fail in fails.items()]
    path = root / "lanes" / f"{name}.toml"
    path.parent.mkdir(exist_ok=True)
    (root / "worker.py").touch()  # never started: the runner answers for it
    path.write_text(f'name = "{name}"\nframework = "pydantic-ai"\nversion = ">=1.0,<2"\n'
                    'command = ["{python}", "worker.py"]\nrepeats = 20\n\n' + "\n".join(blocks))
    return path


@pytest.fixture
def runs(tmp_path: Path, private_temp: None, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    setup = api.RunSetup(out_dir=tmp_path, runner=ByRepeat(), environ=documents.SECRET_ENV)
    # 19/20 (repeat 7 fails) → 14/20; sampled 15/20 → 16/20.
    before = lane_file(tmp_path, "before", [7], [1, 4, 8, 12, 16])
    after = lane_file(tmp_path, "after", [2, 5, 9, 13, 17, 19], [3, 6, 10, 14])
    ids = [api.run_lane(api.load_lane(path), api.RunOptions(seed=7), setup).document.run_id
           for path in (before, after)]
    return setup, ids


def test_at_20_repeats_it_says_what_it_could_not_see(runs) -> None:
    setup, (before, after) = runs
    comparison = compare_runs(api.read_run(before), api.read_run(after))
    changed = comparison.scenarios[0]
    assert (changed.a.passed, changed.b.passed, changed.a.scored) == (19, 14, 20)
    assert changed.change is Change.INCONCLUSIVE and comparison.change is Change.INCONCLUSIVE
    assert changed.p == pytest.approx(
        fisher_exact([[14, 6], [19, 1]], alternative="less").pvalue, rel=1e-12)
    # `changed`, `sampled` and the lane test can reach 0.05/3; the ten 20/20 and the two 0/20
    # scenarios cannot, and spend nothing.
    assert changed.level == pytest.approx(0.05 / 3) and changed.p > changed.level
    drop = gate_power.detectable_drop(0.95, 20, 20, 0.05 / 3)
    assert changed.detectable_drop == drop
    points = math.ceil(drop * 100 - 1e-9)
    text = " ".join(render(compare_view(comparison), 80).split())
    assert (f"changed: ? inconclusive · a drop of up to {points} points could go unseen here "
            "at 20 repeats") in text
    assert "about" in text and "a run would see a 20-point drop 80% of the time" in text
    assert "no evidence" not in text
    # The ten scenarios at 20/20 in both runs say one thing, once; of those A never passed,
    # there is no drop to see.
    assert text.count("could go unseen here") == 3
    assert ("pass-0, pass-1, pass-2, pass-3, pass-4, pass-5, pass-6, pass-7, pass-8, pass-9 "
            "(10 scenarios, 20/20 in both runs): ? inconclusive") in text
    assert "fails-1, fails-2 (2 scenarios, 0/20 in both runs): ? inconclusive · A never " \
        "passed here: there is no drop to see" in text


@pytest.mark.slow
def test_until_decided_decides_it(runs) -> None:
    # As `alk compare A B --until-decided --max-repeats 60 --fail-on-regression` runs it: it
    # stops at the look that decides the regression (sampled, 75% in both, would need more
    # than 100 repeats a run to show unchanged within ±10 points).
    setup, (before, after) = runs
    looked = []
    comparison = api.compare_until_decided(before, after, max_repeats=60, round_size=10,
                                           setup=dataclasses.replace(setup, runner=ByRepeat()),
                                           stop_at_regression=True, on_look=looked.append)
    changed = comparison.scenarios[0]
    assert changed.change is Change.REGRESSED and comparison.change is Change.REGRESSED
    looks = comparison.sequence
    assert looks is not None and looks.taken > 1 and looks.decided_at[0] == looks.taken
    n = changed.a.scored
    assert n == 20 + 10 * (looks.taken - 1) and changed.b.completed == n
    # Every scenario still open ran to this look in both runs: the added repeats are theirs.
    assert looks.added_a == looks.added_b == sum(
        s.a.completed - 20 for s in comparison.scenarios)
    assert comparison.scenarios[0].p <= looks.boundaries[-1]
    assert len(looked) == looks.taken and looks.planned == 5
    assert looks.alpha_spent == pytest.approx(looked[-1].spent)
    t = (20 + 10 * (looks.taken - 1)) / 60
    assert looks.alpha_spent == pytest.approx(2 * (1 - norm.cdf(norm.ppf(0.975) / math.sqrt(t))))
    text = render(compare_view(comparison), 80)
    assert f"until decided: {looks.taken} of 5 looks" in " ".join(text.split())
    # The scenarios left undecided were held to the last look's boundary, not to a share by
    # Holm–Tarone, which the sequential gate does not use.
    flat = " ".join(text.split())
    assert "at the last look, needs <= " in flat and "(Holm–Tarone)" not in flat
    page = compare_page(comparison, Path("."))
    assert f"until decided: {looks.taken} of 5 looks" in page
    assert "These decisions replace the rules above" in page
