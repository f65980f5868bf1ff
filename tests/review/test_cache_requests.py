"""The response cache keeps each reply's request: the messages as sent, each distinct message
stored once, found again by conversation; a cache from before requests were kept opens, its
entries with no request."""

import sqlite3

from flowrate.judge.cache import CACHE_FILE, ResponseCache

PREFIX = [{"role": "system", "content": "the rubric " * 500}, {"role": "user", "content": "a worked example"}]


def test_a_replys_messages_come_back_exactly_and_shared_ones_are_stored_once(tmp_path):
    cache = ResponseCache(tmp_path)
    for n in range(3):
        messages = [*PREFIX, {"role": "user", "content": f"conversation {n} </script> \u2028"}]
        cache.put(f"k{n}", "gpt-4o", "v1", [f'{{"verdict": "fully", "n": {n}}}'], messages, f"c{n}")
    cache.put(
        "k3", "gpt-4o", "v2", ["again"], [*PREFIX, {"role": "user", "content": "conversation 0 </script> \u2028"}], "c0"
    )
    cache.close()
    cache = ResponseCache(tmp_path)
    records = cache.records_for("c0")
    assert [(r.key, r.rubric_version, r.texts) for r in records] == [
        ("k3", "v2", ["again"]),
        ("k0", "v1", ['{"verdict": "fully", "n": 0}']),
    ]
    assert records[1].messages == [*PREFIX, {"role": "user", "content": "conversation 0 </script> \u2028"}]
    assert cache.records_for("c0", "other-model") == []
    stored = sqlite3.connect(tmp_path / CACHE_FILE).execute("SELECT count(*) FROM messages").fetchone()[0]
    assert stored == 2 + 3  # the rubric's two messages once, and each conversation's own
    assert cache.clear() == 4 and cache.records_for("c1") == []
    cache.close()


def test_a_cache_from_before_requests_were_kept_opens_and_its_replies_stay_usable(tmp_path):
    old = sqlite3.connect(tmp_path / CACHE_FILE)
    old.execute(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, rubric_version TEXT NOT NULL,"
        " texts BLOB NOT NULL, created_at REAL NOT NULL)"
    )
    old.execute("INSERT INTO responses VALUES ('k', 'gpt-4o', 'v1', '[\"old reply\"]', 1.0)")
    old.commit()
    old.close()
    cache = ResponseCache(tmp_path)
    assert cache.get("k") == ["old reply"]
    cache.put("k2", "gpt-4o", "v1", ["new"], [{"role": "user", "content": "hi"}], "c9")
    assert [(r.texts, r.messages) for r in cache.records_for("c9")] == [(["new"], [{"role": "user", "content": "hi"}])]
    assert cache.stats()["entries"] == 2
    cache.close()


def test_the_review_app_opens_a_cache_only_where_one_was_written_and_never_creates_one(tmp_path):
    import pytest

    from flowrate.errors import ConfigError
    from flowrate.judge.cache import existing_cache

    folder = tmp_path / "cache"
    assert existing_cache(str(folder)) is None and not folder.exists()
    ResponseCache(folder).close()
    opened = existing_cache(str(folder))
    assert opened is not None and opened.path == folder / CACHE_FILE
    opened.close()
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError, match="--cache-dir .*a-file: is not a directory"):
        existing_cache(str(tmp_path / "a-file"))
