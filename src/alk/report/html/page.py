"""What makes a page of the HTML report, whichever it is: its template filled in (Jinja2, which
escapes every value), its inline scripts hashed into its Content-Security-Policy, JSON made safe
inside a script block, and the figures both pages write alike.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from alk.report.safe_text import DASH

TEMPLATES = Path(__file__).parent / "templates"
# A page is written in pieces of about this size.
PIECE_BYTES = 256 * 1024


def json_for_script(value: Any) -> str:
    """JSON safe inside a `<script type="application/json">` block: `<`, `>` and `&` are
    escapes (`\\u003c`), so that `</script>` or `<!--` in a string cannot end or bend the
    block; JSON.parse reads them back as the characters."""
    from plotly.utils import PlotlyJSONEncoder  # numpy arrays and NaN, as plotly writes them

    text = json.dumps(value, cls=PlotlyJSONEncoder, ensure_ascii=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render(name: str, context: dict[str, Any]) -> str:
    """The page whole, as `stream` writes it."""
    return b"".join(stream(name, context)).decode("utf-8")


def stream(name: str, context: dict[str, Any]) -> Iterator[bytes]:
    """The page in UTF-8 pieces of about PIECE_BYTES, as they are made: the template filled
    in, its inline scripts hashed into its policy, and Plotly's bundle (4.6 MiB) read from its
    file as it is written, so that neither the page nor the bundle is ever whole in memory."""
    scripts = [_bundle(), _inline(_asset("report.js"))] if context.get("charts") else []
    hashes = " ".join(f"'sha256-{script.digest}'" for script in scripts)
    policy = ("default-src 'none'; "
              f"script-src {hashes or chr(39) + 'none' + chr(39)}; "
              # Images only from the page itself: a chart's "download as PNG" draws its SVG
              # through a blob: (or data:) image; neither reaches the network.
              "style-src 'unsafe-inline'; img-src blob: data:; base-uri 'none'; "
              "form-action 'none'")
    from markupsafe import Markup

    # Where each script goes, by a mark no text of the page can hold (its values are escaped,
    # and controls in a worker's text are shown as escapes before they reach it).
    marks = {f"\0script-{secrets.token_hex(8)}\0": script for script in scripts}
    pieces = _environment().get_template(name).generate(
        **context, policy=policy, style=Markup(_asset("report.css")),
        scripts=[Markup(mark) for mark in marks])
    held: list[bytes] = []
    size = 0
    for piece in pieces:
        script = marks.get(piece)
        if script is None and "\0script-" in piece:
            raise ValueError("a script's place is not a piece of its own: it cannot be filled")
        if script is not None or size >= PIECE_BYTES:
            yield b"".join(held)
            held, size = [], 0
        if script is not None:
            yield from script.read()
            continue
        data = piece.encode("utf-8")
        held.append(data)
        size += len(data)
    yield b"".join(held)


@dataclass(frozen=True, slots=True)
class _Script:
    """An inline script: the sha256 of its UTF-8 (base64, as a policy gives it), and its
    text in pieces."""

    digest: str
    read: Callable[[], Iterator[bytes]]


def _inline(text: str) -> _Script:
    data = text.encode("utf-8")
    _check_script([data])
    return _Script(base64.b64encode(hashlib.sha256(data).digest()).decode("ascii"),
                   lambda: iter((data,)))


def _bundle() -> _Script:
    """Plotly's bundle, read from its file in pieces whenever a page is written."""
    path = _bundle_path()

    def read() -> Iterator[bytes]:
        with path.open("rb") as file:
            yield from iter(lambda: file.read(PIECE_BYTES), b"")

    return _Script(_bundle_digest(path), read)


def _bundle_path() -> Any:
    from importlib.resources import files

    return files("plotly") / "package_data" / "plotly.min.js"


@functools.cache
def _bundle_digest(path: Any) -> str:
    """The bundle's digest, read once: in pieces, checked as they come."""
    digest = hashlib.sha256()

    def pieces() -> Iterator[bytes]:
        with path.open("rb") as file:
            while piece := file.read(PIECE_BYTES):
                digest.update(piece)
                yield piece

    _check_script(pieces())
    return base64.b64encode(digest.digest()).decode("ascii")


def _check_script(pieces: Iterable[bytes]) -> None:
    """A script holding '</script' would end its element early: it is never embedded. The
    pieces are read with the end of the one before, where the words may begin."""
    before = b""
    for piece in pieces:
        if b"</script" in (before + piece).lower():
            raise ValueError("an inline script holds '</script': it cannot be embedded")
        before = piece[-len(b"</script"):]


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
