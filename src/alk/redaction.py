"""Redacts the values of a lane's declared environment from everything alk writes or prints, and
is the one place where alk shortens text.

Values are replaced in every form they take on the way out: raw, JSON-escaped (a value with a
quote, a backslash or a non-ASCII character is spelled differently inside a JSON string), as
Python's repr spells it, and, for a value of several lines (a PEM key, a service-account JSON),
line by line, since a stream is stored a line at a time. Every cut of text goes through `cut`,
`tail`, `excerpt` or `bounded`, which redact first and drop a partial secret at the cut, so that
no part of a value survives a length limit, wherever the limit is.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import re
from typing import Any, Iterable

MASK = "[REDACTED]"
# Shorter values (a flag like "1") are not secrets, and masking them would garble every line.
MIN_SECRET_CHARS = 4
# Neither are JSON's literals: a lane that passes TRACING=false must not see every `false` of
# the result document (a failed preflight's "ok") turned into a string.
NOT_SECRETS = frozenset({"true", "false", "null"})
# A name longer than its bound keeps this many hex digits of the whole's sha256.
DIGEST_CHARS = 12
ELLIPSIS = "…"


def decode_cut(data: bytes, start: bool = False, end: bool = False) -> str:
    """Bytes that a cut may have split inside a character, as text: the partial character at a
    cut edge (`start`, `end`) is dropped, not decoded as U+FFFD, so that the text's edge is the
    worker's own character and a partial secret there is still recognised."""
    if start:
        skip = 0
        while skip < min(3, len(data)) and 0x80 <= data[skip] < 0xC0:
            skip += 1  # continuation bytes of a character that began before the cut
        data = data[skip:]
    if end and data:
        lead = len(data) - 1
        while lead > 0 and len(data) - lead < 4 and 0x80 <= data[lead] < 0xC0:
            lead -= 1
        first = data[lead]
        needed = 2 if 0xC0 <= first < 0xE0 else 3 if 0xE0 <= first < 0xF0 else \
            4 if first >= 0xF0 else 1
        if len(data) - lead < needed:
            data = data[:lead]  # the last character did not fit before the cut
    return data.decode("utf-8", "replace")


# How alk writes text out: as JSON, ASCII or not (transcripts, result.json) and as repr (the
# excerpts a detail quotes). The first set encodes a whole text; the second one character, in
# the same way, to find which characters a secret's match covers.
_ESCAPERS = (lambda text: json.dumps(text), lambda text: json.dumps(text, ensure_ascii=False),
             repr)
_ONE_ESCAPERS = (lambda char: json.dumps(char)[1:-1],
                 lambda char: json.dumps(char, ensure_ascii=False)[1:-1],
                 lambda char: "\\'" if char == "'" else repr(char)[1:-1])


def _forms(value: str) -> set[str]:
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
            repr(value)[1:-1]}


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        for value in secrets:
            parts = [value, *(line for line in value.splitlines() if line != value)]
            for part in parts:
                part = part.strip() if part is not value else part
                if len(part) >= MIN_SECRET_CHARS and part.lower() not in NOT_SECRETS:
                    forms.update(_forms(part))
        self._forms = sorted(forms, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, self._forms))) if forms else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    @property
    def longest(self) -> int:
        """Length of the longest form a secret takes; text kept around a cut needs this much."""
        return len(self._forms[0]) if self._forms else 0

    def redact(self, text: str) -> str:
        if not self._pattern:
            return text
        text = self._pattern.sub(MASK, text)
        # A secret can also be spelled by an escape's tail and the text after it: a worker
        # that writes "\f" then "z-key" for the secret "fz-key" holds no secret, but JSON and
        # repr write it back as \fz-key. A text with nothing that escapes cannot do that (the
        # common case, and a flood of plain text costs nothing more); one with something that
        # does is checked in the escaped forms alk writes (with the C encoders, and slowly
        # only on a hit).
        if text.isascii() and text.isprintable() and not any(c in text for c in "\"\\'"):
            return text
        return self._escape_safe(text)

    def _escape_safe(self, text: str) -> str:
        """`text` with every character masked whose escaped form takes part in a secret."""
        for _ in range(len(text) + 1):  # each pass masks at least one more character
            if not any(self._pattern.search(escaped(text)) for escaped in _ESCAPERS):
                return text
            masked = False
            for escape_one in _ONE_ESCAPERS:
                pieces = [escape_one(char) for char in text]
                ends = list(itertools.accumulate(map(len, pieces)))
                spans = [(bisect.bisect_right(ends, m.start()), bisect.bisect_left(ends, m.end()))
                         for m in self._pattern.finditer("".join(pieces))]
                for first, last in reversed(spans):
                    text = text[:first] + MASK + text[last + 1:]
                    masked = True
                if masked:
                    break
            if not masked:
                return MASK  # a hit that no one character's form places: mask it all
        return MASK

    def redact_value(self, value: Any) -> Any:
        """Redacts the strings and keys inside a JSON-like value before it is serialized; the
        structure, numbers and literals stay as they are, so the result is valid JSON of the
        same shape (alk's own figures are never turned into text)."""
        if not self._pattern:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {self.redact(str(k)): self.redact_value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.redact_value(item) for item in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return self.redact(str(value))

    def cut(self, text: str, limit: int, *, truncated: bool = False,
            redacted: bool = False) -> str:
        """Redact, then keep at most `limit` characters, dropping a trailing partial secret.
        `truncated` says the caller already cut the text's end: it may end inside a secret
        even when it is short. `redacted` says the caller already redacted `text` whole (a
        megabyte's redaction costs a millisecond: a flood must not pay it twice an event)."""
        if not redacted:
            text = self.redact(text)
        if len(text) <= limit and not truncated:
            return text
        kept = text[:limit]
        for form in self._forms:
            for size in range(min(len(form) - 1, len(kept)), 0, -1):
                if kept.endswith(form[:size]):
                    kept = kept[:-size]
                    break
        return kept + ELLIPSIS

    def tail(self, text: str, limit: int, truncated: bool = False) -> str:
        """Redact, then keep the last `limit` characters, dropping a leading partial secret.
        `truncated` says the caller already dropped the text's start: it may begin inside a
        secret even when it is short."""
        text = self.redact(text)
        if len(text) <= limit and not truncated:
            return text
        kept = text[-limit:]
        for form in self._forms:
            for size in range(min(len(form) - 1, len(kept)), 0, -1):
                if kept.startswith(form[-size:]):
                    kept = kept[size:]
                    break
        return ELLIPSIS + kept

    def excerpt(self, raw: bytes, limit: int) -> str:
        """The start of a worker's bytes as text, at most `limit` characters, redacted: only
        as many bytes are decoded as the cut needs (4 a character, and a secret's length)."""
        window = (limit + self.longest) * 4
        cut = len(raw) > window
        return self.cut(decode_cut(raw[:window], end=cut), limit, truncated=cut)

    def line(self, raw: bytes, cut: bool) -> str:
        """A line of a worker's output as text, redacted. One the line splitter `cut` at its
        limit may end inside a character and inside a secret: both partial ends go."""
        if not cut:
            return self.redact(raw.decode("utf-8", "replace"))
        text = decode_cut(raw, end=True)
        return self.cut(text, len(text), truncated=True)

    def bounded(self, name: str, limit: int) -> str:
        """A worker-chosen name at most `limit` characters long: kept whole when it fits,
        else its redacted head and a digest of the whole, so that long names stay distinct
        while their size stays bounded."""
        name = self.redact(name)
        if len(name) <= limit:
            return name
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]
        head = self.cut(name, limit - DIGEST_CHARS - 1, truncated=True, redacted=True)
        return f"{head}{digest}"
