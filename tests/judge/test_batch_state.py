"""The provider batch state: what `BatchState` keeps comes back as typed `BatchRecord`s, the
same from the process that recorded a batch and from a later one, state files of older
flowrate versions included; and never a secret in it."""

import sqlite3
import time

import orjson

from flowrate.judge.batch_api import BatchRecord, BatchState, redacted_url


def test_a_recorded_batch_comes_back_as_the_record_it_was_stored_as(tmp_path):
    state = BatchState(tmp_path)
    before = time.time()
    recorded = state.record(
        "batch-1", "openai", "gpt-4o", "http://gw.example/v1", "file-1", "/r/out.jsonl", ["a", "b"], {"paths": ["c"]}
    )
    state.record("batch-2", "openai", "gpt-4o", None, "file-2", "/r/other.jsonl", ["c"], {})
    state.close()
    assert isinstance(recorded, BatchRecord)
    assert (recorded.status, recorded.collected, recorded.custom_ids) == ("in_progress", False, ["a", "b"])
    assert before <= recorded.created_at_s <= time.time()
    later = BatchState(tmp_path)  # another process, as `batch collect` is
    assert later.all()[0] == recorded
    assert [batch.batch_id for batch in later.uncollected("/r/out.jsonl")] == ["batch-1"]
    later.mark(recorded, "completed", collected=True)
    (collected, other) = later.all()
    assert (collected.status, collected.collected) == ("completed", True) and other.batch_id == "batch-2"
    assert [batch.batch_id for batch in later.uncollected()] == ["batch-2"]
    later.close()


def test_a_state_file_written_by_an_older_flowrate_reads_as_records(tmp_path):
    # The table and the row exactly as flowrate wrote them before the records (commit ffc73e3).
    with sqlite3.connect(tmp_path / "batches.sqlite3") as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY, provider TEXT, model TEXT, api_base TEXT,"
            " input_file TEXT, output TEXT, custom_ids TEXT, status TEXT, created_at REAL, collected INTEGER DEFAULT 0,"
            " command TEXT)"
        )
        db.execute(
            "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, 'in_progress', ?, 0, ?)",
            (
                "batch-old",
                "openai",
                "gpt-4o",
                None,
                "file-9",
                "/r/out.jsonl",
                orjson.dumps(["x"]).decode(),
                1_700_000_000.5,
                orjson.dumps({"paths": ["/data/c.jsonl"], "settings": {"model": "gpt-4o"}}).decode(),
            ),
        )
    state = BatchState(tmp_path)
    assert state.uncollected() == [
        BatchRecord(
            batch_id="batch-old",
            provider="openai",
            model="gpt-4o",
            api_base=None,
            input_file="file-9",
            output="/r/out.jsonl",
            custom_ids=["x"],
            status="in_progress",
            created_at_s=1_700_000_000.5,
            collected=False,
            command={"paths": ["/data/c.jsonl"], "settings": {"model": "gpt-4o"}},
        )
    ]
    state.close()


def test_redacted_url_drops_credentials_and_masks_secret_query_values():
    assert redacted_url("http://user:pass@host:8000/v1") == "http://host:8000/v1"
    assert redacted_url("https://token@gw.example/v1") == "https://gw.example/v1"
    assert (
        redacted_url("https://gw.example/openai?api-key=k-123&api-version=2024-06-01&sig=abc")
        == "https://gw.example/openai?api-key=***&api-version=2024-06-01&sig=***"
    )
    assert redacted_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert redacted_url(None) is None


def test_the_batch_state_file_never_holds_a_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_TOKEN", "tok-0123456789-gateway")
    secrets = ["pa55-w0rd-x", "alice", "qk-1234567890", "tok-0123456789-gateway", "sk-live-abcdef123456"]
    api_base = "http://alice:pa55-w0rd-x@gw.example/v1?api-key=qk-1234567890&api-version=2024-06-01"
    command = {
        "paths": ["/data/c.jsonl"],
        "settings": {
            "api_base": api_base,
            "api_key": "sk-live-abcdef123456",
            "only": ["team=tok-0123456789-gateway"],
            "max_input_tokens": 4096,
        },
    }
    state = BatchState(tmp_path)
    state.record("batch-1", "openai", "gpt-4o", api_base, "file-1", "/r/out.jsonl", ["x"], command)
    state.close()
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("batches.sqlite3*"))
    assert b"batch-1" in stored and b"2024-06-01" in stored
    for secret in secrets:
        assert secret.encode() not in stored, secret
    (batch,) = BatchState(tmp_path).all()
    assert batch.api_base == "http://gw.example/v1?api-key=***&api-version=2024-06-01"
    assert batch.command["settings"] == {
        "api_base": "http://gw.example/v1?api-key=***&api-version=2024-06-01",
        "api_key": "***",
        "only": ["team=***"],
        "max_input_tokens": 4096,
    }


def test_two_endpoints_giving_one_batch_id_are_two_batches_each_marked_alone(tmp_path):
    state = BatchState(tmp_path)
    first = state.record("batch-1", "openai", "m", "http://10.0.0.1:8000/v1", "file-1", "/r/a.jsonl", ["a"], {})
    second = state.record("batch-1", "openai", "m", "http://10.0.0.2:8000/v1", "file-1", "/r/b.jsonl", ["b"], {})
    state.mark(first, "completed", collected=True)
    state.close()
    later = BatchState(tmp_path)
    assert [(batch.api_base, batch.collected) for batch in later.all()] == [
        ("http://10.0.0.1:8000/v1", True),
        ("http://10.0.0.2:8000/v1", False),
    ]
    assert later.uncollected() == [second]
    later.close()


def test_an_older_state_keyed_by_the_id_alone_is_migrated_and_takes_the_same_id_again(tmp_path):
    with sqlite3.connect(tmp_path / "batches.sqlite3") as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY, provider TEXT, model TEXT, api_base TEXT,"
            " input_file TEXT, output TEXT, custom_ids TEXT, status TEXT, created_at REAL, collected INTEGER DEFAULT 0,"
            " command TEXT)"
        )
        db.execute(
            "INSERT INTO batches VALUES ('batch-1', 'openai', 'm', 'http://h:8000/v1', 'file-1', '/r/a.jsonl', '[\"a\"]',"
            " 'in_progress', 1700000000.5, 0, '{}')"
        )
    db.close()
    state = BatchState(tmp_path)
    again = state.record("batch-1", "openai", "m", "http://h:8000/v1", "file-1", "/r/b.jsonl", ["b"], {})  # restarted
    assert [(batch.batch_id, batch.output) for batch in state.all()] == [
        ("batch-1", "/r/a.jsonl"),
        ("batch-1", "/r/b.jsonl"),
    ]
    assert state.all()[1] == again
    state.close()
    with sqlite3.connect(tmp_path / "batches.sqlite3") as db:
        assert db.execute("PRAGMA user_version").fetchone() == (1,)
    db.close()
