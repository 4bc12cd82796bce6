"""Redacts the values of a lane's declared environment from everything alk writes or prints.

Values are replaced in every form they take on the way out: raw, and JSON-escaped (a value with a
quote, a backslash or a non-ASCII character is spelled differently inside a JSON string). Text
that is cut at a length limit is redacted first, and a cut that ends inside a secret loses that
prefix too, so no part of a value survives either step.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

MASK = "[REDACTED]"
# Shorter values (a flag like "1") are not secrets, and masking them would garble every line.
MIN_SECRET_CHARS = 4
# Neither are JSON's literals: a lane that passes TRACING=false must not see every `false` of
# the result document (a failed preflight's "ok") turned into a string.
NOT_SECRETS = frozenset({"true", "false", "null"})


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        for value in secrets:
            if len(value) < MIN_SECRET_CHARS or value.lower() in NOT_SECRETS:
                continue
            forms.add(value)
            forms.add(json.dumps(value)[1:-1])
            forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
        self._forms = sorted(forms, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, self._forms))) if forms else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    @property
    def longest(self) -> int:
        """Length of the longest form a secret takes; text kept around a cut needs this much."""
        return len(self._forms[0]) if self._forms else 0

    def redact(self, text: str) -> str:
        return self._pattern.sub(MASK, text) if self._pattern else text

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

    def cut(self, text: str, limit: int) -> str:
        """Redact, then keep at most `limit` characters, dropping a trailing partial secret."""
        text = self.redact(text)
        if len(text) <= limit:
            return text
        kept = text[:limit]
        for form in self._forms:
            for size in range(min(len(form) - 1, len(kept)), 0, -1):
                if kept.endswith(form[:size]):
                    kept = kept[:-size]
                    break
        return kept + "…"

    def tail(self, text: str, limit: int, trimmed: bool = False) -> str:
        """Redact, then keep the last `limit` characters, dropping a leading partial secret.
        `trimmed` says the caller already dropped the text's start: it may begin inside a
        secret even when it is short."""
        text = self.redact(text)
        if len(text) <= limit and not trimmed:
            return text
        kept = text[-limit:]
        for form in self._forms:
            for size in range(min(len(form) - 1, len(kept)), 0, -1):
                if kept.startswith(form[-size:]):
                    kept = kept[size:]
                    break
        return "…" + kept
