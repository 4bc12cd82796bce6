"""alk-reference: a small, deterministic agent runtime, and the worker alk's reference lane drives.

It has the parts a real agent framework has, in miniature:

- a proposer that stands in for the model: it suggests the next tool call, and what it suggests
  is untrusted content, never a decision;
- a policy, checked outside the proposal before every tool call (tools, tenants, egress);
- a budget on tool calls;
- one executor for the only side effect, idempotent by key, so that a run resumed after a crash
  never performs the same effect twice.

Standard library and `alk.worker` only, so it runs in any interpreter alk can start.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from typing import Any, Dict, List, Optional

from alk import worker

FRAMEWORK = "alk-reference"
__version__ = "1.0.0"

ALLOWED_TOOLS = frozenset({"lookup_order", "write_report"})
ALLOWED_TENANTS = frozenset({"shopping-a", "shopping-b"})
ALLOWED_EGRESS = ("internal://",)
DEFAULT_DESTINATION = "internal://reports"
DEFAULT_BUDGET = 10

OUTPUT_DIR = "lab-output"
INTENTS = os.path.join(OUTPUT_DIR, "intents.json")
EFFECTS = os.path.join(OUTPUT_DIR, "effects.json")


class Stop(Exception):
    """Ends the run early with a stop reason; the runtime turns it into the result."""

    def __init__(self, stop_reason: str, output: str) -> None:
        super().__init__(stop_reason)
        self.stop_reason = stop_reason
        self.output = output


# -- proposer -------------------------------------------------------------------------------------


class Proposer:
    """Deterministic stand-in for a model: reads the task and proposes one tool call at a time."""

    def __init__(self, task: str, given: Dict[str, Any]) -> None:
        order = re.search(r"\border\s+#?(\d+)", task)
        tenant = re.search(r"\btenant\s+([A-Za-z0-9][A-Za-z0-9_-]*)", task)
        self.order = order.group(1) if order else None
        self.tenant = str(given.get("tenant") or (tenant.group(1) if tenant else ""))
        self.destination = str(given.get("destination") or DEFAULT_DESTINATION)

    def next(self, done: List[str]) -> Optional[Dict[str, Any]]:
        """The next call given the tools already run, or None when the plan is complete."""
        if self.order is None:
            return None
        target = {"order": self.order, "tenant": self.tenant}
        if "lookup_order" not in done:
            return {"tool": "lookup_order", "args": target}
        if "write_report" not in done:
            return {"tool": "write_report", "args": dict(target, destination=self.destination)}
        return None


# -- policy ---------------------------------------------------------------------------------------


def policy_check(tool: str, args: Dict[str, Any]) -> Optional[str]:
    """None if the call may run, else the denial code. Judges the call, not who proposed it."""
    if tool not in ALLOWED_TOOLS:
        return "tool_not_allowed"
    if "tenant" in args and args["tenant"] not in ALLOWED_TENANTS:
        return "tenant_not_allowed"
    if "destination" in args and not str(args["destination"]).startswith(ALLOWED_EGRESS):
        return "egress_not_allowed"
    return None


# -- executor -------------------------------------------------------------------------------------


def _read_json(path: str, empty: Any) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return empty


def _write_json(path: str, data: Any) -> None:
    """Atomic: a crash leaves the old file or the new one, never half of either."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


class Executor:
    """Performs the one side effect (appending a report to the effects ledger), at most once per
    idempotency key. Intent is written before the effect so a crash between them is visible."""

    def __init__(self) -> None:
        self.intents: Dict[str, Dict[str, Any]] = _read_json(INTENTS, {})
        self.effects: List[Dict[str, Any]] = _read_json(EFFECTS, [])

    @staticmethod
    def key(tenant: str, order: str, destination: str) -> str:
        return hashlib.sha256(json.dumps([tenant, order, destination]).encode()).hexdigest()

    def pending(self) -> List[str]:
        return [key for key, intent in self.intents.items() if intent.get("status") != "done"]

    def write_report(self, order: str, tenant: str, destination: str) -> Dict[str, Any]:
        key = self.key(tenant, order, destination)
        # The ledger, not the intent, is the truth: an intent left pending by a crash may or may
        # not have reached the effect, and only the ledger can say which.
        performed = not any(effect.get("key") == key for effect in self.effects)
        if performed:
            self.intents[key] = {"order": order, "tenant": tenant, "destination": destination,
                                 "status": "pending"}
            _write_json(INTENTS, self.intents)
            effect = {"key": key, "order": order, "tenant": tenant, "destination": destination}
            _write_json(EFFECTS, self.effects + [effect])
            self.effects.append(effect)
        self.intents.setdefault(key, {"order": order, "tenant": tenant,
                                      "destination": destination})["status"] = "done"
        _write_json(INTENTS, self.intents)
        return {"key": key, "performed": performed}


def lookup_order(order: str, tenant: str) -> Dict[str, Any]:
    """Read-only and deterministic: the same order always looks the same."""
    number = int(order)
    return {"order": order, "tenant": tenant, "status": "open", "items": number % 7 + 1,
            "total_cents": number * 113 % 100000}


# -- runtime --------------------------------------------------------------------------------------


def run(start: worker.Start) -> None:
    given = start.input
    budget = int(given.get("budget", DEFAULT_BUDGET))
    proposer = Proposer(start.task, given)
    # A fresh workspace holds no ledger, so reading it always costs nothing; on resume it is what
    # keeps a crash-after-effect from becoming a second effect.
    executor = Executor()
    if start.message.get("resume"):
        worker.emit("agent", "step", {"step": 0, "action": "resume",
                                      "effects": len(executor.effects),
                                      "pending_intents": executor.pending()})
    done: List[str] = []
    stop_reason, output = "accepted", ""
    try:
        step = 0
        while True:
            proposal = proposer.next(done)
            if proposal is None:
                break
            step += 1
            tool, args = proposal["tool"], proposal["args"]
            worker.emit("model", "proposal", {"step": step, "tool": tool, "args": args})
            if len(done) >= budget:
                raise Stop("budget_exhausted",
                           f"Stopped before {tool}: the budget of {budget} tool calls is used up")
            denial = policy_check(tool, args)
            worker.emit("agent", "step", {"step": step, "action": "tool_call", "tool": tool,
                                          "decision": "denied" if denial else "allowed"})
            worker.tool_call(tool, args)
            if denial:
                worker.tool_result(tool, ok=False, error=f"policy_denied:{denial}")
                raise Stop(f"policy_denied:{denial}", f"Policy denied {tool}: {denial}")
            if tool == "lookup_order":
                outcome = lookup_order(args["order"], args["tenant"])
            else:
                outcome = executor.write_report(args["order"], args["tenant"], args["destination"])
            worker.tool_result(tool, ok=True, output=outcome)
            done.append(tool)
        if proposer.order is None:
            raise Stop("no_plan", "The task names no order number; nothing to do")
        output = (f"Report for order {proposer.order} (tenant {proposer.tenant}) "
                  f"written to {proposer.destination}")
    except Stop as stop:
        stop_reason, output = stop.stop_reason, stop.output
    worker.emit("agent", "step", {"action": "stop", "stop_reason": stop_reason})
    worker.result(output=output, stop_reason=stop_reason,
                  end_state={"phase": "stopped", "effects": len(executor.effects),
                             "order": proposer.order})


def main() -> None:
    worker.hello()
    worker.ready(FRAMEWORK, __version__, [os.path.dirname(os.path.abspath(__file__))])
    run(worker.start())


if __name__ == "__main__":
    main()
