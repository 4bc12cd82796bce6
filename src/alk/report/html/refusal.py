"""What the run page says of a lane that ran no repeat: the preflight refused its worker, or alk
could not start it (a missing variable, an isolation the machine lacks); why, in the words
the run recorded, what to do about it from the cause catalogue, the scenarios not run, and
the preflight's transcript where there is one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from alk.causes import CATALOGUE
from alk.layout import probe_transcript
from alk.report.html.excerpts import transcript_link
from alk.report.safe_text import DASH
from alk.result.document import RunDocument

NOT_RUN_NAMED = 20  # scenarios of a lane that never ran, named in its panel


def refused_lane(document: RunDocument) -> dict[str, Any]:
    """The panel's facts: the cause, its detail, what to do, the scenarios not run."""
    gate = document.gate
    info = CATALOGUE.get(gate.cause) if gate.cause else None  # type: ignore[call-overload]
    ids = [s.id for s in document.scenarios]
    return {"cause": gate.cause or "preflight_failed", "detail": gate.detail or DASH,
            "action": info.action if info is not None else None,
            "scenarios": ids[:NOT_RUN_NAMED], "more": max(0, len(ids) - NOT_RUN_NAMED)}


def with_probes(lanes: list[dict[str, Any]], documents: Sequence[RunDocument], folder: Path,
                out_dir: Path) -> list[dict[str, Any]]:
    """Each refused lane's link to its preflight's transcript, where the file is."""
    for lane, document in zip(lanes, documents):
        probe = probe_transcript(document.run_id)
        lane["probe"] = (transcript_link(probe.as_posix(), folder, out_dir)
                         if lane["refused"] and (out_dir / probe).is_file() else None)
    return lanes
