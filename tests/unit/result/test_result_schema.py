"""docs/result.schema.json, the published shape of result.json (`alk.result/3`): its objects are
the record's types field for field, its codes are alk's own, the documents of real runs of every
shape follow it, and it rejects broken ones.

(tests/conftest.py checks every other result document the tests make alk write against it.)
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import types
import typing
from collections.abc import Iterator, Mapping
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from alk import api
from alk.causes import CATALOGUE
from alk.gateway.script import FAULT_KINDS
from alk.layout import result_path
from alk.records import Lane, Limits, Outcome, RepeatResult, Verdict
from alk.result.document import SCHEMA, STATUSES, RunDocument, to_json
from alk.runner.isolation import Containment, Filesystem, Network
from alk.served_model import WireFault

pytestmark = pytest.mark.slow  # real runs of real workers

REPO = Path(__file__).resolve().parents[3]
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


# -- its objects are the record's types, field for field -----------------------------------------


def resolved(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].removeprefix("#/$defs/")]
    return node


def accepts(schema: dict[str, Any], node: dict[str, Any], value: Any) -> bool:
    return Draft202012Validator({"$defs": schema["$defs"], **node}).is_valid(value)


def holds_a_record(hint: Any) -> bool:
    return dataclasses.is_dataclass(hint) or any(map(holds_a_record, typing.get_args(hint)))


# A value of the wrong JSON type for each kind of leaf field: the schema must refuse it.
WRONG = {str: 1, int: "1", float: "1", bool: 0, tuple: "x"}


def walk(schema: dict[str, Any], node: dict[str, Any], hint: Any, where: str
         ) -> Iterator[str]:
    """Every way the schema `node` at `where` differs from the type `hint`: a record's fields
    against the object's properties (names, order, required), and each field's nullability,
    JSON type and codes."""
    if dataclasses.is_dataclass(hint):
        yield from walk_record(schema, resolved(schema, node), hint, where)
        return
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and holds_a_record(hint):
        [record] = args  # `X | None`: the schema's one object branch
        branches = [resolved(schema, branch) for branch in resolved(schema, node)["anyOf"]]
        [branch] = [branch for branch in branches if branch.get("type") == "object"]
        yield from walk_record(schema, branch, record, where)
    elif origin is tuple and args[-1:] == [Ellipsis] and holds_a_record(hint):
        yield from walk(schema, resolved(schema, node)["items"], args[0], f"{where}[]")
    elif holds_a_record(hint):
        yield f"{where}: this test cannot yet follow {hint} into the schema: teach walk()"


def walk_record(schema: dict[str, Any], node: dict[str, Any], record: type, where: str
                ) -> Iterator[str]:
    names = [field.name for field in dataclasses.fields(record)]
    listed = list(node.get("properties", {}))
    name = f"{record.__module__}.{record.__qualname__}"
    missing = [field for field in names if field not in listed]
    extra = [prop for prop in listed if prop not in names]
    if missing:
        yield (f"{where} ({name}): fields {missing} are not in the schema: add each to "
               "properties and required, with a description")
    if extra:
        yield f"{where} ({name}): properties {extra} are not fields of the record: remove them"
    if not missing and not extra and listed != names:
        yield f"{where} ({name}): properties must come in the record's field order, {names}"
    if node.get("required") != names:
        yield f"{where} ({name}): required must list every field, in order: {names}"
    if node.get("additionalProperties") is not False:
        yield f"{where} ({name}): must be closed (additionalProperties false)"
    hints = typing.get_type_hints(record)
    for field in names:
        if field in listed:
            yield from check_field(schema, node["properties"][field], hints[field],
                                   f"{where}.{field}")


def check_field(schema: dict[str, Any], node: dict[str, Any], hint: Any, where: str
                ) -> Iterator[str]:
    nullable = type(None) in typing.get_args(hint) or hint is Any
    if accepts(schema, node, None) != nullable:
        yield (f"{where}: the record's type is {hint}, so the schema must "
               f"{'accept' if nullable else 'refuse'} null")
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    kind = args[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) and \
        len(args) == 1 else hint
    base = typing.get_origin(kind) or kind
    if isinstance(base, type) and issubclass(base, Enum):
        for code in base:
            if not accepts(schema, node, code.value):
                yield f"{where}: the schema refuses {code.value!r}, a code of {base.__name__}"
        if accepts(schema, node, "made_up"):
            yield f"{where}: the schema takes any string where {base.__name__} has codes"
    elif base in WRONG and accepts(schema, node, WRONG[base]):
        yield f"{where}: the record's type is {hint}, and the schema takes {WRONG[base]!r}"
    elif isinstance(base, type) and issubclass(base, Mapping) and accepts(schema, node, []):
        yield f"{where}: the record's type is {hint}, and the schema takes a list"
    yield from walk(schema, node, hint, where)


def test_every_object_is_its_record_field_for_field(schema: dict[str, Any]) -> None:
    found = list(walk(schema, schema, RunDocument, "$"))
    assert found == [], ("docs/result.schema.json does not match alk.result.document.RunDocument:\n"
                         + "\n".join(found))


def without(schema: dict[str, Any], definition: str, field: str) -> dict[str, Any]:
    changed = copy.deepcopy(schema)
    node = changed["$defs"][definition]
    del node["properties"][field]
    node["required"].remove(field)
    return changed


def test_the_field_check_names_what_does_not_match(schema: dict[str, Any]) -> None:
    """The check above can fail, and says where: a field the schema lacks, a property the
    record lacks, a field that may be null where the schema says it may not."""
    repeat = [field.name for field in dataclasses.fields(RepeatResult)]
    lacking = without(schema, "repeat", "peak_tmpfs_mb")
    assert list(walk(lacking, lacking, RunDocument, "$")) == [
        "$.scenarios[].repeats[] (alk.records.RepeatResult): fields ['peak_tmpfs_mb'] are not "
        "in the schema: add each to properties and required, with a description",
        "$.scenarios[].repeats[] (alk.records.RepeatResult): required must list every field, "
        f"in order: {repeat}"]
    extra = copy.deepcopy(schema)
    extra["$defs"]["icc"]["properties"]["interval"] = {"type": "number"}
    assert list(walk(extra, extra, RunDocument, "$")) == [
        "$.aggregate.icc (alk.stats.records.Icc): properties ['interval'] are not fields of the "
        "record: remove them"]
    strict = copy.deepcopy(schema)
    strict["$defs"]["repeat"]["properties"]["exit_code"] = {"type": "integer"}
    assert list(walk(strict, strict, RunDocument, "$")) == [
        "$.scenarios[].repeats[].exit_code: the record's type is int | None, so the schema "
        "must accept null"]
    loose = copy.deepcopy(schema)
    loose["$defs"]["scenario_stats"]["properties"]["verdict"] = {"type": "string"}
    assert list(walk(loose, loose, RunDocument, "$")) == [
        "$.scenarios[].stats.verdict: the schema takes any string where Verdict has codes"]


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
    assert schema["properties"]["status"]["enum"] == list(STATUSES)
    assert defs["outcome"]["enum"] == [outcome.value for outcome in Outcome]
    assert defs["verdict"]["enum"] == [verdict.value for verdict in Verdict]
    assert [pair["prefixItems"][0]["const"] for pair in
            defs["lane_stats"]["properties"]["verdicts"]["prefixItems"]] == \
        [verdict.value for verdict in Verdict]
    assert defs["settings"]["properties"]["limits"]["propertyNames"]["enum"] == \
        [field.name for field in dataclasses.fields(Limits)]
    for name, codes in (("containment", Containment), ("network", Network),
                        ("filesystem", Filesystem)):
        assert repeat[name]["anyOf"][0]["enum"] == [code.value for code in codes], name
    fault = Draft202012Validator(defs["wire_fault"])
    for kind in FAULT_KINDS:
        assert fault.is_valid(WireFault(call=12, kind=kind).label), kind
    for junk in ("meteor@call1", "stall@call0", "stall", "stall@call1 "):
        assert not fault.is_valid(junk), junk
    # Each outcome goes with its own causes only.
    pairs = {branch["properties"]["outcome"]["const"]: branch["properties"]["cause"]["$ref"]
             for branch in defs["repeat"]["oneOf"]}
    assert pairs == {o.value: f"#/$defs/{o.value}_cause" for o in Outcome}


# -- the documents of real runs follow it --------------------------------------------------------


@dataclasses.dataclass
class Run:
    document: dict[str, Any]  # as returned, in JSON
    on_disk: dict[str, Any]
    running: dict[str, Any] | None = None  # the file while the run went on


def as_json(document: RunDocument) -> dict[str, Any]:
    return json.loads(json.dumps(to_json(document)))


def real_run(out: Path, lane: Path | Lane, repeats: int, *, missing_env: str | None = None,
             stop_after: int | None = None, resume: bool = False,
             keep_workspaces: bool = False) -> Run:
    """One real run (real worker processes) of a lane. `missing_env`: a name the lane requires
    and the environment lacks. `stop_after`: interrupt the run, as Ctrl-C would, once that
    many repeats finished; the file is read as it was then. `resume`: then go on with it."""
    lane = api.load_lane(lane) if isinstance(lane, Path) else lane
    environ = dict(os.environ)
    if missing_env is not None:
        lane = dataclasses.replace(lane, required_env=(missing_env,))
        environ.pop(missing_env, None)
    plans, seen = [], []

    def on_repeat(_result: Any) -> None:
        seen.append(json.loads(result_path(out, plans[0].run_id).read_text(encoding="utf-8")))
        if stop_after is not None and len(seen) >= stop_after:
            raise KeyboardInterrupt

    done = api.run_lane(lane, api.RunOptions(repeats=repeats, seed=7),
                        api.RunSetup(out_dir=out, environ=environ,
                                     keep_workspaces=keep_workspaces,
                                     on_plan=lambda plan, done: plans.append(plan),
                                     on_repeat=on_repeat))
    if resume:
        stop_after = None
        done = api.resume_run(plans[0].run_id, api.RunSetup(out_dir=out, environ=environ))
    return Run(as_json(done.document), json.loads(done.path.read_text(encoding="utf-8")),
               seen[0] if seen else None)


def faulty_gateway_lane() -> Lane:
    """The openai client against alk's scripted model, with a 500 on its second call."""
    lane = api.load_lane(LANES / "gateway.toml")
    [chat] = lane.scenarios
    chat = dataclasses.replace(
        chat, wire_faults=(WireFault(call=2, kind="http_500"),),
        expect=dataclasses.replace(chat.expect, model_calls=None))
    return dataclasses.replace(lane, scenarios=(chat,))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = tmp_path_factory.mktemp("runs")
    root.chmod(0o755)  # a sandboxed worker may run as nobody
    workspaces = root / "workspaces"
    workspaces.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("tempfile.tempdir", str(workspaces))
        return {
            "pass and kill_at": real_run(root / "a", REPO / "lanes" / "reference.toml", 2),
            "pass, void and agent": real_run(root / "b", LANES / "faults.toml", 2),
            "framework crashes": real_run(root / "c", LANES / "adapter_bug.toml", 1),
            "protocol violation": real_run(root / "d", LANES / "bad_protocol.toml", 1),
            "flaky": real_run(root / "e", LANES / "flaky.toml", 4),
            "a claim, kept workspaces": real_run(root / "f", LANES / "false_claim.toml", 1,
                                                 keep_workspaces=True),
            "gate refused": real_run(root / "g", LANES / "old_version.toml", 2),
            "environment missing": real_run(root / "h", LANES / "trivial.toml", 1,
                                            missing_env="SCHEMA_TEST_UNSET"),
            "interrupted": real_run(root / "i", LANES / "trivial.toml", 3, stop_after=1),
            "resumed": real_run(root / "j", LANES / "trivial.toml", 3, stop_after=1,
                                resume=True),
            "a model, a wire fault": real_run(root / "k", faulty_gateway_lane(), 1),
        }


def shape(run: Run) -> dict[str, Any]:
    """What a run's document says about itself, for asserting it is the shape it is named for."""
    document = run.document
    repeats = [r for s in document["scenarios"] for r in s["repeats"]]
    return {"status": document["status"], "gate": document["gate"]["cause"],
            "verdicts": sorted({s["stats"]["verdict"] for s in document["scenarios"]}),
            "outcomes": sorted({r["outcome"] for r in repeats}),
            "finished": (document["aggregate"]["counts"]["completed"],
                         document["aggregate"]["counts"]["requested"]),
            "attempts": max((r["attempts"] for r in repeats), default=0),
            "claimed": any(r["claimed"] is not None for r in repeats),
            "workspaces": document["paths"]["workspaces"] is not None,
            "resumed": [r["done"] for r in document["resumed"]],
            "faults": [f for r in repeats for f in (r["model"] or {}).get("faults", [])],
            "model": [s["model"] is not None for s in document["scenarios"]]}


SHAPES = {
    "pass and kill_at": {"verdicts": ["pass"], "outcomes": ["pass"], "attempts": 2},
    "pass, void and agent": {"verdicts": ["fail", "pass", "void"],
                             "outcomes": ["agent", "lane_infra", "pass"]},
    "framework crashes": {"verdicts": ["fail"], "outcomes": ["framework_runtime"]},
    "protocol violation": {"outcomes": ["framework_runtime"]},
    "flaky": {"verdicts": ["flaky"], "outcomes": ["agent", "pass"]},
    "a claim, kept workspaces": {"outcomes": ["agent"], "claimed": True, "workspaces": True},
    "gate refused": {"gate": "version_unsupported", "verdicts": ["void"], "outcomes": []},
    "environment missing": {"gate": "env_missing", "verdicts": ["void"], "outcomes": []},
    "interrupted": {"status": "interrupted", "verdicts": ["pass"], "outcomes": ["pass"],
                    "finished": (1, 3), "resumed": []},
    "resumed": {"status": "complete", "outcomes": ["pass"], "finished": (3, 3),
                "resumed": [1]},
    "a model, a wire fault": {"faults": ["http_500@call2"], "model": [True]},
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
        assert run.running["gate"]["ok"] is None
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


STATS = "scenarios.0.stats"
REPEAT = "scenarios.0.repeats.0"
GATEWAY_SEEN = {"calls": 2, "turns": 1, "retries": 1, "prompt_tokens": 9,
                "completion_tokens": 3, "faults": ["meteor@call1"], "cost": None}
PROVIDER_COST = {"source": "provider", "input_tokens": 90, "output_tokens": 30, "calls": 2,
                 "unreported": 0, "clamped": 0, "refused": 1}
BREAKS = {
    "a missing required field": ("run_id", DELETE),
    "a missing field of a repeat": (f"{REPEAT}.sha256", DELETE),
    "a missing field of the statistics": (f"{STATS}.durations", DELETE),
    "a number as a string": (f"{REPEAT}.duration_s", "0.5"),
    "a count as a number with a fraction": ("aggregate.counts.passed", 1.5),
    "a boolean as a string": (f"{REPEAT}.timed_out", "false"),
    "an unknown cause": (f"{REPEAT}.cause", "made_up"),
    "an unknown cause in the counts": ("aggregate.causes", [["made_up", 1]]),
    "causes counted in an object": ("aggregate.causes", {"passed": 10}),
    "a cause counted no times": (f"{STATS}.causes", [["passed", 0]]),
    "a count pair with a third item": (f"{STATS}.layers", [["pass", 2, 1]]),
    "a cause of another outcome": (f"{REPEAT}.cause", "timeout"),
    "an unknown outcome": (f"{REPEAT}.outcome", "crashed"),
    "an unknown verdict": (f"{STATS}.verdict", "green"),
    "the verdicts out of order": ("aggregate.verdicts",
                                  [["fail", 0], ["pass", 5], ["flaky", 0], ["void", 0]]),
    "a verdict left out": ("aggregate.verdicts", [["pass", 5], ["fail", 0], ["flaky", 0]]),
    "an unknown status": ("status", "done"),
    "a finished run without its end": ("finished_at", None),
    "an unknown field": ("extra", 1),
    "an unknown field of a repeat": (f"{REPEAT}.score", 1),
    "an unknown field of the statistics": (f"{STATS}.score", 1),
    "the fields of alk.result/1": ("preflight", {
        "ok": True, "cause": None, "detail": "", "framework": None, "version": None}),
    "a rate above 1": ("aggregate.pass_rate", 1.5),
    "pass^k by k in an object": ("aggregate.curve.pass_hat_k", {"1": 1.0}),
    "pass^k above 1": (f"{STATS}.curve.pass_hat_k", [1.5, 1.0]),
    "pass^k at k = 0": (f"{STATS}.curve.k", [0, 1]),
    "an interval with one bound": (f"{STATS}.ci", [0.5]),
    "an estimate without its interval": ("aggregate.clustered_rate", {"value": 0.0}),
    "a void rate as a pair": (f"{STATS}.void_rate", [0.0, 0.5]),
    "a void rate as an estimate of a part": (f"{STATS}.void_rate", {"value": 0.0}),
    "a void interval with one bound": (f"{STATS}.void_ci", [0.5]),
    "a tally of no scenarios": ("aggregate.tallies.0.scenarios", 0),
    "no failure rate to see": (f"{STATS}.repeats_needed.failure_rate", 0.0),
    "an ICC interval above 1": ("aggregate.icc.ci", [0.5, 1.5]),
    "a digest that is not one": (f"{REPEAT}.sha256", "not a digest"),
    "an unknown limit": ("settings.limits", {"memory_gb": 8}),
    "no repeat at once": ("settings.jobs", 0),
    "an unknown executor": ("settings.executor", "slurm"),
    "another schema": ("schema", "alk.result/1"),
    "a refused gate without its cause": ("gate", {
        "ok": False, "cause": None, "detail": "", "framework": None, "version": None}),
    "a passed gate with a cause": ("gate.cause", "env_missing"),
    "a repeat's event path kept": (f"{REPEAT}.path", ["tool/result lookup_order@ab12"]),
    "an attempt's identity of three": (f"{REPEAT}.identities", [["fw", "1.0", "x"]]),
    "an unknown wire fault": (f"{REPEAT}.model", GATEWAY_SEEN),
    "a resumption at no time": ("resumed", [{"at": "yesterday", "done": 1}]),
    "a negative provider count": (f"{REPEAT}.model", {
        **GATEWAY_SEEN, "faults": [], "cost": {**PROVIDER_COST, "input_tokens": -1}}),
    "a cost of an unknown source": (f"{REPEAT}.model", {
        **GATEWAY_SEEN, "faults": [], "cost": {**PROVIDER_COST, "source": "estimated"}}),
}


@pytest.mark.parametrize("path, value", BREAKS.values(), ids=BREAKS)
def test_a_broken_document_is_rejected(schema: dict[str, Any], runs: dict[str, Run], path: str,
                                       value: Any) -> None:
    document = runs["pass and kill_at"].document
    assert problems(schema, document) == []
    assert problems(schema, broken(document, path, value))


def test_what_the_breaks_start_from_is_valid(schema: dict[str, Any],
                                             runs: dict[str, Run]) -> None:
    """Each break changes one thing of a document that is valid without it: a repeat's gateway
    record with a known fault, a resumption and an ICC interval are valid."""
    document = runs["pass and kill_at"].document
    seen = {**GATEWAY_SEEN, "faults": ["http_429@call1"]}
    assert problems(schema, broken(document, f"{REPEAT}.model", seen)) == []
    costly = {**seen, "cost": PROVIDER_COST}
    assert problems(schema, broken(document, f"{REPEAT}.model", costly)) == []
    run_cost = {"totals": {"source": "replayed", "input_tokens": 90, "output_tokens": 30,
                           "repeats": 1, "unreported": 0, "clamped": 0, "refused": 1},
                "max_tokens_run": 1000, "max_tokens_repeat": None,
                "stopped": "stopped: token budget reached"}
    assert problems(schema, broken(document, "cost", run_cost)) == []
    resumed = [{"at": "2026-11-30T12:40:13+00:00", "done": 1}]
    assert problems(schema, broken(document, "resumed", resumed)) == []
    # An ICC below 0 is noise, not an error: its interval may reach below 0 too.
    assert problems(schema, broken(document, "aggregate.icc.ci", [-0.2, 0.9])) == []


@pytest.mark.parametrize("claim", [None, "checked", {"passed": True, "n": [1, 2.5, None]}, 7],
                         ids=["none", "text", "object", "number"])
def test_a_claim_may_be_any_json_value(schema: dict[str, Any], runs: dict[str, Run],
                                       claim: Any) -> None:
    document = broken(runs["pass and kill_at"].document, f"{REPEAT}.claimed", claim)
    assert problems(schema, document) == []
