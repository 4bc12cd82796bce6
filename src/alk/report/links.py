"""Where a report's links point (`Links`): relative to the report's folder, which works
wherever the files sit together, or under a base URL (`--link-base`) at which the folder
`--out` names (its `transcripts/` and `reports/`) is served, for text that leaves them, such as
report.md pasted into a pull-request comment.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from alk.errors import UsageError

# A base longer than this would eat report.md's room under GitHub's comment limit.
BASE_CHARS = 500
_BASE = re.compile(r"https?://[A-Za-z0-9._~:/@!$&'*+,;=%-]+")


def check_link_base(value: str) -> str:
    """The base URL as links take it (no trailing slash); UsageError unless it is an http or
    https URL with a host and a path of plain URL characters: no space, no parenthesis (which
    would end a Markdown link), no query or fragment (a path is put after it)."""
    parts = urlsplit(value)
    if not (_BASE.fullmatch(value) and parts.netloc and len(value) <= BASE_CHARS):
        raise UsageError("--link-base: expected the http(s) URL at which the --out folder "
                         "(its transcripts/ and reports/) is served, e.g. "
                         "https://ci.example.com/jobs/123/artifacts (no space, parenthesis, "
                         f"?query or #fragment; at most {BASE_CHARS} characters); got "
                         f"{value[:BASE_CHARS]!r}")
    return value.rstrip("/")


@dataclass(frozen=True, slots=True)
class Links:
    """`base`: a checked base URL or None (relative links); `folder`: the report's folder,
    relative to the served one, in POSIX form (`reports/RUN_ID`)."""

    base: str | None
    folder: str

    def to(self, target: str) -> str:
        """A link's destination for `target`, a POSIX path relative to the report's folder,
        percent-encoded: a scenario id in the path cannot end the link, start a scheme
        (`javascript:`) or hold a space."""
        if self.base is None:
            return quote(target, safe="/")
        path = posixpath.normpath(posixpath.join(self.folder, target))
        return f"{self.base}/{quote(path, safe='/')}"
