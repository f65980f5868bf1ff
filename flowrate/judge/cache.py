"""A persistent cache of judge replies in SQLite, safe for several runs at once.

The key covers exactly what changes a verdict: the model, the rubric version, the
rendered messages, the temperature, the number of samples and the response format.
Only usable replies are stored; errors and unparsable replies never are.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

import orjson

from flowrate.errors import ConfigError

CACHE_FILE = "responses.sqlite3"
WRITE_BATCH = 200
WRITE_INTERVAL_S = 2.0
LOOKUP_BATCH = 500  # below SQLite's limit on bound parameters
OPEN_TIMEOUT_S = 30.0


def default_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("flowrate"))


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


class ResponseCache:
    """Judge replies by key. WAL mode and a busy timeout let two runs write at once."""

    def __init__(self, directory: Path):
        self.path = Path(directory).expanduser() / CACHE_FILE
        self._pending: dict[str, tuple] = {}
        self._last_flush = time.monotonic()
        self.lost_writes = 0
        self.last_error = ""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = self._open()
        except (OSError, sqlite3.Error) as error:
            raise ConfigError(f"{self.path}: cannot open the response cache: {error}") from None

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
                    " rubric_version TEXT NOT NULL, texts BLOB NOT NULL, created_at REAL NOT NULL)"
                )
                return db
            except sqlite3.OperationalError as error:
                db.close()
                contended = "locked" in str(error) or "busy" in str(error)
                if not contended or time.monotonic() > deadline:
                    raise
                time.sleep(random.uniform(0.01, 0.1))

    def get(self, key: str) -> list[str] | None:
        if key in self._pending:
            return orjson.loads(self._pending[key][3])
        found = self._db.execute("SELECT texts FROM responses WHERE key = ?", (key,)).fetchone()
        return orjson.loads(found[0]) if found else None

    def get_many(self, keys: list[str]) -> dict[str, list[str]]:
        """Several lookups in one query: each query hands the GIL to other threads and back."""
        found = {key: orjson.loads(self._pending[key][3]) for key in keys if key in self._pending}
        wanted = [key for key in keys if key not in found]
        for start in range(0, len(wanted), LOOKUP_BATCH):
            chunk = wanted[start : start + LOOKUP_BATCH]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT key, texts FROM responses WHERE key IN ({marks})", chunk).fetchall()
            found.update((key, orjson.loads(texts)) for key, texts in rows)
        return found

    def put(self, key: str, model: str, rubric_version: str, texts: list[str]) -> None:
        """Kept in memory and written in one transaction per batch: a commit per reply would
        cost more than the rest of flowrate's own work on it."""
        self._pending[key] = (key, model, rubric_version, orjson.dumps(texts), time.time())
        if len(self._pending) >= WRITE_BATCH or time.monotonic() - self._last_flush > WRITE_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        """Write what is pending. The cache is an aid, not the record: a failed write (a full
        disk, say) is counted in `lost_writes` for the run to report, and the run goes on."""
        if self._pending:
            try:
                with self._db:
                    self._db.execute("BEGIN IMMEDIATE")  # take the write lock now, waiting on the busy timeout
                    self._db.executemany(
                        "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)", list(self._pending.values())
                    )
            except sqlite3.Error as error:
                self.lost_writes += len(self._pending)
                self.last_error = str(error)
            self._pending.clear()
        self._last_flush = time.monotonic()

    def stats(self) -> dict[str, Any]:
        self.flush()
        rows = self._db.execute("SELECT model, COUNT(*) FROM responses GROUP BY model ORDER BY model").fetchall()
        size = sum(p.stat().st_size for p in self.path.parent.glob(CACHE_FILE + "*"))
        return {"path": str(self.path), "entries": sum(n for _, n in rows), "bytes": size, "models": dict(rows)}

    def clear(self) -> int:
        self._pending.clear()
        removed = self._db.execute("DELETE FROM responses").rowcount
        self._db.execute("VACUUM")
        return removed

    def close(self) -> None:
        self.flush()
        self._db.close()
