"""The harness forks workers from repeat threads while its main thread aggregates with numpy: a
fork during a multi-threaded OpenBLAS call deadlocks in OpenBLAS's fork handler, so alk's harness
keeps BLAS to one thread. Checked in a fresh interpreter, as `alk` starts: after a product large
enough for OpenBLAS to use its pool, the process has no thread but its own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import os
import alk.api
import numpy
matrix = numpy.ones((400, 400))
matrix @ matrix
print(len(os.listdir("/proc/self/task")))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2,
                    reason="needs /proc and two cores (one core: OpenBLAS has no pool to start)")
def test_the_harness_runs_blas_on_one_thread():
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    assert done.stdout.strip() == "1", done.stderr
