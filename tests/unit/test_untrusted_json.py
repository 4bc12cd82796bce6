"""alk.untrusted_json: the count of values taken before parsing, strings left out of it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alk import untrusted_json
from alk.untrusted_json import Rejected, parse, values_outside_strings

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                    max_leaves=30)


def made(value) -> int:
    """How many values json.loads makes of it, keys left out."""
    if isinstance(value, dict):
        return 1 + sum(made(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(made(v) for v in value)
    return 1


@given(JSON, st.booleans())
def test_the_count_is_never_less_than_what_json_makes(value, ascii_only) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert values_outside_strings(data) >= made(value)


def test_commas_and_brackets_inside_strings_are_text_not_values() -> None:
    text = json.dumps({"messages": [{"role": "user", "content": "a, [b], {c}, \\\", d" * 5000}]})
    assert values_outside_strings(text.encode()) == 3 + 1 + 1
    assert parse(text, max_values=10)["messages"][0]["role"] == "user"


def test_many_empty_objects_are_refused_before_they_are_parsed() -> None:
    with pytest.raises(Rejected) as refused:
        parse(b"[" + b"{}," * 100_000 + b"{}]", max_values=100_000)
    assert refused.value.kind == "too_many"


def test_a_string_that_never_ends_hides_nothing_before_it() -> None:
    data = b"[" + b"{}," * 1000 + b'"never ends, [,,,'
    assert values_outside_strings(data) > 2000


def test_utf16_is_counted_with_the_commas_of_its_strings() -> None:
    # An escaped quote in UTF-16 is not one in bytes: its strings are not looked into.
    data = json.dumps(["\"", *[{}] * 50, "x"]).encode("utf-16")
    assert json.loads(data)[1] == {}
    assert values_outside_strings(data) >= 52
    with pytest.raises(Rejected):
        untrusted_json.parse(data, max_values=40)
