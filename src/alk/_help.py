"""`alk --help` as typer renders it at 80 columns and wider, for `alk.launch`.

Generated: tests/unit/test_launch.py fails when it differs from what typer renders, and
`ALK_UPDATE_SNAPSHOTS=1 python -m pytest tests/unit/test_launch.py` writes it again.
"""

TOP_LEVEL = "Usage: alk [OPTIONS] COMMAND [ARGS]...\n\n  alk, the agent lane kit: run agent-framework workers as untrusted\n  subprocesses, many times, and measure how reliably they run.\n\nOptions:\n  --version  Print alk's version and exit.\n  --help     Show this message and exit.\n\nCommands:\n  run           Run lanes: N fresh worker processes a scenario; report.\n  report        Show a saved run again, and write its report files again.\n  compare       Compare two runs of the same scenarios: did B regress?\n  rerun         Run one repeat of a saved run again, exactly as it ran.\n  runs          List past runs, newest first.\n  show          Print a page of one repeat's transcript.\n  export        Export a saved run as OpenTelemetry traces (OTLP).\n  lanes         List the lanes: framework, version requirement, scenarios.\n  causes        List the cause codes, or explain one.\n  doctor        Show how this machine contains workers, and why.\n  check-worker  Check that a worker speaks protocol v1.\n"
