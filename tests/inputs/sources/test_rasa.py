"""Rasa: a tracker, the events an event broker streams and the SQL tracker store's events table
(CSV or Parquet, rows of many conversations) read into the same dialogues; the bot's own
actions as tool calls, `utter_*` and Rasa's default actions not shown, the last slot values in
the metadata."""

import csv

import duckdb
import orjson

from flowrate.inputs.conversation import chat_date
from tests.inputs.sources.platforms import FIXTURES, conversations, exchanges, fixture, problems, read


def test_a_tracker_reads_user_and_bot_events_with_the_custom_action_as_a_tool_call():
    [case] = conversations(FIXTURES / "rasa_tracker.json").values()
    assert case.id == "mysender"
    assert exchanges(case) == [
        ("What's the weather in Berlin?", "It is 18 degrees in Berlin.", ["call action_get_weather()"]),
        ("thanks, bye", "Bye!", []),
    ]
    assert case.metadata == {
        "sender_id": "mysender",
        "channel": "rest",
        "slots": {"city": "Berlin", "temperature": "18"},
        "started_at": "2018-02-05T09:08:50Z",
        "ended_at": "2018-02-05T09:09:50.300000Z",
    }
    assert chat_date(case) == "2018-02-05"


def test_the_events_table_groups_rows_by_sender_and_orders_them_by_time():
    found = conversations(FIXTURES / "rasa_events.csv")
    assert list(found) == ["alice", "bob"]
    assert exchanges(found["alice"]) == [
        ("Where is order 42?", "Order 42 has shipped.", ["call action_check_order()"]),
        ("thanks!", "You're welcome.", []),
    ]
    assert found["alice"].metadata["slots"] == {"order_status": "shipped"}
    assert found["alice"].metadata["started_at"] == "2023-11-14T22:13:20.100000Z"
    assert exchanges(found["bob"]) == [("hello", "Hi! How can I help?", [])]


def test_the_events_table_as_parquet_and_broker_events_read_as_the_csv_reads(tmp_path):
    parquet = tmp_path / "events.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{FIXTURES / 'rasa_events.csv'}')) TO '{parquet}' (FORMAT parquet)")
    assert conversations(parquet) == conversations(FIXTURES / "rasa_events.csv")
    with (FIXTURES / "rasa_events.csv").open(newline="") as handle:
        events = [{"sender_id": row["sender_id"], **orjson.loads(row["data"])} for row in csv.DictReader(handle)]
    broker = tmp_path / "broker.jsonl"
    broker.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in events))
    assert conversations(broker) == conversations(FIXTURES / "rasa_events.csv")


def test_a_row_that_cannot_be_read_makes_its_conversation_a_problem_naming_the_row(tmp_path, monkeypatch):
    path = fixture("rasa_events.csv", tmp_path)
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[4]["data"] = "{not json"  # one of alice's
    rows.append({**rows[5], "sender_id": ""})
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    monkeypatch.chdir(tmp_path)
    [no_sender, alice] = problems("rasa_events.csv")
    assert no_sender == "rasa_events.csv:12: sender_id: is missing"
    assert alice.startswith("conversation 'alice': rasa_events.csv:6: data: is not JSON: ")
    assert [record.case.id for record in read("rasa_events.csv") if record.case] == ["bob"]  # alice not judged short


def test_trackers_as_the_redis_and_mongo_tracker_stores_keep_them_read_as_one_conversation():
    """fixtures/rasa-tracker-stores: Rasa 3.6.21's RedisTrackerStore value (`{"events", "name"}`,
    no sender_id) and MongoTrackerStore document (mongoexport's JSON, with `_id`)."""
    for name in ("redis.json", "mongo.json"):
        [case] = conversations(FIXTURES / "rasa-tracker-stores" / name).values()
        assert case.id == "a3f9c2e1-weather", name
        assert exchanges(case) == [
            ("What's the weather in Berlin?", "It is 18 degrees in Berlin.", ["call action_get_weather()"]),
            ("thanks, bye", "Bye! Stay dry.", []),
        ], name
        assert case.metadata == {
            "sender_id": "a3f9c2e1-weather",
            "channel": "rest",
            "slots": {"city": "Berlin"},
            "started_at": "2025-12-05T08:00:04Z",
            "ended_at": "2025-12-05T08:01:00.300000Z",
        }, name
