"""OpenTelemetry evaluation events: one `gen_ai.evaluation.result` event per row, as an OTLP log
record, written to a file of OTLP/JSON lines (`--otel-file`) or posted to an OTLP/HTTP receiver
(`--otel-endpoint`), so that any backend that ingests OTLP shows the verdicts.

The event and its attributes follow the GenAI semantic conventions as released in
open-telemetry/semantic-conventions v1.41.0 (`model/gen-ai/events.yaml`,
`event.gen_ai.evaluation.result`; from v1.42.0 on they live, unchanged, in
semantic-conventions-genai): `gen_ai.evaluation.name` (required), `gen_ai.evaluation.score.value`
and `gen_ai.evaluation.score.label` (when there is a score), `gen_ai.evaluation.explanation`, and
`error.type` for a row that ended in an error; the conversation is `gen_ai.conversation.id`. What
the conventions have no name for is under `flowrate.*`: the judge's model, the rubric version, the
verdict, pass/fail and the key issues; flowrate's version is the instrumentation scope's.

The JSON is the OTLP/JSON encoding (opentelemetry-proto docs/specification.md, "JSON Protobuf
Encoding"): 64-bit integers as decimal strings, field names in lowerCamelCase, an
`ExportLogsServiceRequest` a line as the Collector's file exporter writes them.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import orjson

from flowrate.results.events import OutputStopped, RunListener
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary

EVENT_NAME = "gen_ai.evaluation.result"
SEMCONV_VERSION = "1.41.0"  # the semantic-conventions release whose text the attributes follow
SCOPE = "flowrate"
SEVERITY_INFO = 9  # OTLP SeverityNumber INFO
SEVERITY_WARN = 13  # WARN, for a row that ended in an error
ENDPOINT_BATCH = 100  # records a POST to --otel-endpoint carries at most
LOGS_PATH = "/v1/logs"  # OTLP/HTTP's path of logs, added to an endpoint given without one
TIMEOUT_S = 10.0


def flowrate_version() -> str:
    """flowrate's installed version ("unknown" when run from a tree that was not installed)."""
    try:
        return version("flowrate")
    except PackageNotFoundError:
        return "unknown"


def _value(value: Any) -> dict[str, Any]:
    """A plain value as an OTLP `AnyValue` in its JSON encoding."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_value(entry) for entry in value]}}
    return {"stringValue": str(value)}


def _attributes(pairs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in pairs.items() if value is not None]


def score_label(row: EvaluationRow) -> str | None:
    """The row's label: `pass` or `fail` (the metric's threshold met or not); None for an error row."""
    if row.success is None:
        return None
    return "pass" if row.success else "fail"


def event_attributes(row: EvaluationRow) -> dict[str, Any]:
    """The attributes of the row's `gen_ai.evaluation.result` event (None values are left out)."""
    return {
        "event.name": EVENT_NAME,  # as the Python SDK's Logger.emit(Event) writes it beside eventName
        "gen_ai.evaluation.name": row.metric,
        "gen_ai.evaluation.score.value": row.score,
        "gen_ai.evaluation.score.label": score_label(row),
        "gen_ai.evaluation.explanation": row.reason,
        "error.type": row.error.type if row.error is not None else None,
        "gen_ai.conversation.id": row.id,
        "flowrate.verdict": row.verdict if row.verdict is not None else row.rating,
        "flowrate.success": row.success,
        "flowrate.key_issues": list(row.key_issues) or None,
        "flowrate.judge.model": row.model,
        "flowrate.rubric.version": row.rubric_version,
        "flowrate.threshold": row.threshold,
    }


def log_record(row: EvaluationRow) -> dict[str, Any]:
    """The row as an OTLP `LogRecord` (JSON encoding) of the event `gen_ai.evaluation.result`."""
    at_ns = str(int(row.evaluated_at.timestamp() * 1e9))
    error = row.error is not None
    return {
        "timeUnixNano": at_ns,
        "observedTimeUnixNano": str(time.time_ns()),
        "severityNumber": SEVERITY_WARN if error else SEVERITY_INFO,
        "severityText": "WARN" if error else "INFO",
        "eventName": EVENT_NAME,
        "attributes": _attributes(event_attributes(row)),
    }


def export_request(records: list[dict[str, Any]]) -> dict[str, Any]:
    """`records` as one OTLP `ExportLogsServiceRequest`: resource `service.name` flowrate, and
    the scope flowrate at its version, with the semantic conventions' schema URL."""
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": _attributes({"service.name": SCOPE})},
                "scopeLogs": [
                    {
                        "scope": {"name": SCOPE, "version": flowrate_version()},
                        "schemaUrl": f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}",
                        "logRecords": records,
                    }
                ],
            }
        ]
    }


def otlp_headers() -> dict[str, str]:
    """The headers of OTEL_EXPORTER_OTLP_LOGS_HEADERS, else OTEL_EXPORTER_OTLP_HEADERS
    (`key=value,key2=value2`, values URL-encoded), as the OTLP exporters read them: a receiver's
    token is given there, and sent only, never written."""
    from urllib.parse import unquote

    given = os.environ.get("OTEL_EXPORTER_OTLP_LOGS_HEADERS") or os.environ.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    headers = {}
    for pair in given.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            headers[unquote(key.strip())] = unquote(value.strip())
    return headers


def logs_url(endpoint: str) -> str:
    """`endpoint` with OTLP/HTTP's `/v1/logs` path when it was given without a path."""
    from urllib.parse import urlsplit

    return endpoint.rstrip("/") + LOGS_PATH if urlsplit(endpoint).path in ("", "/") else endpoint


class OtelFile(RunListener):
    """`--otel-file`: each row's event appended as it comes, one `ExportLogsServiceRequest` a line
    (the Collector's file exporter's shape, which its `otlpjsonfile` receiver reads back). The
    file is opened at the first row: a run that judges nothing leaves it as it was."""

    def __init__(self, path: str):
        self.path = path
        self.events_written = 0
        self._handle: Any = None

    def row(self, row: EvaluationRow) -> None:
        try:
            if self._handle is None:
                self._handle = open(self.path, "ab")  # noqa: SIM115  (closed by `close`)
            self._handle.write(orjson.dumps(export_request([log_record(row)])) + b"\n")
            self._handle.flush()
        except OSError as error:
            raise OutputStopped(f"--otel-file {self.path}: {error.strerror or error}") from None
        self.events_written += 1

    def finished(self, summary: RunSummary) -> None:
        self.close()

    def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            handle.close()


class OtelEndpoint(RunListener):
    """`--otel-endpoint`: the rows' events posted to an OTLP/HTTP receiver as JSON, `ENDPOINT_BATCH`
    at a time and the rest when the run finishes. A receiver that refuses costs no row: the
    rows are in the results file; the failures are counted and the run told once at the end."""

    def __init__(self, endpoint: str):
        self.url = logs_url(endpoint)
        self.pending: list[dict[str, Any]] = []
        self.sent = 0
        self.failed = 0
        self.first_failure = ""

    def row(self, row: EvaluationRow) -> None:
        self.pending.append(log_record(row))
        if len(self.pending) >= ENDPOINT_BATCH:
            self._send()

    def _send(self) -> None:
        records, self.pending = self.pending, []
        if not records:
            return
        request = urllib.request.Request(
            self.url,
            data=orjson.dumps(export_request(records)),
            headers={"Content-Type": "application/json", **otlp_headers()},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                response.read()
            self.sent += len(records)
        except (urllib.error.URLError, OSError) as error:
            self.failed += len(records)
            self.first_failure = self.first_failure or _said(error)

    def close(self) -> None:
        """Send what is left."""
        self._send()

    def outcome(self) -> list[str]:
        """The notice of the events delivered, and of those the receiver refused."""
        said = [f"--otel-endpoint {self.url}: {self.sent} evaluation event(s) delivered"]
        if self.failed:
            said.append(
                f"--otel-endpoint {self.url}: {self.failed} evaluation event(s) not delivered ({self.first_failure});"
                " the rows are in the results file"
            )
        return said


def _said(error: Exception) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    if isinstance(error, urllib.error.URLError):
        return str(error.reason)
    return str(error)
