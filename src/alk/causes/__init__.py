"""The stable vocabulary of cause codes: every repeat carries exactly one.

Codes are part of the result format (`alk.result/3`): never rename one, only add. The table in
`docs/causes.md` is generated from `CATALOGUE` (a test keeps them equal); `alk.causes.labels`
says in a few words what each one means happened, for charts; `alk.causes.advice` fits a
cause's action to the fault a repeat's detail names.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from alk.records import Outcome


class Cause(StrEnum):
    PASSED = "passed"
    # lane_infra: the repeat is void and never scored
    ENV_MISSING = "env_missing"
    SPAWN_FAILED = "spawn_failed"
    EXITED_BEFORE_READY = "exited_before_ready"
    TIMEOUT_BEFORE_READY = "timeout_before_ready"
    FRAMEWORK_MISMATCH = "framework_mismatch"
    VERSION_UNSUPPORTED = "version_unsupported"
    VERSION_INVALID = "version_invalid"
    FRAMEWORK_MISSING = "framework_missing"
    LIMIT_BEFORE_READY = "limit_before_ready"
    HARNESS_ERROR = "harness_error"
    CHECK_ERROR = "check_error"
    FAULT_NOT_FIRED = "fault_not_fired"
    KILL_NOT_FIRED = "kill_not_fired"
    ISOLATION_UNAVAILABLE = "isolation_unavailable"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    # framework_runtime: the framework crashed, hung, broke the protocol or did not recover
    # from what alk did to it
    TIMEOUT = "timeout"
    KILLED_BY_SIGNAL = "killed_by_signal"
    NONZERO_EXIT = "nonzero_exit"
    IDENTITY_CHANGED = "identity_changed"
    FRAMEWORK_EXCEPTION = "framework_exception"
    WORKER_EXCEPTION = "worker_exception"
    PROTOCOL_VIOLATION = "protocol_violation"
    BAD_RESULT = "bad_result"
    NO_RESULT = "no_result"
    MEMORY_LIMIT = "memory_limit"
    CPU_LIMIT = "cpu_limit"
    PROCESS_LIMIT = "process_limit"
    OPEN_FILES_LIMIT = "open_files_limit"
    FILE_SIZE_LIMIT = "file_size_limit"
    DISK_LIMIT = "disk_limit"
    SCRIPT_EXHAUSTED = "script_exhausted"
    FAULT_UNRECOVERED = "fault_unrecovered"
    UPSTREAM_REFUSED = "upstream_refused"
    REPLAY_MISMATCH = "replay_mismatch"
    # framework_runtime too: a check failed where the agent had no choice to make (rule 13)
    EFFECT_REPEATED = "effect_repeated"
    STATE_LOST = "state_lost"
    FAULT_MISHANDLED = "fault_mishandled"
    ANSWER_DROPPED = "answer_dropped"
    SCRIPT_NOT_FOLLOWED = "script_not_followed"
    # agent: the model's or the agent code's choice (a live model, a worker's own model, the
    # lane's mistake alternative), and the harness's own check of the result failed
    WRONG_STOP_REASON = "wrong_stop_reason"
    WRONG_OUTPUT = "wrong_output"
    WRONG_END_STATE = "wrong_end_state"
    WRONG_TOOL_CALLS = "wrong_tool_calls"
    WRONG_FILES = "wrong_files"
    SCRIPT_NOT_CONSUMED = "script_not_consumed"
    WRONG_MODEL_CALLS = "wrong_model_calls"
    TOKEN_BUDGET = "token_budget"


@dataclass(frozen=True, slots=True)
class CauseInfo:
    outcome: Outcome
    meaning: str
    action: str
    # The framework's own handling of what alk did to it (a fault, a kill, an answer served
    # from the script, a provider's refusal): a finding about the framework, which no change
    # to the worker's adapter or protocol lines would fix. `alk check-worker` lists these as
    # findings and still exits 0; every other failure is the worker's author's to fix.
    framework_finding: bool = False


CATALOGUE: dict[Cause, CauseInfo] = {
    Cause.PASSED: CauseInfo(
        Outcome.PASS, "Clean exit, a valid result, every expectation held.", "Nothing."
    ),
    Cause.ENV_MISSING: CauseInfo(
        Outcome.LANE_INFRA,
        "A name in the lane's `required_env` is not set in alk's environment; nothing was started.",
        "Export the named variable before `alk run`.",
    ),
    Cause.SPAWN_FAILED: CauseInfo(
        Outcome.LANE_INFRA,
        "The worker's command could not be started (missing program, not executable).",
        "Fix the lane's `command`; the detail has the OS error.",
    ),
    Cause.EXITED_BEFORE_READY: CauseInfo(
        Outcome.LANE_INFRA,
        "The worker exited before it sent `framework_ready` (often an import error).",
        "Read the stderr tail in the detail; install the framework or fix the import.",
    ),
    Cause.TIMEOUT_BEFORE_READY: CauseInfo(
        Outcome.LANE_INFRA,
        "The worker sent no `framework_ready` within the repeat's timeout.",
        "Send `framework_ready` right after reading `hello`; raise `timeout_s` for slow imports.",
    ),
    Cause.FRAMEWORK_MISMATCH: CauseInfo(
        Outcome.LANE_INFRA,
        "`framework_ready.framework` is not the lane's `framework`.",
        "Point the lane at the right worker, or fix the name either reports.",
    ),
    Cause.VERSION_UNSUPPORTED: CauseInfo(
        Outcome.LANE_INFRA,
        "The reported framework version does not satisfy the lane's `version` requirement.",
        "Install a version the lane supports, or widen the requirement after checking it.",
    ),
    Cause.VERSION_INVALID: CauseInfo(
        Outcome.LANE_INFRA,
        "`framework_ready.framework_version` is missing or not a PEP 440 version.",
        "Report the version from `importlib.metadata.version(...)`.",
    ),
    Cause.FRAMEWORK_MISSING: CauseInfo(
        Outcome.LANE_INFRA,
        "The worker could not import its framework (ModuleNotFoundError before "
        "framework_ready): it is not installed where the worker runs.",
        "Install it: the detail gives the lane's `install` command when it has one.",
    ),
    Cause.LIMIT_BEFORE_READY: CauseInfo(
        Outcome.LANE_INFRA,
        "The worker ended before `framework_ready` on one of the lane's resource limits (a "
        "failed allocation or mapping under `memory_mb`, say): the limit is too small for its "
        "interpreter or imports to start.",
        "Raise the limit the detail names (`[limits]` in the lane, or `--limit NAME=VALUE`; "
        "0 lifts it).",
    ),
    Cause.HARNESS_ERROR: CauseInfo(
        Outcome.LANE_INFRA,
        "alk itself failed while running this repeat (a bug or the machine, not the worker).",
        "Read the detail; report it if it is alk's fault.",
    ),
    Cause.ISOLATION_UNAVAILABLE: CauseInfo(
        Outcome.LANE_INFRA,
        "The lane asks for an isolation level this machine cannot give (`alk doctor` says "
        "why); alk never runs a worker with less than the lane asks for.",
        "Run where the level is available, or change the lane's `network` after checking.",
    ),
    Cause.FAULT_NOT_FIRED: CauseInfo(
        Outcome.LANE_INFRA,
        "A fault the scenario declares was never reported as injected: the run did not test "
        "what the scenario claims.",
        "Make the worker inject the fault at that point and report it (`worker.fault(...)`), "
        "or fix the scenario's `faults`.",
    ),
    Cause.KILL_NOT_FIRED: CauseInfo(
        Outcome.LANE_INFRA,
        "The event the scenario's `kill_at` names never came, so the crash and resume it "
        "declares never happened.",
        "Check `kill_at` (channel, type, name, occurrence) against the transcript.",
    ),
    Cause.PROVIDER_UNAVAILABLE: CauseInfo(
        Outcome.LANE_INFRA,
        "alk's gateway, proxying the model, saw the upstream provider fail (connection "
        "refused or timed out, a 5xx, or a refusal of alk's own key), confirmed it by a "
        "request of its own making that failed too, and the repeat did not pass. Decided by "
        "the gateway's own observation, never by what the worker says or sends.",
        "Check the upstream (`model.upstream`) and the key alk reads (`model.key_env`); the "
        "transcript's model/call events show each answer and alk's own check.",
    ),
    Cause.CHECK_ERROR: CauseInfo(
        Outcome.LANE_INFRA,
        "No longer given (codes are never removed: older result documents hold it): a check "
        "of the lane's that could not be carried out. A regular expression that does not "
        "finish on a worker's output now fails its check, since a worker could otherwise "
        "pick such an output to make a failure void.",
        "Simplify the lane's regular expression; see wrong_output.",
    ),
    Cause.TIMEOUT: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "After the start message the worker did not exit within the repeat's timeout (a hang).",
        "Open the transcript: its last events show where it stopped, and the detail names "
        "the frame where alk's SIGINT found a Python worker.",
    ),
    Cause.KILLED_BY_SIGNAL: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker was ended by a signal it did not get from alk (a crash or the OOM killer).",
        "Read the stderr tail; the detail names the signal.",
    ),
    Cause.NONZERO_EXIT: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker exited with a nonzero status after the start message (it crashed).",
        "Read the stderr tail: the detail names the exception when stderr ends with a Python "
        "traceback or a Node stack, else quotes its last line.",
    ),
    Cause.IDENTITY_CHANGED: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "A repeat (or an attempt alk resumed after its kill_at crash) reported another "
        "framework or version than the run's probe: the framework changed identity mid-run. A "
        "scored failure, never void: a worker must not choose which repeats are scored.",
        "Compare the preflight events of the probe and the repeat; pin the framework.",
    ),
    Cause.FRAMEWORK_EXCEPTION: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker crashed with a Python traceback or a Node stack whose nearest frame to the "
        "error, past library code, is inside the framework (a `package_paths` folder of its "
        "framework_ready).",
        "A framework bug or misuse: the detail names the frame; the transcript has the "
        "whole traceback.",
    ),
    Cause.WORKER_EXCEPTION: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker crashed with a Python traceback or a Node stack whose nearest frame to the "
        "error, past library code, is in the worker's own code, outside the framework's "
        "`package_paths`.",
        "Fix the worker (the adapter), not the framework: the detail names the frame.",
    ),
    Cause.PROTOCOL_VIOLATION: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker wrote a stdout line that breaks protocol v1 (not JSON, forged `harness` "
        "channel, an event before `framework_ready`, ...).",
        "Run `alk check-worker`; write only protocol lines to stdout (the SDK routes prints to "
        "stderr).",
    ),
    Cause.BAD_RESULT: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The `result` event is malformed (output not a string, end_state not an object, ...) "
        "or was sent twice.",
        "Send exactly one result with `output` (string), `stop_reason` (string), `end_state` "
        "(object).",
    ),
    Cause.NO_RESULT: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker exited cleanly without a `result` event.",
        "Always end a run with `result(...)`, also when the agent gives up.",
    ),
    Cause.MEMORY_LIMIT: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker crashed on the lane's `memory_mb` limit: MemoryError or a failed allocation, "
        "or the kernel killed a process of its tree on the repeat's memory cgroup.",
        "Raise `[limits] memory_mb` if the framework needs it, or find what grows.",
    ),
    Cause.CPU_LIMIT: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker used up the lane's `cpu_s` limit of CPU time (SIGXCPU, then SIGKILL).",
        "Look for a busy loop in the transcript's last events, or raise `[limits] cpu_s`.",
    ),
    Cause.PROCESS_LIMIT: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker failed to start a process or thread past the lane's `max_processes` limit.",
        "Raise `[limits] max_processes`, or look for runaway forking.",
    ),
    Cause.OPEN_FILES_LIMIT: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker crashed on the lane's `max_open_files` limit (Too many open files).",
        "Look for leaked files or sockets, or raise `[limits] max_open_files`.",
    ),
    Cause.FILE_SIZE_LIMIT: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker crashed writing a file larger than the lane's `max_file_mb` limit.",
        "Raise `[limits] max_file_mb` if such files are expected.",
    ),
    Cause.DISK_LIMIT: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The worker's workspace grew past the lane's `disk_mb` limit, or filled the disk it "
        "shares with alk's output during the repeat (alk ended it, or it crashed on `No space "
        "left on device`). A scored failure, never void: a disk full before the repeat began "
        "is alk's (`harness_error`).",
        "The transcript's `disk_limit` event says how large the workspace grew and what the "
        "disk had left; raise `[limits] disk_mb`, give the disk room, or find what writes.",
    ),
    Cause.SCRIPT_EXHAUSTED: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The framework asked its scripted model for a turn past the scenario's `script` (alk's "
        "gateway answered a call past it, or the worker reported `script_exhausted`), and the "
        "repeat then failed: the failure that "
        "followed, which the detail names, came from a run that had left the scripted path. "
        "A scored failure, never void.",
        "Compare the transcript's model/call (or model/turn) events with the scenario's "
        "`script`: the "
        "framework called the model again where the script ends (a retry, a loop, a final "
        "answer it did not take); script what it asks for, or fix what made it ask.",
    ),
    Cause.FAULT_UNRECOVERED: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "A declared fault fired (alk's gateway injected it on the wire or at a tool it serves, "
        "or the worker reported injecting it) and the repeat then failed without recovering: "
        "no model call after alk's fault was answered in full. The failure is the framework's handling of "
        "the fault, which the detail names with the failure that followed. A scored failure, "
        "never void.",
        "Read the transcript from the fault on (the detail says where it was injected): did "
        "the framework retry, hand the error back to the model, or stop? Configure its "
        "retries or error handling, or report it upstream.",
        framework_finding=True,
    ),
    Cause.UPSTREAM_REFUSED: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "The upstream provider refused a request the framework made (a 5xx, 401 or 403: a body "
        "it could not take, content it would not serve, a burst past its limits) while it "
        "answered alk's own check at once, and the repeat did not pass. The request was the "
        "framework's; handling the refusal was too, so the failure is scored, never void.",
        "The transcript's model/call events show the refused request's answer and alk's check; "
        "look at what the framework sent, and at how it handles a provider's error.",
        framework_finding=True,
    ),
    Cause.REPLAY_MISMATCH: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "In replay mode, the framework sent a model request the cassette does not hold at "
        "that call (the detail names the first difference), and the repeat failed: the run "
        "left the recorded path. A scored failure, never void.",
        "If the framework's requests changed on purpose (a new version, a new prompt), record "
        "the cassette again (`mode = \"proxy\"`, `record = ...`); else find what varies.",
    ),
    Cause.EFFECT_REPEATED: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "alk killed the worker (the scenario's `kill_at`) and resumed it in the same "
        "workspace, and a check that counts effects came out above what the scenario expects "
        "(a file's `json_length`, a tool's `tool_calls`): the resumed run did again what the "
        "killed one had done. The kill was alk's; not recovering from it is the framework's. "
        "A scored failure, never void.",
        "Give the effect an idempotency key, or checkpoint after it (durably, before the "
        "next step): the detail names the check, the transcript's restart event the resume.",
        framework_finding=True,
    ),
    Cause.STATE_LOST: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "alk killed the worker (the scenario's `kill_at`) and resumed it, and the resumed "
        "run then failed another check (an effect missing, a wrong answer or end state): what "
        "the killed attempt had done or decided did not reach the resumed one. A scored "
        "failure, never void.",
        "Read the attempts in the transcript (a harness restart event splits them): what did "
        "the resumed attempt load, and where did it start again?",
        framework_finding=True,
    ),
    Cause.FAULT_MISHANDLED: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "alk's gateway injected a declared wire fault, the framework went on past it (a "
        "later model call was answered in full), and a check then failed: what it did with "
        "the faulted answer (a tool run with arguments that did not parse, a call made "
        "twice) is the finding. A scored failure, never void.",
        "The transcript's model/call events show the faulted answer and what came next; the "
        "tool channel shows what was run on it.",
        framework_finding=True,
    ),
    Cause.ANSWER_DROPPED: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "alk served the model from the script (or a cassette), the last answer the "
        "framework got proposed a tool call, and the run ended there, never back at the "
        "model: the framework dropped the call (an unparsable tool call taken for an empty "
        "answer, a proposed call it did not run or did not report back), and a check failed. "
        "A scored failure, never void.",
        "Find where the framework parses the model's tool calls: an invalid one should go "
        "back to the model as an error, not end the run.",
        framework_finding=True,
    ),
    Cause.SCRIPT_NOT_FOLLOWED: CauseInfo(
        Outcome.FRAMEWORK_RUNTIME,
        "alk served the model from the script (or a cassette), no served turn was one the "
        "lane marks as the model's mistake, no fault or kill explains it, and a check of the "
        "result failed: the framework was given right answers and did not carry them out (or, "
        "when the detail says it never called the model, failed before it asked). A scored "
        "failure, never void.",
        "Compare the transcript's model/call events (what the model said) with its tool "
        "events and result (what the framework did); the detail names the failed checks.",
    ),
    Cause.WRONG_STOP_REASON: CauseInfo(
        Outcome.AGENT,
        "The result's `stop_reason` is not the expected one.",
        "Compare expected and actual in the detail; the transcript shows the path taken.",
    ),
    Cause.WRONG_OUTPUT: CauseInfo(
        Outcome.AGENT,
        "The result's `output` fails `output_equals`, `output_contains` or `output_matches`.",
        "Compare expected and actual in the detail.",
    ),
    Cause.WRONG_END_STATE: CauseInfo(
        Outcome.AGENT,
        "The result's `end_state` does not contain the expected subset.",
        "Compare expected and actual in the detail.",
    ),
    Cause.WRONG_TOOL_CALLS: CauseInfo(
        Outcome.AGENT,
        "The number of tool calls by name differs from `tool_calls`.",
        "The transcript's tool channel shows every call.",
    ),
    Cause.WRONG_FILES: CauseInfo(
        Outcome.AGENT,
        "A workspace file the harness read does not match (missing, wrong length, wrong content).",
        "The transcript's `check` events show what the harness found.",
    ),
    Cause.SCRIPT_NOT_CONSUMED: CauseInfo(
        Outcome.AGENT,
        "The scenario expects every scripted model turn to be used (`script_consumed`), and "
        "fewer or more were: the agent's when the worker plays the script itself (the turns "
        "it reported) or the lane's mistake was served; under alk's gateway otherwise, "
        "`script_not_followed`.",
        "Compare the model/turn events in the transcript with the scenario's `script`.",
    ),
    Cause.WRONG_MODEL_CALLS: CauseInfo(
        Outcome.AGENT,
        "The number of model calls alk's gateway served differs from the scenario's "
        "`model_calls` (a number, or a min and max).",
        "The transcript's model/call events list every call, retries included.",
    ),
    Cause.TOKEN_BUDGET: CauseInfo(
        Outcome.AGENT,
        "A live model (proxy, or its replay) used the repeat's token budget (the lane's "
        "`max_tokens.repeat`, as the provider counted them), alk's gateway refused the next "
        "call, and the repeat failed. The live model chose to go on calling, so it is the "
        "agent's layer, as a wrong answer is; a scored failure, never void: burning tokens "
        "cannot void a repeat.",
        "Read the transcript's model/call events: a loop of calls that goes nowhere is the "
        "agent's (its prompt, its stop condition); a task that needs more, a larger budget.",
    ),
}


def outcome_of(cause: str) -> Outcome:
    return CATALOGUE[Cause(cause)].outcome
