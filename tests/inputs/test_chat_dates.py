"""Chat dates read from a conversation's metadata, and those that cannot be read counted."""

from flowrate.inputs.conversation import ConversationalEvalTestCase, chat_date
from tests.helpers import read_rows, turn_record, write_jsonl


def case(**metadata):
    return ConversationalEvalTestCase(turns=[{"input": "hi", "actual_output": "hello"}], metadata=metadata)


def test_chat_dates_read_unix_seconds_and_milliseconds_given_as_numbers_or_strings():
    assert chat_date(case(ts="1717243200"), "ts") == "2024-06-01"
    assert chat_date(case(ts=" 1717243200.5 "), "ts") == "2024-06-01"
    assert chat_date(case(ts="1717243200000"), "ts") == "2024-06-01"  # above 1e11: milliseconds
    assert chat_date(case(ts=1717243200000), "ts") == "2024-06-01"
    assert chat_date(case(ts=1717243200), "ts") == "2024-06-01"
    assert chat_date(case(timestamp="2024-06-01T23:30:00-02:00")) == "2024-06-01"  # the date as written
    assert chat_date(case(chat_date="20240601")) == "2024-06-01"
    problems = []
    assert chat_date(case(ts="yesterday"), "ts", problems) is None
    assert chat_date(case(ts=True), "ts", problems) is None
    assert chat_date(case(ts="1e400"), "ts", problems) is None
    assert chat_date(case(other="x"), "ts", problems) is None  # no date at all is not a problem
    assert problems == [
        "metadata.ts: 'yesterday' is not a date",
        "metadata.ts: True is not a date",
        "metadata.ts: '1e400' is not a date",
    ]


def test_eval_counts_unreadable_chat_dates_and_names_the_first(run_flowrate, tmp_path):
    records = [
        turn_record("good", "hi", "hello", metadata={"ts": "1717243200"}),
        turn_record("none", "hi", "hello"),
        turn_record("bad1", "hi", "hello", metadata={"ts": "last tuesday"}),
        turn_record("bad2", "hi", "hello", metadata={"ts": "2024-13-45"}),
    ]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate("eval", path, "--metric", "repetition_check", "--date-field", "ts", "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert (
        f"2 conversation(s) have a chat date that cannot be read (first: {path}:3 id 'bad1':"
        " metadata.ts: 'last tuesday' is not a date); their rows have chat_date null"
    ) in result.stderr
    assert {item["id"]: item["chat_date"] for item in read_rows(tmp_path / "out.jsonl")} == {
        "good": "2024-06-01",
        "none": None,
        "bad1": None,
        "bad2": None,
    }
