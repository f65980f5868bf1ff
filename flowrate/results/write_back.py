"""`--write-back`: each verdict written back onto the conversation it judged, on the platform it
was read from (`inputs.sources.platform_api`), by a run listener.

- Phoenix: an annotation of the session (`POST /v1/session_annotations`), or of the trace where
  the conversation is a trace with no session (`POST /v1/trace_annotations`): `annotator_kind`
  LLM, the result's label (the verdict), score and explanation (the reason), and in its metadata
  pass/fail, the key issues and the judge's identity (model, rubric version, flowrate version).
  Phoenix upserts an annotation on (its session or trace, `name`, `identifier`): the name is the
  metric, the identifier `flowrate:` and the rubric version, so a rerun replaces it.
- MLflow: an assessment of kind feedback on the conversation's last trace
  (`POST /api/3.0/mlflow/traces/{trace_id}/assessments`): the value is the score, the rationale
  the reason, the source `LLM_JUDGE` with the judge's model as its id, and the verdict, pass/fail,
  key issues, rubric and flowrate versions in its metadata, with `flowrate.key` (conversation,
  metric, rubric version). Before it is written, the assessments of that key on the session's
  traces are deleted: a rerun, or a session grown by a trace, leaves one.

Writes go from a thread of their own, so a slow platform never holds the judging back. A
refused write costs no verdict: the row is in the results file, the write is kept in the
pending-writes file beside it (`OUTPUT.write-back.jsonl`), the failures are counted and named,
and the run ends with exit 4; `--resume` sends the pending writes again (and only those, for the
rows the output holds already). Error rows carry no verdict and are not written.
"""

from __future__ import annotations

import base64
import os
import re
import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from flowrate.errors import ConfigError, WriteBackIncomplete
from flowrate.inputs.sources.platform_api import Endpoint, PlatformError, PlatformURL, is_platform_url
from flowrate.results.events import RunListener
from flowrate.results.otel_events import flowrate_version, score_label
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary

WRITERS = 4  # writes in flight at once: a platform's API answers each in a few ms, a round trip apart
PENDING_SUFFIX = ".write-back.jsonl"
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
SEARCH_PAGE = 100


def pending_path(output: str) -> Path:
    """The pending-writes file of the results file `output`."""
    return Path(output + PENDING_SUFFIX)


def write_key(row: EvaluationRow) -> str:
    """What a write is keyed by: the conversation, the metric and the rubric version."""
    return f"{row.id}|{row.metric}|{row.rubric_version}"


def identity(row: EvaluationRow) -> dict[str, str]:
    """The judge's identity as the platform's metadata keeps it."""
    return {"judge_model": row.model, "rubric_version": row.rubric_version, "flowrate_version": flowrate_version()}


class PhoenixWriter:
    """Annotations of Phoenix sessions (or traces)."""

    def __init__(self, url: PlatformURL):
        self.url = url

    def write(self, row: EvaluationRow) -> None:
        annotation: dict[str, Any] = {
            "name": row.metric,
            "annotator_kind": "LLM",
            "result": {"label": _label(row), "score": row.score, "explanation": row.reason},
            "metadata": {
                "passed": row.success,
                "key_issues": list(row.key_issues),
                "threshold": row.threshold,
                **identity(row),
            },
            "identifier": f"flowrate:{row.rubric_version}",
        }
        if self._is_session(row.id):
            self.url.call("POST", "/v1/session_annotations?sync=true", {"data": [{"session_id": row.id, **annotation}]})
        else:
            self.url.call("POST", "/v1/trace_annotations?sync=true", {"data": [{"trace_id": row.id, **annotation}]})

    def _is_session(self, conversation: str) -> bool:
        try:
            self.url.call("GET", f"/v1/sessions/{quote(conversation, safe='')}")
        except PlatformError as error:
            if error.status == 404 and _TRACE_ID.fullmatch(conversation):
                return False  # a conversation with no session is its trace
            raise
        return True


class MlflowWriter:
    """Feedback assessments on MLflow traces."""

    def __init__(self, url: PlatformURL):
        self.url = url

    def write(self, row: EvaluationRow) -> None:
        traces = self._traces(row.id)
        if not traces:
            raise PlatformError(
                f"mlflow {self.url.base}: no trace of conversation {row.id!r} in experiment {self.url.place}"
            )
        key = write_key(row)
        for trace in traces:
            for assessment in trace.get("assessments") or []:
                if (assessment.get("metadata") or {}).get("flowrate.key") == key:
                    trace_id, assessment_id = trace["trace_id"], assessment["assessment_id"]
                    self.url.call("DELETE", f"/api/3.0/mlflow/traces/{trace_id}/assessments/{assessment_id}")
        last = traces[0]["trace_id"]
        metadata = {
            "flowrate.key": key,
            "verdict": _label(row) or "",
            "passed": "" if row.success is None else str(row.success).lower(),
            "key_issues": orjson.dumps(list(row.key_issues)).decode(),
            "threshold": str(row.threshold),
            **identity(row),
        }
        assessment = {
            "assessment_name": row.metric,
            "trace_id": last,
            "source": {"source_type": "LLM_JUDGE", "source_id": row.model},
            "feedback": {"value": row.score},
            "rationale": row.reason or "",
            "metadata": metadata,
        }
        self.url.call("POST", f"/api/3.0/mlflow/traces/{last}/assessments", {"assessment": assessment})

    def _traces(self, conversation: str) -> list[dict[str, Any]]:
        """The conversation's traces, the last first: its session's, else the trace it is."""
        session = conversation.replace("\\", "\\\\").replace("'", "\\'")
        search: dict[str, Any] = {
            "locations": [{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": self.url.place}}],
            "filter": f"metadata.`mlflow.trace.session` = '{session}'",
            "order_by": ["timestamp_ms DESC"],
            "max_results": SEARCH_PAGE,
        }
        found: list[dict[str, Any]] = []
        token = None
        while True:
            page = self.url.call(
                "POST", "/api/3.0/mlflow/traces/search", {**search, **({"page_token": token} if token else {})}
            )
            found.extend((page or {}).get("traces") or [])
            token = (page or {}).get("next_page_token")
            if not token:
                break
        if found or not _TRACE_ID.fullmatch(conversation):
            return found
        answer = self.url.call("GET", f"/api/3.0/mlflow/traces/tr-{conversation}")  # a conversation that is its trace
        info = (answer or {}).get("trace") or {}
        return [info.get("trace_info") or info] if info else []


def score_id(row: EvaluationRow) -> str:
    """The write's id on platforms whose ids the writer gives (Langfuse's scores, LangSmith's
    feedback): a UUID of its key, the same on every run, so a rerun writes the same object."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "flowrate:" + write_key(row)))


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


class LangfuseWriter:
    """Scores in Langfuse (`POST /api/public/scores`, a list of scores, as the langfuse SDK 5's
    `create_score` sends them): a session score (`sessionId`), or a trace score for a
    conversation that is its trace; the id a UUID of the write's key, which Langfuse upserts."""

    def __init__(self, endpoint: Endpoint, sessions: set[str]):
        self.endpoint = endpoint
        self.sessions = sessions

    def write(self, row: EvaluationRow) -> None:
        target = "sessionId" if row.id in self.sessions else "traceId"
        score = {
            "id": score_id(row),
            target: row.id,
            "name": row.metric,
            "value": row.score,
            "comment": row.reason,
            "dataType": "NUMERIC",
            "timestamp": row.evaluated_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "metadata": {
                "verdict": _label(row),
                "passed": row.success,
                "key_issues": list(row.key_issues),
                "threshold": row.threshold,
                **identity(row),
            },
        }
        self.endpoint.call("POST", "/api/public/scores", [score])


class LangSmithWriter:
    """Feedback in LangSmith on the thread's last root run (`POST /feedback`, as the langsmith
    SDK's `create_feedback` sends it with the run's trace and project; `feedback_source` of type
    `model` with the judge's identity);
    a rerun's feedback has the same id, and is updated (`PATCH /feedback/{id}`, as
    `update_feedback` sends it) where LangSmith answers that it exists (409)."""

    def __init__(self, endpoint: Endpoint, last_runs: dict[str, dict[str, str]]):
        self.endpoint = endpoint
        self.last_runs = last_runs

    def write(self, row: EvaluationRow) -> None:
        run = self.last_runs.get(row.id)
        if run is None:
            raise PlatformError(f"{self.endpoint.name}: no root run of thread {row.id!r} in the export")
        feedback_id, now = score_id(row), _now_iso()
        comment, score, value = row.reason, row.score, _label(row)
        feedback = {
            "id": feedback_id,
            "created_at": now,
            "modified_at": now,
            "run_id": run["run_id"],
            "trace_id": run["trace_id"],
            "key": row.metric,
            "score": score,
            "value": value,
            "comment": comment,
            "feedback_source": {
                "type": "model",
                "metadata": {"passed": row.success, "key_issues": list(row.key_issues), **identity(row)},
            },
            # the tracing project, which LangSmith's SmithDB requires (the SDK warns without it)
            **({"session_id": run["session_id"]} if "session_id" in run else {}),
            "extend_trace_retention": True,
        }
        try:
            self.endpoint.call("POST", "/feedback", feedback)
        except PlatformError as error:
            if error.status != 409:
                raise
            update = {"score": score, "value": value, "comment": comment}
            self.endpoint.call("PATCH", f"/feedback/{feedback_id}", update)


def langfuse_endpoint() -> Endpoint:
    """Langfuse's API from the SDK's own variables: LANGFUSE_BASE_URL (or LANGFUSE_HOST) and the
    project's keys, LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY, as basic authentication."""
    base = os.environ.get("LANGFUSE_BASE_URL") or os.environ.get("LANGFUSE_HOST") or "https://cloud.langfuse.com"
    public, secret = os.environ.get("LANGFUSE_PUBLIC_KEY"), os.environ.get("LANGFUSE_SECRET_KEY")
    if not (public and secret):
        raise ConfigError("--write-back to Langfuse needs LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY")
    token = base64.b64encode(f"{public}:{secret}".encode()).decode()
    return Endpoint("langfuse", base.rstrip("/"), {"Authorization": f"Basic {token}"})


def langsmith_endpoint() -> Endpoint:
    """LangSmith's API from the SDK's own variables: LANGSMITH_ENDPOINT and LANGSMITH_API_KEY
    (or their LANGCHAIN_ names), the key sent as `x-api-key`."""
    base = (
        os.environ.get("LANGSMITH_ENDPOINT")
        or os.environ.get("LANGCHAIN_ENDPOINT")
        or "https://api.smith.langchain.com"
    )
    key = os.environ.get("LANGSMITH_API_KEY") or os.environ.get("LANGCHAIN_API_KEY")
    if not key:
        raise ConfigError("--write-back to LangSmith needs LANGSMITH_API_KEY")
    return Endpoint("langsmith", base.rstrip("/"), {"x-api-key": key})


def _label(row: EvaluationRow) -> str | None:
    """The verdict as a label: the level's name, or the rating of its scale (`4/5`)."""
    if row.verdict is not None:
        return row.verdict
    if row.rating is not None:
        return f"{row.rating}/{row.scale}" if row.scale else str(row.rating)
    return score_label(row)


def writers_for(paths: Sequence[Any]) -> dict[str, Any]:
    """The writer of each input `--write-back` writes to, by the input as given: a platform URL
    (Phoenix, MLflow), or an export file of Langfuse or LangSmith (the platform from the SDK's
    own variables); `ConfigError` when there is none (records given in memory have no platform)."""
    from flowrate.inputs.files import file_format
    from flowrate.inputs.sources.langfuse import session_ids
    from flowrate.inputs.sources.langsmith import thread_last_runs

    writers: dict[str, Any] = {}
    for given in dict.fromkeys(path for path in paths if isinstance(path, str)):
        if is_platform_url(given):
            url = PlatformURL.parse(given)
            writers[given] = PhoenixWriter(url) if url.platform == "phoenix" else MlflowWriter(url)
        elif Path(given).is_file():
            format, items = file_format(given)
            if format == "langfuse":
                writers[given] = LangfuseWriter(langfuse_endpoint(), session_ids(items))
            elif format == "langsmith":
                writers[given] = LangSmithWriter(langsmith_endpoint(), thread_last_runs(items))
    if not writers:
        raise ConfigError(
            "--write-back writes each verdict where its conversation was read: give a platform URL"
            " (phoenix+http://HOST:PORT?project=NAME, mlflow+http://HOST:PORT?experiment=ID) or a Langfuse or"
            " LangSmith export file"
        )
    return writers


class WriteBack(RunListener):
    """The `--write-back` listener: each row of an input that has a writer in `writers` (by the
    input as given, which is the row's `source.path`) written back from a thread; the refused
    writes kept in `pending` (the file beside the output); with `resume`, the writes pending from
    an earlier run sent first. `outcome()` once the run is over says what became of them."""

    def __init__(self, writers: dict[str, Any], output: str, resume: bool):
        self.writers = writers
        self.pending = pending_path(output)
        self.resume = resume
        self.written = 0
        self.failed: list[tuple[str, str]] = []  # (conversation | metric, what the platform said), in order
        self._refused: list[bytes] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="flowrate-write-back")
        self._retried = 0

    def started(self, total_rows: int) -> None:
        if not self.resume or not self.pending.exists():
            return
        for line in self.pending.read_bytes().splitlines():
            if line.strip():
                entry = orjson.loads(line)
                row = EvaluationRow.model_validate(entry["row"])
                if entry.get("platform") in self.writers:
                    self._retried += 1
                    self._send(entry["platform"], row)
                else:  # a pending write of a platform this run does not read: kept for the run that does
                    self._refused.append(line)

    def row(self, row: EvaluationRow) -> None:
        platform = row.source.path if row.source is not None else None
        if platform in self.writers and row.error is None and row.score is not None:
            self._send(platform, row)

    def _send(self, platform: str, row: EvaluationRow) -> None:
        self._pool.submit(self._write, platform, row)

    def _write(self, platform: str, row: EvaluationRow) -> None:
        try:
            self.writers[platform].write(row)
        except Exception as error:  # a refusal, or an answer no writer foresaw: the write is kept all the same
            said = str(error) if isinstance(error, PlatformError) else f"{type(error).__name__}: {error}"
            with self._lock:
                self.failed.append((f"{row.id} | {row.metric}", said))
                self._refused.append(orjson.dumps({"platform": platform, "row": row.model_dump(mode="json")}))
            return
        with self._lock:
            self.written += 1

    def finished(self, summary: RunSummary) -> None:
        self.close()

    def close(self) -> None:
        """Wait for the writes in flight, and keep the refused ones in the pending file (removed
        when none is left)."""
        self._pool.shutdown(wait=True)
        if self._refused:
            temporary = self.pending.with_name(self.pending.name + ".tmp")
            temporary.write_bytes(b"".join(line + b"\n" for line in self._refused))
            os.replace(temporary, self.pending)
        elif self.pending.exists():
            self.pending.unlink()

    def outcome(self) -> tuple[list[str], WriteBackIncomplete | None]:
        """The notices of what was written, and the error when a write was refused."""
        retried = f" ({self._retried} pending from an earlier run)" if self._retried else ""
        notices = [f"--write-back: {self.written} verdict(s) written{retried}"]
        if not self.failed:
            return notices, None
        first_row, said = self.failed[0]
        more = f" and {len(self.failed) - 1} more" if len(self.failed) > 1 else ""
        error = WriteBackIncomplete(
            f"--write-back: {len(self.failed)} verdict(s) not written ({first_row}: {said}{more}); the rows are in the"
            f" results file, the writes wait in {self.pending}: run again with --resume to send them"
        )
        return notices, error
