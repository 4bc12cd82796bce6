"""`alk export`: a saved run's repeats as OpenTelemetry traces, one trace a repeat, written to
an OTLP/JSON file or sent to a collector (docs/reports.md, "OpenTelemetry")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from alk import installed_version
from alk.api.read import transcript_intact
from alk.errors import TranscriptError, UsageError
from alk.result.document import RunDocument
from alk.transcript.reader import iter_transcript

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )


@dataclass
class ExportTally:
    """What an export held, and what a reader of it should know it lacks."""

    traces: int = 0
    spans: int = 0
    dropped: int = 0  # spans and span events past a trace's bounds
    rejected: int = 0  # spans the collector said it did not take
    changed: list[str] = field(default_factory=list)  # transcripts that no longer hash right
    unreadable: list[str] = field(default_factory=list)  # missing, or cut by a bad line


def export_otlp(documents: Sequence[RunDocument], out_dir: Path = Path("."), *,
                file: Path | None = None, endpoint: str | None = None,
                headers: dict[str, str] | None = None) -> ExportTally:
    """Every repeat of the runs as a trace: to `file` as OTLP/JSON lines, and/or to the
    collector at `endpoint` over OTLP/HTTP, with `headers`. The file is written whole or not
    at all."""
    from alk.report import otlp

    if file is None and endpoint is None:
        raise UsageError("alk export: say where the traces go: --otlp FILE (OTLP/JSON lines) "
                         "or --otlp-endpoint URL (a collector's OTLP/HTTP address), or both")
    url = otlp.endpoint_url(endpoint) if endpoint is not None else None
    tally = ExportTally()
    if file is not None:
        otlp.write_file(file, _requests(documents, out_dir, tally))
    if url is not None:
        sending = ExportTally()
        rejected = otlp.post(url, _requests(documents, out_dir, sending), headers)
        tally = sending if file is None else tally
        tally.rejected = rejected
    return tally


def _requests(documents: Sequence[RunDocument], out_dir: Path,
              tally: ExportTally) -> Iterator[ExportTraceServiceRequest]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    from alk.report import otlp

    for document in documents:
        resource = Resource(attributes=[
            KeyValue(key=key, value=AnyValue(string_value=value)) for key, value in (
                ("service.name", "alk"), ("service.version", document.alk_version),
                ("alk.run_id", document.run_id), ("alk.lane", document.lane.name),
                ("alk.framework", document.lane.framework),
                ("alk.framework.requirement", document.lane.requirement))])
        entries = (entry for scenario in document.scenarios for entry in scenario.repeats)
        for batch in otlp.batches(_trace(document, entry, out_dir, tally) for entry in entries):
            request = ExportTraceServiceRequest()
            resource_spans = request.resource_spans.add(schema_url=otlp.SCHEMA_URL)
            resource_spans.resource.CopyFrom(resource)
            scope_spans = resource_spans.scope_spans.add(schema_url=otlp.SCHEMA_URL)
            scope_spans.scope.name, scope_spans.scope.version = "alk", installed_version()
            for trace in batch:
                scope_spans.spans.extend(trace.spans)
            yield request


def _trace(document: RunDocument, entry: Any, out_dir: Path, tally: ExportTally) -> Any:
    from alk.report import otlp

    intact = transcript_intact(entry, out_dir)
    if not intact and entry.sha256 and (out_dir / entry.transcript).is_file():
        tally.changed.append(entry.transcript)
    trace = otlp.repeat_trace(document.run_id, document.lane.name, entry,
                              _events(out_dir / entry.transcript, tally), document.started_at,
                              intact=intact)
    tally.traces += 1
    tally.spans += len(trace.spans)
    tally.dropped += trace.dropped_spans + trace.dropped_events
    return trace


def _events(path: Path, tally: ExportTally) -> Iterator[dict[str, Any]]:
    """A transcript's events, up to its first line alk could not have written; none when it is
    missing. Either is counted: the trace then shows less than the repeat did."""
    try:
        yield from iter_transcript(path)
    except (OSError, TranscriptError):
        tally.unreadable.append(str(path))
