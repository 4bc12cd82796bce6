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
    """The model alk serves this attempt at its OpenAI endpoint, as `(name, base_url,
    api_key)`: `family_endpoint(start, "openai")`."""
    return family_endpoint(start, "openai")


# Each family's variables, read when the start message names no base URL for it.
_FAMILY_ENV = {"openai": ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
               "anthropic": ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
               "gemini": ("GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY")}
# The tools as a model is told of them, for the workers that declare them to a provider's
# client by hand: name -> description (each takes one string argument, `order`).
TOOL_DOCS = {"lookup_order": "Look up an order.",
             "write_report": "Write the order's report (the side effect).",
             "delete_records": "Delete the order's records."}
ORDER_SCHEMA = {"type": "object", "properties": {"order": {"type": "string"}},
                "required": ["order"]}


def family_endpoint(start, family):
    """One family's endpoint of the model alk serves, as `(name, base_url, api_key)`: from
    `start.model["base_urls"][family]` (Anthropic's and Gemini's are the root, with no /v1),
    else from the variables that family's client reads."""
    model, (url_env, key_env) = start.model, _FAMILY_ENV[family]
    # `base_url` is the OpenAI one, as the start message gave it before it had `base_urls`.
    given = (model.get("base_urls") or {}).get(family) or (
        model.get("base_url") if family == "openai" else None)
    return (model.get("name") or "alk-script", given or os.environ.get(url_env),
            model.get("api_key") or os.environ.get(key_env))


def tool_outcome(name, args, faults):
    """A tool call for a loop the worker writes itself: `(output, ok)`, where a tool that raised
    gives its error's text and ok False, for the loop to hand back to the model as a failed
    result (what Anthropic's and Google's guides do with a tool error)."""
    try:
        return run_tool(name, args, faults), True
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}", False


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
