"""The version preflight: does the framework a worker reports satisfy the lane? Pure."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from alk.causes import Cause
from alk.records import Lane, Preflight
from alk.redaction import Redactor

# A framework's name or version longer than this is not one: it is kept as a bounded excerpt
# (a worker must not fill the report with a million-character "version").
MAX_IDENTITY_CHARS = 128


def check_ready(lane: Lane, ready: Mapping[str, Any], redactor: Redactor = Redactor()
                ) -> Preflight:
    """Judges a `framework_ready` payload against the lane's framework and PEP 440 requirement."""
    raw_framework, raw_version = ready.get("framework"), ready.get("framework_version")
    framework = _kept(raw_framework, redactor)
    version = _kept(raw_version, redactor)
    if framework != lane.framework:
        return Preflight(False, framework, version, Cause.FRAMEWORK_MISMATCH,
                         f"worker reports framework {framework!r}, lane {lane.name!r} "
                         f"expects {lane.framework!r}")
    if isinstance(raw_version, str) and len(raw_version) > MAX_IDENTITY_CHARS:
        return Preflight(False, framework, version, Cause.VERSION_INVALID,
                         f"framework_version is {len(raw_version):,} characters long (at most "
                         f"{MAX_IDENTITY_CHARS}): {version!r}")
    try:
        # The verdict is taken on what the worker sent; `version` is what alk keeps of it.
        parsed = Version(raw_version if isinstance(raw_version, str) else "")
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


Judge = Callable[[Mapping[str, Any]], Preflight]


def same_identity(first: Preflight, gate: Judge) -> Judge:
    """The gate of every repeat once the probe passed: the worker must report the framework
    and version the probe reported, or it is a failure of the framework's
    (`identity_changed`), never a void. A worker that could make some repeats void by
    reporting another version could choose which of its failures are scored."""

    def judge(ready: Mapping[str, Any]) -> Preflight:
        verdict = gate(ready)
        if (verdict.framework, verdict.version) == (first.framework, first.version):
            return verdict
        return Preflight(False, verdict.framework, verdict.version, Cause.IDENTITY_CHANGED,
                         f"this start reports {verdict.framework!r} {verdict.version!r}; the "
                         f"run's probe reported {first.framework!r} {first.version!r}")

    return judge


def _kept(value: Any, redactor: Redactor) -> str | None:
    if not isinstance(value, str):
        return None
    return redactor.bounded(value, MAX_IDENTITY_CHARS)
