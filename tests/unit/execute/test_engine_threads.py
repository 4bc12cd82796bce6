"""alk.execute.threads: repeats at once in threads of alk (`-j N`), with scripted runners whose
repeats wait on each other (barriers, events, the run's stop) rather than on the clock. Up to N
repeats are in flight, a lane's max_parallel caps them, the callbacks come in the calling thread
only, Ctrl-C ends every running repeat and keeps what finished, and a run's result does not
depend on N."""

from __future__ import annotations

import dataclasses
import json
import select
import signal
import threading
from pathlib import Path

import pytest

from alk.api import RunOptions, RunSetup, run_lane
from alk.execute import repeat as repeat_module
from alk.execute import threads
from alk.execute.threads import ThreadEngine, parallelism
from alk.lane.load import load_lane
from alk.layout import journal_path
from alk.plan import build_plan
from alk.records import Expectations, Scenario
from alk.result.document import RunDocument, to_json
from alk.result.journal import read_journal
from alk.runner.stop import Stopped

from helpers.lane_files import WHERE, lane_error, lane_toml, write
from helpers.scripted import PASSING, ScriptedRunner

pytestmark = pytest.mark.usefixtures("private_temp")

ENVIRON = {"PATH": "/bin"}
# Only ever reached when what a test waits for never comes: the test then fails, never hangs.
STUCK_S = 30.0
WRONG = dataclasses.replace(PASSING, result={**PASSING.result, "output": "bye"})


def repeat_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("alk-repeat-")]


def wait_for_stop(request) -> None:
    ready, _, _ = select.select([request.stop.fd], [], [], STUCK_S)
    assert ready, "the run's stop never came"


def stopped(request) -> None:
    """What the runner's loop does when the run stops: it wakes on the stop's fd and raises."""
    wait_for_stop(request)
    raise Stopped


class ThreadedRunner(ScriptedRunner):
    """Answers the probe with PASSING and each repeat with `act(request)` (PASSING when it
    returns None), recording who asked, from which thread, and how many repeats were in flight
    at once. Each repeat's worker reports ready first, as a real one does before its work; then
    `together` repeats at a time meet at a barrier before acting: a run that cannot have that
    many in flight at once breaks it (and the repeat is void)."""

    def __init__(self, together: int = 1, act=lambda request: None) -> None:
        super().__init__()
        self.act = act
        self.barrier = threading.Barrier(together, timeout=STUCK_S)
        self.lock = threading.Lock()
        self.in_flight = self.most = self.most_threads = 0
        self.idents: set[int] = set()

    def run(self, request, gate, transcript):
        self.requests.append(request)
        transcript.harness("spawn", {"pid": 0})
        preflight = gate(PASSING.ready)
        if request.start is None:
            return dataclasses.replace(PASSING, preflight=preflight)
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.most_threads = max(self.most_threads, len(repeat_threads()))
            self.idents.add(threading.get_ident())
        try:
            self.barrier.wait()
            return dataclasses.replace(self.act(request) or PASSING, preflight=preflight)
        finally:
            with self.lock:
                self.in_flight -= 1


def scenario_of(request) -> str:
    return request.start["scenario"]["id"]


def run(tmp_path, make_lane, runner, ids=("a", "b"), repeats=2, jobs=1, max_parallel=None,
        run_id=None, **hooks):
    lane = make_lane(scenarios=tuple(Scenario(sid, f"task {sid}", {},
                                              Expectations(output_equals="hi")) for sid in ids),
                     max_parallel=max_parallel)
    return run_lane(lane, RunOptions(repeats=repeats, seed=3),
                    RunSetup(out_dir=tmp_path, runner=runner, environ=ENVIRON, jobs=jobs, **hooks),
                    run_id=run_id)


def outcomes(document: RunDocument) -> dict[tuple[str, int], str]:
    return {(entry.id, item.repeat): item.outcome
            for entry in document.scenarios for item in entry.repeats}


# --- how many at once --------------------------------------------------------------------------


def test_jobs_4_has_4_repeats_in_flight_at_once(tmp_path, make_lane):
    runner = ThreadedRunner(together=4)
    done = run(tmp_path, make_lane, runner, repeats=4, jobs=4)
    assert set(outcomes(done.document).values()) == {"pass"} and len(outcomes(done.document)) == 8
    assert runner.most == 4 and len(runner.idents) == 4
    assert done.document.settings.jobs == 4
    assert done.document.settings.executor == "local"


def test_a_lanes_max_parallel_caps_jobs(tmp_path, make_lane):
    runner = ThreadedRunner(together=2)
    done = run(tmp_path, make_lane, runner, repeats=4, jobs=4, max_parallel=2)
    assert set(outcomes(done.document).values()) == {"pass"}
    assert runner.most == 2 and runner.most_threads == 2
    assert done.document.settings.jobs == 2  # what ran at once, not the 4 asked


@pytest.mark.parametrize("jobs, max_parallel, items, max_processes, cgroup, expected", [
    (4, None, 10, None, False, 4),
    (4, 2, 10, None, False, 2),
    (4, 8, 10, None, False, 4),  # max_parallel caps, never raises
    (8, None, 3, None, False, 3),  # never more threads than repeats
    (1, 4, 10, None, False, 1),
    (4, None, 10, 64, False, 1),  # RLIMIT_NPROC only: repeats would share one count
    (4, None, 10, 64, True, 4),  # a pids cgroup bounds each repeat's tree alone
    (4, 2, 10, 64, True, 2),
])
def test_parallelism(make_lane, monkeypatch, jobs, max_parallel, items, max_processes, cgroup,
                     expected):
    from alk.runner import cgroup as cgroups

    monkeypatch.setattr(cgroups, "parent",
                        lambda controller: Path("/sys/fs/cgroup/pids") if cgroup else None)
    lane = make_lane(tuple(f"s{i}" for i in range(items)), max_parallel=max_parallel)
    plan = build_plan(lane, "r", repeats=1, seed=1,
                      limits={"max_processes": max_processes} if max_processes else None)
    assert parallelism(jobs, plan) == expected


def test_jobs_below_one_are_refused():
    with pytest.raises(ValueError, match="jobs must be at least 1, got 0"):
        ThreadEngine(jobs=0)


@pytest.mark.parametrize("value, message", [
    ("0", "max_parallel must be at least 1 (repeats at once), got 0; leave it out to let "
          "--jobs decide"),
    ("-1", "max_parallel must be at least 1 (repeats at once), got -1; leave it out to let "
           "--jobs decide"),
    ('"2"', "max_parallel must be a whole number, got a string ('2')"),
    ("true", "max_parallel must be a whole number, got a boolean"),
    ("2.5", "max_parallel must be a whole number, got a number (2.5)"),
])
def test_max_parallel_must_be_a_whole_number_of_at_least_one(root, value, message):
    assert lane_error(root, lane_toml(raw=f"max_parallel = {value}")) == f"{WHERE}: {message}"


def test_max_parallel_is_read_from_the_lane(root):
    assert load_lane(write(root, lane_toml(max_parallel=3))).max_parallel == 3
    assert load_lane(write(root, lane_toml())).max_parallel is None


# --- the calling thread ------------------------------------------------------------------------


def test_callbacks_come_only_in_the_calling_thread(tmp_path, make_lane):
    runner = ThreadedRunner(together=3)
    heard: list[tuple[str, int]] = []
    run(tmp_path, make_lane, runner, ids=("a", "b", "c"), repeats=2, jobs=3,
        on_plan=lambda plan, done: heard.append(("plan", threading.get_ident())),
        on_start=lambda item: heard.append(("start", threading.get_ident())),
        on_repeat=lambda result: heard.append(("repeat", threading.get_ident())))
    assert [kind for kind, _ in heard].count("start") == 6
    assert [kind for kind, _ in heard].count("repeat") == 6
    assert {ident for _, ident in heard} == {threading.get_ident()}
    assert len(runner.idents) == 3 and threading.get_ident() not in runner.idents


def test_results_come_in_the_order_they_finish_and_the_document_in_repeat_order(tmp_path,
                                                                                make_lane):
    second_done = threading.Event()

    def act(request):
        if request.start["repeat"] == 1:  # finishes only once repeat 2 has been handed over
            assert second_done.wait(STUCK_S), "repeat 2 was never handed over"

    def heard(result):
        order.append(result.repeat)
        if result.repeat == 2:
            second_done.set()

    order: list[int] = []
    done = run(tmp_path, make_lane, ThreadedRunner(together=2, act=act), ids=("a",), jobs=2,
               on_repeat=heard)
    assert order == [2, 1]
    assert [item.repeat for item in done.document.scenarios[0].repeats] == [1, 2]
    journaled = read_journal(journal_path(tmp_path, done.document.run_id)).repeats
    assert [result.repeat for result in journaled] == [2, 1]


# --- stopping ----------------------------------------------------------------------------------


def stop_test_act(request):
    """a: finishes at once; b: ends when the run stops, as a running worker does; c: finishes
    just as the run stops (its result comes after the interrupt and is kept)."""
    scenario = scenario_of(request)
    if scenario == "b":
        stopped(request)
    if scenario == "c":
        wait_for_stop(request)


def transcript_events(tmp_path: Path, document: RunDocument, scenario: str) -> list[dict]:
    path = tmp_path / "transcripts" / document.run_id / scenario / "repeat-01.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_stopped_and_kept(tmp_path: Path, done, kept: set[str]) -> None:
    document = done.document
    assert done.interrupted and document.status == "interrupted"
    assert {sid for sid, _ in outcomes(document)} == kept
    journaled = read_journal(journal_path(tmp_path, document.run_id))
    assert {result.scenario for result in journaled.repeats} == kept
    assert journaled.ended == "interrupted"
    # The repeat the stop ended was discarded, and its transcript says so.
    assert transcript_events(tmp_path, document, "b")[-1]["type"] == "interrupted"
    assert repeat_threads() == []


def test_an_interrupt_in_the_calling_thread_ends_every_repeat_and_keeps_what_finished(
        tmp_path, make_lane):
    heard: list[str] = []

    def on_repeat(result):
        heard.append(result.scenario)
        if len(heard) == 1:
            raise KeyboardInterrupt  # as Ctrl-C landing while a's result is handed over

    runner = ThreadedRunner(together=3, act=stop_test_act)
    done = run(tmp_path, make_lane, runner, ids=("a", "b", "c"), repeats=1, jobs=3,
               on_repeat=on_repeat)
    assert heard == ["a", "c"]
    assert_stopped_and_kept(tmp_path, done, {"a", "c"})


def test_a_real_sigint_to_the_main_thread_ends_every_repeat(tmp_path, make_lane):
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's KeyboardInterrupt here")
    main = threading.main_thread().ident
    assert threading.get_ident() == main

    starts: list[str] = []
    all_started = threading.Event()

    def on_start(item):
        starts.append(item.scenario.id)
        if len(starts) == 3:
            all_started.set()

    def act(request):
        if scenario_of(request) == "a":
            # Ctrl-C while all three run, once the calling thread is waiting for results.
            assert all_started.wait(STUCK_S)
            signal.pthread_kill(main, signal.SIGINT)
            stopped(request)
        stop_test_act(request)

    done = run(tmp_path, make_lane, ThreadedRunner(together=3, act=act), ids=("a", "b", "c"),
               repeats=1, jobs=3, on_start=on_start)
    assert_stopped_and_kept(tmp_path, done, {"c"})


def test_a_sigint_while_the_repeat_threads_start_sets_the_runs_stop(tmp_path, make_lane,
                                                                   monkeypatch):
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's KeyboardInterrupt here")
    main = threading.main_thread().ident
    sent = threading.Event()

    class SlowToStart(threading.Thread):
        def start(self):
            super().start()
            if self.name == "alk-repeat-1":  # the Ctrl-C comes before the next one starts
                assert sent.wait(STUCK_S)

    monkeypatch.setattr(threads.threading, "Thread", SlowToStart)
    woke_to_a_set_stop: list[bool] = []

    def act(request):
        if not sent.is_set():
            signal.pthread_kill(main, signal.SIGINT)
            sent.set()
        wait_for_stop(request)
        woke_to_a_set_stop.append(request.stop.is_set())
        raise Stopped

    done = run(tmp_path, make_lane, ThreadedRunner(act=act), ids=("a", "b", "c"), repeats=1,
               jobs=3)
    for thread in repeat_threads():
        thread.join(STUCK_S)
    assert done.interrupted and woke_to_a_set_stop == [True]


def test_a_ctrl_c_just_before_the_hand_over_begins_still_stops_and_waits_for_every_repeat(
        tmp_path, make_lane, monkeypatch):
    # The Ctrl-C lands after the threads started and before hand_over's own guard: the engine's
    # must stop the run and drain it, or repeats race the lane's close and their results are lost.
    real, calls = threads.hand_over, []

    def interrupted_at_entry(messages, *args, **kwargs):
        calls.append(kwargs.get("stopping"))
        if len(calls) == 1:  # once a's result is in, put back for the drain to hand over
            taken = [messages.get()]
            while not (isinstance(taken[-1], tuple) and taken[-1][0] == "result"
                       and taken[-1][1][0].scenario == "a"):
                taken.append(messages.get())
            for message in taken:
                messages.put(message)
            raise KeyboardInterrupt
        real(messages, *args, **kwargs)

    monkeypatch.setattr(threads, "hand_over", interrupted_at_entry)
    alive_at_close: list[list[str]] = []
    close = repeat_module.LaneContext.close

    def closing(self):
        alive_at_close.append([thread.name for thread in repeat_threads()])
        close(self)

    monkeypatch.setattr(repeat_module.LaneContext, "close", closing)

    def act(request):
        if scenario_of(request) != "a":  # a finishes; b and c run until the run stops
            stopped(request)

    done = run(tmp_path, make_lane, ThreadedRunner(together=3, act=act), ids=("a", "b", "c"),
               repeats=1, jobs=3)
    assert done.interrupted and alive_at_close == [[]]
    assert {sid for sid, _ in outcomes(done.document)} == {"a"}


def test_a_second_interrupt_while_a_result_is_handed_over_still_waits_for_every_repeat(
        tmp_path, make_lane, monkeypatch):
    c_handed, b_may_end = threading.Event(), threading.Event()
    alive_at_close: list[list[str]] = []
    close = repeat_module.LaneContext.close

    def closing(self):
        alive_at_close.append([thread.name for thread in repeat_threads()])
        b_may_end.set()  # else a repeat left running would wait for ever
        close(self)

    monkeypatch.setattr(repeat_module.LaneContext, "close", closing)

    def act(request):
        scenario = scenario_of(request)
        if scenario == "b":  # still ending when the second Ctrl-C comes
            wait_for_stop(request)
            assert b_may_end.wait(STUCK_S)
            raise Stopped
        if scenario == "c":
            wait_for_stop(request)
        if scenario == "d":  # finishes after c was handed over
            wait_for_stop(request)
            assert c_handed.wait(STUCK_S)

    def on_repeat(result):
        if result.scenario == "a":
            raise KeyboardInterrupt  # the first Ctrl-C
        if result.scenario == "c":
            c_handed.set()
            raise KeyboardInterrupt  # a second one, while c is handed over
        b_may_end.set()

    done = run(tmp_path, make_lane, ThreadedRunner(together=4, act=act),
               ids=("a", "b", "c", "d"), repeats=1, jobs=4, on_repeat=on_repeat)
    assert alive_at_close == [[]]
    assert {sid for sid, _ in outcomes(done.document)} == {"a", "c", "d"}


def test_a_bug_in_a_repeats_thread_stops_the_run_instead_of_hanging_it(tmp_path, make_lane,
                                                                       monkeypatch):
    """An exception alk does not expect (a bug in its own code past the runner) reaches the
    caller, after every other repeat ended; the run stays resumable."""
    buggy = dataclasses.replace(PASSING, trajectory=("bug:here",))
    kept_steps = repeat_module.LaneContext.kept_steps

    def broken(self, obs):
        if obs.trajectory == ("bug:here",):
            raise RuntimeError("a bug in alk")
        return kept_steps(self, obs)

    monkeypatch.setattr(repeat_module.LaneContext, "kept_steps", broken)

    def act(request):
        if scenario_of(request) == "a":
            return buggy
        stopped(request)

    raised: list[BaseException] = []

    def go():
        try:
            run(tmp_path, make_lane, ThreadedRunner(together=3, act=act), ids=("a", "b", "c"),
                repeats=1, jobs=3, run_id="20261130-000000-abcdef")
        except BaseException as exc:  # noqa: BLE001 - what the caller would get
            raised.append(exc)

    caller = threading.Thread(target=go, daemon=True)  # a hung run must not hang pytest too
    caller.start()
    caller.join(STUCK_S)
    assert not caller.is_alive(), "the run hung"
    [error] = raised
    assert isinstance(error, RuntimeError) and str(error) == "a bug in alk"
    assert repeat_threads() == []
    journaled = read_journal(journal_path(tmp_path, "20261130-000000-abcdef"))
    assert journaled.ended is None and journaled.repeats == ()  # resumable


# --- the result does not depend on -j ----------------------------------------------------------


def by_seed(request):
    """Outcomes that depend on the repeat alone (its seed), not on when or where it ran."""
    seed = request.start["seed"]
    return WRONG if seed % 3 == 0 else dataclasses.replace(
        PASSING, duration_s=seed % 7 / 10, trajectory=(f"step-{seed % 2}:ok",))


def comparable(document: RunDocument) -> dict:
    document = json.loads(json.dumps(to_json(document)))
    for key in ("started_at", "finished_at", "harness_peak_rss_mb"):
        document.pop(key)
    document["settings"].pop("jobs")
    for entry in document["scenarios"]:
        for item in entry["repeats"]:
            item.pop("sha256")  # transcripts hold their times
    return document


def test_a_run_with_jobs_4_has_the_result_of_the_same_run_with_jobs_1(tmp_path, make_lane):
    documents = []
    for jobs in (1, 4):
        done = run(tmp_path / f"j{jobs}", make_lane, ThreadedRunner(act=by_seed),
                   ids=("a", "b", "c"), repeats=6, jobs=jobs, run_id="20261130-000000-abcdef")
        documents.append(done.document)
    one, four = documents
    assert {"pass", "agent"} <= set(outcomes(one).values())
    assert comparable(four) == comparable(one)
