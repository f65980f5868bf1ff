"""Intercom: a conversation as Retrieve a conversation returns it, the `source` first, then the
parts that are messages; HTML bodies as text; teammates' notes and events not shown."""

import orjson

from flowrate.inputs.conversation import chat_date
from tests.inputs.sources.platforms import FIXTURES, conversations, exchanges, fixture, problems


def test_a_conversation_reads_its_source_and_parts_as_turns_with_html_as_text():
    [case] = conversations(FIXTURES / "intercom.json").values()
    assert case.id == "367"
    assert exchanges(case) == [
        ("Hi, my order #1234 hasn't arrived.", "Sorry about that! Let me check.\nIt left our warehouse on Monday.", []),
        ("When will it come?", "Tomorrow & before noon.", []),  # the note between is not shown
    ]
    assert case.metadata == {
        "conversation_id": "367",
        "user": "667d60d88a68186f43bafde1",
        "channel": "customer_initiated",
        "tags": ["shipping"],
        "state": "closed",
        "started_at": "2024-06-27T12:53:45Z",
        "ended_at": "2024-06-27T12:58:20Z",
    }
    assert chat_date(case) == "2024-06-27"


def test_conversations_one_a_line_read_as_the_document_reads(tmp_path):
    document = orjson.loads((FIXTURES / "intercom.json").read_bytes())
    lines = tmp_path / "conversations.jsonl"
    lines.write_bytes(orjson.dumps(document) + b"\n" + orjson.dumps({**document, "id": "368"}) + b"\n")
    found = conversations(lines)
    assert list(found) == ["367", "368"]
    assert exchanges(found["368"]) == exchanges(conversations(FIXTURES / "intercom.json")["367"])


def test_a_part_with_no_author_is_named_by_file_and_field(tmp_path, monkeypatch):
    path = fixture("intercom.json", tmp_path)
    document = orjson.loads(path.read_bytes())
    del document["conversation_parts"]["conversation_parts"][2]["author"]
    path.write_bytes(orjson.dumps(document))
    monkeypatch.chdir(tmp_path)
    assert problems("intercom.json") == [
        "intercom.json#0: conversation '367': conversation_parts.conversation_parts[2].author.type: is missing"
    ]
