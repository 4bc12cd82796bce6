"""alk.lane: loading a lane file, its defaults, path resolution, and every message a lane author
can get. Lanes are written into tmp_path; the tests run from tmp_path so messages name
`lanes/demo.toml`, as they would for a lane in a project."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from alk.errors import LaneError
from alk.lane.find import find_lane, lane_paths
from alk.lane.load import lane_warnings, load_lane
from alk.records import Expectations, FileExpectation

from helpers.lane_files import OMIT, WHERE, lane_error, lane_toml, scenario, write

# --- a valid lane --------------------------------------------------------------------------


def test_valid_lane_loads_with_defaults(root: Path) -> None:
    lane = load_lane(write(root, lane_toml()))

    assert lane.name == "demo"  # the file stem
    assert lane.description == ""
    assert lane.framework == "fw"
    assert lane.requirement == ">=1.0,<2"
    assert lane.required_env == ()
    assert lane.timeout_s == 30.0
    assert lane.repeats == 20
    assert lane.transcript_cap_bytes == 64 * 1024 * 1024
    assert lane.root == root.resolve()
    assert lane.path == root / "lanes" / "demo.toml"
    assert [s.id for s in lane.scenarios] == ["a"]
    assert lane.scenarios[0].task == "Do it"
    assert lane.scenarios[0].input == {}
    assert lane.scenarios[0].expect == Expectations()


def test_explicit_fields_override_defaults(root: Path) -> None:
    text = lane_toml(name="other-name", description="words", timeout_s=2.5, repeats=3,
                     transcript_cap_mb=0.5, required_env=["API_KEY"])
    lane = load_lane(write(root, text))

    assert (lane.name, lane.description) == ("other-name", "words")
    assert (lane.timeout_s, lane.repeats) == (2.5, 3)
    assert lane.transcript_cap_bytes == 512 * 1024
    assert lane.required_env == ("API_KEY",)


def test_scenario_input_and_expectations_are_parsed(root: Path) -> None:
    expect = "\n".join([
        'stop_reason = "accepted"',
        'output_contains = "hello"',
        'output_equals = "hello there"',
        'output_matches = "^hel+o"',
        'end_state = { phase = "stopped", n = 2 }',
        "tool_calls = { search = 2, delete = 0 }",
        'files = [{ path = "out/report.json", exists = true, json_length = 3 },',
        '         { path = "state.json", json_subset = { ok = true } }]',
    ])
    text = lane_toml(scenario(expect=expect, extra='input = { order = 742, tags = ["x"] }'))
    found = load_lane(write(root, text)).scenarios[0]

    assert found.input == {"order": 742, "tags": ["x"]}
    assert found.expect == Expectations(
        stop_reason="accepted",
        output_contains="hello",
        output_equals="hello there",
        output_matches="^hel+o",
        end_state={"phase": "stopped", "n": 2},
        tool_calls={"search": 2, "delete": 0},
        files=(FileExpectation("out/report.json", True, 3, None),
               FileExpectation("state.json", None, None, {"ok": True})),
    )


def test_relative_command_paths_resolve_from_the_folder_holding_lanes(root: Path) -> None:
    text = lane_toml(command=["{python}", "-u", "workers/w.py", "python3", "pkg.module",
                              "/abs/tool.py"])
    lane = load_lane(write(root, text))

    assert lane.command == ("{python}", "-u", str(root.resolve() / "workers" / "w.py"),
                            "python3", "pkg.module", "/abs/tool.py")


@pytest.mark.parametrize("arg", ["workers/missing.py", "typo.py"])
def test_a_relative_command_path_that_does_not_exist_is_a_lane_error(root: Path,
                                                                       arg: str) -> None:
    message = lane_error(root, lane_toml(command=["{python}", arg]))
    assert message.startswith(f"{WHERE}: command[1] {arg!r} does not exist under ")
    assert "relative paths resolve from the folder that holds the lane's lanes/ folder" in message


def test_other_arguments_may_look_like_paths(root: Path) -> None:
    text = lane_toml(command=["{python}", "workers/w.py", "--model", "openai/gpt-4o", "x.py"])
    assert load_lane(write(root, text)).command[3:] == ("openai/gpt-4o", "x.py")


def test_toml_dates_are_not_json_values(root: Path) -> None:
    message = lane_error(root, lane_toml(scenario() + "[scenarios.input]\nsince = 2024-01-01\n"))
    assert message.startswith(f"{WHERE}: scenarios[0].input.since must hold only JSON values")


def test_a_lane_outside_a_lanes_folder_resolves_from_its_own_folder(tmp_path: Path) -> None:
    (tmp_path / "w.py").write_text("")
    path = tmp_path / "solo.toml"
    path.write_text(lane_toml(command=["{python}", "w.py"]))
    lane = load_lane(path)

    assert lane.name == "solo"
    assert lane.root == tmp_path.resolve()
    assert lane.command == ("{python}", str(tmp_path.resolve() / "w.py"))


# --- malformed lanes -----------------------------------------------------------------------


def test_missing_scenario_id_names_its_index(root: Path) -> None:
    text = lane_toml(scenario("a") + scenario("b") + scenario(None))
    assert lane_error(root, text) == f"{WHERE}: scenarios[2].id is required"


@pytest.mark.parametrize("value, shown", [(0, "0"), (-1, "-1"), (-0.5, "-0.5")])
def test_timeout_must_be_positive(root: Path, value: float, shown: str) -> None:
    assert lane_error(root, lane_toml(timeout_s=value)) == (
        f"{WHERE}: timeout_s must be a positive number, got {shown}")


@pytest.mark.parametrize("field", ["timeout_s", "transcript_cap_mb"])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_nan_and_inf_are_not_usable_numbers(root: Path, field: str, value: str) -> None:
    assert lane_error(root, lane_toml(raw=f"{field} = {value}")) == (
        f"{WHERE}: {field} must be a positive number, got {value}")


@pytest.mark.parametrize("value, found", [("30", "a string ('30')"), (True, "a boolean")])
def test_timeout_must_be_a_number(root: Path, value: Any, found: str) -> None:
    # TOML `true` must not pass as 1 (bool is an int in Python).
    assert lane_error(root, lane_toml(timeout_s=value)) == (
        f"{WHERE}: timeout_s must be a number, got {found}")


def test_unknown_top_level_field_suggests_the_close_one(root: Path) -> None:
    message = lane_error(root, lane_toml(timout_s=5))
    assert message.startswith(f"{WHERE}: unknown field 'timout_s' "
                              "(did you mean 'timeout_s'?); allowed: ")
    assert "timeout_s" in message.split("allowed: ")[1].split(", ")


def test_unknown_field_without_a_close_one_has_no_suggestion(root: Path) -> None:
    message = lane_error(root, lane_toml(frobnicate=1))
    assert message.startswith(f"{WHERE}: unknown field 'frobnicate'; allowed: ")


def test_unknown_field_inside_expect_names_the_table(root: Path) -> None:
    message = lane_error(root, lane_toml(scenario(expect='stop_reasons = "done"')))
    assert message.startswith(f"{WHERE}: scenarios[0].expect unknown field 'stop_reasons' "
                              "(did you mean 'stop_reason'?); allowed: ")


def test_duplicate_scenario_ids(root: Path) -> None:
    text = lane_toml(scenario("a") + scenario("b") + scenario("a"))
    assert lane_error(root, text) == (
        f"{WHERE}: scenarios[2].id 'a' is a duplicate; scenario ids must be unique")


def test_bad_regex_in_output_matches(root: Path) -> None:
    message = lane_error(root, lane_toml(scenario(expect='output_matches = "("')))
    assert message.startswith(f"{WHERE}: scenarios[0].expect.output_matches is not a valid "
                              "regular expression: missing )")


@pytest.mark.parametrize("spec", ["latest", "=>1.0", "1.0"])
def test_bad_pep440_specifier(root: Path, spec: str) -> None:
    assert lane_error(root, lane_toml(version=spec)) == (
        f"{WHERE}: version must be a PEP 440 specifier such as '>=1.0,<2', got {spec!r}")


def test_empty_version_is_rejected(root: Path) -> None:
    assert lane_error(root, lane_toml(version=" ")) == f"{WHERE}: version must not be empty"


def test_invalid_toml(root: Path) -> None:
    message = lane_error(root, 'framework = "fw\n')
    assert message.startswith(f"{WHERE}: is not valid TOML: ")


def test_not_utf8(root: Path) -> None:
    path = root / "lanes" / "demo.toml"
    path.write_bytes(b'framework = "f\xff"\n')
    with pytest.raises(LaneError, match=r"^lanes/demo\.toml: is not UTF-8 text$"):
        load_lane(path)


@pytest.mark.parametrize("names, index, name", [
    (["HOME"], 0, "HOME"),
    (["API_KEY", "ALK_X"], 1, "ALK_X"),
    (["PATH"], 0, "PATH"),
])
def test_required_env_cannot_name_harness_variables(root: Path, names: list[str], index: int,
                                                    name: str) -> None:
    assert lane_error(root, lane_toml(required_env=names)) == (
        f"{WHERE}: required_env[{index}] '{name}' belongs to the harness and never crosses to a "
        "worker; remove it")


def test_required_env_must_be_variable_names(root: Path) -> None:
    assert lane_error(root, lane_toml(required_env=["1BAD"])) == (
        f"{WHERE}: required_env[0] must be an environment variable name, got '1BAD'")


@pytest.mark.parametrize("path", ["../out.json", "a/../../out.json", "/etc/passwd"])
def test_expected_files_stay_inside_the_workspace(root: Path, path: str) -> None:
    text = lane_toml(scenario(expect=f"files = [{{ path = {json.dumps(path)} }}]"))
    assert lane_error(root, text) == (
        f"{WHERE}: scenarios[0].expect.files[0].path must be relative to the workspace and stay "
        f"inside it, got {path!r}")


@pytest.mark.parametrize("count, shown", [("-1", "-1"), ("true", "True"), ("1.5", "1.5")])
def test_tool_calls_are_whole_numbers_at_least_zero(root: Path, count: str, shown: str) -> None:
    text = lane_toml(scenario(expect=f"tool_calls = {{ search = {count} }}"))
    assert lane_error(root, text) == (
        f"{WHERE}: scenarios[0].expect.tool_calls.search must be a whole number ≥ 0, got {shown}")


@pytest.mark.parametrize("command", [[], [""], ["python", 1]])
def test_command_must_be_non_empty_strings(root: Path, command: list[Any]) -> None:
    assert lane_error(root, lane_toml(command=command)) == (
        f"{WHERE}: command must be a non-empty list of non-empty strings (argv, no shell)")


@pytest.mark.parametrize("top, message", [
    ({"framework": OMIT}, "framework is required"),
    ({"command": OMIT}, "command is required"),
    ({"repeats": 0}, "repeats must be at least 1, got 0"),
    ({"repeats": 2.5}, "repeats must be a whole number, got a number (2.5)"),
    ({"name": "has space"}, "name must be letters, digits, '.', '_' or '-', got 'has space'"),
])
def test_other_top_level_checks(root: Path, top: dict[str, Any], message: str) -> None:
    assert lane_error(root, lane_toml(**top)) == f"{WHERE}: {message}"


def test_scenarios_are_required_and_non_empty(root: Path) -> None:
    assert lane_error(root, lane_toml(scenarios="")) == f"{WHERE}: scenarios is required"
    assert lane_error(root, lane_toml(scenarios="", raw="scenarios = []")) == (
        f"{WHERE}: scenarios must hold at least one [[scenarios]] table")


def test_scenario_id_must_be_a_folder_name(root: Path) -> None:
    assert lane_error(root, lane_toml(scenario("../up"))) == (
        f"{WHERE}: scenarios[0].id must be letters, digits, '.', '_' or '-' (it names a folder), "
        "got '../up'")


# --- finding lanes -------------------------------------------------------------------------


def test_find_lane_by_name_in_a_lanes_dir(root: Path) -> None:
    path = write(root, lane_toml())
    assert find_lane("demo", root / "lanes") == path
    assert load_lane("demo", root / "lanes").name == "demo"


def test_find_lane_by_path(root: Path) -> None:
    path = write(root, lane_toml())
    assert find_lane(str(path)) == path
    assert find_lane("lanes/demo.toml") == Path("lanes/demo.toml")


def test_find_lane_by_path_that_does_not_exist(root: Path) -> None:
    with pytest.raises(LaneError, match=r"^nope\.toml: no such lane file$"):
        find_lane("nope.toml")


def test_lane_not_found_lists_the_known_lanes(root: Path) -> None:
    write(root, lane_toml(), "demo")
    write(root, lane_toml(), "alpha")
    with pytest.raises(LaneError) as caught:
        find_lane("nope", Path("lanes"))
    assert str(caught.value) == "lane 'nope' not found in lanes/ (known lanes: alpha, demo)"
    assert [p.name for p in lane_paths(Path("lanes"))] == ["alpha.toml", "demo.toml"]


def test_lane_not_found_without_a_lanes_dir(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LaneError) as caught:
        find_lane("nope", Path("lanes"))
    assert str(caught.value) == ("lane 'nope' not found in lanes/ (there is no lanes/ here: run "
                                 "alk from the folder that holds it, or pass the path of a "
                                 ".toml file)")


def test_limits_default_to_safe_values_and_can_be_set_or_lifted(root: Path) -> None:
    assert load_lane(write(root, lane_toml())).limits.applied() == {
        "memory_mb": 8192, "max_open_files": 1024, "max_file_mb": 1024, "disk_mb": 4096}
    text = lane_toml(raw="[limits]\ncpu_s = 5\nmemory_mb = 0\nmax_open_files = 64\n"
                         "disk_mb = 0")
    limits = load_lane(write(root, text)).limits
    assert limits.applied() == {"cpu_s": 5, "max_open_files": 64, "max_file_mb": 1024}
    limits = load_lane(write(root, lane_toml(raw="[limits]\ndisk_mb = 16"))).limits
    assert limits.disk_mb == 16


@pytest.mark.parametrize("raw, expected", [
    ("[limits]\nmemory_gb = 2", "limits unknown field 'memory_gb'"),
    ("[limits]\ncpu_s = -1", "limits.cpu_s must be a whole number ≥ 0"),
    ("[limits]\ncpu_s = 1.5", "limits.cpu_s must be a whole number, got a number (1.5)"),
])
def test_bad_limits_are_lane_errors(root: Path, raw: str, expected: str) -> None:
    assert lane_error(root, lane_toml(raw=raw)).startswith(f"{WHERE}: {expected}")


def test_network_is_none_host_or_unset(root: Path) -> None:
    assert load_lane(write(root, lane_toml())).network is None
    assert load_lane(write(root, lane_toml(network="none"))).network == "none"
    message = lane_error(root, lane_toml(network="off"))
    assert message == f"{WHERE}: network must be one of 'none', 'host', got 'off'"


def test_filesystem_is_sandbox_workspace_or_unset(root: Path) -> None:
    assert load_lane(write(root, lane_toml())).filesystem is None
    assert load_lane(write(root, lane_toml(filesystem="workspace"))).filesystem == "workspace"
    message = lane_error(root, lane_toml(filesystem="ro"))
    assert message == f"{WHERE}: filesystem must be one of 'sandbox', 'workspace', got 'ro'"


def test_script_faults_and_kill_at_are_read(root: Path) -> None:
    extra = ('script = [ { tool = "lookup", args = { order = 742 } }, { text = "done" } ]\n'
             'faults = [ { point = "tool", occurrence = 2, error = "boom" } ]\n'
             'kill_at = { channel = "tool", type = "result", name = "write_report" }')
    [read] = load_lane(write(root, lane_toml(scenario(extra=extra)))).scenarios
    assert read.script[0]["args"] == {"order": 742}
    assert read.faults[0].point == "tool" and read.faults[0].occurrence == 2
    assert read.kill_at.name == "write_report" and read.kill_at.occurrence == 1
    assert read.max_attempts == 2


@pytest.mark.parametrize("extra, expected", [
    ('kill_at = { channel = "tool" }', "scenarios[0].kill_at.type is required"),
    ('kill_at = { channel = "tool", type = "result" }\nmax_attempts = 5',
     "scenarios[0].max_attempts must be 2 with a kill_at"),
    ('max_attempts = 2', "scenarios[0].max_attempts needs a kill_at"),
    ('kill_at = { channel = "tools", type = "results" }',
     "scenarios[0].kill_at.channel must be one of 'agent', 'tool'"),
    ('kill_at = { channel = "framework", type = "framework_ready" }',
     "scenarios[0].kill_at.type cannot be framework_ready"),
    ('faults = [ { point = "tool", occurrence = 0 } ]',
     "scenarios[0].faults[0].occurrence must be a whole number ≥ 1"),
    ('script = [ "text" ]', "scenarios[0].script[0] must be a table"),
])
def test_bad_script_faults_and_kill_at(root: Path, extra: str, expected: str) -> None:
    assert lane_error(root, lane_toml(scenario(extra=extra))).startswith(f"{WHERE}: {expected}")


def test_a_multi_line_description_is_reflowed_into_paragraphs(root: Path) -> None:
    text = lane_toml(raw='description = """\nA lane whose description\n   is broken to fit the '
                         'file.\n\n  A second paragraph.\n"""')
    lane = load_lane(write(root, text))
    assert lane.description == ("A lane whose description is broken to fit the file.\n"
                                "A second paragraph.")


def test_a_name_that_differs_from_the_file_is_warned_about(root: Path) -> None:
    assert lane_warnings(load_lane(write(root, lane_toml()))) == []
    assert lane_warnings(load_lane(write(root, lane_toml(name="demo")))) == []
    renamed = load_lane(write(root, lane_toml(name="other-name")))
    assert lane_warnings(renamed) == [
        "lanes/demo.toml: name 'other-name' differs from the file's name 'demo': results say "
        "'other-name', `--lane demo` finds it; rename one so they agree"]


def test_a_missing_interpreter_of_the_lanes_own_says_how_to_install_it(root: Path) -> None:
    """A framework with a virtual environment of its own: until it is made, the lane's error
    says the command that makes it."""
    message = lane_error(root, lane_toml(command=[".venvs/fw/bin/python", "workers/w.py"],
                                         install="make .venvs/fw/.installed"))
    assert message.startswith(f"{WHERE}: command[0] '.venvs/fw/bin/python' does not exist")
    assert message.endswith("; to install it: make .venvs/fw/.installed")


FAULT = 'faults = [ { point = "tool", occurrence = 1 } ]'


def test_a_baseline_names_the_faulted_scenarios_unfaulted_twin(root: Path) -> None:
    text = lane_toml(scenario("nominal") + scenario("f", extra=f'{FAULT}\nbaseline = "nominal"'))
    assert [s.baseline for s in load_lane(write(root, text)).scenarios] == [None, "nominal"]


@pytest.mark.parametrize("scenarios, expected", [
    (scenario("nominal") + scenario("f", extra=f'{FAULT}\nbaseline = "nomnal"'),
     "scenarios[1].baseline 'nomnal' names no scenario of the lane; expected one of nominal, f"),
    (scenario("nominal") + scenario("f", extra='baseline = "nominal"'),
     "scenarios[1].baseline 'nominal': only a scenario with faults, wire_faults or a kill_at "
     "has a baseline; remove the field"),
    (scenario("g", extra=FAULT) + scenario("f", extra=f'{FAULT}\nbaseline = "g"'),
     "scenarios[1].baseline 'g' must name a scenario with no fault and no weighted choices"),
    (scenario("s", extra='script = [ { choices = [ { text = "a", weight = 1 } ] } ]')
     + scenario("f", extra=f'{FAULT}\nbaseline = "s"'),
     "scenarios[1].baseline 's' must name a scenario with no fault and no weighted choices"),
])
def test_a_baseline_that_is_no_twin_is_refused(root: Path, scenarios: str, expected: str) -> None:
    assert lane_error(root, lane_toml(scenarios)).startswith(f"{WHERE}: {expected}")


@pytest.mark.parametrize("program, expected", [
    ("/nonexistent/bin/python3.99", "command[0] '/nonexistent/bin/python3.99' does not exist "
                                    "(the program that starts the worker"),
    ("python3.99-nowhere", "command[0] 'python3.99-nowhere' is not a program on PATH (the "
                           "program that starts the worker): install it, give its full path"),
])
def test_a_missing_interpreter_is_a_lane_error_like_a_missing_script(root: Path, program: str,
                                                                       expected: str) -> None:
    """Caught when the lane loads (exit 2, before anything runs), not as a failed spawn."""
    message = lane_error(root, lane_toml(command=[program, "workers/w.py"]))
    assert message.startswith(f"{WHERE}: {expected}")


def test_an_interpreter_that_is_not_executable_is_a_lane_error(root: Path) -> None:
    (root / "workers" / "run.sh").write_text("#!/bin/sh\n")
    message = lane_error(root, lane_toml(command=["workers/run.sh"]))
    assert message.startswith(f"{WHERE}: command[0] '{root / 'workers' / 'run.sh'}' is not "
                              "executable")


def test_an_interpreter_on_path_or_given_whole_loads(root: Path) -> None:
    sh = shutil.which("sh")
    assert sh is not None
    for program in ("sh", sh, "{python}"):
        lane = load_lane(write(root, lane_toml(command=[program, "workers/w.py"])))
        assert lane.command[0] == program
