"""Redaction of a lane's secrets in the escaped forms alk writes text in, not only the raw one."""

from __future__ import annotations

import json

import pytest

from alk.redaction import MASK, Redactor


@pytest.mark.parametrize(("secret", "text", "written"), [
    # JSON writes a form feed as \f: "\f" + "z-key-1234" comes back as the secret "fz-key-1234".
    ("fz-key-1234", "done\fz-key-1234", lambda text: json.dumps(text)),
    ("nkey-1234", "a\nkey-1234 b", lambda text: json.dumps(text, ensure_ascii=False)),
    # ASCII JSON writes U+202E as \u202e.
    ("u202eKEY9", "a\u202eKEY9", lambda text: json.dumps(text)),
    # repr writes a form feed as \x0c.
    ("x0cKEY99", "a\x0cKEY99", repr),
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
