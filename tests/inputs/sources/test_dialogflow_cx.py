"""Dialogflow CX: the BigQuery export's rows, one a turn, grouped by conversation and ordered by
`turn_position`; a playbook's tool use in its turn; times and language kept."""

import csv

import duckdb
import orjson

from flowrate.inputs.conversation import chat_date
from tests.inputs.sources.platforms import FIXTURES, conversations, exchanges, fixture, problems

SESSIONS = "projects/my-project/locations/global/agents/3f2a-agent/sessions/"


def test_turn_rows_group_into_conversations_in_turn_order_with_the_tool_use():
    found = conversations(FIXTURES / "dialogflow_cx.csv")
    assert list(found) == [SESSIONS + "s-7781", SESSIONS + "s-9902"]
    orders = found[SESSIONS + "s-7781"]
    assert exchanges(orders) == [
        ("", "Hi, I'm the order desk. What can I do for you?", []),  # the WELCOME event: no user text
        (
            "Where is my order 42?",
            "Order 42 has shipped and arrives on 4 March.",
            ['call order_status({"orderId":"42"})', 'result order_status: {"status":"shipped","eta":"2026-03-04"}'],
        ),
        ("Great, thanks.", "You're welcome. Goodbye!", []),
    ]
    assert orders.metadata == {
        "session_id": "s-7781",
        "language": "en",
        "agent_id": "3f2a-agent",
        "project_id": "my-project",
        "started_at": "2026-03-02T10:15:02Z",
        "ended_at": "2026-03-02T10:16:05Z",
    }
    assert chat_date(orders) == "2026-03-02"


def test_the_export_as_parquet_reads_as_the_csv_reads(tmp_path):
    parquet = tmp_path / "export.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{FIXTURES / 'dialogflow_cx.csv'}')) TO '{parquet}' (FORMAT parquet)")
    assert conversations(parquet) == conversations(FIXTURES / "dialogflow_cx.csv")


def test_a_row_whose_response_is_not_json_is_named_by_file_line_and_column(tmp_path, monkeypatch):
    path = fixture("dialogflow_cx.csv", tmp_path)
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[0]["response"] = '{"queryResult": '
    rows[1]["turn_position"] = "first"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    monkeypatch.chdir(tmp_path)
    [orders, other] = problems("dialogflow_cx.csv")
    assert orders.startswith(f"conversation '{SESSIONS}s-7781': dialogflow_cx.csv:2: response: is not JSON: ")
    assert (
        other
        == f"conversation '{SESSIONS}s-9902': dialogflow_cx.csv:3: turn_position: must be a whole number, got 'first'"
    )


def test_rows_whose_request_and_response_are_objects_read_as_json_text_reads(tmp_path):
    with (FIXTURES / "dialogflow_cx.csv").open(newline="") as handle:
        rows = [
            {**row, "request": orjson.loads(row["request"]), "response": orjson.loads(row["response"])}
            for row in csv.DictReader(handle)
        ]
    path = tmp_path / "export.jsonl"
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    assert conversations(path) == conversations(FIXTURES / "dialogflow_cx.csv")
