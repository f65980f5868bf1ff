"""Batch mode in constant memory, against the local fake of the Files and Batches endpoints: the
request files are written to disk and uploaded from there as they were planned, the results are
read back in chunks and mapped to their conversations again from the input, and every
conversation still ends with one row per metric."""

import json
import re

import orjson

from flowrate.judge import batch_api
from tests.helpers import (
    MARK_FAIL,
    SUITE_MARK,
    batch_args,
    read_rows,
    suite_reply,
    turn_record,
    write_jsonl,
)
from tests.helpers import batch_conversations as conversations


def uploaded_lines(batch_server) -> list[list[bytes]]:
    """The request lines of each batch the fake created, in the order they were created."""
    batches = sorted(batch_server.batches.values(), key=lambda batch: int(batch["id"].split("-")[1]))
    return [batch_server.files[batch["input_file_id"]].splitlines() for batch in batches]


def row_keys(rows) -> list[tuple[str, str]]:
    return sorted((row["id"], row["metric"]) for row in rows)


def test_the_uploaded_files_are_the_export_line_for_line_cut_by_batch_size(batch_server, judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(7))
    exported = run_flowrate(*batch_args(batch_server, "--batch-export", "requests.jsonl", "--no-cache"))
    assert exported.returncode == 0, exported.stderr
    submitted = run_flowrate(*batch_args(batch_server, "--batch-size", "3", "--batch-submit-only", "--no-cache"))
    assert submitted.returncode == 0, submitted.stderr
    files = uploaded_lines(batch_server)
    assert [len(lines) for lines in files] == [3, 3, 1]
    assert [line for lines in files for line in lines] == (tmp_path / "requests.jsonl").read_bytes().splitlines()


def test_results_read_in_small_chunks_give_every_conversation_one_row(
    batch_server, judge, run_flowrate, tmp_path, monkeypatch
):
    monkeypatch.setattr(batch_api, "DOWNLOAD_CHUNK_BYTES", 7)  # every result line arrives cut in pieces
    write_jsonl(tmp_path / "c.jsonl", conversations(12, fail_every=5))
    batch_server.fail_marker = MARK_FAIL
    result = run_flowrate(*batch_args(batch_server, "--batch-size", "5"))
    assert result.returncode == 0, result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert sorted(row["id"] for row in rows) == sorted(f"c{n}" for n in range(12))
    assert batch_server.created == 3 and judge.requests == 3  # c0, c5 and c10 failed in the batch: online
    assert {row["id"] for row in rows if not row["batch"]} == {"c0", "c5", "c10"}
    assert all(row["verdict"] for row in rows)


def test_batches_collected_one_at_a_time_give_each_conversation_once(batch_server, judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(5))
    submitted = run_flowrate(*batch_args(batch_server, "--batch-size", "2", "--batch-submit-only"))
    ids = re.search(r"submitted 3 batch\(es\): (.+)", submitted.stderr).group(1).replace(",", " ").split()
    assert len(ids) == 3, submitted.stderr
    first = run_flowrate("batch", "collect", ids[1])
    assert first.returncode == 0, first.stderr
    assert sorted(row["id"] for row in read_rows(tmp_path / "out.jsonl")) == ["c2", "c3"]
    rest = run_flowrate("batch", "collect")
    assert rest.returncode == 0, rest.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert sorted(row["id"] for row in rows) == [f"c{n}" for n in range(5)] and judge.requests == 0
    assert all(row["batch"] for row in rows) and batch_server.created == 3


def test_a_conversation_gone_from_the_input_is_passed_over_when_its_batch_is_collected(
    batch_server, judge, run_flowrate, tmp_path
):
    write_jsonl(tmp_path / "c.jsonl", conversations(4))
    assert run_flowrate(*batch_args(batch_server, "--batch-submit-only")).returncode == 0
    write_jsonl(tmp_path / "c.jsonl", conversations(4)[1:])  # c0 is no longer in the input
    collected = run_flowrate("batch", "collect")
    assert collected.returncode == 0, collected.stderr
    assert sorted(row["id"] for row in read_rows(tmp_path / "out.jsonl")) == ["c1", "c2", "c3"]
    assert judge.requests == 0


def test_two_judged_metrics_and_an_offline_one_each_end_once_with_failed_lines_online(
    batch_server, judge, run_flowrate, tmp_path
):
    judge.script(SUITE_MARK, {"content": suite_reply()})
    write_jsonl(tmp_path / "c.jsonl", conversations(6, fail_every=3))
    batch_server.fail_marker = MARK_FAIL
    metrics = ("--metric", "virtual_agent", "--metric", "conversational_flow_rate", "--metric", "repetition_check")
    result = run_flowrate(*batch_args(batch_server, *metrics, "--batch-size", "4"))
    assert result.returncode == 1 and "gate FAILED: slot_filling" in result.stderr, result.stderr  # its 2 of 3
    rows = read_rows(tmp_path / "out.jsonl")
    keys = row_keys(rows)
    assert len(keys) == len(set(keys)) and {key[0] for key in keys} == {f"c{n}" for n in range(6)}
    per_conversation = len(keys) // 6
    assert all(sum(key[0] == f"c{n}" for key in keys) == per_conversation for n in range(6))
    assert judge.requests == 4  # c0 and c3, one call for each judged metric
    assert "4 batch line(s) were judged online instead" in result.stderr
    online = {row["id"] for row in rows if not row.get("batch") and row["metric"] != "repetition_check"}
    assert online == {"c0", "c3"}


def test_import_results_in_any_order_without_a_last_newline(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", [turn_record(f"c{n}", f"question {n}", f"answer {n}") for n in range(4)])
    run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "--batch-export", "requests.jsonl", "--no-cache")
    requests = [orjson.loads(raw) for raw in (tmp_path / "requests.jsonl").read_bytes().splitlines()]
    lines = []
    for n, request in enumerate(requests):
        reply = json.dumps({"reason": f"r{n}", "key_issues": [], "verdict": "mostly"})
        body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}], "usage": {}}
        lines.append({"custom_id": request["custom_id"], "response": {"status_code": 200, "body": body}, "error": None})
    text = "\n\n".join(json.dumps(line) for line in reversed(lines))  # reversed, a blank line between, no last newline
    (tmp_path / "out-file.jsonl").write_text(text)
    result = run_flowrate(
        "batch", "import-results", "out-file.jsonl", "c.jsonl", "--api-base", judge.base_url, "-o", "rows.jsonl"
    )
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "rows.jsonl")}
    assert {name: row["reason"] for name, row in rows.items()} == {f"c{n}": f"r{n}" for n in range(4)}


def test_a_bad_line_in_imported_results_is_named_by_its_number(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(1))
    (tmp_path / "out-file.jsonl").write_text('{"custom_id": "x", "response": null}\nnot json\n')
    result = run_flowrate(
        "batch", "import-results", "out-file.jsonl", "c.jsonl", "--api-base", judge.base_url, "-o", "rows.jsonl"
    )
    assert result.returncode == 2 and "out-file.jsonl:2: not a batch result line" in result.stderr, result.stderr
