"""`memory_mb` through real workers: RLIMIT_DATA bounds each process's own memory and not the
address space it only reserves; the repeat's memory cgroup, where alk may make one, bounds the
whole tree, its children and its tmpfs, and its kills are attributed to the limit."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import alk
from alk.attribution.outcome import attribute
from alk.causes import Cause
from alk.records import Limits
from alk.redaction import Redactor
from alk.runner import cgroup
from alk.runner.isolation import Filesystem, Network, detect
from alk.runner.process import LocalRunner
from alk.runner.protocol import hello_message
from alk.runner.request import RunRequest
from alk.transcript.writer import TranscriptWriter

SRC = Path(alk.__file__).resolve().parent.parent
ACTS = Path(__file__).resolve().parents[1] / "workers" / "acts.py"
START = {"type": "start", "run_id": "r", "scenario": {"id": "s", "task": "t", "input": {}},
         "repeat": 1, "seed": 1}
SANDBOX = Filesystem.SANDBOX in detect().filesystems
NO_MEMORY_CGROUP = cgroup.memory_parent() is None


def accept(ready):
    from alk.records import Preflight

    return Preflight(True, ready.get("framework"), ready.get("framework_version"))


def run_act(tmp_path, act, arg="", *, limits, filesystem=Filesystem.WORKSPACE, argv=None):
    workspace = tmp_path / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    request = RunRequest(
        argv=argv or (sys.executable, str(ACTS), act, arg), cwd=str(workspace),
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(SRC)}, timeout_s=30,
        hello=hello_message("acts"), start=START, redactor=Redactor(), limits=limits,
        network=Network.HOST, filesystem=filesystem,
        visible=(sys.prefix, sys.base_prefix, str(SRC), str(ACTS.parent)))
    with TranscriptWriter(tmp_path / "t.jsonl", 16 * 1024 * 1024, Redactor()) as log:
        return LocalRunner().run(request, accept, log)


def left_behind():
    """This process's repeat cgroups still there (each test's are removed after its repeat)."""
    found = []
    for controller in ("memory", "pids"):
        root = cgroup.parent(controller)
        found += list(root.glob(f"alk-{os.getpid()}-*")) if root else []
    return found


@pytest.fixture
def no_memory_cgroup(monkeypatch):
    monkeypatch.setenv(cgroup.NO_MEMORY_CGROUP_ENV, "1")
    assert "memory" not in cgroup.settings(Limits(memory_mb=256))


def test_rlimit_data_alone_stops_a_worker_that_allocates_past_memory_mb(tmp_path,
                                                                        no_memory_cgroup):
    obs = run_act(tmp_path, "eat_in_chunks", "1024", limits=Limits(memory_mb=256))
    verdict = attribute(obs)
    assert (verdict.outcome.value, verdict.cause) == ("framework_runtime", "memory_limit"), \
        verdict.detail
    assert "MemoryError" in obs.stderr_tail and obs.limits_hit == ()
    assert "limit memory_mb = 256" in verdict.detail


def test_address_space_only_reserved_is_not_counted(tmp_path):
    # What V8, Go and the JVM do: reserve far more than they use, inaccessible until needed
    # (prot 0 is PROT_NONE, which mmap names only from Python 3.13).
    code = ("import mmap, sys; sys.path.insert(0, %r); from alk import worker; "
            "m = mmap.mmap(-1, 16 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, "
            "prot=0); worker.hello(); worker.ready('acts', '1.0'); "
            "worker.start(); worker.result('done', 'accepted', {})" % str(SRC))
    obs = run_act(tmp_path, "", limits=Limits(), argv=(sys.executable, "-c", code))
    assert attribute(obs).cause == Cause.PASSED, (attribute(obs).detail, obs.stderr_tail)


@pytest.mark.skipif(NO_MEMORY_CGROUP, reason="no writable memory cgroup here (v2 with the "
                    "memory controller delegated, or v1's /sys/fs/cgroup/memory)")
@pytest.mark.parametrize("act, arg", [
    ("children_eat", "150"),  # four children, each under RLIMIT_DATA, not all four
    ("eat_shared", "512"),  # shared anonymous memory, which RLIMIT_DATA does not count
])
def test_the_memory_cgroup_bounds_what_rlimit_data_does_not(tmp_path, monkeypatch, act, arg):
    limits = Limits(memory_mb=256)
    obs = run_act(tmp_path, act, arg, limits=limits)
    verdict = attribute(obs)
    # The kernel's kill is the limit's, though the worker only saw a SIGKILL (its own or a
    # child's).
    assert obs.limits_hit == ("memory_mb",), obs.stderr_tail
    assert (verdict.outcome.value, verdict.cause) == ("framework_runtime", "memory_limit"), \
        verdict.detail
    assert "memory cgroup" in verdict.detail
    assert left_behind() == []
    # Without the cgroup nothing else bounds it: the same worker passes.
    monkeypatch.setenv(cgroup.NO_MEMORY_CGROUP_ENV, "1")
    again = run_act(tmp_path / "again", act, arg, limits=limits)
    assert attribute(again).cause == Cause.PASSED, again.stderr_tail


@pytest.mark.skipif(NO_MEMORY_CGROUP, reason="no writable memory cgroup here")
@pytest.mark.skipif(not SANDBOX, reason=f"no sandbox here: {detect().filesystem_reason}")
def test_the_memory_cgroup_counts_the_sandboxs_tmpfs(tmp_path):
    # /tmp and /dev/shm are each sized half of memory_mb, so that each write fits; with the
    # heap the three are past the limit, which only the cgroup sees.
    obs = run_act(tmp_path, "fill_tmpfs", "100", limits=Limits(memory_mb=256),
                  filesystem=Filesystem.SANDBOX)
    verdict = attribute(obs)
    assert obs.limits_hit == ("memory_mb",), obs.stderr_tail
    assert verdict.cause == Cause.MEMORY_LIMIT, verdict.detail
    assert left_behind() == []


@pytest.mark.skipif(cgroup.parent("memory") is None, reason="no writable memory cgroup here")
def test_a_repeats_memory_cgroup_is_made_under_alks_own_where_it_may(tmp_path):
    own = cgroup._own("" if cgroup.unified() else "memory")
    root = cgroup.MOUNT if cgroup.unified() else cgroup.MOUNT / "memory"
    made = cgroup.RepeatCgroup(cgroup.settings(Limits(memory_mb=64)))
    try:
        [path] = made.paths.values()
        assert path.parent in (root / own, root)
        limit = "memory.max" if cgroup.unified() else "memory.limit_in_bytes"
        assert (path / limit).read_text().strip() == str(64 << 20)
        assert made.limits_hit() == ()
    finally:
        made.remove()
    assert not path.exists()


def test_doctor_says_which_memory_bound_holds(monkeypatch):
    from alk.runner import doctor

    value, why = next(row[1:] for row in doctor.doctor() if row[0] == "memory_mb")
    if cgroup.memory_parent() is not None:
        assert value.startswith("memory cgroup v") and "RLIMIT_DATA" in value
        assert "whole tree" in why
    monkeypatch.setattr(doctor, "memory_parent", lambda: None)
    value, why = next(row[1:] for row in doctor.doctor() if row[0] == "memory_mb")
    assert value == "RLIMIT_DATA per process only"
    assert "no writable memory cgroup" in why and "not counted together" in why
