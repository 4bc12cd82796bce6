"""Adaptive repeats (`alk.execute.adaptive`): the stopping rule with hand-worked Wilson widths, and
runs through the real executor with a scripted runner: each scenario stops where the rule says, the
same at any -j, and a resumed run continues as an uninterrupted one would."""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest

from alk.errors import UsageError
from alk.execute.adaptive import Sampling, stop_reason
from alk.execute.executor import execute
from alk.plan import build_plan, repeat_seed
from alk.records import Observation, Outcome
from alk.redaction import Redactor
from alk.result.options import Adaptive, StopReason

from helpers.lane_files import lane_toml, scenario, write
from helpers.scripted import PASSING, ScriptedRunner, ready

pytestmark = pytest.mark.usefixtures("private_temp")

Z2 = 1.959963984540054**2  # z² at 95%: 3.8415

# --- the rule ------------------------------------------------------------------------------


def rule(passed, failed, ran, max_repeats=100, ci_width=0.2):
    return stop_reason(passed, failed, ran, max_repeats=max_repeats, ci_width=ci_width)


def test_agreeing_repeats_settle_once_their_interval_is_narrower_than_the_target():
    # At n/n (or 0/n) the Wilson interval is [n/(n + z²), 1], z²/(n + z²) wide:
    # n = 15: 3.8415/18.8415 = 0.2039, not below 0.2; n = 16: 3.8415/19.8415 = 0.1936, below.
    assert Z2 / (15 + Z2) == pytest.approx(0.2039, abs=1e-4)
    assert Z2 / (16 + Z2) == pytest.approx(0.1936, abs=1e-4)
    assert rule(15, 0, 15) is None and rule(0, 15, 15) is None
    assert rule(16, 0, 16) == rule(0, 16, 16) == StopReason.CI_WIDTH
    # A wider target settles sooner: 0.3 > 3.8415/(9 + 3.8415) = 0.2991, while n = 8 gives 0.3244.
    assert rule(8, 0, 8, ci_width=0.3) is None and rule(9, 0, 9, ci_width=0.3) == "ci_width"


def test_a_pass_and_a_scored_failure_settle_the_verdict_at_once():
    assert rule(1, 1, 2) == StopReason.FLAKY
    assert rule(19, 1, 100) == StopReason.FLAKY  # at the maximum too: the verdict is the news


def test_void_repeats_settle_nothing_but_count_toward_the_maximum():
    assert rule(0, 0, 99) is None
    assert rule(0, 0, 100) == StopReason.MAX_REPEATS
    # 15 agreeing scored repeats among 100 run: still 0.2039 wide, stopped by the maximum.
    assert rule(15, 0, 99) is None and rule(15, 0, 100) == StopReason.MAX_REPEATS


def test_the_stop_codes_are_stable():
    assert [reason.value for reason in StopReason] == [
        "flaky", "ci_width", "max_repeats", "interrupted"]


@pytest.mark.parametrize("options, message", [
    ({"max_repeats": 0}, "--max-repeats must be at least 1, got 0"),
    ({"ci_width": 0}, "--ci-width must be between 0 and 1"),
    ({"ci_width": 1.0}, "--ci-width must be between 0 and 1"),
    ({"round_size": 0}, "round size must be at least 1"),
    # 3.8415 × 0.98 / 0.02 = 188.2: n = 189 gives 0.01992, n = 188 still 0.02002.
    ({"ci_width": 0.02}, "raise --max-repeats to at least 189"),
    ({"max_repeats": 15}, "raise --max-repeats to at least 16"),
])
def test_options_that_cannot_work_are_refused_with_the_fix(options, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        Adaptive(**options).check()


def test_options_are_checked_where_a_run_is_planned_not_where_a_record_is_read(make_lane):
    import msgspec

    # A record holds them as they were: reading it never applies today's rules.
    assert msgspec.convert({"max_repeats": 15, "ci_width": 0.2, "round_size": 5},
                           Adaptive) == Adaptive(max_repeats=15)
    with pytest.raises(UsageError, match="raise --max-repeats to at least 16"):
        build_plan(make_lane(("a",)), "run-1", adaptive=Adaptive(max_repeats=15))


def test_the_least_maximum_that_reaches_the_width_is_accepted():
    assert Adaptive(max_repeats=16).check().ci_width == 0.2
    assert Adaptive(max_repeats=189, ci_width=0.02).check().max_repeats == 189
    # One repeat can settle a wide enough target: 3.8415/4.8415 = 0.793 < 0.9.
    assert Adaptive(max_repeats=1, ci_width=0.9).check().max_repeats == 1
    assert Adaptive(round_size=1).check().round_size == 1  # a round of one repeat is a round
    # z², not 2z: at 0.1931, 16 agreeing repeats give 3.8415/19.8415 = 0.19361, not below it
    # (with 2z = 3.92 it would be 0.19285, below).
    with pytest.raises(UsageError, match=r"raise --max-repeats to at least 17, or ask for a "
                                         r"wider interval$"):
        Adaptive(max_repeats=16, ci_width=0.1931).check()


def _stopping_points(p, adaptive):
    """Every (passes, scored) an adaptive run of one scenario can stop at, with its chance,
    when each repeat passes with chance p and none is void: the rule itself, round by round."""
    ends, open_ = [], {(0, 0): 1.0}
    ran = 0
    while open_:
        size = min(adaptive.round_size, adaptive.max_repeats - ran)
        ran += size
        after = {}
        for (passed, failed), chance in open_.items():
            for k in range(size + 1):
                key = (passed + k, failed + size - k)
                after[key] = after.get(key, 0.0) + chance * math.comb(size, k) * p**k * (
                    1 - p) ** (size - k)
        open_ = {}
        for (passed, failed), chance in after.items():
            if rule(passed, failed, ran, adaptive.max_repeats, adaptive.ci_width) is None:
                open_[(passed, failed)] = chance
            else:
                ends.append((passed, passed + failed, chance))
    return ends


def test_what_the_note_says_holds_at_the_defaults():
    """alk.report.format.ADAPTIVE_NOTE calls an adaptive run's intervals approximate. Exact
    coverage over every stopping point: the Wilson interval of a scenario stopped by the rule
    covers its true rate less often than 95% for some rates, less than at a fixed 20 repeats
    (where Wilson is already approximate); Clopper–Pearson stays above 95%."""
    stats = pytest.importorskip("scipy.stats")
    from statsmodels.stats.proportion import proportion_confint

    adaptive = Adaptive()

    @functools.cache
    def interval(passed, n, method):
        return proportion_confint(passed, n, method=method)

    def coverage(p, method):
        return sum(chance for passed, n, chance in _stopping_points(p, adaptive)
                   if interval(passed, n, method)[0] <= p <= interval(passed, n, method)[1])

    rates = [i / 100 for i in range(1, 100)]
    wilson = [coverage(p, "wilson") for p in rates]
    exact = [coverage(p, "beta") for p in rates]
    fixed = [stats.binom.pmf(range(21), 20, p) @ [
        lo <= p <= hi for lo, hi in (interval(c, 20, "wilson") for c in range(21))]
        for p in rates]
    assert min(wilson) < 0.9 and min(wilson) < min(fixed)
    assert min(exact) > 0.95
    assert sum(chance for *_, chance in _stopping_points(0.3, adaptive)) == pytest.approx(1)


# --- through the executor ------------------------------------------------------------------

FAILING = Observation(spawned=True, ready=ready(), started=True, exit_code=1)
VOID = Observation(spawned=False, spawn_error="[Errno 2] No such file: 'worker'")

# Each scenario's outcome by repeat number, whatever the order repeats start or end in.
BEHAVIOURS = {
    "stable": lambda n: PASSING,
    "broken": lambda n: FAILING,
    "alternating": lambda n: PASSING if n % 2 else FAILING,
    "voids": lambda n: PASSING if n % 4 == 0 else VOID,  # three in four void
}


class ByRepeat(ScriptedRunner):
    """Passes the probe, then answers each repeat from its scenario's behaviour and number."""

    def __init__(self, behaviours=BEHAVIOURS):
        super().__init__(PASSING)
        self.behaviours = behaviours

    def answer(self, request):
        if request.start is None:
            return super().answer(request)
        start = request.start
        return self.behaviours[start["scenario"]["id"]](start["repeat"])


@pytest.fixture
def plan(make_lane):
    lane = make_lane(tuple(BEHAVIOURS))
    return build_plan(lane, "run-1", adaptive=Adaptive(max_repeats=30), seed=7)


def run(plan, tmp_path, runner=None, **options):
    return execute(plan, tmp_path, Redactor(), runner=runner or ByRepeat(),
                   environ={"PATH": "/bin"}, adaptive=Adaptive(max_repeats=30), **options)


def ran(execution):
    """Scenario -> its repeat numbers, in order."""
    numbers = {}
    for result in execution.repeats:
        numbers.setdefault(result.scenario, []).append(result.repeat)
    return {scenario: sorted(found) for scenario, found in numbers.items()}


def test_each_scenario_stops_where_the_rule_says(plan, tmp_path):
    execution = run(plan, tmp_path)
    assert execution.stopped == {
        "stable": "ci_width",  # 16 agreeing repeats are needed: rounds end at 15, then 20
        "broken": "ci_width",
        "alternating": "flaky",  # both outcomes in its first round
        "voids": "max_repeats",  # 7 scored passes of 30: 3.8415/10.8415 = 0.354 wide
    }
    assert ran(execution) == {"stable": list(range(1, 21)), "broken": list(range(1, 21)),
                              "alternating": [1, 2, 3, 4, 5], "voids": list(range(1, 31))}
    outcomes = {r.outcome for r in execution.repeats if r.scenario == "voids"}
    assert outcomes == {Outcome.PASS, Outcome.LANE_INFRA}
    assert not execution.interrupted and execution.void is None
    # The seeds a fixed run of the same seed gives: --seed reproduces an adaptive run too.
    assert all(r.seed == repeat_seed(7, r.scenario, r.repeat) for r in execution.repeats)


def test_voids_stop_a_scenario_only_at_the_maximum_whatever_passes_among_them(make_lane,
                                                                              tmp_path):
    lane = make_lane(("voids",))
    adaptive = Adaptive(max_repeats=20, round_size=7)
    plan = build_plan(lane, "run-1", adaptive=adaptive, seed=7)
    execution = execute(plan, tmp_path, Redactor(), runner=ByRepeat(), environ={"PATH": "/bin"},
                        adaptive=adaptive)
    # Rounds of 7 end at 7, 14 and the maximum, 20 (not 21): 5 scored passes by then.
    assert ran(execution) == {"voids": list(range(1, 21))}
    assert execution.stopped == {"voids": "max_repeats"}


def test_repeats_run_round_by_round(plan, tmp_path):
    starts = []
    run(plan, tmp_path, on_start=lambda item: starts.append((item.scenario.id, item.repeat)))
    rounds = [(repeat - 1) // 5 for _, repeat in starts]
    assert rounds == sorted(rounds)  # no repeat of round 2 before every one of round 1
    assert starts[:20] == [(item.scenario.id, item.repeat) for item in plan.items[:20]]


def test_a_fixed_run_has_no_stop_codes(make_lane, tmp_path):
    plan = build_plan(make_lane(("alternating",)), "run-1", repeats=7, seed=7)
    execution = execute(plan, tmp_path, Redactor(), runner=ByRepeat(), environ={"PATH": "/bin"})
    assert execution.stopped == {} and len(execution.repeats) == 7


def outcome_record(execution):
    return sorted((r.scenario, r.repeat, r.seed, r.outcome) for r in execution.repeats)


def test_the_same_repeats_at_any_jobs(plan, tmp_path):
    one = run(plan, tmp_path / "one", jobs=1)
    four = run(plan, tmp_path / "four", jobs=4)
    assert four.jobs == 4
    assert outcome_record(four) == outcome_record(one)
    assert four.stopped == one.stopped


@pytest.mark.parametrize("cut_after", [1, 13, 27, 60])
def test_a_resumed_run_continues_as_an_uninterrupted_one(plan, tmp_path, cut_after):
    whole = run(plan, tmp_path / "whole")

    def interrupt(result, execution):
        if len(execution.repeats) == cut_after:
            raise KeyboardInterrupt  # what Ctrl-C raises in the calling thread

    first = run(plan, tmp_path / "cut", on_repeat=interrupt)
    assert first.interrupted and len(first.repeats) >= cut_after  # and what ended meanwhile
    # What was settled keeps its code; what was still sampling says it was cut short.
    assert set(first.stopped) == set(BEHAVIOURS)
    for scenario, code in first.stopped.items():
        assert code in (whole.stopped[scenario], "interrupted")
    rest = run(plan, tmp_path / "cut", done=first.repeats)
    assert outcome_record(rest) == outcome_record(whole)
    assert rest.stopped == whole.stopped and not rest.interrupted


def test_an_interrupt_as_a_round_ends_keeps_what_that_round_settled(plan, tmp_path):
    def interrupt(result, execution):
        if len(execution.repeats) == 20:  # the last repeat of the first round
            raise KeyboardInterrupt

    first = run(plan, tmp_path, on_repeat=interrupt)
    assert first.interrupted and len(first.repeats) == 20
    assert first.stopped == {"stable": "interrupted", "broken": "interrupted",
                             "alternating": "flaky", "voids": "interrupted"}


def test_a_resumed_run_whose_scenarios_are_all_settled_runs_nothing(plan, tmp_path):
    whole = run(plan, tmp_path / "whole")
    runner = ByRepeat()
    again = run(plan, tmp_path / "again", runner, done=whole.repeats)
    assert len(runner.requests) == 1  # the probe alone
    assert again.stopped == whole.stopped and len(again.repeats) == len(whole.repeats)
    assert Sampling(plan, Adaptive(max_repeats=30), whole.repeats).next_round() == []


def test_the_engine_is_asked_for_one_round_at_a_time(plan, tmp_path):
    batches = []

    class Recording:
        """The default engine, recording each batch it is handed."""

        name = "local"

        def __init__(self):
            from alk.execute.threads import ThreadEngine
            self.inner = ThreadEngine(ByRepeat(), 2)

        def open(self, *args):
            from contextlib import contextmanager

            @contextmanager
            def opened():
                with self.inner.open(*args) as lane:
                    real = lane.run

                    def run_batch(items, **callbacks):
                        batches.append(sorted((i.scenario.id, i.repeat) for i in items))
                        real(items, **callbacks)

                    lane.run = run_batch
                    yield lane
            return opened()

    run(plan, tmp_path, engine=Recording())
    assert [len(batch) for batch in batches] == [20, 15, 15, 15, 5, 5]
    assert batches[1] == sorted([(s, n) for s in ("stable", "broken", "voids")
                                 for n in range(6, 11)])
    assert batches[-1] == [("voids", n) for n in range(26, 31)]


def test_a_plan_of_another_maximum_is_refused(make_lane):
    plan = build_plan(make_lane(("stable",)), "run-1", repeats=10, seed=1)
    with pytest.raises(ValueError, match="max_repeats"):
        Sampling(plan, Adaptive(max_repeats=30))


def every_repeat(plan, tmp_path):
    """A fixed run of the plan's every repeat: the seeds an adaptive run gives, all 30 each."""
    fixed = build_plan(plan.lane, plan.run_id, repeats=plan.repeats, seed=plan.seed)
    return execute(fixed, tmp_path / "fixed", Redactor(), runner=ByRepeat(),
                   environ={"PATH": "/bin"}).repeats


def test_results_past_the_stopping_point_change_nothing(plan, tmp_path):
    """A journal holds no such repeat, but the rule reads only the rounds up to its stop."""
    sampling = Sampling(plan, Adaptive(max_repeats=30), every_repeat(plan, tmp_path))
    assert sampling.next_round() == []
    assert sampling.stopped == {"stable": "ci_width", "broken": "ci_width",
                                "alternating": "flaky", "voids": "max_repeats"}


def test_sampling_fed_round_by_round_stops_where_the_executor_did(plan, tmp_path):
    results = {(r.scenario, r.repeat): r for r in every_repeat(plan, tmp_path)}
    sampling = Sampling(plan, Adaptive(max_repeats=30))
    asked = []
    while batch := sampling.next_round():
        for item in batch:
            asked.append((item.scenario.id, item.repeat))
            sampling.add(results[(item.scenario.id, item.repeat)])
    execution = run(plan, tmp_path)
    assert sorted(asked) == sorted((r.scenario, r.repeat) for r in execution.repeats)
    assert sampling.stopped == execution.stopped


def test_a_round_asked_again_is_an_error_not_a_loop(plan):
    """An engine that returned without a repeat it was given would have the run ask forever."""
    sampling = Sampling(plan, Adaptive(max_repeats=30))
    assert len(sampling.next_round()) == 20
    with pytest.raises(RuntimeError, match="the engine returned without repeat 1 of alternating"):
        sampling.next_round()


# --- a scenario whose model turns are sampled ----------------------------------------------------


def test_a_sampled_scenario_is_settled_by_its_rate_not_by_both_outcomes():
    # Its turns are drawn from weighted choices: a pass beside a failure is what it is for.
    assert rule(1, 1, 2) == StopReason.FLAKY
    assert stop_reason(1, 1, 2, max_repeats=100, ci_width=0.2, sampled=True) is None
    # 20/40: Wilson half-width 1.96·sqrt(.25/40 + 3.8415/6400)/(1 + 3.8415/40) = 0.1466, so
    # 0.293 wide; 50/100: 1.96·sqrt(.0025 + .000096)/1.038415 = 0.0962, 0.192 wide.
    assert stop_reason(20, 20, 40, max_repeats=100, ci_width=0.2, sampled=True) is None
    assert stop_reason(50, 50, 100, max_repeats=100, ci_width=0.2,
                       sampled=True) == StopReason.CI_WIDTH


def test_a_sampled_scenario_runs_on_where_a_scripted_one_stops(make_lane, tmp_path):
    choices = ({"choices": [{"weight": 1, "say": "a"}, {"weight": 1, "say": "b"}]},)
    lane = make_lane(("fixed", "sampled"))
    lane = dataclasses.replace(lane, scenarios=(
        lane.scenarios[0], dataclasses.replace(lane.scenarios[1], script=choices)))
    adaptive = Adaptive(max_repeats=30)
    plan = build_plan(lane, "run-1", adaptive=adaptive, seed=7)
    alternating = BEHAVIOURS["alternating"]
    execution = execute(plan, tmp_path, Redactor(),
                        runner=ByRepeat({"fixed": alternating, "sampled": alternating}),
                        environ={"PATH": "/bin"}, adaptive=adaptive)
    assert execution.stopped == {"fixed": "flaky", "sampled": "max_repeats"}
    assert ran(execution) == {"fixed": [1, 2, 3, 4, 5], "sampled": list(range(1, 31))}


# --- through the API: the journal, resume, the record -------------------------------------------


def interrupting(at: int):
    """The behaviours, but Ctrl-C when the stable scenario's repeat `at` starts."""
    return {**BEHAVIOURS, "stable": lambda n: KeyboardInterrupt() if n == at else PASSING}


def lane_file(root):
    """A lane of the behaviours' scenarios on disk: a resumed run loads its lane again."""
    from alk import api

    ids = "".join(scenario(sid, expect='output_equals = "hi"') for sid in BEHAVIOURS)
    return api.load_lane(write(root, lane_toml(ids, name="demo"), "demo"))


def test_a_resumed_adaptive_run_ends_as_an_uninterrupted_one(root):
    from alk import api

    lane = lane_file(root)
    options = api.RunOptions(seed=7, adaptive=Adaptive(max_repeats=30))
    whole = api.run_lane(lane, options, api.RunSetup(out_dir=root / "whole", runner=ByRepeat(),
                                                     environ={"PATH": "/bin"}))
    cut = api.run_lane(lane, options, api.RunSetup(out_dir=root, runner=ByRepeat(interrupting(12)),
                                                   environ={"PATH": "/bin"}))
    assert cut.interrupted and cut.document.settings.adaptive == Adaptive(max_repeats=30)
    # Cut in the third round: only the scenario settled in the first has a rule of its own.
    assert [s.stopped for s in cut.document.scenarios] == [
        "interrupted", "interrupted", "flaky", "interrupted"]
    done = api.resume_run(cut.document.run_id,
                          api.RunSetup(out_dir=root, runner=ByRepeat(), environ={"PATH": "/bin"}))

    def shape(document):
        return [(s.id, s.stopped, [r.repeat for r in s.repeats], s.stats.counts.requested)
                for s in document.scenarios]

    assert shape(done.document) == shape(whole.document) == [
        ("stable", "ci_width", list(range(1, 21)), 20),
        ("broken", "ci_width", list(range(1, 21)), 20),
        ("alternating", "flaky", [1, 2, 3, 4, 5], 5),
        ("voids", "max_repeats", list(range(1, 31)), 30)]
    assert done.document.settings.adaptive == whole.document.settings.adaptive


def test_an_adaptive_run_killed_after_its_last_round_is_written_up_with_its_stop_rules(root):
    from alk import api
    from alk.layout import journal_path, result_path

    tmp_path = root
    whole = api.run_lane(lane_file(root),
                         api.RunOptions(seed=7, adaptive=Adaptive(max_repeats=30)),
                         api.RunSetup(out_dir=root, runner=ByRepeat(), environ={"PATH": "/bin"}))
    run_id = whole.document.run_id
    journal = journal_path(tmp_path, run_id)
    lines = journal.read_bytes().split(b"\n")
    journal.write_bytes(b"\n".join(lines[:-2]) + b"\n")  # no `end` record: killed
    result_path(tmp_path, run_id).unlink()

    class Untouchable(ByRepeat):
        def answer(self, request):
            raise AssertionError("a run with nothing left to run started a worker")

    again = api.resume_run(run_id,
                           api.RunSetup(out_dir=tmp_path, runner=Untouchable(),
                                        environ={"PATH": "/bin"}))
    assert [s.stopped for s in again.document.scenarios] == [
        "ci_width", "ci_width", "flaky", "max_repeats"]
    assert [s.stats for s in again.document.scenarios] == [
        s.stats for s in whole.document.scenarios]
