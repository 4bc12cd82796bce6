"""The run as kept on disk: what a run was asked and what it found, read and written here.

- `document`: the typed result record (`RunDocument`), built from an execution, to and from JSON;
- `store`: `result.json`, written redacted and atomically, read back with its schema checked;
- `journal`: `journal.jsonl`, every finished repeat made durable as it ends (`--resume`);
- `rule`: the pass rule (`--fail-under`), and `verdict`: the exit code it gives a run.
"""
