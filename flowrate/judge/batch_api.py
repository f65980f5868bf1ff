"""Provider batch mode: the same judge calls as the online path, sent as files of requests
to a provider's Batch API (OpenAI, Azure, or any server with `/v1/files` and `/v1/batches`),
through LiteLLM's files and batches API.

Each request carries a `custom_id` (`[A-Za-z0-9_-]{1,64}`, as every provider accepts) made from
the metric and a hash of the conversation id, so the results map back after the process is
gone. Batches are recorded in SQLite next to the response cache, never with a secret in them.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import re
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from flowrate.errors import ConfigError, ExitCode, FlowrateError, InputError
from flowrate.judge.backend import Usage, tokens_of, usage_of
from flowrate.judge.direct import json_loads, openai_endpoint
from flowrate.judge.errors import BadReply, JudgeError, TimedOut, Unreachable, error_for
from flowrate.judge.litellm_backend import judge_error_of
from flowrate.judge.retry import SECRET_NAME, RetryPolicy, one_line, redact_secrets, worth_retrying

ENDPOINT = "/v1/chat/completions"
MAX_REQUESTS = 50_000  # OpenAI and Azure: requests in one batch
MAX_BYTES = 200 * 1024 * 1024  # and bytes of its input file
MARGIN = 0.95  # stay this far under both
CONNECT_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 600.0  # LiteLLM's default for its files calls
DOWNLOAD_CHUNK_BYTES = 1024 * 1024  # a results file is read in pieces of this size, written to disk as they come
STATE_FILE = "batches.sqlite3"
# The state file's columns, in `BatchRecord`'s order (`created_at` holds `created_at_s`).
COLUMNS = "batch_id, provider, model, api_base, input_file, output, custom_ids, status, created_at, collected, command"
STATE_V0 = (  # the batches table as flowrate made it before the state had versions
    "batch_id TEXT PRIMARY KEY, provider TEXT, model TEXT, api_base TEXT, input_file TEXT, output TEXT,"
    " custom_ids TEXT, status TEXT, created_at REAL, collected INTEGER DEFAULT 0, command TEXT"
)
STATE_V1 = (  # `endpoint`: the redacted api_base, '' for the provider's own
    "batch_id TEXT NOT NULL, provider TEXT NOT NULL, model TEXT, api_base TEXT, input_file TEXT, output TEXT,"
    " custom_ids TEXT, status TEXT, created_at REAL NOT NULL, collected INTEGER DEFAULT 0, command TEXT,"
    " endpoint TEXT NOT NULL, PRIMARY KEY (provider, endpoint, batch_id, created_at)"
)
STATE_VERSION = 1
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


def request_line(cid: str, body: dict[str, Any]) -> bytes:
    """One line of an OpenAI batch input file: request `cid` with `body`, the chat-completions
    request the same call online would send (`metrics.step.JudgeRequest.body`)."""
    return orjson.dumps({"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body}) + b"\n"


class Chunker:
    """Where request lines are cut into batches: within the provider's request and byte limits
    (with a margin) and `batch_size`, as they come. It counts sizes only; the lines themselves
    go to disk (`RequestFile`)."""

    def __init__(self, batch_size: int | None = None, max_bytes: int = MAX_BYTES):
        """Cut at `batch_size` requests (None: the provider's limit) and `max_bytes` (with the margin)."""
        self.most = min(batch_size or MAX_REQUESTS, int(MAX_REQUESTS * MARGIN))
        self.room = int(max_bytes * MARGIN)
        self.count = 0
        self.size = 0

    def starts_batch(self, line_bytes: int, lines: int = 1) -> bool:
        """Count `lines` lines of `line_bytes` bytes together (one conversation's requests, which
        stay in one batch); True when they must start the next batch (the current one, not empty,
        is full)."""
        full = self.count > 0 and (self.count + lines > self.most or self.size + line_bytes > self.room)
        if full:
            self.count = self.size = 0
        self.count += lines
        self.size += line_bytes
        return full


def split(lines: list[bytes], batch_size: int | None = None, max_bytes: int = MAX_BYTES) -> list[list[bytes]]:
    """The batches `Chunker` cuts `lines` into, in order."""
    chunker = Chunker(batch_size, max_bytes)
    batches: list[list[bytes]] = []
    for line in lines:
        if chunker.starts_batch(len(line)) or not batches:
            batches.append([])
        batches[-1].append(line)
    return batches


def check_line(line: bytes, number: int) -> str:
    """Validate request line `number` of a batch file locally before upload: an OpenAI batch
    request with a valid custom id, which it returns."""
    try:
        item = orjson.loads(line)
        cid, body = item["custom_id"], item["body"]
        assert isinstance(cid, str) and CUSTOM_ID.match(cid), "custom_id"
        assert item["method"] == "POST" and item["url"] == ENDPOINT, "method or url"
        assert body["model"] and body["messages"], "body"
    except (orjson.JSONDecodeError, KeyError, TypeError, AssertionError) as error:
        raise ConfigError(f"batch request line {number} is not a valid OpenAI batch request ({error})") from None
    return cid


class RequestFile:
    """One batch's request file, written to a temporary file in `directory` line by line as the
    requests are planned, and uploaded from there: a run holds none of its lines in memory (a
    line of the rated dialogues in bench/batch_memory.py is 13 KB, the rubric included: 20,000
    conversations make 271 MB of requests). Where `directory` has no room left (a full disk),
    the file moves to the system's temporary directory, and `moved` says why."""

    def __init__(self, directory: Path):
        """A new empty file in `directory` (on disk, next to the cache: /tmp may be in memory);
        it is unlinked at once, so nothing is left behind by a killed run."""
        self.moved: str | None = None  #: why the file left `directory` (what the system said), if it did
        self.size = 0  #: bytes written, every one of them on disk
        self.ids: list[str] = []
        self._seen: set[str] = set()
        try:
            self.handle: BinaryIO = tempfile.TemporaryFile(dir=directory, prefix="flowrate-batch-", buffering=0)
        except OSError as error:
            self.handle = self._elsewhere(error)

    def add(self, line: bytes) -> None:
        """Check request `line` (`check_line`, its custom id unique in the file) and append it."""
        cid = check_line(line, len(self.ids) + 1)
        if cid in self._seen:
            raise ConfigError(f"batch request line {len(self.ids) + 1} is not a valid OpenAI batch request (custom_id)")
        self._seen.add(cid)
        self.ids.append(cid)
        written = 0
        while written < len(line):
            try:
                written += self.handle.write(line[written:]) or 0
            except OSError as error:
                if self.moved is not None:
                    raise
                self.handle, written = self._elsewhere(error), 0  # the line again, whole, after the rest
        self.size += len(line)

    def _elsewhere(self, error: OSError) -> BinaryIO:
        """A file in the system's temporary directory holding what was written so far."""
        self.moved = error.strerror or str(error)
        moved = tempfile.TemporaryFile(prefix="flowrate-batch-", buffering=0)
        if hasattr(self, "handle"):
            self.handle.seek(0)
            with (
                open(self.handle.fileno(), "rb", closefd=False) as before,
                open(moved.fileno(), "wb", closefd=False) as after,
            ):
                left = self.size
                while left:
                    left -= after.write(before.read(min(left, 1 << 20)))
            self.handle.close()
        return moved

    def close(self) -> None:
        """Close (and so delete) the file."""
        self.handle.close()


class ResultFile:
    """Result lines of batches (OpenAI's format: successes, or errors) in a file on disk, found
    again by custom id. Only each line's offset is held in memory, never the lines: a line is
    read back from disk when its conversation comes by."""

    def __init__(self, handle: BinaryIO):
        """The lines in the open binary file `handle`, once `index` has read them."""
        self.handle = handle
        self.offsets: dict[str, int] = {}

    def index(self, start_offset: int, name: str) -> None:
        """Read the file from `start_offset` to its end, line by line, keeping each custom id's
        offset (the last line of an id counts). A line that is not a result line is an input
        error naming it as line N of `name`."""
        self.handle.seek(start_offset)
        offset = start_offset
        for number, line in enumerate(iter(self.handle.readline, b""), start=1):
            if line.strip():
                try:
                    self.offsets[json_loads(line)["custom_id"]] = offset
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    raise InputError(
                        [f"{name}:{number}: not a batch result line (custom_id)"],
                        headline="problem(s) in the batch results",
                    ) from None
            offset += len(line)

    def get(self, cid: str) -> dict[str, Any] | None:
        """The result line of custom id `cid`, read back from disk; None when there is none."""
        offset = self.offsets.get(cid)
        if offset is None:
            return None
        self.handle.seek(offset)
        return json_loads(self.handle.readline())


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

    def row(self) -> tuple:
        """The record as a row of the state's table: its `COLUMNS`, then its endpoint."""
        return (
            self.batch_id,
            self.provider,
            self.model,
            self.api_base,
            self.input_file,
            self.output,
            orjson.dumps(self.custom_ids).decode(),
            self.status,
            self.created_at_s,
            int(self.collected),
            orjson.dumps(self.command).decode(),
            self.api_base or "",
        )

    @classmethod
    def from_row(cls, row: tuple) -> BatchRecord:
        """The record a row of the state's table (its `COLUMNS`) holds."""
        batch_id, provider, model, api_base, input_file, output, ids, status, created_at, collected, command = row
        return cls(
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


class StateFile:
    """The SQLite file behind a `BatchState` at `path`, migrated to `STATE_VERSION`: created
    unless `create` is False (then a file never written reads as an empty state in memory, and
    nothing is made on disk). A file that cannot be set up (a full disk) gives a state in memory
    for this run (`in_memory`), `error` saying why."""

    def __init__(self, path: Path, create: bool):
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        where = str(path) if create or path.exists() else ":memory:"
        self.error = ""
        self.in_memory = False
        self.db = sqlite3.connect(where, timeout=30, isolation_level=None)
        try:
            self._migrate()
        except sqlite3.OperationalError as error:
            self.db.close()
            self.error, self.in_memory = str(error), True
            self.db = sqlite3.connect(":memory:", isolation_level=None)
            self._migrate()

    def _migrate(self) -> None:
        """Bring the state file to `STATE_VERSION` (SQLite's `user_version`), each step in one
        transaction: 1 keys a batch by its provider, endpoint, id and the time it was recorded (two
        self-hosted servers number their batches alike, and so does one restarted, at the same
        endpoint), where 0 keyed it by the id alone."""
        (version,) = self.db.execute("PRAGMA user_version").fetchone()
        if version >= STATE_VERSION:
            return
        self.db.execute("BEGIN IMMEDIATE")  # another process may be migrating it too: one at a time
        try:
            if self.db.execute("PRAGMA user_version").fetchone()[0] >= STATE_VERSION:
                self.db.execute("COMMIT")
                return
            self.db.execute(f"CREATE TABLE IF NOT EXISTS batches ({STATE_V0})")
            self.db.execute(f"CREATE TABLE batches_v1 ({STATE_V1})")
            self.db.execute(f"INSERT INTO batches_v1 SELECT {COLUMNS}, coalesce(api_base, '') FROM batches")
            self.db.execute("DROP TABLE batches")
            self.db.execute("ALTER TABLE batches_v1 RENAME TO batches")
            self.db.execute(f"PRAGMA user_version = {STATE_VERSION}")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")


class BatchState:
    """The batches a run submitted, kept in SQLite so that a later process can collect them."""

    def __init__(self, directory: Path, create: bool = True):
        """Open `batches.sqlite3` in `directory`, creating it unless `create` is False: then a
        state never written reads as empty and nothing is made on disk (the batch commands
        that only look)."""
        self.path = Path(directory).expanduser() / STATE_FILE
        state_file = StateFile(self.path, create)
        self.not_kept: list[str] = []  #: batches whose record or collection could not be written
        self.last_error = state_file.error  #: what SQLite said of the last write that failed (a full disk)
        self._db = state_file.db
        self._in_memory = state_file.in_memory  #: the file could not be set up: this run's batches are in memory

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
        row = batch.row()
        self._write(batch, f"INSERT INTO batches ({COLUMNS}, endpoint) VALUES ({', '.join('?' * len(row))})", row)
        return batch

    def uncollected(self, output: str | None = None) -> list[BatchRecord]:
        """Batches not collected yet, oldest first: those collected into the results file
        `output` (a resolved path), or all."""
        query = f"SELECT {COLUMNS} FROM batches WHERE collected = 0{' AND output = ?' if output else ''} ORDER BY created_at"
        return [BatchRecord.from_row(row) for row in self._db.execute(query, (output,) if output else ()).fetchall()]

    def all(self) -> list[BatchRecord]:
        """Every recorded batch, oldest first."""
        query = f"SELECT {COLUMNS} FROM batches ORDER BY created_at"
        return [BatchRecord.from_row(row) for row in self._db.execute(query).fetchall()]

    def mark(self, batch: BatchRecord, status: str, collected: bool = False) -> None:
        """Keep the provider's `status` of `batch` (a record of this state), and whether it is `collected`."""
        self._write(
            batch,
            "UPDATE batches SET status = ?, collected = ?"
            " WHERE provider = ? AND endpoint = ? AND batch_id = ? AND created_at = ?",
            (status, int(collected), batch.provider, batch.api_base or "", batch.batch_id, batch.created_at_s),
        )

    def _write(self, batch: BatchRecord, statement: str, values: tuple) -> None:
        """One write of `batch`'s line. The state is how a later process collects a batch, but a
        failed write (a full disk) must not stop the run that can still collect it: it is kept in
        `not_kept` and `last_error` for the run to tell, as the response cache's are."""
        try:
            self._db.execute(statement, values)
            kept = not self._in_memory
        except sqlite3.Error as error:
            self.last_error, kept = str(error), False
        if not kept and batch.batch_id not in self.not_kept:
            self.not_kept.append(batch.batch_id)

    def close(self) -> None:
        """Close the state file."""
        self._db.close()


def _namespace(value: Any) -> Any:
    """A JSON answer with attribute access (`info.request_counts.completed`), as the SDK's objects have."""
    if isinstance(value, dict):
        return SimpleNamespace(**{key: _namespace(item) for key, item in value.items()})
    return value


def _decoded(payload: bytes) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise BadReply(f"the answer is not JSON: {payload[:200]!r}") from None


class OpenAIFiles:
    """OpenAI's Files and Batches endpoints (`/files`, `/batches`) over aiohttp, for OpenAI and any
    `--api-base`: LiteLLM is not imported for them. Its import is most of a batch run's memory:
    online, 93 MB of peak RSS through flowrate's own client against 226 MB through LiteLLM
    (bench/batch_memory.py, 2,000 conversations). Uploads stream from the open file and
    downloads are written to disk as they come; a failed call is tried again as the run's
    `RetryPolicy` says (`--max-retries`, `--backoff`, `--backoff-max`), as a judge call is."""

    def __init__(self, api_base: str | None, retry: RetryPolicy | None = None):
        """The endpoints under `api_base` (else OPENAI_BASE_URL, else OpenAI's), with the key in
        OPENAI_API_KEY; a failed call is tried again as `retry` says (default: `RetryPolicy()`)."""
        self.base, self.headers = openai_endpoint(api_base)
        self.retry = retry or RetryPolicy()

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        upload: BinaryIO | None = None,
        into: BinaryIO | None = None,
    ) -> Any:
        """`method` on `path` under the base URL, sending the `json` body, or the file `upload`
        (streamed from disk as a batch file, in a multipart form); returns the answer with
        attribute access, or, with `into`, appends the answer's bytes to `into` in chunks of
        `DOWNLOAD_CHUNK_BYTES` as they come (None). Raises flowrate's `JudgeError` for an error
        answer, a lost connection or a timeout, once the retries are spent."""
        start = into.tell() if into is not None else 0
        for attempt in range(1, self.retry.max_retries + 1):
            try:
                return await self._once(method, path, json, upload, into)
            except JudgeError as error:
                if not worth_retrying(error):
                    raise
                wait_s = self.retry.wait_seconds(attempt, error, random.random())
            if into is not None:  # what a lost download wrote is written again
                into.seek(start)
                into.truncate()
            await asyncio.sleep(wait_s)
        return await self._once(method, path, json, upload, into)

    async def _once(self, method, path, json, upload, into) -> Any:
        import aiohttp

        data = sent = None
        if upload is not None:
            # aiohttp closes the file it has sent: each try sends a copy of the descriptor, read from the start
            sent = os.fdopen(os.dup(upload.fileno()), "rb")
            sent.seek(0)
            data = aiohttp.FormData()
            data.add_field("purpose", "batch")
            data.add_field("file", sent, filename="requests.jsonl", content_type="application/jsonl")
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=READ_TIMEOUT_S)
        try:
            async with (
                aiohttp.ClientSession(trust_env=True, timeout=timeout, headers=self.headers) as client,
                client.request(method, f"{self.base}{path}", json=json, data=data) as answer,
            ):
                if answer.status >= 400:
                    raise error_for(answer.status, await answer.read(), answer.headers)
                if into is None:
                    return _namespace(_decoded(await answer.read()))
                async for chunk in answer.content.iter_chunked(DOWNLOAD_CHUNK_BYTES):
                    into.write(chunk)
                return None
        except TimeoutError as error:
            raise TimedOut(str(error) or "the call timed out") from error
        except (aiohttp.ClientError, OSError) as error:  # a lost connection, or the download's disk
            raise Unreachable(str(error)) from error
        finally:
            if sent is not None:
                sent.close()


def litellm_options(provider: str, api_base: str | None) -> dict[str, Any]:
    """What every LiteLLM files and batches call of `provider` at `api_base` is given."""
    options: dict[str, Any] = {"custom_llm_provider": provider}
    if api_base:
        options["api_base"] = api_base
        if provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
            options["api_key"] = "no-key"
    return options


def batch_api_error(what: str, error: Exception, where: str) -> BatchApiError:
    """`error` as one plain `BatchApiError` saying `what` failed at `where`, with no secret in it."""
    status = error.status if isinstance(error, JudgeError) else None
    verb = f"refused to {what} ({status})" if status is not None else f"could not {what}"
    return BatchApiError(f"the batch API at {where} {verb}: {one_line(redact_secrets(str(error)))}", status)


class Provider:
    """Files and batches: over flowrate's own client (`OpenAIFiles`) for the OpenAI protocol, else
    through LiteLLM, for the providers it supports there."""

    def __init__(self, provider: str, api_base: str | None, transport: str = "auto", retry: RetryPolicy | None = None):
        """The batch API of `provider` at `api_base` (None: the provider's own); `transport`
        "litellm" sends OpenAI's through LiteLLM too (`batch status` and `batch cancel`: auto);
        `retry` is how hard flowrate's own client tries each call (default: `RetryPolicy()`)."""
        if provider == "anthropic":
            raise ConfigError(
                "LiteLLM cannot create Anthropic message batches: use the online path, or --batch-export and a runner of your own"
            )
        self.provider = provider
        self.api_base = api_base
        self.where = redacted_url(api_base) or f"the {provider} API"  # as its errors name it
        self._files = OpenAIFiles(api_base, retry) if provider == "openai" and transport != "litellm" else None

    async def _call(self, what: str, name: str, **arguments: Any) -> Any:
        """LiteLLM's `name`, awaited; its errors as one plain `BatchApiError` saying `what` failed."""
        from flowrate.judge.lazy_litellm import litellm as _litellm

        try:
            return await getattr(_litellm(), name)(**arguments, **litellm_options(self.provider, self.api_base))
        except Exception as error:  # LiteLLM's mapped errors, the OpenAI SDK's and the transport's
            raise batch_api_error(what, judge_error_of(error), self.where) from None

    async def _direct(self, files: OpenAIFiles, what: str, method: str, path: str, **arguments: Any) -> Any:
        """`files.call`; its errors as one plain `BatchApiError` saying `what` failed."""
        try:
            return await files.call(method, path, **arguments)
        except JudgeError as error:
            raise batch_api_error(what, error, self.where) from None

    async def submit(self, requests: RequestFile) -> tuple[str, str]:
        """Upload a batch's `requests` file from disk and create the batch; returns (input file
        id, batch id). The file is streamed from disk either way: aiohttp reads the open file as it
        sends it, and through LiteLLM the OpenAI SDK gets the open file, which httpx reads 64 KB at a
        time (given bytes or a path, the SDK holds the whole file in memory, the form a copy)."""
        if self._files is not None:
            uploaded = await self._direct(self._files, "upload a batch file", "POST", "/files", upload=requests.handle)
            body = {"input_file_id": uploaded.id, "endpoint": ENDPOINT, "completion_window": "24h"}
            batch = await self._direct(self._files, "create a batch", "POST", "/batches", json=body)
            return uploaded.id, batch.id
        requests.handle.seek(0)
        uploaded = await self._call(
            "upload a batch file", "acreate_file", file=("requests.jsonl", requests.handle), purpose="batch"
        )
        batch = await self._call(
            "create a batch", "acreate_batch", completion_window="24h", endpoint=ENDPOINT, input_file_id=uploaded.id
        )
        return uploaded.id, batch.id

    async def retrieve(self, batch_id: str) -> Any:
        """The provider's record of batch `batch_id`: its status, request counts and files."""
        if self._files is not None:
            return await self._direct(self._files, f"retrieve batch {batch_id}", "GET", f"/batches/{batch_id}")
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

    async def download(self, file_id: str | None, into: BinaryIO) -> None:
        """Append the content of the results (or errors) file `file_id` to `into` (nothing when
        there is no file), in chunks of `DOWNLOAD_CHUNK_BYTES` as they arrive. LiteLLM streams a
        file's content for the OpenAI protocol too; for the other providers it gives only the
        whole file, written at once."""
        if not file_id:
            return
        what = f"read file {file_id}"
        if self._files is not None:
            await self._direct(self._files, what, "GET", f"/files/{file_id}/content", into=into)
        else:
            response = await self._call(
                what, "afile_content", file_id=file_id, stream=True, chunk_size=DOWNLOAD_CHUNK_BYTES
            )
            chunks = getattr(response, "stream_iterator", None)
            if chunks is None:
                into.write(response.content)
            else:
                try:
                    async for chunk in chunks:
                        into.write(chunk)
                except Exception as error:  # the connection lost part-way, as in `_call`
                    raise batch_api_error(what, judge_error_of(error), self.where) from None
                finally:
                    await chunks.aclose()
        into.write(b"\n")  # a last line without its newline stays a line of its own

    async def cancel(self, batch_id: str) -> Any:
        """Ask the provider to cancel batch `batch_id`; returns its record, whose status says what it did."""
        if self._files is not None:
            return await self._direct(self._files, f"cancel batch {batch_id}", "POST", f"/batches/{batch_id}/cancel")
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


@dataclass
class BatchReplies:
    """The replies in a successful result line: their texts, the line's usage (the cached input and
    the reasoning among it, as online), and each reply's tokens with their log-probabilities
    (`logprobs`, None for one without)."""

    texts: list[str]
    usage: Usage
    logprobs: list[list[dict[str, Any]] | None]


def result_replies(line: dict[str, Any]) -> BatchReplies | None:
    """The replies of a successful result line; None for a failed one, or one with no reply."""
    response = line.get("response") or {}
    if line.get("error") or response.get("status_code") != 200:
        return None
    body = response.get("body") or {}
    choices = body.get("choices") or []
    if not choices:
        return None
    return BatchReplies(
        texts=[(choice.get("message") or {}).get("content") or "" for choice in choices],
        usage=usage_of(body.get("usage")),
        logprobs=[tokens_of(choice.get("logprobs")) for choice in choices],
    )
