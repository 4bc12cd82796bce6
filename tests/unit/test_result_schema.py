"""docs/result.schema.json, the published shape of result.json (`alk.result/1`): its codes are
alk's own, the documents of real runs of every shape follow it, and it rejects broken ones.

(tests/conftest.py checks every other result document the tests make alk write against it.)
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from alk import api
from alk.causes import CATALOGUE
from alk.records import Limits, Outcome, Verdict
from alk.report.document import SCHEMA, result_path
from alk.runner.isolation import Containment, Filesystem, Network

REPO = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO / "docs" / "result.schema.json"
LANES = REPO / "tests" / "lanes"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    document = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(document)
    return document


def problems(schema: dict[str, Any], document: Any) -> list[str]:
    return [f"{error.json_path}: {error.message[:200]}"
            for error in Draft202012Validator(schema).iter_errors(document)]


# -- the schema's codes are alk's ----------------------------------------------------------------


@pytest.mark.parametrize("outcome", list(Outcome), ids=str)
def test_the_causes_of_each_outcome_are_the_catalogues(schema: dict[str, Any],
                                                       outcome: Outcome) -> None:
    expected = [cause.value for cause, info in CATALOGUE.items() if info.outcome is outcome]
    listed = schema["$defs"][f"{outcome.value}_cause"]["enum"]
    assert listed == expected, (
        f"docs/result.schema.json: $defs.{outcome.value}_cause.enum must list the "
        f"{outcome.value} causes of alk.causes.CATALOGUE, in its order; set it to "
        f"{json.dumps(expected)}")


def test_a_cause_is_any_cause_of_the_catalogue_and_nothing_else(schema: dict[str, Any]) -> None:
    refs = [part["$ref"] for part in schema["$defs"]["cause"]["anyOf"]]
    assert refs == [f"#/$defs/{outcome.value}_cause" for outcome in Outcome]
    listed = [code for outcome in Outcome
              for code in schema["$defs"][f"{outcome.value}_cause"]["enum"]]
    assert sorted(listed) == sorted(cause.value for cause in CATALOGUE)
    cause = Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/cause"})
    for code in CATALOGUE:
        assert cause.is_valid(code.value)
    for junk in ("", "PASSED", "made_up", "pass", None, 3):
        assert not cause.is_valid(junk)


def test_the_other_codes_are_alks(schema: dict[str, Any]) -> None:
    defs, repeat = schema["$defs"], schema["$defs"]["repeat"]["properties"]
    assert schema["properties"]["schema"]["const"] == SCHEMA
    assert defs["outcome"]["enum"] == [outcome.value for outcome in Outcome]
    assert defs["verdict"]["enum"] == [verdict.value for verdict in Verdict]
    assert list(defs["aggregate"]["properties"]["verdicts"]["properties"]) == \
        [verdict.value for verdict in Verdict]
    assert defs["settings"]["properties"]["limits"]["propertyNames"]["enum"] == \
        [field.name for field in dataclasses.fields(Limits)]
    for name, codes in (("containment", Containment), ("network", Network),
                        ("filesystem", Filesystem)):
        assert repeat[name]["anyOf"][0]["enum"] == [code.value for code in codes], name
    # Each outcome goes with its own causes only.
    pairs = {branch["properties"]["outcome"]["const"]: branch["properties"]["cause"]["$ref"]
             for branch in defs["repeat"]["oneOf"]}
    assert pairs == {o.value: f"#/$defs/{o.value}_cause" for o in Outcome}


# -- the documents of real runs follow it --------------------------------------------------------


@dataclasses.dataclass
class Run:
    document: dict[str, Any]  # as returned
    on_disk: dict[str, Any]
    running: dict[str, Any] | None = None  # the file while the run went on


def real_run(out: Path, lane_file: Path, repeats: int, *, missing_env: str | None = None,
             stop_after: int | None = None, **options: Any) -> Run:
    """One real run (real worker processes) of a lane. `missing_env`: a name the lane requires
    and the environment lacks. `stop_after`: interrupt the run, as Ctrl-C would, once that
    many repeats finished; the file is read as it was then."""
    lane = api.load_lane(lane_file)
    environ = dict(os.environ)
    if missing_env is not None:
        lane = dataclasses.replace(lane, required_env=(missing_env,))
        environ.pop(missing_env, None)
    plans, seen = [], []

    def on_repeat(_result: Any) -> None:
        seen.append(json.loads(result_path(out, plans[0].run_id).read_text(encoding="utf-8")))
        if stop_after is not None and len(seen) >= stop_after:
            raise KeyboardInterrupt

    done = api.run_lane(lane, repeats=repeats, seed=7, out_dir=out, environ=environ,
                        on_plan=lambda plan, done: plans.append(plan), on_repeat=on_repeat, **options)
    return Run(done.document, json.loads(done.path.read_text(encoding="utf-8")),
               seen[0] if seen else None)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("runs")
    root.chmod(0o755)  # a sandboxed worker may run as nobody
    workspaces = root / "workspaces"
    workspaces.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("tempfile.tempdir", str(workspaces))
        return {
            "pass and resume": real_run(root / "a", REPO / "lanes" / "reference.toml", 2),
            "pass, void and agent": real_run(root / "b", LANES / "faults.toml", 2),
            "framework crashes": real_run(root / "c", LANES / "adapter_bug.toml", 1),
            "protocol violation": real_run(root / "d", LANES / "bad_protocol.toml", 1),
            "flaky": real_run(root / "e", LANES / "flaky.toml", 4),
            "a claim, kept workspaces": real_run(root / "f", LANES / "false_claim.toml", 1,
                                                 keep_workspaces=True),
            "preflight refused": real_run(root / "g", LANES / "old_version.toml", 2),
            "environment missing": real_run(root / "h", LANES / "trivial.toml", 1,
                                            missing_env="SCHEMA_TEST_UNSET"),
            "interrupted": real_run(root / "i", LANES / "trivial.toml", 3, stop_after=1),
        }


def shape(run: Run) -> dict[str, Any]:
    """What a run's document says about itself, for asserting it is the shape it is named for."""
    document = run.document
    repeats = [r for s in document["scenarios"] for r in s["repeats"]]
    return {"status": document["status"], "preflight": document["preflight"]["cause"],
            "verdicts": sorted({s["verdict"] for s in document["scenarios"]}),
            "outcomes": sorted({r["outcome"] for r in repeats}),
            "finished": (document["aggregate"]["counts"]["completed"],
                         document["aggregate"]["counts"]["requested"]),
            "attempts": max((r["attempts"] for r in repeats), default=0),
            "claimed": any(r["claimed"] is not None for r in repeats),
            "workspaces": document["paths"]["workspaces"] is not None}


SHAPES = {
    "pass and resume": {"verdicts": ["pass"], "outcomes": ["pass"], "attempts": 2},
    "pass, void and agent": {"verdicts": ["fail", "pass", "void"],
                             "outcomes": ["agent", "lane_infra", "pass"]},
    "framework crashes": {"verdicts": ["fail"], "outcomes": ["framework_runtime"]},
    "protocol violation": {"outcomes": ["framework_runtime"]},
    "flaky": {"verdicts": ["flaky"], "outcomes": ["agent", "pass"]},
    "a claim, kept workspaces": {"outcomes": ["agent"], "claimed": True, "workspaces": True},
    "preflight refused": {"preflight": "version_unsupported", "verdicts": ["void"],
                          "outcomes": []},
    "environment missing": {"preflight": "env_missing", "verdicts": ["void"], "outcomes": []},
    "interrupted": {"status": "interrupted", "verdicts": ["pass"], "outcomes": ["pass"],
                    "finished": (1, 3)},
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_a_real_run_follows_the_schema(schema: dict[str, Any], runs: dict[str, Run],
                                       name: str) -> None:
    run = runs[name]
    found = shape(run)
    assert {key: found[key] for key in SHAPES[name]} == SHAPES[name]
    assert problems(schema, run.document) == []
    assert run.on_disk == run.document
    # The file as the run began, before its probe was judged (as a killed alk leaves it).
    if run.running is not None:
        assert run.running["status"] == "running" and run.running["finished_at"] is None
        assert run.running["preflight"]["ok"] is None
        assert problems(schema, run.running) == []


# -- it rejects broken documents -----------------------------------------------------------------

DELETE = object()


def broken(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy with the field at `path` (dotted; numbers index lists) set to `value`, or removed."""
    document = copy.deepcopy(document)
    *parents, last = [int(part) if part.isdigit() else part for part in path.split(".")]
    target: Any = document
    for part in parents:
        target = target[part]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return document


REPEAT = "scenarios.0.repeats.0"
BREAKS = {
    "a missing required field": ("run_id", DELETE),
    "a missing field of a repeat": (f"{REPEAT}.sha256", DELETE),
    "a number as a string": (f"{REPEAT}.duration_s", "0.5"),
    "a count as a number with a fraction": ("aggregate.counts.passed", 1.5),
    "a boolean as a string": (f"{REPEAT}.timed_out", "false"),
    "an unknown cause": (f"{REPEAT}.cause", "made_up"),
    "an unknown cause in the counts": ("aggregate.causes", {"made_up": 1}),
    "a cause of another outcome": (f"{REPEAT}.cause", "timeout"),
    "an unknown outcome": (f"{REPEAT}.outcome", "crashed"),
    "an unknown verdict": ("scenarios.0.verdict", "green"),
    "an unknown status": ("status", "done"),
    "a finished run without its end": ("finished_at", None),
    "an unknown field": ("extra", 1),
    "an unknown field of a repeat": (f"{REPEAT}.score", 1),
    "a rate above 1": ("aggregate.pass_rate", 1.5),
    "pass^k at k = 0": ("aggregate.pass_hat_k", {"0": 1.0}),
    "a digest that is not one": (f"{REPEAT}.sha256", "not a digest"),
    "an unknown limit": ("settings.limits", {"memory_gb": 8}),
    "another schema": ("schema", "alk.result/2"),
    "a refused preflight without its cause": ("preflight", {
        "ok": False, "cause": None, "detail": "", "framework": None, "version": None}),
}


@pytest.mark.parametrize("path, value", BREAKS.values(), ids=BREAKS)
def test_a_broken_document_is_rejected(schema: dict[str, Any], runs: dict[str, Run], path: str,
                                       value: Any) -> None:
    document = runs["pass and resume"].document
    assert problems(schema, document) == []
    assert problems(schema, broken(document, path, value))


@pytest.mark.parametrize("claim", [None, "checked", {"passed": True, "n": [1, 2.5, None]}, 7],
                         ids=["none", "text", "object", "number"])
def test_a_claim_may_be_any_json_value(schema: dict[str, Any], runs: dict[str, Run],
                                       claim: Any) -> None:
    document = broken(runs["pass and resume"].document, f"{REPEAT}.claimed", claim)
    assert problems(schema, document) == []
