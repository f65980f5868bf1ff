"""The files of one run as one input set: a conversation split across files is one conversation, a
row exported twice is read once, compressed files are read, a directory names every file it does
not read, a file that yields nothing is named, and a conversation with a silent side never
reaches the judge."""

import bz2
import gzip
import json
import lzma
import shutil

import pytest

from flowrate.inputs.files import InputSet, with_duplicates_marked
from tests.helpers import local_eval, read_rows, turn_record, write_jsonl
from tests.inputs.sources.platforms import FIXTURES, exchanges
from tests.inputs.sources.sdk_logs import ANSWER, FOLLOW_UP, FORECAST, QUESTION, openai_chat_calls
from tests.inputs.sources.test_otel import CONVERSATION, agent_conversation, collector_lines, write_lines
from tests.inputs.sources.traces import USER_TURNS

RASA_EVENTS = FIXTURES / "rasa_events.csv"


def read(*paths, format=None):
    """Every record of `paths` read as one run reads them (duplicate ids marked), and the run's notices."""
    inputs = InputSet([str(path) for path in paths], format=format)
    try:
        return list(with_duplicates_marked(inputs.records(), {})), inputs.notices
    finally:
        inputs.close()


def cases(*paths):
    """The conversations of `paths` by id, failing on any problem."""
    records, _ = read(*paths)
    assert [problem for record in records for problem in record.problems] == []
    return {record.case.id: record.case for record in records}


# -- never judge nothing ------------------------------------------------------------------------
def test_a_conversation_of_empty_turns_never_reaches_the_judge(judge, run_flowrate, tmp_path):
    empty = turn_record("empty", "", "")
    silent_bot = turn_record("silent", "Where is my parcel?", "   ")
    write_jsonl(tmp_path / "c.jsonl", [turn_record("fine", "hi", "hello"), empty, silent_bot])
    refused = run_flowrate(*local_eval(judge, "c.jsonl"))
    assert refused.returncode == 2 and judge.requests == 0
    assert "c.jsonl:2: conversation 'empty': no user text; nothing to judge" in refused.stderr
    assert "c.jsonl:3: conversation 'silent': no assistant text; nothing to judge" in refused.stderr
    skipped = run_flowrate(*local_eval(judge, "c.jsonl", "--skip-invalid", "--metric", "conversational_flow_rate"))
    assert skipped.returncode == 0, skipped.stderr
    assert judge.requests == 1 and [row["id"] for row in read_rows(tmp_path / "out.jsonl")] == ["fine"]
    assert "skipped 2" in skipped.stderr  # counted: in 3, out 1 judged and 2 skipped, each named
    assert "c.jsonl:3: conversation 'silent': no assistant text; nothing to judge" in skipped.stderr


def test_validate_exits_2_naming_a_file_that_yields_no_conversation(run_flowrate, tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [turn_record("a", "hi", "hello")])
    (tmp_path / "b.jsonl").write_text("\n")
    result = run_flowrate("validate", "a.jsonl", "b.jsonl")
    assert result.returncode == 2
    assert "b.jsonl: no conversation in this file" in result.stderr and "a.jsonl:" not in result.stderr


# -- files and rows ------------------------------------------------------------------------------
def test_a_conversation_split_across_the_files_of_one_run_is_one_conversation(tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    write_jsonl(tmp_path / "day1.jsonl", calls[:2])
    write_jsonl(tmp_path / "day2.jsonl", calls[2:])
    records, _ = read(tmp_path / "day1.jsonl", tmp_path / "day2.jsonl")
    assert [(record.case.id, record.problems) for record in records] == [("conv-42", [])]
    found = cases(tmp_path / "day1.jsonl", tmp_path / "day2.jsonl")
    assert [(user, reply) for user, reply, _ in exchanges(found["conv-42"])] == [
        (QUESTION, ANSWER),
        (FOLLOW_UP, FORECAST),
    ]


def test_an_events_table_exported_in_two_files_reads_as_one_table(tmp_path):
    header, *rows = RASA_EVENTS.read_text().splitlines(keepends=True)
    (tmp_path / "part1.csv").write_text(header + "".join(rows[::2]))
    (tmp_path / "part2.csv").write_text(header + "".join(rows[1::2]))
    split = cases(tmp_path)  # a directory: the CSVs a format takes are read
    whole = cases(RASA_EVENTS)
    assert {key: exchanges(case) for key, case in split.items()} == {
        key: exchanges(case) for key, case in whole.items()
    }


def test_a_row_exported_twice_is_read_once_and_said_so(tmp_path):
    header, *rows = RASA_EVENTS.read_text().splitlines(keepends=True)
    (tmp_path / "events.csv").write_text(header + "".join(rows) + "".join(rows[2:5]))
    records, notices = read(tmp_path / "events.csv")
    assert {record.case.id: exchanges(record.case) for record in records} == {
        key: exchanges(case) for key, case in cases(RASA_EVENTS).items()
    }
    assert (
        f"{tmp_path / 'events.csv'}:12: the same record as one read before; 3 repeated record(s) read once" in notices
    )


@pytest.mark.parametrize(("suffix", "opener"), [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)])
@pytest.mark.parametrize("name", ["rasa_events.csv", "sharegpt.json", "rasa_tracker.json"])
def test_a_compressed_export_reads_as_its_text(name, suffix, opener, tmp_path):
    compressed = tmp_path / (name + suffix)
    with (FIXTURES / name).open("rb") as plain, opener(compressed, "wb") as out:
        shutil.copyfileobj(plain, out)
    assert {key: exchanges(case) for key, case in cases(compressed).items()} == {
        key: exchanges(case) for key, case in cases(FIXTURES / name).items()
    }


def test_a_cut_gzip_file_is_a_problem_naming_it(tmp_path):
    whole = gzip.compress((FIXTURES / "sharegpt.json").read_bytes())
    (tmp_path / "cut.json.gz").write_bytes(whole[: len(whole) // 2])
    records, _ = read(tmp_path / "cut.json.gz")
    [problem] = [problem for record in records for problem in record.problems]
    assert problem.startswith(f"{tmp_path / 'cut.json.gz'}: cannot decompress: ")


def test_a_directory_names_every_file_it_does_not_read(run_flowrate, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    write_jsonl(logs / "c.jsonl", [turn_record("a", "hi", "hello")])
    shutil.copy(RASA_EVENTS, logs / "events.csv")
    (logs / "labels.csv").write_text("id,metric,label\na,conversational_flow_rate,0.9\n")
    (logs / "notes.txt").write_text("read me")
    (logs / "dump.sqlite").write_bytes(b"SQLite format 3\0")
    (logs / ".DS_Store").write_bytes(b"\0")
    result = run_flowrate("validate", "logs", "--json")
    assert result.returncode == 0, result.stderr
    assert '"files":2,"valid":3' in result.stdout  # c.jsonl's a, and the table's alice and bob
    assert "logs: passed over 2 file(s) of no type flowrate reads: dump.sqlite, notes.txt" in result.stderr
    assert "logs/labels.csv: passed over, no format flowrate reads takes its first row" in result.stderr
    assert "logs: left out 1 hidden file(s) (a name or a directory starting with a dot)" in result.stderr


def test_spans_a_collectors_file_rotation_split_mid_trace_are_one_conversation(judge, instrumented, tmp_path):
    """The Collector's file exporter rotates its file by size or time: the spans of one trace, a
    call's span and the agent span above it that names the conversation, can land in two files."""
    agent_conversation(judge, instrumented)
    [document, *_] = collector_lines(instrumented)
    resource, scope = document["resourceSpans"][0], document["resourceSpans"][0]["scopeSpans"][0]
    spans = [
        span for line in collector_lines(instrumented) for span in line["resourceSpans"][0]["scopeSpans"][0]["spans"]
    ]
    half = len(spans) // 2
    first, second = spans[:half], spans[half:]  # in the order they ended: children before parents
    assert {span.get("parentSpanId") for span in first} & {span["spanId"] for span in second}

    def lines(part):
        return [{"resourceSpans": [{**resource, "scopeSpans": [{**scope, "spans": [span]}]}]} for span in part]

    write_lines(tmp_path / "traces-1.jsonl", lines(first))
    write_lines(tmp_path / "traces-2.jsonl", lines(second))

    records, _ = read(tmp_path / "traces-1.jsonl", tmp_path / "traces-2.jsonl")

    assert [(record.case.id, record.problems) for record in records] == [(CONVERSATION, [])]
    assert [turn.input for turn in records[0].case.turns] == list(USER_TURNS)


def test_langfuse_traces_and_their_observations_in_two_files_are_one_conversation(tmp_path):
    rows = [json.loads(line) for line in (FIXTURES / "langfuse" / "session.jsonl").read_text().splitlines()]
    write_jsonl(tmp_path / "traces.jsonl", [row for row in rows if "traceId" not in row])
    write_jsonl(tmp_path / "observations.jsonl", [row for row in rows if "traceId" in row])
    joined = cases(tmp_path / "traces.jsonl", tmp_path / "observations.jsonl")
    whole = cases(FIXTURES / "langfuse" / "session.jsonl")
    assert {key: exchanges(case) for key, case in joined.items()} == {
        key: exchanges(case) for key, case in whole.items()
    }


def test_a_directory_with_no_file_to_read_names_the_files_it_holds(run_flowrate, tmp_path):
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "chats.zst").write_bytes(b"(\xb5/\xfd")  # zstd: not in Python 3.11's library
    (tmp_path / "exports" / "notes.txt").write_text("read me")
    result = run_flowrate("validate", "exports")
    assert result.returncode == 2
    assert "exports: no .jsonl, .json, .yaml, .yml, .parquet or .csv files in this directory" in result.stderr
    assert "found chats.zst, notes.txt" in result.stderr
