"""alk.causes.labels: what happened, in a few words, for every cause code; a fault not recovered
from reads by how the run then ended, from the "; then CODE: " of alk's own detail."""

from __future__ import annotations

import pytest

from alk.causes import Cause
from alk.causes.labels import LABELS, label


def test_every_cause_has_a_short_label_of_its_own() -> None:
    assert set(LABELS) == set(Cause)
    assert len(set(LABELS.values())) == len(LABELS)
    assert max(map(len, LABELS.values())) <= 28  # a bar's text, and a legend's column


@pytest.mark.parametrize("followed, said", [
    ("wrong_stop_reason", "error stop after a fault"),
    ("framework_exception", "crash after a fault"),
    ("nonzero_exit", "crash after a fault"),
    ("timeout", "hang after a fault"),
    ("wrong_files", "fault not recovered from"),  # no ending of its own to name
])
def test_a_fault_not_recovered_from_reads_by_how_the_run_ended(followed, said) -> None:
    detail = f"the gateway injected http_500@call2 and no model call ...; then {followed}: x"
    assert label("fault_unrecovered", detail) == said


def test_only_the_first_then_of_alks_detail_is_read() -> None:
    """What follows the first "; then " quotes the worker (an output, a stderr line): a
    worker cannot name the ending by writing one."""
    detail = ("the worker injected tool#2; then wrong_output: output_equals: expected \"x\", "
              "got \"; then timeout: \"")
    assert label("fault_unrecovered", detail) == "fault not recovered from"
    assert label("effect_repeated", "...; then wrong_stop_reason: x") == \
        "effect repeated on resume"


def test_a_code_this_alk_does_not_know_reads_as_itself() -> None:
    assert label("from_a_newer_alk") == "from_a_newer_alk"
