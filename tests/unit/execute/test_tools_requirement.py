"""A lane with [[tools]] needs mcp 2.x, which alk serves them with: without it, or with the
1.x a framework's MCP client can pull into the same environment, the run is refused before
anything starts, naming the lane, what was found and what to install."""

from __future__ import annotations

import importlib.metadata

import pytest

from alk.errors import LaneError
from alk.execute.model_gateway import _require_mcp


def test_the_installed_mcp_is_taken():
    pytest.importorskip("mcp")
    _require_mcp("lanes/x.toml")


@pytest.mark.parametrize("found, said", [("1.30.0", "which is 1.30.0 here"),
                                         (None, "which is not installed here")])
def test_another_major_or_none_is_refused_by_name(monkeypatch, found, said):
    pytest.importorskip("mcp")

    def version(name: str) -> str:
        if found is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return found

    monkeypatch.setattr(importlib.metadata, "version", version)
    with pytest.raises(LaneError) as error:
        _require_mcp("lanes/x.toml")
    assert str(error.value).startswith(
        f"lanes/x.toml: tools: alk serves a lane's tools with the mcp package 2.x, {said}: "
        "pip install 'alk[tools]'")
