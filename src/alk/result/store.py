"""Where runs are kept: reading and writing `reports/RUN_ID/result.json`.

A result is written atomically (a reader never sees half a file) and redacted as a whole, and
read back as the typed record (`alk.result.document`), so that `alk report RUN_ID` shows exactly
what `alk run` showed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from alk.errors import ResultFormatError, ResumeError, RunNotFoundError, TranscriptError
from alk.files import write_atomically
from alk.layout import GROUP_NAME, JOURNAL_NAME, REPORTS_DIR, RESULT_NAME, is_run_id, result_path
from alk.redaction import Redactor
from alk.result.document import RunDocument, from_json, to_json


def write_document(path: Path, document: RunDocument, redactor: Redactor) -> RunDocument:
    """Writes the redacted document and returns it as written."""
    # Strict JSON (no NaN or Infinity, which jq, browsers and Go reject), ASCII only: no
    # control or bidi character a worker sent reaches a terminal that shows the file.
    value = _redacted(to_json(document), redactor)
    text = json.dumps(value, ensure_ascii=True, allow_nan=False, indent=1)
    write_atomically(path, (text + "\n").encode("ascii"))
    return from_json(value, str(path))


# Fields whose values are alk's own codes (an outcome, a cause, a verdict, a failure layer).
# With the document's keys, they are alk's fixed vocabulary, never made from a secret: a lane
# whose secret happens to spell one (MODE=pass) must not get a "[REDACTED]" verdict.
_CODE_FIELDS = frozenset({"schema", "status", "outcome", "cause", "verdict", "containment",
                          "network", "filesystem", "layers", "causes", "verdicts", "stopped",
                          "executor"})
# The one place a worker shapes keys: its own claim, any JSON it likes.
_WORKERS_OWN = "claimed"


def _redacted(value: Any, redactor: Redactor, field: str = "") -> Any:
    """The document with every secret masked in what it quotes, and alk's own words kept."""
    if field == _WORKERS_OWN:
        return redactor.redact_value(value)
    if isinstance(value, dict):
        return {key: _redacted(item, redactor, key) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(item, redactor, field) for item in value]
    if isinstance(value, str) and field in _CODE_FIELDS:
        return value
    return redactor.redact_value(value)


def read_document(out_dir: Path, run_id: str) -> RunDocument:
    """The record in reports/RUN_ID/result.json, which must say it is run RUN_ID: the reports
    written from it go to the folder its run id names, never elsewhere."""
    if not is_run_id(run_id):
        raise RunNotFoundError(f"{run_id!r} is not a run id: a run id is a folder name under "
                               "reports/ (RUN, or RUN/LANE for a lane of a run of several)")
    path = result_path(out_dir, run_id)
    if not path.is_file() and (path.parent / GROUP_NAME).is_file():
        lanes = sorted(p.parent.name for p in path.parent.glob(f"*/{RESULT_NAME}"))
        raise RunNotFoundError(f"run '{run_id}' holds several lanes: name one as "
                               f"{run_id}/LANE (its lanes: {', '.join(lanes) or 'none yet'})")
    if not path.is_file():
        raise RunNotFoundError(f"no result for run '{run_id}': {path} does not exist "
                               "(run ids are the folder names under reports/)")
    try:
        value = json.loads(path.read_text(encoding="utf-8"), parse_constant=_not_json)
    except (OSError, ValueError) as exc:
        raise TranscriptError(f"{path}: not a readable result document: {exc}") from None
    except RecursionError:
        raise TranscriptError(f"{path}: not a readable result document: nested too deep "
                              "(alk writes a few levels)") from None
    document = from_json(value, str(path))
    if document.run_id != run_id:
        raise ResultFormatError(f"{path}: run_id is {document.run_id!r}, expected {run_id!r} "
                                "(the folder it is in): the file was moved or edited; put it "
                                "back in its own folder")
    return document


def _not_json(constant: str) -> float:
    # NaN and Infinity are not JSON (alk never writes them): a file that holds one was edited.
    raise ValueError(f"{constant} is not a JSON number")


def latest_run_id(out_dir: Path) -> str:
    reports = out_dir / REPORTS_DIR
    # A run of several lanes is a folder of lanes with a group.json (alk.api.run_lanes).
    runs = sorted({p.parent.name for name in (RESULT_NAME, GROUP_NAME)
                   for p in reports.glob(f"*/{name}")}) if reports.is_dir() else []
    if not runs:
        raise RunNotFoundError(f"no runs in {reports}/; start one with `alk run --lane NAME`")
    return runs[-1]


def check_is_a_run(run_id: str, out_dir: Path) -> None:
    """For `alk run --resume`: raises ResumeError, before anything is written, for a run id that names no run: a typo
    or a folder of something else is not a run of another alk's."""
    runs = out_dir / REPORTS_DIR
    listing = "`alk runs`" if out_dir == Path(".") else f"`alk runs --out {out_dir}`"
    if not is_run_id(run_id):
        raise ResumeError(f"--resume {run_id!r} is not a run id: a run id is a folder name under "
                          f"{runs}/ (RUN, or RUN/LANE for a lane of a run of several); {listing} "
                          "lists them")
    folder = runs / run_id
    if not folder.is_dir():
        raise ResumeError(f"--resume {run_id!r}: no such run, {folder} does not exist; "
                          f"{listing} lists the runs there are")
    if not any((folder / name).is_file() for name in (JOURNAL_NAME, GROUP_NAME, RESULT_NAME)):
        raise ResumeError(f"--resume {run_id!r}: {folder} is not a run, it holds no "
                          f"{JOURNAL_NAME}, {GROUP_NAME} or {RESULT_NAME}; {listing} lists the "
                          "runs there are")
