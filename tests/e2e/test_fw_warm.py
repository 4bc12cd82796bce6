"""Each Python framework lane, cold and warm with the same seed: every repeat comes to the same
outcome, cause and trajectory, so that a warm run's verdict is the cold run's, faster.
(LlamaIndex's prepared process runs a second thread at the fork: alk refuses the warm start
and runs it cold, which this test sees too. The TypeScript lanes have no warm start.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers.gateway_lanes import ROOT, lane, needs_offline, require_installed

VENV = ROOT / ".venv" / "bin" / "python"
# lane: (the interpreter its command names, a module its worker imports)
LANES = {
    "pydantic-ai": (VENV, "pydantic_ai"),
    "pydantic-ai-anthropic": (VENV, "pydantic_ai"),
    "pydantic-ai-google": (VENV, "pydantic_ai"),
    "langgraph": (VENV, "langgraph"),
    "langgraph-anthropic": (VENV, "langgraph"),
    "openai-agents": (VENV, "agents"),
    "smolagents": (VENV, "smolagents"),
    "autogen": (VENV, "autogen_agentchat"),
    "google-genai": (VENV, "google.genai"),
    "anthropic": (VENV, "anthropic"),
    "llamaindex": (ROOT / ".venvs/llamaindex/bin/python", "llama_index.core"),
    "strands": (ROOT / ".venvs/strands/bin/python", "strands"),
    "adk": (ROOT / ".venvs/adk/bin/python", "google.adk"),
    "pydantic-ai-mcp": (VENV, "pydantic_ai.mcp"),
    "openai-agents-mcp": (VENV, "agents.mcp"),
    "langgraph-mcp": (ROOT / ".venvs/langgraph-mcp/bin/python", "langchain_mcp_adapters"),
    "smolagents-mcp": (ROOT / ".venvs/smolagents-mcp/bin/python", "mcpadapt.core"),
    "autogen-mcp": (ROOT / ".venvs/autogen-mcp/bin/python", "autogen_ext.tools.mcp"),
    "llamaindex-mcp": (ROOT / ".venvs/llamaindex/bin/python", "llama_index.tools.mcp"),
    "strands-mcp": (ROOT / ".venvs/strands/bin/python", "strands.tools.mcp"),
}
# The call that never answers waits out each client's own bound (up to 300 s): cold and warm
# alike, it says nothing of the warm start the other scenarios do not.
LEFT_OUT = {"tool-timeout"}
SEED = 11
# Scenarios whose verdict races, cold as warm: alk kills the worker once it reports
# write_report's result, and LangGraph writes its checkpoints asynchronously (the lane's
# comments), so the resumed graph finds the tools step's checkpoint (pass), or not (the effect
# repeats). A clean clone's CI saw a cold repeat pass it where the lane's 20 had all failed.
# One repeat each way cannot compare a race: each must land on one of its two sides.
RACE_SIDES = {("pass", "passed"), ("framework_runtime", "effect_repeated")}
RACING = {("langgraph", "crash-after-effect"), ("langgraph-anthropic", "crash-after-effect"),
          ("langgraph-mcp", "crash-after-effect")}


def repeats(tmp_path, name: str, *warm: str) -> dict[tuple[str, int], tuple]:
    scenarios = [s["id"] for s in lane(name)["scenarios"] if s["id"] not in LEFT_OUT]
    folder = tmp_path / ("warm" if warm else "cold")
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "alk", "run", "--lane", str(ROOT / "lanes" / f"{name}.toml"),
         "--repeats", "1", "-j", "2", "--seed", str(SEED), "--json", "-q", *warm,
         *(arg for sid in scenarios for arg in ("-s", sid))],
        cwd=folder, capture_output=True, text=True, timeout=600,
        env={**os.environ, "COLUMNS": "120"})
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    document = json.loads(done.stdout)
    return {(r["scenario"], r["repeat"]): (r["outcome"], r["cause"], tuple(r["trajectory"]),
                                           r["containment"])
            for s in document["scenarios"] for r in s["repeats"]}


@needs_offline
@pytest.mark.slow
@pytest.mark.parametrize("name", list(LANES))
def test_warm_repeats_come_to_the_cold_ones_verdicts(tmp_path, name):
    program, module = LANES[name]
    require_installed(name, name, program, imports=module)
    cold, warm = repeats(tmp_path, name), repeats(tmp_path, name, "--warm")
    assert {c for *_, c in cold.values()} == {"pid_namespace"}
    expected = "pid_namespace" if name.startswith("llamaindex") else "warm_fork"
    assert {c for *_, c in warm.values()} == {expected}

    def held(found: dict) -> dict:
        racing = {key: value[:2] for key, value in found.items() if (name, key[0]) in RACING}
        assert set(racing.values()) <= RACE_SIDES, racing
        return {key: value[:3] for key, value in found.items() if key not in racing}

    assert held(warm) == held(cold)
