"""ServiceNow Virtual Agent: Table API records of sys_cs_message grouped by conversation in time
order, inbound the user and outbound the bot, payload text read; sys_cs_conversation records
give their conversation's metadata."""

import orjson

from flowrate.inputs.conversation import chat_date
from tests.inputs.sources.platforms import FIXTURES, exchanges, fixture, problems, read

RESET = "b4c2e9a01b2f3010a1b2c3d4e5f60789"
UNANSWERED = "c5d3fab12c303121b2c3d4e5f6071890"  # a user's "hello?" the bot never answered


def conversations(path):
    """The conversations of a ServiceNow file by id, the one of the fixture nobody answered
    among them: its record names that problem (no assistant text)."""
    records = read(path)
    assert [problem for record in records for problem in record.problems] == [
        f"{records[-1].source}: conversation {UNANSWERED!r}: no assistant text; nothing to judge"
    ]
    return {record.case.id: record.case for record in records}


def test_messages_group_into_conversations_with_the_payload_text_and_the_conversation_record():
    found = conversations(FIXTURES / "servicenow.json")
    assert list(found) == [RESET, UNANSWERED]
    reset = found[RESET]
    assert exchanges(reset) == [
        ("", "Hi, I'm your Virtual Agent. How can I help?", []),  # the topic picker shows no text
        ("I forgot my password", "I can reset it. I've sent a reset link to your email.", []),
        ("Got it, thanks", "Glad I could help. Goodbye!", []),
    ]
    assert reset.metadata == {
        "conversation": RESET,
        "state": "completed",
        "user": "46d44a23a9fe19810012d100cca80666",
        "channel": "web",
        "topic": "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        "started_at": "2026-03-02T09:40:02Z",
        "ended_at": "2026-03-02T09:41:31Z",
    }
    assert chat_date(reset) == "2026-03-02"
    assert exchanges(found[UNANSWERED]) == [("hello?", None, [])]  # a plain-text payload


def test_one_table_api_response_reads_alone_and_an_empty_page_adds_nothing(tmp_path):
    [_, messages] = orjson.loads((FIXTURES / "servicenow.json").read_bytes())
    path = tmp_path / "sys_cs_message.json"
    path.write_bytes(orjson.dumps([messages, {"result": []}]))
    found = conversations(path)
    assert exchanges(found[RESET]) == exchanges(conversations(FIXTURES / "servicenow.json")[RESET])
    assert "state" not in found[RESET].metadata
    assert found[RESET].metadata["user"] == "46d44a23a9fe19810012d100cca80666"  # the messages' consumer


def test_a_message_with_no_direction_is_named_by_file_record_and_field(tmp_path, monkeypatch):
    path = fixture("servicenow.json", tmp_path)
    [conversation, messages] = orjson.loads(path.read_bytes())
    messages["result"][5]["direction"] = ""
    path.write_bytes(orjson.dumps([conversation, messages]))
    monkeypatch.chdir(tmp_path)
    assert problems("servicenow.json") == [
        f"conversation '{RESET}': servicenow.json#1: result[5]: direction: must be inbound or outbound, got ''",
        f"servicenow.json#3: conversation {UNANSWERED!r}: no assistant text; nothing to judge",
    ]


def test_records_asked_with_display_values_read_as_their_values_read(tmp_path):
    def both(value):
        return value if isinstance(value, dict) else {"display_value": value, "value": value}

    documents = orjson.loads((FIXTURES / "servicenow.json").read_bytes())
    shown = [
        {"result": [{name: both(value) for name, value in row.items()} for row in doc["result"]]} for doc in documents
    ]
    path = tmp_path / "display.json"
    path.write_bytes(orjson.dumps(shown))
    assert conversations(path) == conversations(FIXTURES / "servicenow.json")
