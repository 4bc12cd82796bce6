"""Redaction of a lane's secrets in the escaped forms alk writes text in, not only the raw one,
and in the forms a worker can turn them into: reversed, hex, base64 at any alignment,
percent-encoded, any character a JSON escape; and no piece of any of them left at a cut."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import struct
import urllib.parse

import pytest

from alk.redaction import DIGEST_CHARS, ELLIPSIS, MASK, MIN_SECRET_CHARS, Redactor


@pytest.mark.parametrize(("secret", "text", "written"), [
    # JSON writes a form feed as \f: "\f" + "z-key-1234" comes back as the secret "fz-key-1234".
    ("fz-key-1234", "done\fz-key-1234", lambda text: json.dumps(text)),
    ("nkey-1234", "a\nkey-1234 b", lambda text: json.dumps(text, ensure_ascii=False)),
    # ASCII JSON writes U+202E as \u202e.
    ("u202eKEY9", "a\u202eKEY9", lambda text: json.dumps(text)),
    # repr writes a form feed as \x0c.
    ("x0cKEY99", "a\x0cKEY99", repr),
    # JSON writes a quote as \": a secret that begins with a backslash takes it up.
    ('\\"abc-1234', 'a "abc-1234', lambda text: json.dumps(text)),
])
def test_a_secret_spelled_by_an_escape_and_the_text_after_it_is_masked(secret, text, written):
    assert secret not in text and secret in written(text)  # the attack, before redaction
    redacted = Redactor([secret]).redact(text)
    assert secret not in written(redacted) and MASK in redacted
    assert redacted.startswith("done" if text.startswith("done") else "a")


def test_text_with_escapes_but_no_secret_is_left_alone():
    redactor = Redactor(["fz-key-1234"])
    for text in ("done\f", "a\nb \u202e \\f z-key", "fz-key-123 (one short)"):
        assert redactor.redact(text) == text


# --- the forms a worker can turn a value into -----------------------------------------------

SHORT = "k3Y9"  # at the minimum length
LONG = "sk-proj-" + "Zx81_kq0LmN3-vT6pQwE2rYuI9oA5sDfGhJ" * 6  # 218 characters
ODD = 'pä"ss wörd/🔑'  # a quote, a space, a slash, non-ASCII and a character past the BMP
assert len(SHORT) == MIN_SECRET_CHARS


def _percent_all(value: str, case=str.upper) -> str:
    return "".join("%" + case(f"{byte:02x}") for byte in value.encode())


def _json_escape_all(value: str, case=str.lower) -> str:
    data = value.encode("utf-16-le")  # JSON escapes a character past the BMP as a pair
    units = struct.unpack(f"<{len(data) // 2}H", data)
    return "".join("\\u" + case(f"{unit:04x}") for unit in units)


TRANSFORMS = {
    "raw": lambda v: v,
    "reversed": lambda v: v[::-1],
    "hex": lambda v: v.encode().hex(),
    "HEX": lambda v: v.encode().hex().upper(),
    "hex reversed": lambda v: v.encode().hex()[::-1],
    "hex of the reversed": lambda v: v[::-1].encode().hex(),
    # Its padding holds nothing of the value: it is left, where there is any.
    "base64": lambda v: base64.b64encode(v.encode()).decode().rstrip("="),
    "url-safe base64": lambda v: base64.urlsafe_b64encode(v.encode()).decode().rstrip("="),
    "base64 reversed": lambda v: base64.b64encode(v.encode()).decode().rstrip("=")[::-1],
    "base64 of the reversed": lambda v: base64.b64encode(v[::-1].encode()).decode().rstrip("="),
    "quote": lambda v: urllib.parse.quote(v, safe=""),
    "quote, lower hex": lambda v: re.sub("%..", lambda m: m[0].lower(),
                                         urllib.parse.quote(v, safe="")),
    "quote_plus": urllib.parse.quote_plus,
    "every byte percent-encoded": _percent_all,
    "every byte percent-encoded, lower": lambda v: _percent_all(v, str.lower),
    "every character a JSON escape": _json_escape_all,
    "every character a JSON escape, upper": lambda v: _json_escape_all(v, str.upper),
    "the first character a JSON escape": lambda v: _json_escape_all(v[0]) + v[1:],
    "the last character a JSON escape": lambda v: v[:-1] + _json_escape_all(v[-1]),
    "every other character a JSON escape": lambda v: "".join(
        _json_escape_all(c) if i % 2 else c for i, c in enumerate(v)),
    "every character as repr's \\x": lambda v: "".join(
        f"\\x{ord(c):02x}" if ord(c) < 256 else c for c in v),
    "JSON-escaped": lambda v: json.dumps(v)[1:-1],
    "JSON-escaped, reversed": lambda v: json.dumps(v[::-1])[1:-1],
}


@pytest.mark.parametrize("secret", [SHORT, LONG, ODD], ids=["short", "long", "odd"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_every_transform_of_a_secret_is_masked_inside_larger_text(secret, transform):
    form = TRANSFORMS[transform](secret)
    text = f"Traceback: the value was {form}, said the worker"
    assert Redactor([secret]).redact(text) == f"Traceback: the value was {MASK}, said the worker"


def _fixed_base64(value: str, prefix: int) -> str:
    """The base64 characters made of `value`'s bits alone, after `prefix` bytes."""
    data = value.encode()
    return base64.b64encode(bytes(prefix) + data).decode()[
        -(-8 * prefix // 6):8 * (prefix + len(data)) // 6]


def _fixed_span(prefix: int, secret: int) -> tuple[int, int]:
    """The base64 characters that hold any bit of a `secret`-byte value after `prefix` bytes:
    the partial ones at either end included."""
    return 8 * prefix // 6, -(-8 * (prefix + secret) // 6)


@pytest.mark.parametrize("secret", [SHORT, LONG, ODD], ids=["short", "long", "odd"])
@pytest.mark.parametrize("prefix", range(6))  # each of the three alignments, twice
@pytest.mark.parametrize("suffix", range(4))
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_base64_of_a_longer_text_is_masked_over_every_character_that_holds_a_bit_of_it(
        secret, prefix, suffix, encode):
    data = secret.encode()
    encoded = encode(b"P" * prefix + data + b"S" * suffix).decode()
    start, end = _fixed_span(prefix, len(data))
    for blob in (encoded, encoded.rstrip("=")):
        redacted = Redactor([secret]).redact(f"Authorization: Basic {blob}.")
        assert redacted == f"Authorization: Basic {blob[:start]}{MASK}{blob[end:]}."


def test_a_bearer_header_encoded_whole_keeps_none_of_the_key():
    key = "tok-" + "0123456789abcdef" * 3
    blob = base64.b64encode(f"Authorization: Bearer {key}\r\n".encode()).decode()
    redacted = Redactor([key]).redact(f'{{"headers": "{blob}"}}')
    start, end = _fixed_span(len("Authorization: Bearer "), len(key))
    assert redacted == f'{{"headers": "{blob[:start]}{MASK}{blob[end:]}"}}'
    assert base64.b64decode(blob[:start - start % 4]).decode().startswith("Authorization")


PEM = ("-----BEGIN PRIVATE KEY-----\n"
       "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
       "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
       "-----END PRIVATE KEY-----")


@pytest.mark.parametrize("encode", [lambda b: base64.b64encode(b).decode(), bytes.hex,
                                    lambda b: bytes.hex(b).upper()])
def test_a_secret_of_several_lines_encoded_whole_is_masked_line_by_line(encode):
    redacted = Redactor([PEM]).redact(f"key: {encode(PEM.encode())} end")
    for line in PEM.splitlines():
        data = line.encode()
        for shift in range(3):  # wherever the line fell in the encoded whole
            fixed = _fixed_base64(line, shift)
            assert fixed[:12] not in redacted and fixed[-12:] not in redacted
        assert data.hex()[:12] not in redacted.lower()
    assert redacted.startswith("key: ") and redacted.endswith(" end")


def test_a_value_of_several_short_lines_is_masked_and_cut_whole():
    redactor = Redactor(["ab\ncd"])  # no line of it is long enough to be a secret
    assert redactor.redact("x ab\ncd y") == f"x {MASK} y"
    assert redactor.cut("x ab\nc", 10, truncated=True) == "x " + ELLIPSIS
    assert redactor.tail("b\ncd y", 10, truncated=True) == ELLIPSIS + " y"


CUT_FORMS = {
    "raw": lambda v: v,
    "reversed": lambda v: v[::-1],
    "hex": lambda v: v.encode().hex(),
    "HEX": lambda v: v.encode().hex().upper(),
    # Base64 where no character mixes in a neighbour's bits: at each alignment.
    **{f"base64 after {n} bytes": (lambda n: lambda v: _fixed_base64(v, n))(n) for n in range(3)},
    "url-safe base64 reversed": lambda v: _fixed_base64(v, 0).translate(
        str.maketrans("+/", "-_"))[::-1],
    "percent-encoded": _percent_all,
    "JSON escapes": _json_escape_all,
}


@pytest.mark.parametrize("secret", [SHORT, LONG, ODD], ids=["short", "long", "odd"])
@pytest.mark.parametrize("form", CUT_FORMS)
def test_no_cut_leaves_a_piece_of_any_form(secret, form):
    redactor = Redactor([secret])
    spelled = CUT_FORMS[form](secret)
    for size in sorted({*range(1, min(9, len(spelled))), len(spelled) - 1,
                        *range(1, len(spelled), len(spelled) // 20 + 1)}):
        # The caller cut the text inside the form, at its end or at its start.
        head, tail = "head words: " + spelled[:size], spelled[-size:] + " :tail words"
        assert redactor.cut(head, len(head), truncated=True) == "head words: " + ELLIPSIS
        assert redactor.tail(tail, len(tail), truncated=True) == ELLIPSIS + " :tail words"
        assert redactor.bounded(head + "z" * 100, len(head) + DIGEST_CHARS + 1).startswith(
            "head words: " + ELLIPSIS)
        # Or alk cuts it, however far into the form the limit falls: redacted first.
        whole, redacted = (f"head words: {text} more" for text in (spelled, MASK))
        limit = len("head words: ") + size
        expected = redacted if len(redacted) <= limit else redacted[:limit] + ELLIPSIS
        assert redactor.cut(whole, limit) == expected
        assert redactor.excerpt(whole.encode(), limit) == expected


@pytest.mark.parametrize("secret", [SHORT, "k3Y"], ids=["at the minimum", "below it"])
def test_ordinary_text_keeps_its_hex_base64_and_escapes(secret):
    rng = random.Random(23)
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/srv/app/worker.py", line 1234, in run',
        *(hashlib.sha256(bytes([n])).hexdigest() for n in range(64)),
        *(hashlib.sha256(bytes([n])).hexdigest().upper() for n in range(16)),
        *(base64.b64encode(rng.randbytes(90)).decode() for _ in range(32)),
        *(base64.urlsafe_b64encode(rng.randbytes(60)).decode() for _ in range(16)),
        "GET /search?q=caf%C3%A9%20au%20lait&page=2 100% done",
        json.dumps({"note": "caf\u00e9 \u2014 d\u00e9j\u00e0 vu", "k": "\x01"}),
        "The quick brown fox jumps over the lazy dog, 0123456789 times.",
    ])
    redactor = Redactor([secret])
    assert redactor.redact(text) == text
    # A value below the minimum is no secret in any form.
    if len(secret) < MIN_SECRET_CHARS:
        assert not redactor
        spelled = f"{secret.encode().hex()} {base64.b64encode(secret.encode()).decode()}"
        assert redactor.redact(spelled) == spelled
