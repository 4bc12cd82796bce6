"""What happened, in a few words, for each cause code: what a chart's bar or a short line says
beside the code. Said of the run (what the framework did, what alk saw), never a guess at a
layer: the layer is the cause's outcome (`alk.causes.CATALOGUE`), and the rule that gives it
is docs/causes.md's.
"""

from __future__ import annotations

import re

from alk.causes import Cause

LABELS: dict[Cause, str] = {
    Cause.PASSED: "passed",
    Cause.ENV_MISSING: "variable not set",
    Cause.SPAWN_FAILED: "could not start",
    Cause.EXITED_BEFORE_READY: "exited before ready",
    Cause.TIMEOUT_BEFORE_READY: "hung before ready",
    Cause.FRAMEWORK_MISMATCH: "another framework",
    Cause.VERSION_UNSUPPORTED: "unsupported version",
    Cause.VERSION_INVALID: "version unreadable",
    Cause.FRAMEWORK_MISSING: "framework not installed",
    Cause.LIMIT_BEFORE_READY: "limit too small to start",
    Cause.HARNESS_ERROR: "alk failed",
    Cause.CHECK_ERROR: "check not carried out",
    Cause.FAULT_NOT_FIRED: "fault never injected",
    Cause.KILL_NOT_FIRED: "kill never came",
    Cause.ISOLATION_UNAVAILABLE: "isolation unavailable",
    Cause.PROVIDER_UNAVAILABLE: "provider down",
    Cause.TIMEOUT: "hung",
    Cause.KILLED_BY_SIGNAL: "killed by a signal",
    Cause.NONZERO_EXIT: "crashed",
    Cause.IDENTITY_CHANGED: "changed identity",
    Cause.FRAMEWORK_EXCEPTION: "crashed in the framework",
    Cause.WORKER_EXCEPTION: "crashed in the worker",
    Cause.PROTOCOL_VIOLATION: "broke the protocol",
    Cause.BAD_RESULT: "malformed result",
    Cause.NO_RESULT: "no result",
    Cause.MEMORY_LIMIT: "memory limit",
    Cause.CPU_LIMIT: "CPU time limit",
    Cause.PROCESS_LIMIT: "process limit",
    Cause.OPEN_FILES_LIMIT: "open files limit",
    Cause.FILE_SIZE_LIMIT: "file size limit",
    Cause.DISK_LIMIT: "disk limit",
    Cause.SCRIPT_EXHAUSTED: "asked past the script",
    Cause.FAULT_UNRECOVERED: "fault not recovered from",
    Cause.UPSTREAM_REFUSED: "provider refused a call",
    Cause.REPLAY_MISMATCH: "left the recorded path",
    Cause.EFFECT_REPEATED: "effect repeated on resume",
    Cause.STATE_LOST: "state lost on resume",
    Cause.FAULT_MISHANDLED: "faulted answer mishandled",
    Cause.ANSWER_DROPPED: "tool call dropped",
    Cause.SCRIPT_NOT_FOLLOWED: "script not followed",
    Cause.WRONG_STOP_REASON: "wrong stop reason",
    Cause.WRONG_OUTPUT: "wrong output",
    Cause.WRONG_END_STATE: "wrong end state",
    Cause.WRONG_TOOL_CALLS: "wrong tool calls",
    Cause.WRONG_FILES: "wrong files",
    Cause.SCRIPT_NOT_CONSUMED: "script not used up",
    Cause.WRONG_MODEL_CALLS: "wrong model calls",
    Cause.TOKEN_BUDGET: "token budget spent",
}
# How a run ended after a fault it did not recover from, by the cause that followed.
_AFTER_FAULT = {Cause.WRONG_STOP_REASON: "error stop after a fault",
                Cause.NONZERO_EXIT: "crash after a fault",
                Cause.FRAMEWORK_EXCEPTION: "crash after a fault",
                Cause.WORKER_EXCEPTION: "crash after a fault",
                Cause.KILLED_BY_SIGNAL: "crash after a fault",
                Cause.TIMEOUT: "hang after a fault"}
# alk's own details of a renamed failure name the failure that followed as "; then CODE: ".
_FOLLOWED = re.compile(r"; then ([a-z_]+): ")



def label(cause: str, detail: str = "") -> str:
    """What happened, in a few words: the cause's label, and for a fault the framework did not
    recover from, how the run then ended (an error stop reason is not a crash). A code this
    alk does not know reads as itself."""
    try:
        known = Cause(cause)
    except ValueError:
        return cause
    if known is Cause.FAULT_UNRECOVERED:
        followed = _FOLLOWED.search(detail)
        if followed and followed.group(1) in _AFTER_FAULT:
            return _AFTER_FAULT[Cause(followed.group(1))]
    return LABELS[known]
