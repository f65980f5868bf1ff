"""Zendesk: a ticket's conversation log, its messaging messages and public comments in time
order; an internal note is not the conversation; HTML comments as text."""

import orjson

from flowrate.inputs.conversation import chat_date
from tests.inputs.sources.platforms import FIXTURES, conversations, exchanges, fixture, problems


def test_a_conversation_log_reads_messages_and_public_comments_in_time_order(tmp_path):
    path = fixture("zendesk.json", tmp_path)
    document = orjson.loads(path.read_bytes())
    document["events"].reverse()  # the API sorts as asked (`sort=-created_at`): time decides
    path.write_bytes(orjson.dumps(document))
    [case] = conversations(path).values()
    assert case.id == "123"  # the ticket its page's links name
    assert exchanges(case) == [
        ("", "Hey! Have a question? I'm here to assist.", []),
        ("My invoice shows the wrong address.", "I have corrected the address.\nA new invoice is on its way.", []),
        ("Thank you!", None, []),
    ]  # the private comment "Conversation with wp native" is not there
    assert case.metadata == {
        "ticket_id": "123",
        "user": "8303911923701",
        "channel": "web",  # the source of the customer's first message
        "started_at": "2025-04-22T09:24:26Z",
        "ended_at": "2025-04-22T09:31:02Z",
    }
    assert chat_date(case) == "2025-04-22"
    assert conversations(FIXTURES / "zendesk.json") == {"123": case}


def test_an_event_with_no_time_is_named_by_file_and_field(tmp_path, monkeypatch):
    path = fixture("zendesk.json", tmp_path)
    document = orjson.loads(path.read_bytes())
    document["events"][1]["created_at"] = "yesterday"
    lines = tmp_path / "logs.jsonl"
    lines.write_bytes(orjson.dumps({**document, "ticket_id": 7}) + b"\n")
    monkeypatch.chdir(tmp_path)
    assert problems("logs.jsonl") == [
        "conversation '7': logs.jsonl:1: events[1].created_at: must be an ISO 8601 time, got 'yesterday'"
    ]


def test_the_pages_of_a_tickets_log_one_a_line_make_one_conversation(tmp_path):
    document = orjson.loads((FIXTURES / "zendesk.json").read_bytes())
    events = document["events"]
    pages = [
        {"ticket_id": 123, "events": events[3:], "meta": {"has_more": False}},
        {"ticket_id": 123, "events": events[:3], "meta": {"has_more": True}},
    ]
    path = tmp_path / "pages.jsonl"
    path.write_bytes(b"".join(orjson.dumps(page) + b"\n" for page in pages))
    assert conversations(path) == conversations(FIXTURES / "zendesk.json")
