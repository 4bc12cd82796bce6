"""A served tool's effect in the workspace (alk.gateway.effects): made by alk while a hostile
worker owns the folder, so whatever it put at the path is refused, never followed."""

from __future__ import annotations

import json
import os

import pytest

from alk.gateway import effects
from alk.gateway.effects import EffectRefused, append_effect

PATH = "lab-output/effects.json"


def test_each_call_appends_its_arguments_and_says_how_many(tmp_path):
    assert append_effect(tmp_path, PATH, {"order": "742"}) == 1
    assert append_effect(tmp_path, PATH, {"order": "743"}) == 2
    assert json.loads((tmp_path / PATH).read_text()) == [{"order": "742"}, {"order": "743"}]
    assert [p.name for p in (tmp_path / "lab-output").iterdir()] == ["effects.json"]


def test_a_symlink_at_the_file_is_refused_and_what_it_points_at_untouched(tmp_path):
    outside = tmp_path / "alks-own.json"
    outside.write_text("[]")
    workspace = tmp_path / "ws"
    (workspace / "lab-output").mkdir(parents=True)
    os.symlink(outside, workspace / PATH)
    with pytest.raises(EffectRefused, match="cannot be read"):
        append_effect(workspace, PATH, {"order": "742"})
    assert outside.read_text() == "[]"


def test_a_symlinked_folder_is_never_entered(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.symlink(elsewhere, workspace / "lab-output")
    with pytest.raises(EffectRefused, match="not a folder alk may enter"):
        append_effect(workspace, PATH, {"order": "742"})
    assert list(elsewhere.iterdir()) == []


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    (tmp_path / "lab-output").mkdir()
    os.mkfifo(tmp_path / PATH)
    with pytest.raises(EffectRefused, match="not a regular file"):
        append_effect(tmp_path, PATH, {"order": "742"})


@pytest.mark.parametrize("content, why", [("{}", "not an array"), ("[1,", "not JSON")])
def test_a_file_that_is_no_json_array_is_refused_and_kept(tmp_path, content, why):
    (tmp_path / "lab-output").mkdir()
    (tmp_path / PATH).write_text(content)
    with pytest.raises(EffectRefused, match=why):
        append_effect(tmp_path, PATH, {"order": "742"})
    assert (tmp_path / PATH).read_text() == content


def test_a_file_past_the_bound_is_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(effects, "MAX_EFFECTS_BYTES", 64)
    (tmp_path / "lab-output").mkdir()
    (tmp_path / PATH).write_text(json.dumps(["x" * 100]))
    with pytest.raises(EffectRefused, match="over"):
        append_effect(tmp_path, PATH, {"order": "742"})


def test_past_the_most_effects_a_call_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(effects, "MAX_EFFECTS", 2)
    append_effect(tmp_path, PATH, 1)
    append_effect(tmp_path, PATH, 2)
    with pytest.raises(EffectRefused, match="alk's most"):
        append_effect(tmp_path, PATH, 3)
