"""What to do about a failure, fitted to the fault it followed: a tool that raised calls for
other advice than a 429 on the wire. Read from the detail alk's attribution wrote, whose
opening (before "; then ", where the failure that followed is told in its own words, the
worker's among them) names each fault in the words below. A kill has causes of its own
(effect_repeated, state_lost), and their own advice.
"""

from __future__ import annotations

from enum import StrEnum

from alk.causes import CATALOGUE, Cause

# How alk's attribution opens a detail that names a fault (alk.attribution.outcome, .layers),
# and how it joins the failure that followed.
WIRE_FAULT = "the gateway injected "
WORKER_FAULT = "the worker injected "
THEN = "; then "


class FaultSite(StrEnum):
    """Where a fault was injected."""

    WIRE = "wire"  # by alk's gateway, on the model's wire
    SERVED_TOOL = "served_tool"  # by alk's tool gateway, at a tool it serves over MCP
    TOOL = "tool"  # by the worker, at a tool (a declared fault's point names a tool)
    MODEL = "model"  # by the worker, at a model call (its scripted model raised)


_BY_SITE: dict[Cause, dict[FaultSite, str]] = {
    Cause.FAULT_UNRECOVERED: {
        FaultSite.WIRE: "Read the transcript's model/call events around the wire fault: did "
                        "the client retry, honour Retry-After, or raise? Configure the "
                        "framework's (or its HTTP client's) retries, or report it upstream.",
        FaultSite.SERVED_TOOL: "alk made a tool it serves over MCP fail (the fault's kind is "
                               "in its name: error, timeout, slow, malformed, duplicate): read "
                               "the transcript's tool events from the fault on. Did the "
                               "framework's MCP client give up on a call that never answered, "
                               "hand the error back to the model, or end the run? Set its MCP "
                               "client's timeout or error handling, or report it upstream.",
        FaultSite.TOOL: "A tool raised and the run ended there: read the transcript's tool "
                        "events from the fault on. Does the framework hand a tool's error back "
                        "to the model (as an error result, or a retry), or let it end the run? "
                        "Use its option for tool errors if it has one, or report it upstream; "
                        "the worker raised it on purpose, so do not catch it there.",
        FaultSite.MODEL: "A model call raised and the run ended there: read the transcript's "
                         "events after its framework/fault event. Did the framework retry the "
                         "call (the fault says whether it was retryable), or stop? Configure "
                         "its retries, or report it upstream.",
    },
}


def advice(cause: str, detail: str = "") -> str:
    """What to do about a repeat of `cause` whose detail is `detail`: the advice for each place
    a fault it names was injected, when the cause has such advice, else the catalogue's
    action. A code this alk does not know has none: ""."""
    try:
        known = Cause(cause)
    except ValueError:
        return ""
    by_site = _BY_SITE.get(known, {})
    fitted = [by_site[site] for site in fault_sites(detail) if site in by_site]
    return " ".join(fitted) or CATALOGUE[known].action


def by_site(cause: str) -> tuple[tuple[FaultSite, str], ...]:
    """The advice a cause gives for each place a fault was injected; () for most causes."""
    try:
        return tuple(_BY_SITE.get(Cause(cause), {}).items())
    except ValueError:
        return ()


def fault_sites(detail: str) -> tuple[FaultSite, ...]:
    """Where the faults a detail names were injected, in the order of FaultSite; a worker's
    point that names neither a tool nor a model adds nothing."""
    found: set[FaultSite] = set()
    for part in detail.split(THEN, 1)[0].split("; "):
        if part.startswith(WIRE_FAULT):
            # A served tool's fault is KIND@TOOL#N, the wire's KIND@callN.
            for label in part.removeprefix(WIRE_FAULT).split(" and ")[0].split(", "):
                found.add(FaultSite.SERVED_TOOL if "#" in label else FaultSite.WIRE)
        elif part.startswith(WORKER_FAULT):
            for fired in part.removeprefix(WORKER_FAULT).split(", "):
                point = fired.rpartition("#")[0] or fired
                if "tool" in point:
                    found.add(FaultSite.TOOL)
                elif "model" in point:
                    found.add(FaultSite.MODEL)
    return tuple(site for site in FaultSite if site in found)
