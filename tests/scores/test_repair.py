"""Nearly valid JSON repaired without a re-ask, and counted."""

from tests.helpers import read_rows, turn_record, write_jsonl

UNESCAPED = '{"reason": "The bot says "we will call you" and never does.", "key_issues": [], "verdict": "minor"}'


def test_json_with_unescaped_quotes_is_repaired_without_a_reask_and_counted(judge, run_flowrate, tmp_path):
    judge.script("MARK-QUOTES", {"content": UNESCAPED})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("q", "MARK-QUOTES", "x"), turn_record("ok", "a", "b")])
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert judge.calls_for("MARK-QUOTES") == 1
    assert rows["q"]["verdict"] == "minor" and rows["q"]["reason"] == 'The bot says "we will call you" and never does.'
    assert rows["q"]["repaired"] is True and rows["q"]["reasked"] is None and rows["ok"]["repaired"] is False


def test_a_cut_reply_that_reads_after_repair_is_flagged_and_not_cached(judge, run_flowrate, tmp_path):
    issues = ", ".join(f'"turn {n}: the reply could be shorter"' for n in range(400))
    judge.script("MARK-CUT", {"content": '{"verdict": "partial", "reason": "Long.", "key_issues": [' + issues + "]}"})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c", "MARK-CUT", "x")])
    for _ in range(2):
        run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["verdict"] == "partial" and row["cut"] is True and row["repaired"] is True
    assert row["key_issues"][0] == "turn 0: the reply could be shorter"
    assert judge.calls_for("MARK-CUT") == 2 and not row["cached"]  # a cut judgement is judged again next run
