"""`alk rerun RUN_ID SCENARIO REPEAT`: one repeat of a saved run, run again exactly as it ran.

The same lane (its sha256 checked), scenario, seed, repeat number and start message, the run's
own timeout and limits. What it cannot hold the same it says: a worker whose files changed
since makes the rerun a check of a fix, not a reproduction.
"""

from __future__ import annotations

import shlex


def command(run_id: str, scenario: str, repeat: int) -> str:
    """The one command that reproduces a repeat, quoted for a POSIX shell: what every report
    prints beside a failed or void repeat."""
    return shlex.join(["alk", "rerun", run_id, scenario, str(repeat)])
