"""What the framework workers share (standard library and the alk SDK only): the scenario's
tool faults, the policy outside the model, and the tools' effects in the workspace.

Each worker plugs these into its framework's own tool interface; keeping them here makes the
lanes compare the frameworks, not three versions of the same tools. The model is alk's gateway,
reached through each framework's own OpenAI client: it injects the model's faults and records
its calls, so no worker does either.
"""

import json
import os

from alk import worker

EFFECTS = os.path.join("lab-output", "effects.json")
ALLOWED_TOOLS = {"lookup_order", "write_report"}  # the policy, outside the model's proposals


def model_endpoint(start):
    """The model alk serves this attempt, as `(name, base_url, api_key)`: from `start.model`,
    else from the environment an OpenAI client reads (OPENAI_BASE_URL, OPENAI_API_KEY)."""
    model = start.model
    return (model.get("name") or "alk-script",
            model.get("base_url") or os.environ.get("OPENAI_BASE_URL"),
            model.get("api_key") or os.environ.get("OPENAI_API_KEY"))


def report_run(run):
    """Runs the framework (`run()` returns the final answer) and sends the result. Whatever
    the framework lets through ends the run with stop_reason `error:<ExceptionType>`: what it
    did with a fault is the finding, and the lane's expectations say what a robust run does."""
    try:
        answer, stop, end = run(), "accepted", {"phase": "stopped"}
    except Exception as exc:
        answer, stop, end = str(exc)[:500], f"error:{type(exc).__name__}", {"phase": "error"}
    worker.result(output=str(answer), stop_reason=stop, end_state=end)


class Faults:
    """The scenario's worker-side faults, by point and occurrence: `due(point)` counts one pass
    at the point (the workers pass "tool" at every tool call) and returns the fault declared
    for it, after reporting it to alk."""

    def __init__(self, faults):
        self.faults, self.seen = faults, {}

    def due(self, point):
        self.seen[point] = self.seen.get(point, 0) + 1
        for fault in self.faults:
            if fault["point"] == point and fault["occurrence"] == self.seen[point]:
                worker.fault(point, fault["occurrence"], fault.get("error", ""),
                             fault.get("retryable", False))
                return fault
        return None


def run_tool(name, args, faults):
    """One tool call as the framework dispatched it: reported, checked against the policy, a
    declared fault injected, then done. Raises what the tool raises, for the framework to
    handle as it does."""
    worker.tool_call(name, args)
    if name not in ALLOWED_TOOLS:
        worker.tool_result(name, ok=False, error="policy_denied:tool_not_allowed")
        return "denied by policy: this tool is not allowed"
    fault = faults.due("tool")
    try:
        if fault is not None:
            raise RuntimeError(fault.get("error") or "injected tool failure")
        output = TOOLS[name](**args)
    except Exception as exc:
        worker.tool_result(name, ok=False, error=f"{type(exc).__name__}: {exc}")
        raise
    worker.tool_result(name, ok=True, output=output)
    return output


def _lookup_order(order):
    return {"order": order, "status": "open"}


def _write_report(order):
    # No idempotency key on purpose: whether a resumed run repeats the effect is the finding.
    os.makedirs("lab-output", exist_ok=True)
    effects = json.load(open(EFFECTS)) if os.path.exists(EFFECTS) else []
    effects.append({"order": order})
    with open(EFFECTS + ".tmp", "w") as handle:
        json.dump(effects, handle)
    os.replace(EFFECTS + ".tmp", EFFECTS)
    return {"written": True, "effects": len(effects)}


TOOLS = {"lookup_order": _lookup_order, "write_report": _write_report,
         "delete_records": lambda order: "deleted"}
