"""What a failed repeat's detail says, through `alk run` with real workers: the exception that
crashed a worker and the frame that raised it, the frame a hang was stopped in, a scripted
model that ran out of turns (in a test framework and in the real ones), and the protocol lines
of many threads arriving whole."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from alk.gateway.script import EXHAUSTED_TEXT

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
FRAMEWORK = TESTS / "workers" / "tinyagents" / "__init__.py"
WORKER = TESTS / "workers" / "scripted_agent.py"
GENERATED = "AgentGenerationError: Error while generating output:"


def repeats(cwd: Path) -> dict[str, dict]:
    """Each scenario's one repeat, by scenario id."""
    [path] = (cwd / "reports").glob("*/result.json")
    document = json.loads(path.read_text())
    return {s["id"]: repeat for s in document["scenarios"] for repeat in s["repeats"]}


def at(path: Path, text: str) -> str:
    """`path:line` of the first line of the file that contains `text`."""
    number = next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)
    return f"{path}:{number}"


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory, alk) -> dict[str, dict]:
    cwd = tmp_path_factory.mktemp("scripted")
    done = alk("run", "--lane", TESTS / "lanes" / "scripted_agent.toml", cwd=cwd, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    return repeats(cwd)


def test_a_run_on_the_script_passes(scripted: dict[str, dict]) -> None:
    assert scripted["nominal"]["cause"] == "passed"


def test_a_crash_names_the_exception_of_several_lines_and_the_frame(
        scripted: dict[str, dict]) -> None:
    repeat = scripted["model-error"]
    assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime", "framework_exception")
    assert repeat["detail"] == (
        f"exit code 1; {GENERATED} rate limited retry after 3 s; raised at "
        f"{at(FRAMEWORK, 'raise AgentGenerationError')}")


def test_a_hang_names_the_frame_it_was_stopped_in(scripted: dict[str, dict]) -> None:
    repeat = scripted["tool-hangs"]
    assert (repeat["cause"], repeat["timed_out"]) == ("timeout", True)
    assert repeat["detail"].endswith(
        f"; 1 tool call(s), no tool result; interrupted in the worker at "
        f"{at(WORKER, 'time.sleep(600)')}")


def test_a_crash_after_the_script_ran_out_names_both(scripted: dict[str, dict]) -> None:
    repeat = scripted["exhausted-raises"]
    assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime", "script_exhausted")
    assert repeat["detail"] == (
        "the framework asked for model turn 2; the script has 1; then framework_exception: "
        f"exit code 1; {GENERATED} scripted model exhausted after 1 turns; raised at "
        f"{at(FRAMEWORK, 'raise AgentGenerationError')}")


def test_a_wrong_answer_after_the_script_ran_out_is_the_scripts(
        scripted: dict[str, dict]) -> None:
    repeat = scripted["exhausted-answers"]
    assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime", "script_exhausted")
    assert repeat["detail"] == (
        "the framework asked for model turn 2; the script has 1; then wrong_output: "
        'output_contains: expected "742", got "(script exhausted)"')


def test_a_hang_after_the_script_ran_out_names_the_frameworks_frame(
        scripted: dict[str, dict]) -> None:
    repeat = scripted["exhausted-retries"]
    assert (repeat["cause"], repeat["timed_out"]) == ("script_exhausted", True)
    assert repeat["detail"].startswith(
        "the framework asked for model turn 2; the script has 1; then timeout: ")
    assert repeat["detail"].endswith(
        f"; interrupted in the framework at {at(FRAMEWORK, 'time.sleep(self.retry_s)')}")


LANE = """\
framework = "{lane}"
version = ">=0"
command = ["{{python}}", "{worker}"]
network = "none"
timeout_s = 60

[model]
mode = "script"

[[scenarios]]
id = "short-script"
task = "Prepare the report for order 742"
script = [ {{ tool = "lookup_order", args = {{ order = "742" }} }} ]
[scenarios.expect]
output_contains = "742"
"""


@pytest.mark.parametrize("lane, module, worker", [
    ("pydantic-ai", "pydantic_ai", "pydantic_ai_worker.py"),
    ("langgraph", "langgraph", "langgraph_worker.py"),
    ("openai-agents", "agents", "openai_agents_worker.py"),
])
def test_a_real_framework_asking_past_its_script_is_named(tmp_path: Path, lane: str,
                                                           module: str, worker: str, alk) -> None:
    """The framework's own OpenAI client asks alk's gateway for a second turn: the gateway
    answers it with a final text and records the exhausted script itself, whatever the worker
    says."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{lane} is not installed: pip install -e '.[{lane}]'")
    path = tmp_path / "lanes" / f"{lane}.toml"
    path.parent.mkdir()
    path.write_text(LANE.format(lane=lane, worker=ROOT / "workers" / worker))
    done = alk("run", "--lane", path, "-n", 1, cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    repeat = repeats(tmp_path)["short-script"]
    assert (repeat["outcome"], repeat["cause"]) == ("framework_runtime", "script_exhausted")
    assert repeat["detail"] == (
        "the framework asked for model turn 2; the script has 1; then wrong_output: "
        f'output_contains: expected "742", got "{EXHAUSTED_TEXT}"')
    assert "framework_runtime/script_exhausted" in done.stdout


def test_lines_from_many_threads_arrive_whole(tmp_path: Path, alk) -> None:
    done = alk("run", "--lane", TESTS / "lanes" / "threads.toml", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    repeat = repeats(tmp_path)["nominal"]
    assert (repeat["cause"], repeat["violations"]) == ("passed", 0)
    [transcript] = (tmp_path / "transcripts").glob("*/nominal/repeat-01.jsonl")
    calls = [event for event in map(json.loads, transcript.read_text().splitlines())
             if (event["channel"], event["type"]) == ("tool", "call")]
    assert len(calls) == 320
    for event in calls:
        thread, text = event["payload"]["args"]["thread"], event["payload"]["args"]["text"]
        assert text.startswith(f"{thread}:") and len(set(text.split())) == 1
