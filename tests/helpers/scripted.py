"""A runner that answers from a script: the executor's seam for the branches real processes
reach only rarely, and for documents built without starting any process."""

from __future__ import annotations

import dataclasses

from alk.records import Observation, Preflight
from alk.runner.isolation import PROCESS_GROUP_ONLY

# The lane's secret in the tests' environments: no trace of it may reach any output.
SECRET = "tok-value-1234"
OK = Preflight(True, "fw", "1.0")


def ready(version: str = "1.0", framework: str = "fw") -> dict:
    return {"framework": framework, "framework_version": version}


PASSING = Observation(spawned=True, ready=ready(), started=True, exit_code=0,
                      result={"output": "hi", "stop_reason": "done", "end_state": {}})


class ScriptedRunner:
    """Answers each run with the next scripted item: an Observation, or an exception to raise.
    The first item answers the preflight probe. As the real runner does, it has the gate judge
    the handshake an Observation holds (`ready`): its `preflight` is the gate's verdict."""

    isolation = PROCESS_GROUP_ONLY

    def __init__(self, *script):
        self.script = list(script)
        self.requests = []

    def run(self, request, gate, transcript):
        self.requests.append(request)
        transcript.harness("spawn", {"pid": 0})
        item = self.answer(request)
        if isinstance(item, BaseException):
            raise item
        return item if item.ready is None else dataclasses.replace(item, preflight=gate(item.ready))

    def answer(self, request):
        return self.script.pop(0)


class ScenarioRunner(ScriptedRunner):
    """Answers the probe with `probe`, then each scenario's repeats from its own script, in the
    order its repeats start (a plan shuffles the order of scenarios within a round)."""

    def __init__(self, probe, **by_scenario):
        super().__init__(probe)
        self.by_scenario = {sid: list(items) for sid, items in by_scenario.items()}

    def answer(self, request):
        if request.start is None:
            return super().answer(request)
        return self.by_scenario[request.start["scenario"]["id"]].pop(0)
