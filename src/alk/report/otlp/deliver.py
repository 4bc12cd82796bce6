"""Traces out: as OTLP/JSON lines in a file, or as OTLP/HTTP protobuf to a collector.

The file holds one `ExportTraceServiceRequest` a line, in OTLP's JSON encoding (the one the
OpenTelemetry Collector's file exporter writes and its `otlpjsonfile` receiver reads): protobuf's
JSON mapping with field names in lowerCamelCase, enums as integers, and trace and span ids as
hex rather than base64, as the OTLP specification asks.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterable, Iterator

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from alk.errors import UsageError
from alk.files import write_atomically

# What one request carries at most, in traces and in bytes: a collector refuses a large body
# (the Collector's default limit is 20 MiB); a trace is at most 4 MiB (`spans.MAX_TRACE_BYTES`).
TRACES_PER_REQUEST = 50
REQUEST_BYTES = 8 * 1024 * 1024
POST_TIMEOUT_S = 30
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def json_line(request: ExportTraceServiceRequest) -> str:
    """One request in OTLP/JSON, on one line."""
    document = MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def write_file(path: Path, requests: Iterable[ExportTraceServiceRequest]) -> None:
    """All requests as lines of one file, written whole or not at all, a line at a time (the
    export of a large run is never whole in memory)."""
    write_atomically(path, ((json_line(request) + "\n").encode() for request in requests),
                     readable=True)


def endpoint_url(base: str) -> str:
    """The traces path of a collector's address, as OTEL_EXPORTER_OTLP_ENDPOINT is read: a URL
    that already ends in /v1/traces is used as it is."""
    if not base.startswith(("http://", "https://")):
        raise UsageError(f"--otlp-endpoint {base!r}: expected an http:// or https:// URL, "
                         "such as http://localhost:4318 (a collector's OTLP/HTTP port)")
    base = base.rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"


def post(url: str, requests: Iterable[ExportTraceServiceRequest],
         headers: dict[str, str] | None = None) -> int:
    """Sends each request as OTLP/HTTP protobuf, with `headers` (a collector's or a vendor's
    key); returns how many spans the collector said it rejected (OTLP's partial success). A
    refusal or an unreachable collector is an error that names the URL and what it answered."""
    sent = rejected = 0
    for request in requests:
        body = request.SerializeToString()
        asked = urllib.request.Request(url, data=body, method="POST", headers={
            **(headers or {}), "Content-Type": "application/x-protobuf"})
        try:
            with urllib.request.urlopen(asked, timeout=POST_TIMEOUT_S) as answer:
                rejected += _rejected(answer.read(64 * 1024))
        except urllib.error.HTTPError as exc:
            said = exc.read(300).decode("utf-8", "replace")
            hint = (" (does it want a key? pass it with --otlp-header 'NAME=VALUE')"
                    if exc.code in (401, 403) else "")
            raise UsageError(f"--otlp-endpoint {url}: the collector answered {exc.code}{hint} "
                             f"after {sent} of the batches were sent: {said}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UsageError(f"--otlp-endpoint {url}: cannot send ({reason}) after {sent} "
                             "batches; is a collector listening there?") from None
        sent += 1
    return rejected


def _rejected(answer: bytes) -> int:
    try:
        return ExportTraceServiceResponse.FromString(answer).partial_success.rejected_spans
    except DecodeError:
        return 0  # a collector that answers in JSON, or nothing: no partial success said


def batches(traces: Iterable[Any], size: int = TRACES_PER_REQUEST,
            most_bytes: int = REQUEST_BYTES) -> Iterator[list[Any]]:
    """Traces (each with `spans`) in groups of at most `size`, and of about `most_bytes`."""
    batch: list[Any] = []
    held = 0
    for trace in traces:
        weight = sum(span.ByteSize() for span in trace.spans)
        if batch and (len(batch) == size or held + weight > most_bytes):
            yield batch
            batch, held = [], 0
        batch.append(trace)
        held += weight
    if batch:
        yield batch


def _hex_ids(message: dict[str, Any]) -> None:
    for name in _ID_FIELDS:
        if name in message:
            message[name] = base64.b64decode(message[name]).hex()
