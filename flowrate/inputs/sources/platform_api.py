"""Conversations read from a running observability platform instead of an export file:
`flowrate eval phoenix+http://HOST:PORT?project=NAME` (Arize Phoenix) and
`flowrate eval mlflow+http://HOST:PORT?experiment=ID` (MLflow), `https` too.

The platform's REST API is paged through, one page at a time (constant memory besides what the
span readers keep of every file: each span's parent and keys, the conversations' histories), and
each page is handed on as an OTLP/JSON document, so the spans are read by the readers of exported
spans with their rules (`openinference.OpenInferenceReader` for Phoenix's OpenInference spans,
`mlflow_traces.MlflowReader` for MLflow's), the same conversation keys (`otlp.SESSION_KEYS`,
`--conversation-key`) and the same normaliser (`messages`).

- Phoenix: `GET /v1/projects/{project}/spans/otlpv1` (start_time, end_time, cursor), which
  Phoenix answers with its spans' attributes flattened in OTLP's shape, field names in snake_case.
- MLflow: `POST /api/3.0/mlflow/traces/search` (the experiment, a filter on the trace's
  timestamp, page_token), then `GET /api/3.0/mlflow/traces/batchGet` for the page's spans (protobuf's
  JSON, ids in base64); a trace's session (`mlflow.trace.session` in its metadata, as
  `mlflow.update_current_trace` writes it) is set as `session.id` on its root spans.

Credentials come from the platform's own variables (`PHOENIX_API_KEY`; `MLFLOW_TRACKING_TOKEN`,
or `MLFLOW_TRACKING_USERNAME` and `MLFLOW_TRACKING_PASSWORD`), are sent as headers and are
never part of what is shown or written: a URL holding `user:password@` is refused.
"""

from __future__ import annotations

import base64
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import orjson

from flowrate.errors import ConfigError
from flowrate.inputs.conversation import Source
from flowrate.inputs.formats import Record
from flowrate.inputs.sources.base import Item

SCHEMES = {"phoenix": "project", "mlflow": "experiment"}  # the platform and the query key naming its place
_URL = re.compile(r"(phoenix|mlflow)\+(https?)://", re.IGNORECASE)
PHOENIX_PAGE = 1000  # spans a page (the most Phoenix's span search returns at once)
MLFLOW_PAGE = 100  # traces a page (a search's default page; their spans come in one batchGet)
TIMEOUT_S = 60.0
SESSION_METADATA = "mlflow.trace.session"  # MLflow's trace metadata naming the session


class PlatformError(Exception):
    """The platform could not be read or written: the message names the URL (without
    credentials) and what it said; `status` is the HTTP status it answered (None: no answer)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def is_platform_url(text: str) -> bool:
    """True when `text` names a platform (`phoenix+http://…`, `mlflow+https://…`) rather than a file."""
    return _URL.match(text) is not None


@dataclass(frozen=True)
class PlatformURL:
    """A platform URL taken apart: `platform` (phoenix, mlflow), `base` (the server's http(s)
    URL, its path kept: a server behind a proxy's prefix), `place` (the Phoenix project, the
    MLflow experiment id) and `given`, the URL as the user wrote it (how rows name their source)."""

    platform: str
    base: str
    place: str
    given: str

    @classmethod
    def parse(cls, given: str) -> PlatformURL:
        """The URL `given`; `ConfigError` naming it and what is missing when it cannot be read."""
        match = _URL.match(given)
        if match is None:
            raise ConfigError(
                f"{given}: not a platform URL (phoenix+http://HOST:PORT?project=NAME, mlflow+http://HOST:PORT?experiment=ID)"
            )
        platform = match[1].lower()
        parts = urlsplit(given[len(match[1]) + 1 :])
        key = SCHEMES[platform]
        if parts.username is not None or parts.password is not None:
            raise ConfigError(
                f"{platform}+{parts.scheme}://{parts.hostname}: the URL holds credentials (user:password@); they would"
                " be kept in the results and logs. Give them in "
                + (
                    "PHOENIX_API_KEY"
                    if platform == "phoenix"
                    else "MLFLOW_TRACKING_TOKEN or MLFLOW_TRACKING_USERNAME/PASSWORD"
                )
            )
        if not parts.hostname:
            raise ConfigError(f"{given}: names no host")
        place = (parse_qs(parts.query).get(key) or [""])[0]
        if not place:
            raise ConfigError(f"{given}: names no {key} (add ?{key}=…)")
        base = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        return cls(platform, base, place, given)

    def headers(self) -> dict[str, str]:
        """The platform's credentials from its own environment variables, as request headers."""
        import os

        if self.platform == "phoenix":
            key = os.environ.get("PHOENIX_API_KEY")
            return {"Authorization": f"Bearer {key}"} if key else {}
        token = os.environ.get("MLFLOW_TRACKING_TOKEN")
        if token:
            return {"Authorization": f"Bearer {token}"}
        user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
        if user and password:
            return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
        return {}

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer of `method path` (see `Endpoint.call`)."""
        return Endpoint(self.platform, self.base, self.headers()).call(method, path, body)


@dataclass(frozen=True)
class Endpoint:
    """A platform's HTTP API: its `name` (how messages name it), `base` URL and the `headers`
    carrying its credentials (sent, never shown)."""

    name: str
    base: str
    headers: dict[str, str]

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer of `method path` (with `body` as JSON); `PlatformError` naming the
        request and the platform's status when it fails."""
        data = None if body is None else orjson.dumps(body)
        headers = {"Accept": "application/json", **self.headers}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        shown = f"{self.name} {method} {self.base}{path.split('?')[0]}"
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            said = error.read()[:300].decode(errors="replace").strip()
            message = f"{shown}: HTTP {error.code} {error.reason}" + (f": {said}" if said else "")
            raise PlatformError(message, error.code) from None
        except (urllib.error.URLError, OSError) as error:
            reason = error.reason if isinstance(error, urllib.error.URLError) else error
            raise PlatformError(f"{shown}: {reason}") from None
        try:
            return orjson.loads(text) if text.strip() else None
        except orjson.JSONDecodeError:
            raise PlatformError(f"{shown}: the answer is not JSON") from None


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


_SNAKE = re.compile(r"_([a-z])")


def otlp_json(value: Any) -> Any:
    """A platform's OTLP-shaped JSON (protobuf field names in snake_case, empty fields as null)
    in the OTLP/JSON encoding's lowerCamelCase, the nulls left out."""
    if isinstance(value, dict):
        return {
            _SNAKE.sub(lambda match: match[1].upper(), key): otlp_json(entry)
            for key, entry in value.items()
            if entry is not None
        }
    if isinstance(value, list):
        return [otlp_json(entry) for entry in value]
    return value


def phoenix_documents(url: PlatformURL, window: tuple[float | None, float]) -> Iterator[dict[str, Any]]:
    """The project's spans that started in `window`, a page at a time, each page one
    `ExportTraceServiceRequest` document."""
    since, until = window
    query: dict[str, Any] = {"limit": PHOENIX_PAGE, "end_time": _iso(until)}
    if since is not None:
        query["start_time"] = _iso(since)
    cursor = None
    while True:
        page = url.call(
            "GET",
            f"/v1/projects/{quote(url.place, safe='')}/spans/otlpv1?"
            + urlencode({**query, **({"cursor": cursor} if cursor else {})}),
        )
        spans = [otlp_json(span) for span in (page or {}).get("data") or []]
        if spans:
            yield {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}
        cursor = (page or {}).get("next_cursor")
        if not cursor:
            return


def mlflow_documents(url: PlatformURL, window: tuple[float | None, float]) -> Iterator[dict[str, Any] | str]:
    """The experiment's traces that started in `window`, a page of traces at a time, each page
    one `ExportTraceServiceRequest` document; a trace's session is `session.id` on its root spans;
    a trace MLflow cannot give, the text naming it."""
    since, until = window
    condition = f"trace.timestamp_ms < {int(until * 1000)}"
    if since is not None:
        condition = f"trace.timestamp_ms >= {int(since * 1000)} AND {condition}"
    search: dict[str, Any] = {
        "locations": [{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": url.place}}],
        "filter": condition,
        "order_by": ["timestamp_ms ASC"],
        "max_results": MLFLOW_PAGE,
    }
    token = None
    while True:
        page = url.call("POST", "/api/3.0/mlflow/traces/search", {**search, **({"page_token": token} if token else {})})
        ids = [info["trace_id"] for info in (page or {}).get("traces") or [] if info.get("trace_id")]
        spans: list[dict[str, Any]] = []
        for trace in _mlflow_traces(url, ids):
            if isinstance(trace, str):
                yield trace
            else:
                spans.extend(_mlflow_spans(trace))
        if spans:
            yield {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}
        token = (page or {}).get("next_page_token")
        if not token:
            return


def _mlflow_traces(url: PlatformURL, ids: list[str]) -> Iterator[dict[str, Any] | str]:
    """The traces of `ids` with their spans, in one `batchGet`; where MLflow cannot give one of
    them (its spans not in the tracking store: a trace still being written, or one whose client
    died before logging them, which fails the whole batch), each trace alone, and a trace it cannot
    give at all as the text naming it. A server that does not answer stops the run's reading."""
    if not ids:
        return
    try:
        answer = url.call("GET", "/api/3.0/mlflow/traces/batchGet?" + urlencode({"trace_ids": ids}, doseq=True))
    except PlatformError as error:
        if error.status is None:
            raise
    else:
        yield from (answer or {}).get("traces") or []
        return
    for trace_id in ids:
        try:
            answer = url.call("GET", "/api/3.0/mlflow/traces/get?" + urlencode({"trace_id": trace_id}))
        except PlatformError as error:
            if error.status is None:
                raise
            yield f"trace {trace_id}: {error}"
            continue
        if (answer or {}).get("trace"):
            yield answer["trace"]


def _mlflow_spans(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """A trace's spans in OTLP/JSON, its session set as `session.id` on its root spans."""
    info = trace.get("trace_info") or {}
    session = (info.get("trace_metadata") or {}).get(SESSION_METADATA)
    spans = [otlp_json(span) for span in trace.get("spans") or []]
    for span in spans:
        if session and not span.get("parentSpanId"):
            span.setdefault("attributes", []).append({"key": "session.id", "value": {"stringValue": str(session)}})
    return spans


def platform_items(given: str, window: tuple[float | None, float]) -> Iterator[Item | Record]:
    """The pages of the platform URL `given` (read in `window`) as items of the span readers, a
    trace the platform cannot give as a problem naming it; `PlatformError` when the platform
    cannot be read at all."""
    url = PlatformURL.parse(given)
    documents: Iterator[dict[str, Any] | str]
    documents = phoenix_documents(url, window) if url.platform == "phoenix" else mlflow_documents(url, window)
    for number, document in enumerate(documents, start=1):
        source = Source(path=given, index=number)
        if isinstance(document, str):
            yield Record(source=source, format=url.platform, problems=[f"{given}: cannot read {document}"])
            continue
        yield Item(source, document, f"{given}#{number}", f"{given} page {number}", whole=True)
