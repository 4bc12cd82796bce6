"""Redacts the values of a lane's declared environment from everything alk writes or prints, and
is the one place where alk shortens text.

Values are replaced in every form they take on the way out, and in the common ones a worker can
turn them into: raw and reversed; in hex; in base64 and URL-safe base64, padded or not, at any
of the three alignments a value may have inside a longer encoded text (`base64("Bearer " +
key)`); and with any of their characters escaped as JSON, Python's repr or a URL write it
(`\\u0073ecret`, `%73ecret`), as alk itself writes text. A value of several lines (a PEM key, a
service-account JSON) is also replaced line by line, since a stream is stored a line at a time.
Every cut of text goes through `cut`, `tail`, `excerpt` or `bounded`, which redact first and
drop a partial secret, in any of those forms, at the cut, so that no part of a value survives a
length limit, wherever the limit is.

However many forms there are, a text is searched once for all fixed ones, from each one's
rarest character (at memchr's speed where those are few), and around an escape for those
spelled with escapes; a flood's lines are redacted at once where that is the same.
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import itertools
import json
import re
import string
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
        needed = next(n for n, k in ((4, 0xF0), (3, 0xE0), (2, 0xC0), (1, 0)) if data[lead] >= k)
        if len(data) - lead < needed:
            data = data[:lead]  # the last character did not fit before the cut
    return data.decode("utf-8", "replace")


# How alk writes text out: as JSON, ASCII or not (transcripts, result.json) and as repr (the
# excerpts a detail quotes). The first set encodes a whole text; the second one character, in
# the same way, to find which characters a secret's match covers.
_ESCAPERS = (lambda text: json.dumps(text), lambda text: json.dumps(text, ensure_ascii=False), repr)
_ONE_ESCAPERS = (lambda char: json.dumps(char)[1:-1],
                 lambda char: json.dumps(char, ensure_ascii=False)[1:-1],
                 lambda char: "\\'" if char == "'" else repr(char)[1:-1])


# The characters base64 writes in either alphabet, and the one it writes from a value's bits and
# a neighbour's, masked with the value's own (its padding holds none).
_BASE64 = frozenset(string.ascii_letters + string.digits + "+/-_")
_EDGE = "[A-Za-z0-9+/_-]?"
_URL_SAFE = str.maketrans("+/", "-_")
_SHORT_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "'": "'", "\b": "b", "\f": "f", "\n": "n",
                  "\r": "r", "\t": "t"}
# Characters from the commonest in logs and prose to the rarest (unlisted ones rarer still).
_COMMON = (" etaoinsrlhdcu\n0123456789mp.fgy,_-:/=bwvk\"'()ETASRINOCDLPMFxHBUGjW[]qzKVYX{}<>"
           "JQZ+*#@!?$%&;|\\^`~")

# A form is a sequence of slots, a slot the spellings a character may take, a spelling tokens,
# each an expression of one character (so that a form reverses as its text does); a fixed form
# is tokens, and whether a partial character precedes it and one follows it.
Slot = tuple[tuple[str, ...], ...]
Fixed = tuple[tuple[str, ...], bool, bool]


def _hex(number: int, width: int) -> tuple[str, ...]:
    """A number's hex digits as tokens, a letter in either case."""
    return tuple(d if d.isdigit() else f"[{d}{d.upper()}]" for d in f"{number:0{width}x}")


def _spellings(char: str) -> Slot:
    """A character as itself, and escaped as JSON, Python's repr or percent-encoding write it
    (a worker may escape any character, not only those that need it)."""
    code = ord(char)
    found = [(re.escape(char),)]
    if code > 0xFFFF:
        high, low = divmod(code - 0x10000, 0x400)
        found += [("\\\\", "u", *_hex(0xD800 + high, 4), "\\\\", "u", *_hex(0xDC00 + low, 4)),
                  ("\\\\", "U", *_hex(code, 8))]
    else:
        found.append(("\\\\", "u", *_hex(code, 4)))
    if code < 0x100:
        found.append(("\\\\", "x", *_hex(code, 2)))
    if char in _SHORT_ESCAPES:
        found.append(("\\\\", re.escape(_SHORT_ESCAPES[char])))
    found.append(tuple(token for byte in char.encode("utf-8", "surrogatepass")
                       for token in ("%", *_hex(byte, 2))))
    return tuple(found + [("\\+",)] * (char == " "))  # quote_plus


def _encoded(value: str) -> list[Fixed]:
    """`value` in hex, and in base64: inside a longer encoded text, it is written one of three
    ways, by its offset modulo 3; only the characters made of its bits alone are fixed, and
    one on either side may mix in a neighbour's."""
    data = value.encode("utf-8", "surrogatepass")
    found = [(tuple(token for byte in data for token in _hex(byte, 2)), False, False)]
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + data).decode("ascii")
        fixed = encoded[-(-8 * shift // 6):8 * (shift + len(data)) // 6]
        for text in dict.fromkeys((fixed, fixed.translate(_URL_SAFE))):
            found.append((tuple(map(re.escape, text)), shift != 0, (shift + len(data)) % 3 != 0))
    return found


def _forms(parts: list[str]) -> tuple[list[Fixed], dict[Any, None]]:
    """Each value's text as alk writes it (raw, JSON-escaped, as repr), encoded and with any
    character escaped, for the value and the value reversed; and the encoded text reversed."""
    written: dict[Fixed, None] = {}
    encoded: dict[Fixed, None] = {}
    escaped: dict[Any, None] = {}
    for part in parts:
        single = len(part.splitlines()) == 1  # else it is encoded or escaped as its lines are
        for value in (part, part[::-1]):
            written.update(dict.fromkeys((tuple(map(re.escape, text)), False, False) for text in (
                value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
                repr(value)[1:-1])))
            if single:
                escaped[tuple(map(_spellings, value))] = None
                encoded.update(dict.fromkeys(_encoded(value)))
        # Written backwards, a partial character after an encoded value is before it.
        encoded.update(dict.fromkeys((form[::-1], after, before)
                                     for form, before, after in (_encoded(part) if single else ())))
    return [*written, *encoded], escaped


def _chars(token: str) -> str:
    return token[1:3] if len(token) == 4 and token[0] == "[" else token[-1]


def _rarity(token: str) -> int:
    return min(_COMMON.find(c) if c in _COMMON else len(_COMMON) for c in _chars(token))


def _render(slots: Iterable[Slot]) -> str:
    return "".join("".join(slot[0]) if len(slot) == 1 else
                   "(?:" + "|".join(map("".join, slot)) + ")" for slot in slots)


def _reversed(slots: tuple[Slot, ...]) -> tuple[Slot, ...]:
    return tuple(tuple(spelling[::-1] for spelling in slot) for slot in reversed(slots))


def _fixed_pattern(fixed: Iterable[Fixed]) -> tuple[re.Pattern[str], list[tuple[int, bool]], str]:
    """The fixed forms in one expression, each looked for from its rarest character (a hex
    letter is two: ordinary text offers the search few places to try one), what comes before it
    checked behind. Each ends in an empty group, whose number the list maps to how far before
    that character the form begins and whether a partial one may precede it; and the anchors."""
    by_anchor: dict[str, list[tuple[str, int, bool]]] = {}
    for form, before, after in sorted(fixed, key=lambda form: -len(form[0])):
        at = max(range(len(form)), key=lambda i: (_rarity(form[i]), -i))
        behind = f"(?<={''.join(form[:at])}(?s:.{{{len(form) - at}}}))" if at else ""
        rest = f"{''.join(form[at + 1:])}{behind}{_EDGE if after else ''}()"
        for anchor in form[at][1:3] if form[at][0] == "[" else [form[at]]:
            by_anchor.setdefault(anchor, []).append((rest, at, before))
    marks, branches = [(0, False)], []
    for anchor in (anchors := sorted(by_anchor, key=_rarity)):
        marks += [(at, before) for _, at, before in by_anchor[anchor]]
        branches.append(f"{anchor}(?:{'|'.join(rest for rest, _, _ in by_anchor[anchor])})")
    return re.compile("|".join(branches)), marks, "".join(anchor[-1] for anchor in anchors)


def _escaped_patterns(escaped: Iterable[tuple[Slot, ...]]) -> list[re.Pattern[str]]:
    """The forms with escapes, in two expressions, so that the rest of a form is written once in
    each and each alternative begins with what the search can skip to: the forms that begin
    with a character as itself, by that character; those that begin with an escape, by its
    first character, each form's escapes then told apart by a look behind at it."""
    itself: dict[str, list[str]] = {}
    firsts, escapes = set(), []
    for form in escaped:
        rest = _render(form[1:])
        [(first,), *others] = form[0]  # a character's first spelling is itself
        itself.setdefault(first, []).append(rest)
        firsts.update(spelling[0] for spelling in others)
        escapes.append("(?:" + "|".join(f"(?<={spelling[0]}){''.join(spelling[1:])}"
                                        for spelling in others) + f"){rest}")
    return [re.compile("|".join(f"{first}(?:{'|'.join(rests)})" for first, rests in
                                sorted(itself.items(), key=lambda way: _rarity(way[0])))),
            re.compile(f"[{''.join(sorted(firsts))}](?:{'|'.join(escapes)})")] if escapes else []


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        parts: list[str] = []
        for value in secrets:
            for part in [value, *(line for line in value.splitlines() if line != value)]:
                part = part.strip() if part is not value else part
                if len(part) >= MIN_SECRET_CHARS and part.lower() not in NOT_SECRETS:
                    parts.append(part)
        self._fixed: tuple[re.Pattern[str], list[tuple[int, bool]], str] | None = None
        self._longest, self._partials = 0, [None, None]  # see `_dangling`
        if not parts:
            return
        fixed, escaped = _forms(parts)
        self._fixed = _fixed_pattern(fixed)
        self._escaped = _escaped_patterns(escaped)
        # Every form as slots, for a cut's partial matches.
        self._cores = [tuple(((token,),) for token in form) for form, _, _ in fixed] + [*escaped]
        self._longest = max([len(form) + before + after for form, before, after in fixed]
                            + [sum(max(map(len, slot)) for slot in form) for form in escaped])
        # Only around an escape of a character a value holds can it be spelled with escapes.
        tails: dict[str, set[str]] = {}
        for spelling in {spelling for form in escaped for slot in form for spelling in slot[1:]}:
            tails.setdefault(spelling[0], set()).add("".join(spelling[1:]))
        self._escapes = re.compile("|".join(f"{first}(?:{'|'.join(sorted(found))})" for first,
                                            found in sorted(tails.items())) or "(?!)")
        self._escape_starts = {first[-1] for first in tails}  # each an escaped character
        # When no value holds a quote, a backslash or a character that escapes, alk's escapes
        # of a quote or a backslash add no character a form could take up, nor do those of a
        # control character none of whose letters begins a form.
        self._plain = all(part.isascii() and part.isprintable()
                          and not any(c in part for c in "\"\\'") for part in parts)
        firsts = {c for form, _, _ in fixed for c in _chars(form[0])}
        self._unsafe = [c for c in map(chr, [*range(32), 127]) if firsts & {
            letter for escape in _ONE_ESCAPERS for letter in escape(c)[1:]}]

    def __bool__(self) -> bool:
        return self._fixed is not None

    @property
    def longest(self) -> int:
        """Length of the longest form a secret takes; text kept around a cut needs this much."""
        return self._longest

    def _spans(self, text: str, escapes: bool = True) -> list[list[int]]:
        """Where the secrets' forms are in `text`, in order, overlapping ones merged; with
        `escapes`, those a worker spelled with escapes too, looked for only around one."""
        found = self._placed(self._fixed_matches(text), self._fixed[1], text)
        reach, windows = self._longest, []
        hit = escapes and any(c in text for c in self._escape_starts) and self._escapes.search(text)
        while hit:
            # A form with an escape lies within `reach` of it; those of the escapes that follow
            # within `reach` lie in this window too.
            start = max(0, hit.start() - reach)
            if windows and start <= windows[-1][1]:
                start = windows.pop()[0]
            windows.append([start, hit.start() + 2 * reach])
            hit = self._escapes.search(text, hit.start() + reach)
        for start, end in windows:
            for pattern in self._escaped:
                found += self._placed(pattern.finditer(text, start, end), [], text)
        spans: list[list[int]] = []
        for span in sorted(found):
            if spans and span[0] < spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], span[1])
            else:
                spans.append(span)
        return spans

    def _fixed_matches(self, text: str) -> Iterable[re.Match[str]]:
        """The fixed forms' matches as the expression's search finds them; in a long text with
        few anchors, tried only at those (found at memchr's speed: the search takes 5 ns a byte)."""
        (pattern, _, anchors), budget, starts, found = self._fixed, len(text) // 256 + 16, [], []
        for anchor in anchors if len(text) >= 64 * len(anchors) else ():
            at = text.find(anchor)
            while at >= 0 and len(starts) < budget:
                starts.append(at)
                at = text.find(anchor, at + 1)
        if len(starts) >= budget or len(text) < 64 * len(anchors):
            return pattern.finditer(text)
        for start in sorted(starts):
            if (not found or start >= found[-1].end()) and (match := pattern.match(text, start)):
                found.append(match)
        return found

    @staticmethod
    def _placed(matches: Iterable[re.Match[str]], marks: list, text: str) -> list[list[int]]:
        found = []
        for match in matches:
            back, before = marks[match.lastindex] if marks else (0, False)
            first = match.start() - back
            if before and first and text[first - 1] in _BASE64:
                first -= 1
            found.append([first, match.end()])
        return found

    def redact(self, text: str) -> str:
        if not self._fixed:
            return text
        if len(text) >= 64 * len(self._fixed[2]) or self._fixed[0].search(text) or \
                self._escapes.search(text):  # a short text's search is quicker than the finds
            text = self._masked(text, self._spans(text))
        # A secret can also be spelled by an escape's tail and the text after it: a worker that
        # writes "\f" then "z-key" for the secret "fz-key" holds no secret, but JSON and repr
        # write it back as \fz-key. A text with nothing that escapes, or whose escapes add
        # nothing a form could take up (`_plain`, `_unsafe`: the common case) cannot; any other
        # is checked in the escaped forms alk writes (with the C encoders, slowly only on a hit).
        if text.isascii() and (text.isprintable() and (
                self._plain or not any(c in text for c in "\"\\'")) or self._plain and not any(
                c in text for c in self._unsafe)):
            return text
        return self._escape_safe(text)

    def redact_lines(self, text: str) -> str:
        """`text`'s lines, each redacted as `redact` would alone: at once where that is the same
        (plain values, whose forms hold no newline; no escape; none alk's would make), else not."""
        if self and self._plain and text.isascii() and not any(
                c in text for c in self._escape_starts):
            masked = self._masked(text, self._spans(text, False))
            if not any(c in masked for c in self._unsafe if c != "\n"):
                return masked
        return "\n".join(map(self.redact, text.split("\n"))) if self else text

    @staticmethod
    def _masked(text: str, spans: list[list[int]]) -> str:
        ends, starts = [0, *(end for _, end in spans)], [*(start for start, _ in spans), len(text)]
        return MASK.join(text[end:start] for end, start in zip(ends, starts)) if spans else text

    def _escape_safe(self, text: str) -> str:
        """`text` with every character masked whose escaped form takes part in a secret."""
        for _ in range(len(text) + 1):  # each pass masks at least one more character
            # ASCII is written alike by JSON's two ways; what alk's escapes spell is a fixed form.
            step = 2 if text.isascii() else 1
            if not any(self._spans(escaped(text), False) for escaped in _ESCAPERS[::step]):
                return text
            for escape_one in _ONE_ESCAPERS[::step]:
                pieces = [escape_one(char) for char in text]
                ends = list(itertools.accumulate(map(len, pieces)))
                spans = [(bisect.bisect_right(ends, start), bisect.bisect_left(ends, end))
                         for start, end in self._spans("".join(pieces), False)]
                for first, last in reversed(spans):
                    text = text[:first] + MASK + text[last + 1:]
                if spans:
                    break
            else:
                return MASK  # a hit that no one character's form places: mask it all
        return MASK

    def _dangling(self, text: str, at_start: bool = False) -> int:
        """How many characters at the end of `text` (at its start) are a form cut short: a
        prefix of one (a suffix), found as a partial match of the forms (reversed)."""
        if self._partials[at_start] is None:
            import regex  # only a cut needs it: its partial matches
            cores = map(_reversed, self._cores) if at_start else self._cores
            self._partials[at_start] = regex.compile("|".join(map(_render, cores)))
        window = text[:self._longest][::-1] if at_start else text[-self._longest:]
        mask = MASK[::-1] if at_start else MASK
        for match in self._partials[at_start].finditer(window, partial=True):
            if match.partial and match.end() > match.start():
                size = len(window) - match.start()
                # Within a mask cut short, the characters are alk's own.
                return 0 if any(window.endswith(mask[:k]) for k in range(size, len(mask))) else size
        return 0

    def redact_value(self, value: Any) -> Any:
        """Redacts the strings and keys inside a JSON-like value before it is serialized; the
        structure, numbers and literals stay as they are, so the result is valid JSON of the
        same shape (alk's own figures are never turned into text)."""
        if not self or value is None or isinstance(value, (bool, int, float)):
            return value
        if isinstance(value, dict):
            return {self.redact(str(k)): self.redact_value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.redact_value(item) for item in value]
        return self.redact(value if isinstance(value, str) else str(value))

    def cut(self, text: str, limit: int, *, truncated: bool = False, redacted: bool = False) -> str:
        """Redact, then keep at most `limit` characters, dropping a trailing partial secret.
        `truncated` says the caller already cut the text's end: it may end inside a secret
        even when it is short. `redacted` says the caller already redacted `text` whole (a
        megabyte's redaction costs a millisecond: a flood must not pay it twice an event)."""
        text = text if redacted else self.redact(text)
        if len(text) <= limit and not truncated:
            return text
        kept = text[:limit]
        return (kept[:len(kept) - self._dangling(kept)] if self else kept) + ELLIPSIS

    def tail(self, text: str, limit: int, truncated: bool = False) -> str:
        """Redact, then keep the last `limit` characters, dropping a leading partial secret.
        `truncated` says the caller already dropped the text's start: it may begin inside a
        secret even when it is short."""
        text = self.redact(text)
        if len(text) <= limit and not truncated:
            return text
        kept = text[-limit:]
        return ELLIPSIS + (kept[self._dangling(kept, at_start=True):] if self else kept)

    def excerpt(self, raw: bytes, limit: int) -> str:
        """The start of a worker's bytes as text, at most `limit` characters, redacted: only
        as many bytes are decoded as the cut needs (4 a character, and a secret's length)."""
        window = (limit + self.longest) * 4
        cut = len(raw) > window
        return self.cut(decode_cut(raw[:window], end=cut), limit, truncated=cut)

    def line(self, raw: bytes, cut: bool) -> str:
        """A line of a worker's output as text, redacted. One the line splitter `cut` at its
        limit may end inside a character and inside a secret: both partial ends go."""
        text = decode_cut(raw, end=cut)
        return self.cut(text, len(text), truncated=True) if cut else self.redact(text)

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
