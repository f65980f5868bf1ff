"""A persistent cache of judge replies in SQLite, safe for several runs at once.

The key covers exactly what changes a verdict: the model, the rubric version, the
rendered messages, the temperature, the number of samples and the response format.
Only usable replies are stored; errors and unparsable replies never are.

Beside each reply the cache keeps the request it answered: the exact messages sent (cut logs and
a truncated middle as sent) and the conversation's id, so `flowrate review` can show a row's
prompt and raw reply. Each distinct message is stored once (table `messages`, by its SHA-256),
an entry naming its messages by digest: the rubric's instructions and worked examples, the same
in every request, take no room per entry.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from flowrate.errors import ConfigError
from flowrate.judge.logprobs import restored, storable, tokens_fault

CACHE_FILE = "responses.sqlite3"
WRITE_BATCH = 200
WRITE_INTERVAL_S = 2.0
LOOKUP_BATCH = 500  # below SQLite's limit on bound parameters
OPEN_TIMEOUT_S = 30.0
KNOWN_MESSAGES = 256  # messages remembered as written: a rubric's few, and room for a run's several rubrics


def read_stats(directory: Path, must_exist: bool = True) -> dict[str, Any]:
    """`ResponseCache.stats` of the cache in `directory`, creating nothing: a missing
    `directory` is an error when `must_exist` (a directory the user named), else, like a
    directory with no cache file yet, a cache of no entries."""
    directory = Path(directory).expanduser()
    path = directory / CACHE_FILE
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"--cache-dir {directory}: is not a directory")
    if not directory.exists() and must_exist:
        raise ConfigError(f"--cache-dir {directory}: does not exist (cache stats creates nothing)")
    if not path.exists():
        return {"path": str(path), "entries": 0, "bytes": 0, "models": {}}
    cache = ResponseCache(directory)
    try:
        return cache.stats()
    finally:
        cache.close()


def messages_digest(messages: list[dict[str, str]]) -> str:
    """The messages of a request, hashed once: a plan's keys for each response form share it."""
    return hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).hexdigest()


def cache_key(
    model: str,
    rubric_version: str,
    messages: list[dict[str, str]] | str,
    temperature: float,
    samples: int,
    response_format: str | None,
) -> str:
    """The key of a reply: the judge (`model` and where it is served), the rubric's version,
    the `messages` (or their `messages_digest`), temperature, samples and the response form."""
    digest = messages if isinstance(messages, str) else messages_digest(messages)
    payload = {
        "model": model,
        "rubric_version": rubric_version,
        "messages": digest,
        "temperature": temperature,
        "samples": samples,
        "response_format": response_format,
    }
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class CacheRecord:
    """One cache entry as `flowrate review` shows it: the judge's raw replies (`texts`, one per
    sample) to exactly the `messages` sent, written at `created_at` (seconds since the epoch);
    `messages` is None for an entry written before the cache kept requests."""

    key: str
    model: str
    rubric_version: str
    texts: list[str]
    created_at: float
    messages: list[dict[str, str]] | None


def read_records(db: sqlite3.Connection, conversation_id: str, model: str | None = None) -> list[CacheRecord]:
    """`ResponseCache.records_for`, read from the cache's connection `db`."""
    query = "SELECT key, model, rubric_version, texts, created_at, request FROM responses WHERE conversation_id = ?"
    parameters = [conversation_id]
    if model is not None:
        query += " AND model = ?"
        parameters.append(model)
    found = db.execute(query + " ORDER BY created_at DESC", parameters).fetchall()
    wanted = sorted({name for *_, request in found if request for name in orjson.loads(request)})
    bodies = {}
    for start in range(0, len(wanted), LOOKUP_BATCH):
        chunk = wanted[start : start + LOOKUP_BATCH]
        marks = ",".join("?" * len(chunk))
        for name, blob in db.execute(f"SELECT digest, message FROM messages WHERE digest IN ({marks})", chunk):
            bodies[name] = orjson.loads(blob)
    records = []
    for key, judge, version, texts, created_at, request in found:
        names = orjson.loads(request) if request else None
        messages = [bodies[name] for name in names] if names and all(n in bodies for n in names) else None
        records.append(CacheRecord(key, judge, version, orjson.loads(texts), created_at, messages))
    return records


class MessageNames:
    """Each message of a request named by its SHA-256 (128 bits of it, in hex) for the
    `messages` table, and the messages not yet written (`pending`)."""

    def __init__(self) -> None:
        self.pending: dict[str, bytes] = {}
        self._known: dict[tuple[str, str], str] = {}
        self._last_prefix: tuple[list[dict[str, str]], list[str]] = ([], [])

    def of(self, messages: list[dict[str, str]]) -> list[str]:
        """The names of `messages`, queueing those not written yet."""
        return [*self._prefix_names(messages[:-1]), *map(self._message_name, messages[-1:])]

    def forget(self) -> None:
        """Forget what was written (the file was cleared, or a write failed)."""
        self.pending.clear()
        self._known.clear()
        self._last_prefix = ([], [])

    def _prefix_names(self, prefix: list[dict[str, str]]) -> list[str]:
        """The names of a request's messages before the conversation: the rubric's, the very
        same objects in each request of a run, so named once (bench/review.py, on a loaded
        machine: keeping requests cost 62 us an entry when each message was hashed, 34 to 52 us
        with this)."""
        last, names = self._last_prefix
        if len(last) == len(prefix) and all(a is b for a, b in zip(last, prefix)):
            return names
        names = [self._message_name(message) for message in prefix]
        self._last_prefix = (prefix, names)
        return names

    def _message_name(self, message: dict[str, str]) -> str:
        """A message's name in the `messages` table (its SHA-256, 128 bits of it in hex), queued
        for writing unless this cache wrote it already; the rubric's messages, the same in
        every request, are hashed once (`_known`, reset past `KNOWN_MESSAGES`)."""
        memo = (message.get("role", ""), message.get("content", ""))
        name = self._known.get(memo)
        if name is None:
            blob = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
            name = hashlib.sha256(blob).hexdigest()[:32]
            self.pending[name] = blob
            if len(self._known) >= KNOWN_MESSAGES:
                self._known.clear()
            self._known[memo] = name
        return name


def _add_request_columns(db: sqlite3.Connection) -> None:
    """A cache from before requests were kept gets their columns and table; its old entries
    keep their replies, with no request (two runs may race here: a column another just added
    is no error)."""
    db.execute("CREATE TABLE IF NOT EXISTS messages (digest TEXT PRIMARY KEY, message BLOB NOT NULL)")
    columns = {row[1] for row in db.execute("PRAGMA table_info(responses)")}
    for name, kind in (("request", "BLOB"), ("conversation_id", "TEXT"), ("logprobs", "BLOB")):
        if name not in columns:
            try:
                db.execute(f"ALTER TABLE responses ADD COLUMN {name} {kind}")
            except sqlite3.OperationalError as error:
                if "duplicate column" not in str(error):
                    raise
    db.execute("CREATE INDEX IF NOT EXISTS responses_by_conversation ON responses (conversation_id)")


class PendingWrites:
    """The replies put in a response cache and not yet in its file `db` (`entries`, by key), with
    the messages they name (`names`): written in one transaction once `WRITE_BATCH` are pending
    or `WRITE_INTERVAL_S` have passed. The cache is an aid, not the record: a failed write (a
    full disk, say) is counted in `lost_writes`, SQLite's words in `last_error`, for the run to
    report, and the run goes on."""

    def __init__(self, db: sqlite3.Connection, names: MessageNames):
        self.db = db
        self.names = names
        self.entries: dict[str, tuple] = {}
        self.lost_writes = 0
        self.last_error = ""
        self.last_flush = time.monotonic()

    def add(self, entry: tuple) -> None:
        """Keep `entry`, a row of the `responses` table, writing what is pending when it is time."""
        self.entries[entry[0]] = entry
        if len(self.entries) >= WRITE_BATCH or time.monotonic() - self.last_flush > WRITE_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        """Write what is pending, in one transaction."""
        if self.entries:
            try:
                with self.db:
                    self.db.execute("BEGIN IMMEDIATE")  # take the write lock now, waiting on the busy timeout
                    self.db.executemany(
                        "INSERT OR IGNORE INTO messages VALUES (?, ?)", list(self.names.pending.items())
                    )
                    self.db.executemany(
                        "INSERT OR REPLACE INTO responses (key, model, rubric_version, texts, created_at, request,"
                        " conversation_id, logprobs) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        list(self.entries.values()),
                    )
            except sqlite3.Error as error:
                self.lost_writes += len(self.entries)
                self.last_error = str(error)
                self.names.forget()  # its messages may not be in the file
            self.entries.clear()
            self.names.pending.clear()
        self.last_flush = time.monotonic()


class ResponseCache:
    """Judge replies by key. WAL mode and a busy timeout let two runs write at once."""

    def __init__(self, directory: Path):
        self.path = Path(directory).expanduser() / CACHE_FILE
        self._names = MessageNames()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = self._open()
        except (OSError, sqlite3.Error) as error:
            raise ConfigError(f"{self.path}: cannot open the response cache: {error}") from None
        self.writes = PendingWrites(self._db, self._names)

    def _open(self) -> sqlite3.Connection:
        """Connect and set up, retrying while another run sets up the same new file: switching
        a database to WAL can answer "locked" at once, without waiting on the busy timeout."""
        deadline = time.monotonic() + OPEN_TIMEOUT_S
        while True:
            db = sqlite3.connect(self.path, timeout=OPEN_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            try:
                if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":  # WAL persists in the file
                    db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute(
                    "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL,"
                    " rubric_version TEXT NOT NULL, texts BLOB NOT NULL, created_at REAL NOT NULL,"
                    " request BLOB, conversation_id TEXT, logprobs BLOB)"
                )
                _add_request_columns(db)
                return db
            except sqlite3.OperationalError as error:
                db.close()
                contended = "locked" in str(error) or "busy" in str(error)
                if not contended or time.monotonic() > deadline:
                    raise
                time.sleep(random.uniform(0.01, 0.1))

    def get(self, key: str) -> list[str] | None:
        if key in self.writes.entries:
            return orjson.loads(self.writes.entries[key][3])
        found = self._db.execute("SELECT texts FROM responses WHERE key = ?", (key,)).fetchone()
        return orjson.loads(found[0]) if found else None

    def get_many(self, keys: list[str]) -> dict[str, Replies]:
        """The replies under each of `keys` found, with their tokens' log-probabilities (None where
        they were kept without), in one query: each query hands the GIL to other threads and back."""
        return _looked_up(self._db, self.writes.entries, keys)

    def put(
        self,
        key: str,
        model: str,
        rubric_version: str,
        texts: list[str],
        messages: list[dict[str, str]] | None = None,
        conversation_id: str | None = None,
        logprobs: list[list[dict[str, Any]] | None] | None = None,
    ) -> None:
        """Keep `texts`, the replies under `key` of `model` judging by `rubric_version`, with the
        request they answer: the `messages` sent and the `conversation_id` (for `records_for`), and
        each reply's tokens with their log-probabilities (`logprobs`, None: kept without).
        Kept in memory and written in one transaction per batch: a commit per reply would cost
        more than the rest of flowrate's own work on it (`PendingWrites`)."""
        digests = orjson.dumps(self._names.of(messages)) if messages is not None else None
        tokens = orjson.dumps(storable(logprobs)) if logprobs and any(logprobs) else None
        entry = (key, model, rubric_version, orjson.dumps(texts), time.time(), digests, conversation_id, tokens)
        self.writes.add(entry)

    def flush(self) -> None:
        """Write what is pending (`PendingWrites.flush`)."""
        self.writes.flush()

    def stats(self) -> dict[str, Any]:
        self.flush()
        rows = self._db.execute("SELECT model, COUNT(*) FROM responses GROUP BY model ORDER BY model").fetchall()
        size = sum(p.stat().st_size for p in self.path.parent.glob(CACHE_FILE + "*"))
        return {"path": str(self.path), "entries": sum(n for _, n in rows), "bytes": size, "models": dict(rows)}

    def records_for(self, conversation_id: str, model: str | None = None) -> list[CacheRecord]:
        """Every entry kept for `conversation_id` (of `model` only, when given), newest first:
        the request's messages as sent and the judge's raw replies."""
        self.flush()
        return read_records(self._db, conversation_id, model)

    def clear(self) -> int:
        self.writes.entries.clear()
        self._names.forget()
        self._db.execute("DELETE FROM messages")
        removed = self._db.execute("DELETE FROM responses").rowcount
        self._db.execute("VACUUM")
        return removed

    def close(self) -> None:
        self.flush()
        self._db.close()


@dataclass
class Replies:
    """The replies kept under one key: their `texts`, and each one's tokens with log-probabilities
    (`logprobs`, None for a reply kept without; empty when none was)."""

    texts: list[str]
    logprobs: list[list[dict[str, Any]] | None]

    @property
    def kept_without_logprobs(self) -> bool:
        """Whether a reply was kept with no tokens at all (asked without log-probabilities). One
        kept with tokens that give no distribution (NaN, kept as null; tokens that do not spell it)
        was asked with them: its server would answer the same again, so it is not paid for again."""
        return len(self.logprobs) != len(self.texts) or any(
            tokens_fault(text, tokens) == "missing" for text, tokens in zip(self.texts, self.logprobs, strict=True)
        )


def _looked_up(db: sqlite3.Connection, pending: dict[str, tuple], keys: list[str]) -> dict[str, Replies]:
    """The replies under `keys` in the writes `pending`, else in `db`, `LOOKUP_BATCH` keys a query."""
    found = {key: _replies(pending[key][3], pending[key][7]) for key in keys if key in pending}
    wanted = [key for key in keys if key not in found]
    for start in range(0, len(wanted), LOOKUP_BATCH):
        chunk = wanted[start : start + LOOKUP_BATCH]
        query = f"SELECT key, texts, logprobs FROM responses WHERE key IN ({','.join('?' * len(chunk))})"
        found.update((key, _replies(texts, tokens)) for key, texts, tokens in db.execute(query, chunk))
    return found


def _replies(texts: bytes, logprobs: bytes | None) -> Replies:
    return Replies(orjson.loads(texts), restored(orjson.loads(logprobs)) if logprobs else [])


def existing_cache(directory: str | None) -> ResponseCache | None:
    """The response cache in `directory` (default: the user cache folder), or None when none
    has been written there yet; nothing is created. A `directory` that is not a directory is a
    `ConfigError` (exit 2)."""
    from flowrate.settings.groups import cache_folder

    folder = cache_folder(directory)
    if directory and folder.exists() and not folder.is_dir():
        raise ConfigError(f"--cache-dir {directory}: is not a directory")
    return ResponseCache(folder) if (folder / CACHE_FILE).exists() else None
