"""What makes a page of the HTML report, whichever it is: its template filled in (Jinja2, which
escapes every value), its inline scripts hashed into its Content-Security-Policy, JSON made safe
inside a script block, and the figures both pages write alike.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from alk.report.safe_text import DASH

TEMPLATES = Path(__file__).parent / "templates"


def json_for_script(value: Any) -> str:
    """JSON safe inside a `<script type="application/json">` block: `<`, `>` and `&` are
    escapes (`\\u003c`), so that `</script>` or `<!--` in a string cannot end or bend the
    block; JSON.parse reads them back as the characters."""
    from plotly.utils import PlotlyJSONEncoder  # numpy arrays and NaN, as plotly writes them

    text = json.dumps(value, cls=PlotlyJSONEncoder, ensure_ascii=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render(name: str, context: dict[str, Any]) -> str:
    """The page: the template filled in, the inline scripts hashed into its policy."""
    from alk.report.html.figure import plotly_js

    scripts = [plotly_js(), _asset("report.js")] if context.get("charts") else []
    for script in scripts:
        if "</script" in script.lower():  # would end the element early: never embed it
            raise ValueError("an inline script holds '</script': it cannot be embedded")
    hashes = " ".join(f"'sha256-{_sha256(script)}'" for script in scripts)
    policy = ("default-src 'none'; "
              f"script-src {hashes or chr(39) + 'none' + chr(39)}; "
              # Images only from the page itself: a chart's "download as PNG" draws its SVG
              # through a blob: (or data:) image; neither reaches the network.
              "style-src 'unsafe-inline'; img-src blob: data:; base-uri 'none'; "
              "form-action 'none'")
    from markupsafe import Markup

    return _environment().get_template(name).render(
        **context, policy=policy, style=Markup(_asset("report.css")),
        scripts=[Markup(script) for script in scripts])


def _sha256(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


@functools.cache
def _asset(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


@functools.cache
def _environment() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)


def percent(value: float | None) -> str:
    return DASH if value is None else f"{value * 100:.1f}%"
