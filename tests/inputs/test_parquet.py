"""Parquet input: one conversation per row, in the turn or the OpenAI-messages shape, read as its
JSONL twin reads; bad rows named by file and row number; the selection pushed into the query, so
the rows it leaves out are counted, not read. The Parquet files are written by DuckDB from JSONL,
as a warehouse export would be (nested turns, messages and metadata as structs)."""

import duckdb

from flowrate.inputs.files import InputSet, iter_cases
from flowrate.inputs.selection import Selection, scan
from tests.helpers import read_rows, turn_record, write_jsonl

CHAT = {
    "id": "chat-1",
    "messages": [
        {"role": "system", "content": "You are the parcel desk."},
        {"role": "user", "content": "Where is parcel 12?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "track", "arguments": '{"parcel": 12}'}}],
        },
        {"role": "tool", "name": "track", "content": "in Leeds"},
        {"role": "assistant", "content": "It is in Leeds."},
    ],
    "metadata": {"channel": "web", "chat_date": "2026-03-02"},
}


def _twin(tmp_path, records, name="c"):
    """A JSONL file of `records` and its Parquet twin, written by DuckDB from it."""
    jsonl = write_jsonl(tmp_path / f"{name}.jsonl", records)
    parquet = tmp_path / f"{name}.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_json('{jsonl}', sample_size = -1)) TO '{parquet}' (FORMAT parquet)")
    return jsonl, parquet


def _cases(path, selection=None):
    inputs = InputSet([str(path)])
    inputs.push_down(selection)
    try:
        return [record.case for record in iter_cases(inputs)]
    finally:
        inputs.close()


def test_nested_turns_messages_and_metadata_read_as_the_jsonl_twin_reads(tmp_path):
    turns = [
        turn_record("t1", "hi", "hello", "where is it?", "in Leeds", metadata={"channel": "app", "tier": "gold"}),
        {**turn_record("t2", "bye", "goodbye"), "chatbot_role": "a desk", "metadata": {"handoff": True, "n": 3}},
        {**turn_record("t3", "one more", "sure"), "trailing_user_utterance": "hello?", "log_cut": True},
    ]
    jsonl, parquet = _twin(tmp_path, turns, "turns")
    assert _cases(parquet) == _cases(jsonl)
    assert _cases(parquet)[0].metadata == {"channel": "app", "tier": "gold"}  # no null "handoff" or "n"
    jsonl, parquet = _twin(tmp_path, [CHAT, {**CHAT, "id": "chat-2"}], "chat")
    [first, _] = _cases(parquet)
    assert _cases(parquet) == _cases(jsonl)
    assert first.turns[0].tool_activity == ['call track({"parcel": 12})', "result track: in Leeds"]
    assert first.chatbot_role == "You are the parcel desk."


def test_a_directory_of_parquet_files_is_read_and_its_results_file_passed_over(run_flowrate, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    _twin(logs, [turn_record("a", "hello there my friend", "hi there")], "day1")
    _twin(logs, [turn_record("b", "hello again", "hi again")], "day2")
    for name in ("day1.jsonl", "day2.jsonl"):
        (logs / name).unlink()
    first = run_flowrate(
        "eval", logs, "--metric", "repetition_check", "-o", "out.jsonl", "--output-parquet", logs / "rows.parquet"
    )
    assert first.returncode == 0, first.stderr
    again = run_flowrate("eval", logs, "--metric", "repetition_check", "-o", "again.jsonl")
    assert again.returncode == 0 and "rows.parquet: passed over, it is a flowrate results file" in again.stderr
    assert sorted(row["id"] for row in read_rows(tmp_path / "again.jsonl")) == ["a", "b"]
    assert [row["source"] for row in read_rows(tmp_path / "again.jsonl")] == [
        {"path": str(logs / "day1.parquet"), "line": None, "index": 0},
        {"path": str(logs / "day2.parquet"), "line": None, "index": 0},
    ]


def test_bad_rows_are_named_by_file_and_row_number_and_exit_2(run_flowrate, tmp_path):
    records = [
        turn_record("ok", "hi", "hello"),
        {"id": "empty", "turns": []},
        {"id": "no-input", "turns": [{"actual_output": "hello"}]},
        {"id": "neither", "metadata": {"channel": "web"}},
    ]
    _, parquet = _twin(tmp_path, records)
    (tmp_path / "junk.parquet").write_text("not parquet at all, though it says so")
    result = run_flowrate("eval", parquet, tmp_path / "junk.parquet", "--metric", "repetition_check", "-o", "out.jsonl")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{parquet} row 1: turns: must not be empty" in result.stderr
    assert f"{parquet} row 2: turns[0].input: is missing" in result.stderr
    assert f"{parquet} row 3: has neither `turns` nor `messages`" in result.stderr
    assert f"{tmp_path / 'junk.parquet'}: cannot read: not a Parquet file" in result.stderr
    assert not (tmp_path / "out.jsonl").exists() or not read_rows(tmp_path / "out.jsonl")


def test_the_shard_and_sample_are_computed_in_the_query_and_choose_what_jsonl_chooses(tmp_path):
    records = [turn_record(f"c{n}", f"question {n}", f"answer {n}") for n in range(3000)]
    records[1234] = {"id": "bad", "turns": []}  # outside the sample: never read, so never reported
    jsonl, parquet = _twin(tmp_path, records)
    chosen = Selection(shard=(2, 3), sample=0.05, sample_seed=4)
    inputs = InputSet([str(parquet)])
    inputs.push_down(chosen.fresh())
    read = list(inputs.records())
    assert 30 < len(read) < 80  # about 3000 / 3 * 0.05 rows come out of the query, of 3000
    parquet_scan = scan(InputSet([str(parquet)]), chosen.fresh())
    jsonl_scan = scan(InputSet([str(jsonl)]), chosen.fresh())
    assert parquet_scan.selected == jsonl_scan.selected > 0
    assert parquet_scan.left_out == jsonl_scan.left_out  # the sample's count taken in SQL, not by reading
    assert parquet_scan.problems == [] and jsonl_scan.problems  # the bad row was never read
    assert _chosen(parquet, chosen.fresh()) == _chosen(jsonl, chosen.fresh())


def _chosen(path, selection):
    """The ids `selection` chooses from `path`, in order, as a run's pass over it chooses them."""
    return [case.id for case in _cases(path, selection) if selection.choose(case)]


def test_a_limit_stops_reading_and_counts_the_rest(run_flowrate, tmp_path):
    _, parquet = _twin(tmp_path, [turn_record(f"c{n}", f"question {n} here", "answer") for n in range(500)])
    result = run_flowrate("eval", parquet, "--metric", "repetition_check", "--limit", "7", "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert [row["id"] for row in read_rows(tmp_path / "out.jsonl")] == [f"c{n}" for n in range(7)]
    assert "--limit 493" in result.stderr


def test_the_rows_written_as_parquet_hold_what_the_jsonl_rows_hold(run_flowrate, tmp_path):
    _, parquet = _twin(tmp_path, [turn_record("a", "hi", "hello"), turn_record("b", "bye", "bye bye")])
    result = run_flowrate(
        "eval", parquet, "--metric", "repetition_check", "-o", "out.jsonl", "--output-parquet", "rows.parquet"
    )
    assert result.returncode == 0 and "rows.parquet" in result.stderr, result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    table = duckdb.sql(f"SELECT id, metric, score, success, source FROM '{tmp_path / 'rows.parquet'}' ORDER BY id")
    assert [(row["id"], row["metric"], row["score"], row["success"], row["source"]["path"]) for row in rows] == [
        (id_, metric, score, success, source["path"]) for id_, metric, score, success, source in table.fetchall()
    ]
    no_file = run_flowrate("eval", parquet, "--metric", "repetition_check", "-o", "-", "--output-parquet", "x.parquet")
    assert no_file.returncode == 2 and "--output-parquet needs --output to be a file" in no_file.stderr
