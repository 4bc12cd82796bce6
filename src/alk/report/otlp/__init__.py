"""A saved run as OpenTelemetry traces (`alk export --otlp`): `spans` makes one repeat's trace
from its record and transcript, `deliver` writes traces to an OTLP/JSON file or sends them to a
collector over OTLP/HTTP. The messages are the OpenTelemetry project's own protobuf definitions
(`opentelemetry-proto`), not an encoding of alk's.
"""

from alk.report.otlp.deliver import batches, endpoint_url, json_line, post, write_file
from alk.report.otlp.spans import SCHEMA_URL, SEMCONV_VERSION, RepeatTrace, repeat_trace

__all__ = ["batches", "endpoint_url", "json_line", "post", "write_file", "SCHEMA_URL",
           "SEMCONV_VERSION", "RepeatTrace", "repeat_trace"]
