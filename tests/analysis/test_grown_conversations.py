"""`--history` judges a conversation once per content: a second run judges only the conversations
that grew, and the history keeps the rows of both runs."""

from xml.etree import ElementTree

import duckdb

from tests.helpers import read_rows, turn_record, write_jsonl

THREADS = [
    turn_record("a", "where is my parcel", "on its way"),
    turn_record("b", "cancel my order", "done"),
    turn_record("c", "what are your hours", "nine to five"),
]


def history_rows(path):
    connection = duckdb.connect(str(path), read_only=True)
    try:
        return connection.execute("SELECT conversation_id, turns_sha256 FROM rows ORDER BY conversation_id").fetchall()
    finally:
        connection.close()


def run_with_history(run_flowrate, judge, path, output, *extra):
    return run_flowrate("eval", path, "--api-base", judge.base_url, "-o", output, "--history", "h.duckdb", *extra)


def test_a_second_run_judges_only_the_conversation_that_grew_and_the_history_keeps_both(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "threads.jsonl", THREADS)
    first = run_with_history(run_flowrate, judge, path, "monday.jsonl")
    assert first.returncode == 0 and judge.requests == 3, first.stderr
    grown = turn_record("b", "cancel my order", "done", "and refund it", "refunded")
    write_jsonl(path, [THREADS[0], grown, THREADS[2]])
    judge.reset()
    second = run_with_history(run_flowrate, judge, path, "tuesday.jsonl", "--junit", "j.xml")
    assert second.returncode == 0, second.stderr
    skipped = [
        (case.get("name"), case.find("skipped").get("message"))
        for case in ElementTree.parse(tmp_path / "j.xml").iter("testcase")
        if case.find("skipped") is not None
    ]
    assert skipped == [(key, "left out by --history: already judged with these turns") for key in ("a", "c")]
    assert judge.requests == 1 and [row["id"] for row in read_rows(tmp_path / "tuesday.jsonl")] == ["b"]
    assert "skipped 2 already judged conversation(s) (--history)" in second.stderr
    stored = history_rows(tmp_path / "h.duckdb")
    assert [key for key, _ in stored] == ["a", "b", "b", "c"]
    assert len({sha for key, sha in stored if key == "b"}) == 2 and all(sha for _, sha in stored)


def test_a_run_where_everything_was_judged_is_nothing_to_judge_and_leaves_the_output(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "threads.jsonl", THREADS)
    assert run_with_history(run_flowrate, judge, path, "out.jsonl").returncode == 0
    before = (tmp_path / "out.jsonl").read_bytes()
    judge.reset()
    again = run_with_history(run_flowrate, judge, path, "out.jsonl")
    assert again.returncode == 2 and "nothing to judge" in again.stderr, again.stderr
    assert "skipped 3 already judged conversation(s) (--history)" in again.stderr
    assert judge.requests == 0 and (tmp_path / "out.jsonl").read_bytes() == before
    assert len(history_rows(tmp_path / "h.duckdb")) == 3


def test_another_judge_model_or_an_error_row_judges_again(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "threads.jsonl", THREADS)
    judge.script("nine to five", {"status": 500})
    run_with_history(run_flowrate, judge, path, "out.jsonl")
    assert [row["id"] for row in read_rows(tmp_path / "out.jsonl") if row["error"]] == ["c"]
    judge.reset()
    retried = run_with_history(run_flowrate, judge, path, "retry.jsonl")
    assert retried.returncode == 0 and [row["id"] for row in read_rows(tmp_path / "retry.jsonl")] == ["c"]
    judge.reset()
    other = run_with_history(run_flowrate, judge, path, "other.jsonl", "--model", "openai/other-judge")
    assert other.returncode == 0 and judge.requests == 3, other.stderr


def test_resume_counts_the_rows_of_its_output_whatever_the_history_holds(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "threads.jsonl", THREADS)
    assert run_with_history(run_flowrate, judge, path, "out.jsonl").returncode == 0
    judge.reset()
    resumed = run_with_history(run_flowrate, judge, path, "out.jsonl", "--resume")
    assert resumed.returncode == 0 and judge.requests == 0, resumed.stderr
    assert "already judged" not in resumed.stderr and len(read_rows(tmp_path / "out.jsonl")) == 3


def test_rows_imported_before_the_fingerprint_existed_are_judged_once_more(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "threads.jsonl", THREADS)
    assert run_with_history(run_flowrate, judge, path, "first.jsonl").returncode == 0
    connection = duckdb.connect(str(tmp_path / "h.duckdb"))
    connection.execute("UPDATE rows SET turns_sha256 = NULL")  # as migration 4 leaves the rows of an older flowrate
    connection.close()
    judge.reset()
    again = run_with_history(run_flowrate, judge, path, "again.jsonl")
    assert again.returncode == 0, again.stderr
    assert sorted(row["id"] for row in read_rows(tmp_path / "again.jsonl")) == ["a", "b", "c"]  # judged (cached)
    judge.reset()
    assert run_with_history(run_flowrate, judge, path, "third.jsonl", "--allow-empty").returncode == 0
    assert judge.requests == 0 and len(history_rows(tmp_path / "h.duckdb")) == 6
