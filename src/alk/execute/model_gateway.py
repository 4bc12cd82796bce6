"""The run's model gateway as a lane opens it (`open_gateway`): started when the lane has a
`[model]`, and in proxy mode checked with the upstream before any worker starts, so that what
is wrong with the lane's model is said once, before anything runs, never as repeats' failures.
"""

from __future__ import annotations

from typing import Any, Mapping

from alk.causes import Cause
from alk.errors import CassetteError, LaneError
from alk.records import Lane
from alk.redaction import Redactor

# How much of a failure's text a void run's detail quotes (as a repeat's, alk.execute.repeat).
DETAIL_CHARS = 500


class GatewayNotStarted(Exception):
    """The run is void before it starts: the cause and detail every repeat of it gets."""

    def __init__(self, cause: Cause, detail: str) -> None:
        super().__init__(detail)
        self.cause, self.detail = cause, detail


def open_gateway(lane: Lane, redactor: Redactor, environ: Mapping[str, str]) -> Any:
    """The run's gateway, or None without `[model]` (aiohttp is imported only with one). A
    model alk cannot serve voids the run (`GatewayNotStarted`); a proxy whose upstream does not
    serve the lane's model, or refuses alk's key, is the lane's error (`LaneError`)."""
    model = lane.model
    if model is None:
        return None
    if lane.tools:
        _require_mcp(lane.path)
    if model.key_env and model.key_env not in environ:
        raise GatewayNotStarted(Cause.ENV_MISSING, f"{lane.path}: model.key_env names "
                                                   f"{model.key_env}, which is not set in alk's "
                                                   "environment; nothing was started")
    from alk.gateway.server import Gateway

    try:
        gateway = Gateway(model, redactor, environ)
    except CassetteError as exc:
        if model.mode != "proxy":
            raise GatewayNotStarted(Cause.HARNESS_ERROR, redactor.cut(
                f"the model gateway could not start: {exc}", DETAIL_CHARS)) from None
        # The cassette to record cannot be written where the lane says: the lane's to fix.
        raise LaneError(f"{lane.path}: model.record: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a cassette that cannot be read voids the run
        raise GatewayNotStarted(Cause.HARNESS_ERROR, redactor.cut(
            f"the model gateway could not start: {exc}", DETAIL_CHARS)) from None
    if model.mode == "proxy":
        _check_upstream(lane, gateway, redactor)
    return gateway


def _check_upstream(lane: Lane, gateway: Any, redactor: Redactor) -> None:
    """alk asks the upstream itself: a model it does not serve or a key it refuses is the
    lane's error; an upstream that does not answer voids the run."""
    from alk.gateway.proxy import first_check

    problem = first_check(gateway)
    if problem is None:
        return
    gateway.close()
    field, why = problem[0], redactor.cut(problem[1], DETAIL_CHARS)
    if field == "upstream":
        raise GatewayNotStarted(Cause.PROVIDER_UNAVAILABLE, f"{why}; nothing was started")
    raise LaneError(f"{lane.path}: model.{field}: {why}")


def _require_mcp(path: object) -> None:
    """alk serves a lane's tools with mcp 2.x's API: a missing package, or the 1.x that a
    framework's MCP client may pull into the same environment, is refused before anything
    runs, not found at the first repeat's preflight."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import InvalidVersion, Version

    try:
        import mcp.server.lowlevel  # noqa: F401 - alk serves the tools with it
        found = version("mcp")
    except (ImportError, PackageNotFoundError):
        found = None
    try:
        major = Version(found).major if found is not None else None
    except InvalidVersion:
        major = None
    if major != 2:
        have = "is not installed here" if found is None else f"is {found} here"
        raise LaneError(f"{path}: tools: alk serves a lane's tools with the mcp package 2.x, "
                        f"which {have}: pip install 'alk[tools]' (or 'mcp>=2.3,<3'); a "
                        "framework whose MCP client needs mcp 1.x runs from a virtual "
                        "environment of its own (docs/tools.md)")
