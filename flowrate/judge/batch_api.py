"""Provider batch mode: the same judge calls as the online path, sent as files of requests
to a provider's Batch API (OpenAI, Azure, or any server with `/v1/files` and `/v1/batches`),
through LiteLLM's files and batches API.

Each request carries a `custom_id` (`[A-Za-z0-9_-]{1,64}`, as every provider accepts) made from
the metric and a hash of the conversation id, so the results map back after the process is
gone. Batches are recorded in SQLite next to the response cache, never with a secret in them.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from flowrate.errors import ConfigError, ExitCode, FlowrateError
from flowrate.judge.retry import SECRET_NAME, one_line, redact_secrets

ENDPOINT = "/v1/chat/completions"
MAX_REQUESTS = 50_000  # OpenAI and Azure: requests in one batch
MAX_BYTES = 200 * 1024 * 1024  # and bytes of its input file
MARGIN = 0.95  # stay this far under both
STATE_FILE = "batches.sqlite3"
# The state file's columns, in `BatchRecord`'s order (`created_at` holds `created_at_s`).
COLUMNS = "batch_id, provider, model, api_base, input_file, output, custom_ids, status, created_at, collected, command"
TERMINAL = {"completed", "failed", "expired", "cancelled"}
CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
REDACTED = "***"
# Query parameters that carry a credential: Azure's `api-key`, `key`, `token`, `access_token`,
# SAS signatures (`sig`), `password`, `secret`, ...
SECRET_QUERY = re.compile(r"(key|token|secret|password|passwd|sig|signature|auth|credential)s?$", re.IGNORECASE)
URL_IN_TEXT = re.compile(r"https?://[^\s\"'<>]+", re.IGNORECASE)


def redacted_url(url: str | None) -> str | None:
    """`url` with no secret left in it: the user and password (`http://user:pass@host/v1`)
    removed, and the values of credential-like query parameters (`?api-key=`, `token`, `sig`)
    replaced by `***`; everything else, `?api-version=` included, kept as it was."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:  # not a URL after all: keep no more of it than redact_secrets would
        return redact_secrets(url)
    masked = [(name, REDACTED if SECRET_QUERY.search(name) else value) for name, value in query]
    return urlunsplit(
        (parts.scheme, host, parts.path, urlencode(masked, safe="*") if query else parts.query, parts.fragment)
    )


def redacted(value: Any, name: str = "") -> Any:
    """A JSON value (a recorded command) with every secret-looking part replaced by `***`: values
    under secret-like names (`api_key`, `*_token`, `password`), credentials in URLs, and the
    values of the environment's `*KEY`, `*TOKEN`, `*SECRET` and `*PASSWORD` variables."""
    if isinstance(value, dict):
        return {key: redacted(item, str(key)) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item, name) for item in value]
    if not isinstance(value, str):
        return value
    if SECRET_NAME.search(name.upper()):
        return REDACTED
    return redact_secrets(URL_IN_TEXT.sub(lambda found: redacted_url(found.group(0)) or "", value))


class BatchApiError(FlowrateError):
    """The provider's Files or Batches API refused a request or could not be reached. A refusal
    (4xx: a rejected key, an unknown batch, a batch that cannot be cancelled any more) is exit 2;
    a server error or a lost connection, which may pass, is exit 3."""

    def __init__(self, message: str, status: int | None):
        super().__init__(message)
        self.exit_code = ExitCode.USAGE if status is not None and 400 <= status < 500 else ExitCode.INCOMPLETE


def custom_id(metric: str, conversation_id: str) -> str:
    """A request's id: the metric and a hash of the conversation id; always `[A-Za-z0-9_-]{1,64}`."""
    return f"{metric[:24]}-{hashlib.sha256(conversation_id.encode()).hexdigest()[:32]}"


def request_line(
    cid: str,
    model: str,
    messages: list[dict[str, str]],
    n: int,
    response_format: dict | None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
) -> bytes:
    """One line of an OpenAI batch input file: request `cid` of `model` with `messages`, asking
    for `n` replies in `response_format` at `temperature`, each bounded by `max_tokens` (None:
    unbounded), as the same request online would."""
    body: dict[str, Any] = {"model": model, "messages": messages, "temperature": temperature}
    if n > 1:
        body["n"] = n
    if response_format:
        body["response_format"] = response_format
    if max_tokens:
        body["max_tokens"] = max_tokens
    return orjson.dumps({"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body}) + b"\n"


class Chunker:
    """Cuts request lines into batches within the provider's request and byte limits (with a
    margin) and `batch_size`, as they come: a run holds one batch's lines at a time."""

    def __init__(self, batch_size: int | None = None, max_bytes: int = MAX_BYTES):
        self.most = min(batch_size or MAX_REQUESTS, int(MAX_REQUESTS * MARGIN))
        self.room = int(max_bytes * MARGIN)
        self.current: list[bytes] = []
        self.size = 0

    def add(self, line: bytes) -> list[bytes] | None:
        """Take a line; returns a full batch when this line starts the next one."""
        full = None
        if self.current and (len(self.current) >= self.most or self.size + len(line) > self.room):
            full, self.current, self.size = self.current, [], 0
        self.current.append(line)
        self.size += len(line)
        return full

    def rest(self) -> list[bytes] | None:
        full, self.current, self.size = self.current or None, [], 0
        return full


def split(lines: list[bytes], batch_size: int | None = None, max_bytes: int = MAX_BYTES) -> list[list[bytes]]:
    """All the batches `Chunker` cuts `lines` into."""
    chunker = Chunker(batch_size, max_bytes)
    batches = [full for line in lines if (full := chunker.add(line))]
    return batches + ([rest] if (rest := chunker.rest()) else [])


def check_lines(lines: list[bytes]) -> None:
    """Validate a batch file locally before upload: each line an OpenAI batch request, ids unique."""
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        try:
            item = orjson.loads(line)
            cid, body = item["custom_id"], item["body"]
            assert CUSTOM_ID.match(cid) and cid not in seen, "custom_id"
            assert item["method"] == "POST" and item["url"] == ENDPOINT, "method or url"
            assert body["model"] and body["messages"], "body"
        except (orjson.JSONDecodeError, KeyError, TypeError, AssertionError) as error:
            raise ConfigError(f"batch request line {number} is not a valid OpenAI batch request ({error})") from None
        seen.add(cid)


@dataclass(frozen=True)
class BatchRecord:
    """A submitted batch as `BatchState` keeps it: the provider's `batch_id` and `input_file` id,
    the `provider`, `model` and `api_base` (its secrets redacted) it went to, the results file
    `output` (a resolved path) it is collected into, the `custom_ids` of its requests, the
    `command` that collects it (its secrets redacted), the provider's last known `status`,
    when it was recorded (`created_at_s`, seconds since the epoch) and whether it is `collected`."""

    batch_id: str
    provider: str
    model: str
    api_base: str | None
    input_file: str
    output: str
    custom_ids: list[str]
    status: str
    created_at_s: float
    collected: bool
    command: dict[str, Any]


class BatchState:
    """The batches a run submitted, kept in SQLite so that a later process can collect them."""

    def __init__(self, directory: Path, create: bool = True):
        """Open `batches.sqlite3` in `directory`, creating it unless `create` is False: then a
        state never written reads as empty and nothing is made on disk (the batch commands
        that only look)."""
        self.path = Path(directory).expanduser() / STATE_FILE
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        where = str(self.path) if create or self.path.exists() else ":memory:"
        self._db = sqlite3.connect(where, timeout=30, isolation_level=None)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY, provider TEXT, model TEXT, api_base TEXT,"
            " input_file TEXT, output TEXT, custom_ids TEXT, status TEXT, created_at REAL, collected INTEGER DEFAULT 0,"
            " command TEXT)"
        )

    def record(
        self,
        batch_id: str,
        provider: str,
        model: str,
        api_base: str | None,
        input_file: str,
        output: str,
        ids: list[str],
        command: dict,
    ) -> BatchRecord:
        """Record a submitted batch: its `batch_id`, `provider`, `model`, `api_base`, `input_file`
        id, the results file `output`, the custom `ids` of its requests, and the `command` that
        collects it. `api_base` and `command` are stored with their secrets redacted (`redacted_url`,
        `redacted`): flowrate never writes a credential to disk. Returns the record as stored."""
        batch = BatchRecord(
            batch_id=batch_id,
            provider=provider,
            model=model,
            api_base=redacted_url(api_base),
            input_file=input_file,
            output=output,
            custom_ids=list(ids),
            status="in_progress",
            created_at_s=time.time(),
            collected=False,
            command=redacted(command),
        )
        self._db.execute(
            "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                batch.batch_id,
                batch.provider,
                batch.model,
                batch.api_base,
                batch.input_file,
                batch.output,
                orjson.dumps(batch.custom_ids).decode(),
                batch.status,
                batch.created_at_s,
                int(batch.collected),
                orjson.dumps(batch.command).decode(),
            ),
        )
        return batch

    def uncollected(self, output: str | None = None) -> list[BatchRecord]:
        """Batches not collected yet, oldest first: those collected into the results file
        `output` (a resolved path), or all."""
        query = f"SELECT {COLUMNS} FROM batches WHERE collected = 0{' AND output = ?' if output else ''} ORDER BY created_at"
        return [self._record(row) for row in self._db.execute(query, (output,) if output else ()).fetchall()]

    def all(self) -> list[BatchRecord]:
        """Every recorded batch, oldest first."""
        query = f"SELECT {COLUMNS} FROM batches ORDER BY created_at"
        return [self._record(row) for row in self._db.execute(query).fetchall()]

    def mark(self, batch_id: str, status: str, collected: bool = False) -> None:
        """Keep the provider's `status` of a batch, and whether it is `collected`."""
        self._db.execute(
            "UPDATE batches SET status = ?, collected = ? WHERE batch_id = ?", (status, int(collected), batch_id)
        )

    def close(self) -> None:
        """Close the state file."""
        self._db.close()

    @staticmethod
    def _record(row: tuple) -> BatchRecord:
        batch_id, provider, model, api_base, input_file, output, ids, status, created_at, collected, command = row
        return BatchRecord(
            batch_id=batch_id,
            provider=provider,
            model=model,
            api_base=api_base,
            input_file=input_file,
            output=output,
            custom_ids=orjson.loads(ids),
            status=status,
            created_at_s=created_at,
            collected=bool(collected),
            command=orjson.loads(command),
        )


class Provider:
    """Files and batches through LiteLLM, for the providers it supports there."""

    def __init__(self, provider: str, api_base: str | None):
        if provider == "anthropic":
            raise ConfigError(
                "LiteLLM cannot create Anthropic message batches: use the online path, or --batch-export and a runner of your own"
            )
        self.provider = provider
        self.api_base = api_base

    def _options(self) -> dict[str, Any]:
        import os

        options: dict[str, Any] = {"custom_llm_provider": self.provider}
        if self.api_base:
            options["api_base"] = self.api_base
            if self.provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
                options["api_key"] = "no-key"
        return options

    async def _call(self, what: str, name: str, **arguments: Any) -> Any:
        """LiteLLM's `name`, awaited; its errors as one plain `BatchApiError` saying `what` failed."""
        from flowrate.judge.lazy_litellm import litellm as _litellm

        try:
            return await getattr(_litellm(), name)(**arguments, **self._options())
        except Exception as error:  # LiteLLM's mapped errors, the OpenAI SDK's and the transport's
            status = getattr(error, "status_code", None)
            status = status if isinstance(status, int) else None
            where = redacted_url(self.api_base) or f"the {self.provider} API"
            verb = f"refused to {what} ({status})" if status is not None else f"could not {what}"
            raise BatchApiError(
                f"the batch API at {where} {verb}: {one_line(redact_secrets(str(error)))}", status
            ) from None

    async def submit(self, lines: list[bytes]) -> tuple[str, str]:
        """Upload a batch file and create the batch; returns (input file id, batch id)."""
        uploaded = await self._call(
            "upload a batch file", "acreate_file", file=("requests.jsonl", b"".join(lines)), purpose="batch"
        )
        batch = await self._call(
            "create a batch", "acreate_batch", completion_window="24h", endpoint=ENDPOINT, input_file_id=uploaded.id
        )
        return uploaded.id, batch.id

    async def retrieve(self, batch_id: str) -> Any:
        """The provider's record of a batch: its status, request counts and files."""
        # Asked for a finished batch, LiteLLM's success logging would fetch the whole output file
        # again to price it, and leaves that call's coroutine unawaited ("coroutine
        # 'OpenAIFilesAPI.afile_content' was never awaited" on the user's terminal, from a
        # background task). flowrate prices the rows itself: that logging is switched off.
        return await self._call(
            f"retrieve batch {batch_id}",
            "aretrieve_batch",
            batch_id=batch_id,
            litellm_metadata={"batch_ignore_default_logging": True},
        )

    async def content(self, file_id: str | None) -> list[dict[str, Any]]:
        """The lines of a results (or errors) file; none when there is no file."""
        if not file_id:
            return []
        response = await self._call(f"read file {file_id}", "afile_content", file_id=file_id)
        return [orjson.loads(line) for line in response.content.splitlines() if line.strip()]

    async def cancel(self, batch_id: str) -> Any:
        """Ask the provider to cancel a batch; returns its record, whose status says what it did."""
        return await self._call(f"cancel batch {batch_id}", "acancel_batch", batch_id=batch_id)


def line_error(line: dict[str, Any] | None) -> str:
    """Why a batch line failed, as the provider said it: its error code and message (or the
    request's HTTP status and error), on one line, with no secret in it."""
    line = line or {}
    response = line.get("response") or {}
    error = line.get("error")
    status = None
    if not error:
        status = response.get("status_code")
        body = response.get("body")
        error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        code = error.get("code") if error.get("code") is not None else error.get("type")
        message = error.get("message") or ""
        text = ": ".join(str(part) for part in (code, message) if part not in (None, ""))
    else:
        text = "" if error is None else str(error)
    if status is not None and status != 200:
        text = f"HTTP {status} {text}".strip()
    return one_line(redact_secrets(text)) or "no reason given"


def result_texts(line: dict[str, Any]) -> tuple[list[str], dict[str, int]] | None:
    """The reply texts and usage of a successful result line; None for a failed one."""
    response = line.get("response") or {}
    if line.get("error") or response.get("status_code") != 200:
        return None
    body = response.get("body") or {}
    texts = [(choice.get("message") or {}).get("content") or "" for choice in body.get("choices") or []]
    usage = body.get("usage") or {}
    return (
        (
            texts,
            {"prompt_tokens": usage.get("prompt_tokens", 0), "completion_tokens": usage.get("completion_tokens", 0)},
        )
        if texts
        else None
    )
