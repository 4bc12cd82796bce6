"""Test worker for the HTML report: it puts markup that would run, if a page let it, in every
string it controls (tool names and outputs, its answer, its claim, stderr, events of its own),
and each scenario ends another way: a pass, a wrong answer on odd repeats (another tool path
too), a crash, and a declared fault it never reports (a void repeat).

Each payload tries to set `window.__alk_pwned` and the page's title: the browser test checks
that neither happened, and that the markup shows as text.
"""

import sys

from alk import worker


def hostile(tag):
    return (f'<script>window.__alk_pwned="{tag}";document.title="pwned"</script>'
            f'<img src=x onerror="window.__alk_pwned=\'{tag}\';document.title=\'pwned\'">'
            f'" onmouseover="window.__alk_pwned=\'{tag}\'" data-x="'
            f'</script><script>window.__alk_pwned="{tag}"</script><!-- '
            f'<a href="javascript:window.__alk_pwned=\'{tag}\'">{tag}</a>')


def main():
    worker.hello()
    worker.ready("<b onmouseover=\"window.__alk_pwned='fw'\">html-hostile</b>", "1.0")
    start = worker.start()
    sys.stderr.write(hostile("stderr") + "\n")
    sys.stderr.flush()
    worker.emit("agent", "thought", {"text": hostile("thought"), "long": hostile("fold") * 8})
    scenario = start.scenario_id
    tool = "lookup" + hostile("tool")
    if scenario == "wavers" and start.repeat % 2:
        worker.tool_call("retry" + hostile("retry"), {"order": hostile("args")})
        worker.tool_result("retry" + hostile("retry"), ok=False, error=hostile("error"))
    worker.tool_call(tool, {"order": 742, "note": hostile("args")})
    worker.tool_result(tool, ok=True, output={"status": hostile("tool-output")})
    if scenario == "crashes":
        raise RuntimeError(hostile("exception"))
    answer = "742 " if scenario != "wavers" or start.repeat % 2 == 0 else ""
    worker.result(output=answer + hostile("output"), stop_reason="accepted",
                  end_state={"phase": "stopped", "note": hostile("state")},
                  verification={"claimed": hostile("claimed")})


if __name__ == "__main__":
    main()
