"""A stand-in for a coding agent's command line, for tests/unit/test_coding_cli.py: it prints a
run as Claude Code's `--output-format stream-json` does (one JSON object a line), in the way its
argument names, and exits. `ok`: a tool call, its result, a line that is not JSON, the answer;
`error`: the run ends on an API error (529), exit 1; `crash`: a tool call, then exit 3 with no
end; `wait`: the tool call, then nothing until the file named by its second argument exists."""

import json
import os
import sys
import time


def say(event):
    print(json.dumps(event), flush=True)


mode = sys.argv[1]
say({"type": "system", "subtype": "init", "cwd": os.getcwd(), "tools": ["Write"]})
say({"type": "assistant", "message": {"content": [
    {"type": "text", "text": "Writing it."},
    {"type": "tool_use", "id": "toolu_1", "name": "Write",
     "input": {"file_path": "notes/a.json", "content": "{}"}}]}})
if mode == "crash":
    sys.exit(3)
if mode == "wait":
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
say({"type": "user", "message": {"content": [
    {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": mode == "error",
     "content": [{"type": "text", "text": "File created"}]}]}})
print("a progress line that is not JSON", flush=True)
if mode == "error":
    say({"type": "result", "subtype": "success", "is_error": True, "api_error_status": 529,
         "result": "API Error: 529 overloaded"})
    sys.exit(1)
say({"type": "assistant", "message": {"content": [{"type": "text", "text": "Wrote notes/a.json"}]}})
say({"type": "result", "subtype": "success", "is_error": False, "result": "Wrote notes/a.json"})
