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
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from alk.errors import UsageError
from alk.files import write_atomically

# What one POST carries at most: a collector refuses a large body (the Collector's default
# limit is 20 MiB), and a batch of repeats keeps one request far below it.
TRACES_PER_REQUEST = 50
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


def post(url: str, requests: Iterable[ExportTraceServiceRequest]) -> int:
    """Sends each request as OTLP/HTTP protobuf; returns how many were sent. A refusal or an
    unreachable collector is an error that names the URL and what it answered."""
    sent = 0
    for request in requests:
        body = request.SerializeToString()
        asked = urllib.request.Request(url, data=body, method="POST", headers={
            "Content-Type": "application/x-protobuf"})
        try:
            with urllib.request.urlopen(asked, timeout=POST_TIMEOUT_S) as answer:
                answer.read(64 * 1024)
        except urllib.error.HTTPError as exc:
            said = exc.read(300).decode("utf-8", "replace")
            raise UsageError(f"--otlp-endpoint {url}: the collector answered {exc.code} "
                             f"after {sent} of the batches were sent: {said}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UsageError(f"--otlp-endpoint {url}: cannot send ({reason}) after {sent} "
                             "batches; is a collector listening there?") from None
        sent += 1
    return sent


def batches(items: Iterable[Any], size: int = TRACES_PER_REQUEST) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _hex_ids(message: dict[str, Any]) -> None:
    for name in _ID_FIELDS:
        if name in message:
            message[name] = base64.b64decode(message[name]).hex()
