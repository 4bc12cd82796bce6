"""Judgement: what happened in a repeat, told from evidence alk checked itself.

- `preflight`: the version gate on the worker's `framework_ready`;
- `expectation`: alk's own checks of a result and of the files a repeat left;
- `outcome`: one outcome and one cause for every repeat, the first rule that matches;
- `tracebacks`: reading a crash's or a hang's Python traceback, to name who raised;
- `node_errors`: reading the error Node reports as an uncaught one ends it, in the same shape.
"""
