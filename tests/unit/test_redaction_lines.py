"""A flood's lines redacted at once, and the fixed forms looked for only at their anchors, give
exactly what a line at a time and the expression's own search give: the same masks, the same
transcript, byte for byte, whatever the lines hold."""

from __future__ import annotations

import base64
import json
import random
import urllib.parse
from pathlib import Path

import pytest

from alk.redaction import Redactor
from alk.transcript.writer import TranscriptWriter

# A token; one that begins with "n" (a newline's escape takes it up), "f" (a form feed's) or
# "u202e" (a character's); one a quote's escape takes up; one of two lines; two that overlap,
# one that overlaps itself; a short one whose anchors are common letters.
SECRETS = [["benchmark-token-0000"], ["nkey-Zx81-0000"], ["fz-key-1234"], ["u202eKEY9"],
           ['\\"abc-1234'], ["line-one-AAAA\nline-two-BBBB"], ["abcd-efgh-1234", "efgh-1234-wxyz"],
           ["aaaa-aaaa"], ["tone"]]
# What a line holds beside them: plain text, and what escapes, is not ASCII or not printable.
PLAIN = ["z" * 300, "the quick brown fox ", " ", "n", "0", "[REDACTED]", "tone", "z-key-1234",
         "a \"abc-1234", "abcd-efgh-1234-wxyz", "aaaa-aaaa-aaaa", "y" * 40, "w" * 1500]
OTHER = ["\\", "'", "\t", "\f", "\x7f", "\r", "é", "\u202e", "\ufffd", "%", "+"]


def forms(secret: str) -> list[str]:
    value = secret.splitlines()[0]
    data = value.encode()
    return [value, value[::-1], data.hex(), data.hex().upper(), base64.b64encode(data).decode(),
            base64.b64encode(b"x" + data).decode(), base64.urlsafe_b64encode(b"xy" + data).decode(),
            json.dumps(value)[1:-1], "".join(f"\\u{ord(c):04x}" for c in value[:3]) + value[3:],
            urllib.parse.quote(value[:2], safe="") + value[2:], "%" + value[1:], value[:-2],
            secret]


def lines(rng: random.Random, secrets: list[str]) -> list[str]:
    """Lines of the secrets' forms and other text: plain, or with a few controls (each of which
    leaves alk's escapes of a line unsafe or not), or with anything."""
    kind = rng.choice(["plain", "controls", "any"])
    pieces = PLAIN + {"plain": [], "controls": ["\t", "\f", "\x7f", "\r", "é", "\u202eKEY9"],
                      "any": OTHER}[kind]
    made = []
    for _ in range(rng.randint(1, 40)):
        line = []
        for _ in range(rng.randint(0, 6)):
            ways = [form for form in forms(rng.choice(secrets))
                    if kind == "any" or not any(c in form for c in "\\%")]
            line.append(rng.choice(ways) if rng.random() < 0.4 else rng.choice(pieces))
        made.append("".join(line).replace("\n", " " if rng.random() < 0.5 else "\n"))
    return "\n".join(made).split("\n")


@pytest.mark.parametrize("secrets", SECRETS, ids=lambda secrets: secrets[0][:8])
def test_lines_at_once_are_redacted_as_each_line_alone(secrets):
    redactor, rng = Redactor(secrets), random.Random(29)
    for _ in range(400):
        text = "\n".join(lines(rng, secrets))
        assert redactor.redact_lines(text) == "\n".join(map(redactor.redact, text.split("\n")))


@pytest.mark.parametrize("secrets", SECRETS, ids=lambda secrets: secrets[0][:8])
def test_the_forms_found_at_their_anchors_are_those_the_search_finds(secrets):
    redactor, rng = Redactor(secrets), random.Random(7)
    pattern = redactor._fixed[0]
    for _ in range(400):
        text = "\n".join(lines(rng, secrets)) * rng.choice([1, 1, 30])  # dense, or sparse
        assert [m.span() for m in redactor._fixed_matches(text)] == \
            [m.span() for m in pattern.finditer(text)]


def transcript(path: Path, secrets: list[str], batches: list[list[tuple[bytes, bool]]],
               at_once: bool, cap: int) -> bytes:
    writer = TranscriptWriter(path, cap, Redactor(secrets), clock=lambda: 0.25)
    for batch in batches:
        for part in [batch] if at_once else [[line] for line in batch]:
            writer.stderr_lines(part)
    writer.close()
    return path.read_bytes()


@pytest.mark.parametrize("cap", [4096, 64 * 1024, 16 * 1024 * 1024])
def test_a_transcript_of_lines_at_once_is_that_of_one_line_at_a_time(tmp_path, cap):
    rng = random.Random(cap)
    for round in range(30):
        secrets = rng.choice(SECRETS)
        batches = []
        for _ in range(rng.randint(1, 12)):
            raws = [line.encode("utf-8", "surrogatepass") for line in lines(rng, secrets)]
            raws += [b"\xe2\x82", b"bad \xff\xfe byte", b"\xf0\x9f\x98"] * (rng.random() < 0.3)
            rng.shuffle(raws)
            batches.append([(raw, rng.random() < 0.05) for raw in raws])
        expected = transcript(tmp_path / f"one-{round}", secrets, batches, False, cap)
        assert transcript(tmp_path / f"all-{round}", secrets, batches, True, cap) == expected
