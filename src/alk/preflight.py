"""The version preflight: does the framework a worker reports satisfy the lane? Pure."""

from __future__ import annotations

from typing import Any, Mapping

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from alk.causes import Cause
from alk.records import Lane, Preflight


def check_ready(lane: Lane, ready: Mapping[str, Any]) -> Preflight:
    """Judges a `framework_ready` payload against the lane's framework and PEP 440 requirement."""
    framework = ready.get("framework")
    version = ready.get("framework_version")
    framework = framework if isinstance(framework, str) else None
    version = version if isinstance(version, str) else None
    if framework != lane.framework:
        return Preflight(False, framework, version, Cause.FRAMEWORK_MISMATCH,
                         f"worker reports framework {framework!r}, lane {lane.name!r} "
                         f"expects {lane.framework!r}")
    try:
        parsed = Version(version or "")
    except InvalidVersion:
        return Preflight(False, framework, version, Cause.VERSION_INVALID,
                         f"framework_version {version!r} is not a PEP 440 version")
    # `installed=True`: a pre-release that is actually installed is judged by the specifier
    # alone, as pip does for installed distributions.
    if not SpecifierSet(lane.requirement).contains(parsed, installed=True):
        return Preflight(False, framework, version, Cause.VERSION_UNSUPPORTED,
                         f"{framework} {version} does not satisfy the lane's requirement "
                         f"{lane.requirement!r}")
    return Preflight(True, framework, version)
