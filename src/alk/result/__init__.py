"""The run as kept on disk: what a run was asked and what it found, read and written here.

- `options`: what a run is asked (`RunOptions`), the one record the journal, group.json and
  result.json's settings are made from;
- `document`: the typed result record (`RunDocument`), built from an execution, to and from JSON;
- `store`: `result.json`, written redacted and atomically, read back with its schema checked;
- `journal`: `journal.jsonl`, every finished repeat made durable as it ends (`--resume`);
- `group`: `group.json`, the lanes of a run of several;
- `rule`: the pass rule (`--fail-under`), and `verdict`: the exit code it gives a run.
"""
