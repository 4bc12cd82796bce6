"""The `alk` command: parses options, calls `alk.api`, renders, maps outcomes to exit codes.
The only package that imports typer; one module per group of commands (`run`: running workers,
`read`: saved runs, `info`: what alk knows), their shared parts in `app`.

Exit codes: 0 every scenario passed; 1 a scenario failed or was flaky; 2 usage or lane error;
3 void (something could not be scored: unsupported version, missing environment, ...);
130 interrupted.
"""

from __future__ import annotations

import signal

from alk.cli import info, read, run
from alk.cli.app import app

# In the order `alk --help` lists them.
COMMANDS = (run.run, read.report, read.compare, run.rerun, read.runs, read.show, read.export, info.lanes,
            info.causes, info.doctor, run.check_worker)
for _command in COMMANDS:
    app.command(**_command.registration)(_command)


def main() -> None:
    # A CI job cancelled (SIGTERM) or a closed terminal (SIGHUP) stops a run like Ctrl-C does:
    # the worker's group is ended and the repeats finished so far are saved.
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, _interrupt)
    # Started in the background (`alk run &` in a script, nohup), alk may inherit SIGINT as
    # ignored, and so would every worker: then a timeout's SIGINT shows nothing of where a
    # worker hung. A handler (reset to the default on exec) gives workers the default back.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # "alk" in every usage line, `python -m alk` too: the help `alk.launch` prints from a copy
    # is the same whichever way alk was started.
    app(prog_name="alk")


def _interrupt(number: int, frame: object) -> None:
    raise KeyboardInterrupt
