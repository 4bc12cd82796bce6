"""Runs one worker as a fresh, contained subprocess and reports what it saw: `LocalRunner`.

It puts together the three parts of a run: `spawn` (start the worker behind its wrappers, end
and reap it), `loop` (the selector loop over its pipes) and `driver` (the pure decisions:
handshake, version gate, kill_at, timeout), and turns what they saw into an `Observation`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import os
import time

from alk.records import Observation
from alk.runner.disk import DiskWatch, Judged
from alk.runner.driver import REAP_LIMIT_S, Driver
from alk.runner.isolation import Containment, Isolation, detect
from alk.runner.loop import Loop, LoopEnd
from alk.runner.procfs import peak_rss_kb
from alk.runner.protocol import MAX_TRAJECTORY_CHARS, Phase
from alk.runner.request import ReadyCheck, RunRequest
from alk.runner.seccomp import program as seccomp_program
from alk.runner.spawn import Spawned, start
from alk.runner.stderr import StderrSink
from alk.served_model import ModelSeen
from alk.transcript.writer import TranscriptWriter

__all__ = ["LocalRunner"]


class LocalRunner:
    """Runs workers as local processes, each in its own session and, where the machine allows,
    its own PID namespace and sandbox (see `isolation`)."""

    def __init__(self, isolation: Isolation | None = None, seccomp: bool = True) -> None:
        self._isolation = isolation
        self._seccomp = seccomp

    @property
    def seccomp(self) -> bool:
        return self._seccomp

    @property
    def isolation(self) -> Isolation:
        if self._isolation is None:
            self._isolation = detect()
        return self._isolation

    def run(self, request: RunRequest, gate: ReadyCheck,
            transcript: TranscriptWriter) -> Observation:
        if request.stop is not None:
            request.stop.check()  # the run is stopping: start nothing more
        isolation = self.isolation
        started = time.monotonic()
        parent_hwm_kb = peak_rss_kb("self")
        containment = isolation.containment.value
        disk = _disk_watch(request, transcript)
        if disk is not None and disk.short_before:
            detail = disk.describe_short()
            disk.close()
            transcript.harness("disk_full", {"detail": detail})
            return Observation(spawned=False, harness_error=detail, containment=containment)
        try:
            spawned = self._start(request, isolation,
                                  seccomp_program() if self._seccomp else None)
        except OSError as exc:
            if disk is not None:
                disk.close()
            detail = f"cannot start {request.argv[0]!r}: {exc.strerror or exc}"
            transcript.harness("spawn_failed", {"argv": list(request.argv), "error": detail})
            return Observation(spawned=False, spawn_error=detail, containment=containment)
        if getattr(spawned, "warm", False):
            containment = Containment.WARM_FORK.value
        if disk is not None:
            disk.watch(spawned.kill, transcript, spawned.sandboxed)
        driver = Driver(request, gate, started)
        stderr = StderrSink(transcript, request.redactor, request.line_limit_bytes)
        seen: ModelSeen | None = None
        try:
            if spawned.listener is not None and request.gateway is not None:
                request.gateway.serve(spawned.listener)
            transcript.harness("spawn", {"pid": spawned.pid, "argv": list(request.argv),
                                         "cwd": request.cwd, "env": sorted(request.env),
                                         "containment": containment,
                                         "network": request.network.value,
                                         "filesystem": request.filesystem.value,
                                         "limits": request.limits.applied(),
                                         # The wall clock at this event: what places the
                                         # repeat in time in an export (`t` is relative).
                                         "unix_time": round(time.time(), 6)})
            loop = Loop(spawned, driver, transcript, stderr, request.line_limit_bytes)
            end = loop.run()
            limits_hit = spawned.limits_hit()
            reported = spawned.init_status(end.status)
            if request.gateway is not None:
                # The worker is gone: what the gateway still held (a stalled call) is ended,
                # and the calls it saw join the transcript before the exit event.
                seen = request.gateway.close()
                loop.model_events()
        except BaseException:
            # alk itself is stopping (Ctrl-C, SIGTERM, a bug): never leave the group behind.
            if disk is not None:
                disk.close()
            spawned.reap_after_kill(REAP_LIMIT_S)
            raise
        finally:
            if disk is not None:
                disk.stop()  # before the worker's descriptors are closed: it may kill
            spawned.close()
            if request.gateway is not None:
                request.gateway.close()
                request.gateway.release()
        limits = request.limits.applied()
        judged = disk.judge() if disk is not None else Judged()
        if judged.breach is not None:
            # The limit in force may have been the disk's room rather than disk_mb.
            limits_hit, limits = ("disk_mb", *limits_hit), {**limits, "disk_mb": judged.limit_mb}
            transcript.harness("disk_limit", judged.breach)
        if judged.harness_error is not None and end.harness_error is None:
            end = dataclasses.replace(end, harness_error=judged.harness_error)
        return _observation(request, spawned, driver, stderr, end, reported, limits_hit,
                            limits, containment, time.monotonic() - started, parent_hwm_kb,
                            transcript, seen)


    def _start(self, request: RunRequest, isolation: Isolation,
               seccomp: bytes | None) -> Spawned:
        """The worker's process: a fresh one (a warm start forks it: alk.runner.warm)."""
        return start(request, isolation, seccomp)


def _disk_watch(request: RunRequest, transcript: TranscriptWriter) -> DiskWatch | None:
    """The attempt's disk watch, measured now, before the worker starts; None where the
    workspace or the transcript's folder cannot be looked at (then nothing is measured)."""
    path = getattr(transcript, "path", None)
    try:
        return DiskWatch(request.cwd, path.parent, request.limits.disk_mb) if path else None
    except OSError:
        return None


def _observation(request: RunRequest, spawned: Spawned, driver: Driver, stderr: StderrSink,
                 end: LoopEnd, reported: tuple[int | None, int | None] | None,
                 limits_hit: tuple[str, ...], limits: dict[str, int], containment: str,
                 duration: float,
                 parent_hwm_kb: int, transcript: TranscriptWriter,
                 seen: ModelSeen | None) -> Observation:
    exit_code = sig = None
    if reported is not None:
        # The init's word: the worker's own exit, not a wrapper's 128 + N.
        exit_code, sig = reported
    elif end.status is not None:
        if os.WIFSIGNALED(end.status):
            sig = os.WTERMSIG(end.status)
        else:
            exit_code = os.waitstatus_to_exitcode(end.status)
    cpu_s = peak_kb = None
    if end.rusage is not None:
        cpu_s = end.rusage.ru_utime + end.rusage.ru_stime
        # ru_maxrss includes the harness's own peak at spawn (the child began as a copy of
        # it); above that it is the worker's true peak, below it only sampling can tell.
        own = end.rusage.ru_maxrss if end.rusage.ru_maxrss > parent_hwm_kb else 0
        peak_kb = max(own, end.peak_rss_kb) or None
    tmpfs_mb = round(end.peak_tmpfs_kb / 1024, 2) if end.peak_tmpfs_kb else None
    state = driver.state
    transcript.harness("exit", {
        "exit_code": exit_code, "signal": sig, "timed_out": driver.timed_out,
        "duration_s": round(duration, 4), "cpu_s": cpu_s,
        "peak_rss_mb": round(peak_kb / 1024, 2) if peak_kb else None,
        **({"peak_tmpfs_mb": tmpfs_mb} if tmpfs_mb else {}),
        "reported_by": "init" if reported is not None else "wait",
        "violations": state.violation_count,
    })
    trajectory, trajectory_hash = tuple(state.trajectory), state.trajectory_hash.hexdigest()
    if seen is not None:
        # With alk serving the model, the trajectory is what the gateway answered, call by
        # call: the harness's observation, not the worker's account of its tools.
        trajectory, trajectory_hash = _model_trajectory(seen)
    return Observation(
        spawned=True,
        containment=containment,
        network=request.network.value,
        filesystem=request.filesystem.value,
        limits=limits,
        limits_hit=limits_hit,
        faults_fired=frozenset(state.faults_fired),
        path_hash=state.path_hash.hexdigest(),
        # Under the gateway, the turns it served and the script it saw run out: the harness's
        # own count, whatever the worker says.
        model_turns=seen.turns if seen is not None else state.model_turns,
        script_exhausted=seen.exhausted if seen is not None else state.script_exhausted,
        path=tuple(state.path),
        trajectory_hash=trajectory_hash,
        model=seen,
        identities=((driver.preflight.framework, driver.preflight.version),)
        if driver.preflight is not None else (),
        kill_fired=driver.kill_fired,
        ready=state.ready,
        preflight=driver.preflight,
        started=state.phase is Phase.STARTED,
        exit_code=exit_code,
        signal=sig,
        timed_out=driver.timed_out,
        duration_s=duration,
        cpu_s=cpu_s,
        peak_rss_mb=peak_kb / 1024 if peak_kb else None,
        peak_tmpfs_mb=end.peak_tmpfs_kb / 1024 if end.peak_tmpfs_kb else None,
        result=state.result,
        bad_result=state.bad_result,
        tool_calls=dict(state.tool_calls),
        uncounted_tool_calls=state.uncounted_tool_calls,
        trajectory=trajectory,
        violations=tuple(state.violations),
        violation_count=state.violation_count,
        stderr_tail=stderr.tail(),
        harness_error=end.harness_error,
    )


def _model_trajectory(seen: ModelSeen) -> tuple[tuple[str, ...], str]:
    """The gateway's steps as a trajectory (bounded like the worker's), and their digest: the
    model's calls, with the tool calls alk served between them where they came."""
    digest = hashlib.sha256()
    kept: list[str] = []
    size = 0
    # A tool step carries the count of model steps before it: it sorts before the model step
    # of that index, and both runs are in order already.
    steps = heapq.merge(((before, 0, step) for before, step in seen.tool_steps),
                        ((index, 1, step) for index, step in enumerate(seen.steps)))
    for _, _, step in steps:
        digest.update(step.encode("utf-8", "surrogatepass") + b"\n")
        if size < MAX_TRAJECTORY_CHARS:
            kept.append(step)
            size += len(step)
    return tuple(kept), digest.hexdigest()
