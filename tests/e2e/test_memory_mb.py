"""`memory_mb` through alk's real command line: a Node worker that calls fetch() runs under the
default limits, and a limit too small for the interpreter is named as such, with or without
the repeat's memory cgroup."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from alk.runner.cgroup import NO_MEMORY_CGROUP_ENV

from helpers.processes import write_lane

WORKERS = Path(__file__).resolve().parents[1] / "workers"


def result_of(cwd):
    [path] = (cwd / "reports").glob("*/result.json")
    return json.loads(path.read_text())


@pytest.mark.skipif(shutil.which("node") is None, reason="no node on PATH")
def test_a_node_worker_that_fetches_passes_under_the_default_limits(tmp_path, alk):
    # Under RLIMIT_AS at the default 8192 MB, undici's WebAssembly reservation failed.
    lane = write_lane(tmp_path, "node", 'framework = "node-fetch"\nversion = ">=1"\n'
                      f'command = ["node", "{WORKERS / "node_fetch.mjs"}"]\n'
                      '[[scenarios]]\nid = "a"\ntask = "t"\n')
    done = alk("run", "--lane", lane, "-n", 1, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [scenario] = result_of(tmp_path)["scenarios"]
    [repeat] = scenario["repeats"]
    assert repeat["cause"] == "passed", repeat["detail"]


@pytest.mark.parametrize("cgroup", ["cgroup", "rlimit only"])
def test_a_memory_limit_too_small_to_start_is_named_not_a_missing_framework(tmp_path, alk,
                                                                            cgroup):
    lane = write_lane(tmp_path, "small", 'framework = "acts"\nversion = ">=1"\n'
                      f'command = ["{{python}}", "{WORKERS / "acts.py"}", "plain"]\n'
                      'install = "pip install acts"\n[[scenarios]]\nid = "a"\ntask = "t"\n')
    done = alk("run", "--lane", lane, "-n", 1, "--limit", "memory_mb=5", cwd=tmp_path,
               env={NO_MEMORY_CGROUP_ENV: "1"} if cgroup == "rlimit only" else None)
    assert done.returncode == 3, done.stdout + done.stderr
    gate = result_of(tmp_path)["gate"]
    assert gate["cause"] == "limit_before_ready", gate
    assert "limit memory_mb = 5 is too small for the worker to start" in gate["detail"]
    assert "install it" not in gate["detail"]
    assert "Raise the limit" in done.stdout
