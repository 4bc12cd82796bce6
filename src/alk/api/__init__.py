"""alk's Python API: load a lane, run it, read a saved run. The CLI is a thin layer over this.

    from alk import api

    lane = api.load_lane("reference")
    run = api.run_lane(lane, api.RunOptions(repeats=5))
    assert run.exit_code == 0, run.document.scenarios

What a run is asked is a `RunOptions` (repeats, scenarios, seed, timeout, limits, adaptive
repeats, the pass rule); how and where it runs, a `RunSetup` (the output folder, the runner and
engine, repeats at once, the environment, the report files, the callbacks). This package holds
the names below, and nothing else is promised to stay where it is.
"""

import os

# The harness's linear algebra runs on one thread, set before numpy loads (every harness path
# imports this package first). alk forks workers from repeat threads (with a preexec step, so
# by fork, not vfork) while the main thread aggregates; OpenBLAS's fork handler waits for its
# thread pool, and a fork during a multi-threaded BLAS call deadlocks both threads for good (a
# run was seen stuck in blas_thread_shutdown_). The statistics' matrices are small. Workers
# never see this: their environment is the lane's.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

from alk.api.export import ExportTally, export_otlp
from alk.api.read import (
    RunEntry,
    list_runs,
    read_repeat_events,
    read_repeat_page,
    read_run,
    read_runs,
    repeat_entry,
    runs_json,
    transcript_intact,
)
from alk.api.run import (
    RerunResult,
    RunResult,
    RunsResult,
    check_worker,
    rerun,
    resume,
    resume_run,
    run_lane,
    run_lanes,
    write_compare_page,
    write_reports,
)
from alk.api.setup import RunSetup, engine_for
from alk.api.until_decided import compare_until_decided, extend_run
from alk.compare import compare_runs, regression_gate
from alk.lane.load import lane_warnings, list_lanes, load_lane, load_lanes
from alk.result.options import Adaptive, RunOptions
from alk.result.rule import PassRule
from alk.runner.doctor import doctor

__all__ = ["RunResult", "RunsResult", "RunOptions", "RunSetup", "Adaptive", "PassRule",
           "engine_for", "load_lane", "load_lanes", "list_lanes", "lane_warnings", "run_lane",
           "run_lanes", "resume_run", "resume", "rerun", "RerunResult", "check_worker",
           "read_run", "read_runs", "runs_json", "list_runs", "RunEntry", "write_reports",
           "compare_runs", "regression_gate", "write_compare_page", "repeat_entry",
           "read_repeat_events", "read_repeat_page", "transcript_intact", "doctor",
           "compare_until_decided", "extend_run", "export_otlp", "ExportTally"]
