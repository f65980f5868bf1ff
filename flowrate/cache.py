"""A persistent cache of judge replies in SQLite, safe for several runs at once.

The key covers exactly what changes a verdict: the model, the rubric version, the
rendered messages, the temperature, the number of samples and the response format.
Only usable replies are stored; errors and unparsable replies never are.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path
from typing import Any

import orjson

from flowrate.exit_codes import ConfigError

CACHE_FILE = "responses.sqlite3"


def default_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("flowrate"))


def cache_key(model: str, rubric_version: str, messages: list[dict[str, str]], temperature: float, samples: int, response_format: str | None) -> str:
    payload = {
        "model": model,
        "rubric_version": rubric_version,
        "messages": messages,
        "temperature": temperature,
        "samples": samples,
        "response_format": response_format,
    }
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


class ResponseCache:
    """Judge replies by key. WAL mode and a busy timeout let two runs write at once."""

    def __init__(self, directory: Path):
        self.path = Path(directory) / CACHE_FILE
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL,"
                " rubric_version TEXT NOT NULL, texts BLOB NOT NULL, created_at REAL NOT NULL)"
            )
        except (OSError, sqlite3.Error) as error:
            raise ConfigError(f"{self.path}: cannot open the response cache: {error}") from None

    def get(self, key: str) -> list[str] | None:
        found = self._db.execute("SELECT texts FROM responses WHERE key = ?", (key,)).fetchone()
        return orjson.loads(found[0]) if found else None

    def put(self, key: str, model: str, rubric_version: str, texts: list[str]) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
            (key, model, rubric_version, orjson.dumps(texts), time.time()),
        )

    def stats(self) -> dict[str, Any]:
        rows = self._db.execute("SELECT model, COUNT(*) FROM responses GROUP BY model ORDER BY model").fetchall()
        size = sum(p.stat().st_size for p in self.path.parent.glob(CACHE_FILE + "*"))
        return {"path": str(self.path), "entries": sum(n for _, n in rows), "bytes": size, "models": dict(rows)}

    def clear(self) -> int:
        removed = self._db.execute("DELETE FROM responses").rowcount
        self._db.execute("VACUUM")
        return removed

    def close(self) -> None:
        self._db.close()
