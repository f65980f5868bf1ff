"""Provider batch mode (issue 11), against a local fake of the Files and Batches endpoints."""

import json
import signal
import time

import orjson

from flowrate.judge.batch_api import MAX_REQUESTS, custom_id, split
from tests.conftest import read_rows, turn_record, write_jsonl

MARK_FAIL = "MARK-BATCH-FAIL"


def conversations(count, fail_every=None):
    records = []
    for n in range(count):
        text = f"question {n}" + (f" {MARK_FAIL}" if fail_every and n % fail_every == 0 else "")
        records.append(turn_record(f"c{n}", text, f"answer {n}"))
    return records


def batch_args(batch_server, *extra, output="out.jsonl"):
    """`flowrate eval c.jsonl --batch` against the fake, polling with no wait."""
    return (
        "eval",
        "c.jsonl",
        "--batch",
        "--api-base",
        batch_server.base_url,
        "--poll-interval",
        "0",
        "-o",
        output,
        *extra,
    )


def submitted_and_polling(batch_server):
    """Wait until a real process has created its batch and gone on to poll it."""
    deadline = time.monotonic() + 60
    while batch_server.created < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)


def test_failed_lines_go_online_and_every_conversation_gets_one_row(batch_server, judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(20, fail_every=10))
    batch_server.fail_marker = MARK_FAIL
    batch_server.polls_to_finish = 2
    result = run_flowrate(*batch_args(batch_server))
    assert result.returncode == 0, result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert sorted(row["id"] for row in rows) == sorted(f"c{n}" for n in range(20))
    assert batch_server.created == 1 and judge.requests == 2  # only the two failed lines went online
    online = {row["id"] for row in rows if not row["batch"]}
    assert online == {"c0", "c10"} and all(row["batch_id"] for row in rows if row["batch"])
    assert "2 batch line(s) were judged online instead" in result.stderr


def test_cost_is_the_batch_price(batch_server, judge, run_flowrate, tmp_path):
    import litellm

    write_jsonl(tmp_path / "c.jsonl", conversations(2))
    assert run_flowrate(*batch_args(batch_server)).returncode == 0
    info = litellm.model_cost["gpt-4o"]
    for row in read_rows(tmp_path / "out.jsonl"):
        usage = row["usage"]
        expected = (
            usage["prompt_tokens"] * info["input_cost_per_token_batches"]
            + usage["completion_tokens"] * info["output_cost_per_token_batches"]
        )
        assert row["cost_usd"] == expected and row["cost_usd"] < usage["prompt_tokens"] * info["input_cost_per_token"]


def test_an_expired_batch_sends_its_unfinished_lines_online(batch_server, judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(8))
    batch_server.expire_after = 3
    result = run_flowrate(*batch_args(batch_server))
    rows = read_rows(tmp_path / "out.jsonl")
    assert result.returncode == 0 and len(rows) == 8 and len({row["id"] for row in rows}) == 8
    assert sum(row["batch"] for row in rows) == 3 and judge.requests == 5


def test_no_fallback_leaves_error_rows(batch_server, judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(10, fail_every=5))
    batch_server.fail_marker = MARK_FAIL
    result = run_flowrate(*batch_args(batch_server, "--batch-no-fallback"))
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert result.returncode == 3 and judge.requests == 0 and len(rows) == 10
    assert rows["c0"]["error"]["type"] == "BatchLineFailed"


def test_submit_only_then_collect_gives_the_rows_of_a_blocking_run(batch_server, judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(6))
    submitted = run_flowrate(*batch_args(batch_server, "--batch-submit-only", "--no-cache"))
    assert (
        submitted.returncode == 0
        and "submitted 1 batch(es)" in submitted.stderr
        and "batch collect" in submitted.stderr
    )
    assert not (tmp_path / "out.jsonl").exists()  # a results file is made at its first row
    collected = run_flowrate("batch", "collect")
    assert collected.returncode == 0, collected.stderr
    after = {row["id"]: row["verdict"] for row in read_rows(tmp_path / "out.jsonl")}
    blocking = run_flowrate(*batch_args(batch_server, "--no-cache", output="blocking.jsonl"))
    assert blocking.returncode == 0
    assert after == {row["id"]: row["verdict"] for row in read_rows(tmp_path / "blocking.jsonl")}
    assert run_flowrate("batch", "collect").stderr.strip() == "no batches to collect"


def test_a_killed_run_is_collected_on_rerun_without_a_new_batch(
    batch_server, judge, tmp_path, start_process, run_flowrate
):
    write_jsonl(tmp_path / "c.jsonl", conversations(5))
    batch_server.polls_to_finish = 10_000  # stays in progress while the first process lives
    process = start_process(
        "eval", "c.jsonl", "--batch", "--api-base", batch_server.base_url, "--poll-interval", "30", "-o", "out.jsonl"
    )
    submitted_and_polling(batch_server)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    batch_server.polls_to_finish = 1
    result = run_flowrate(*batch_args(batch_server))
    assert result.returncode == 0, result.stderr
    assert batch_server.created == 1 and batch_server.uploads == 1
    assert sorted(row["id"] for row in read_rows(tmp_path / "out.jsonl")) == [f"c{n}" for n in range(5)]


def test_ctrl_c_while_polling_leaves_the_batches_running(batch_server, judge, tmp_path, start_process):
    write_jsonl(tmp_path / "c.jsonl", conversations(3))
    batch_server.polls_to_finish = 10_000
    process = start_process(
        "eval", "c.jsonl", "--batch", "--api-base", batch_server.base_url, "--poll-interval", "30", "-o", "out.jsonl"
    )
    submitted_and_polling(batch_server)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "keep running at the provider" in stderr and "batch collect" in stderr and batch_server.cancelled == 0


def test_batches_are_cut_by_batch_size_and_by_bytes(batch_server, judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(10))
    assert run_flowrate(*batch_args(batch_server, "--batch-size", "4")).returncode == 0
    assert batch_server.created == 3
    lines = [b"x" * 100 + b"\n"] * 10
    assert [len(batch) for batch in split(lines, max_bytes=400)] == [3, 3, 3, 1]  # 95 % of 400 bytes holds three
    assert [len(batch) for batch in split([b"x\n"] * 50_000)] == [
        int(MAX_REQUESTS * 0.95),
        50_000 - int(MAX_REQUESTS * 0.95),
    ]


def test_the_export_is_openai_batch_input_line_for_line(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(4))
    run_flowrate(
        "eval", "c.jsonl", "--api-base", judge.base_url, "--limit", "1", "-o", "first.jsonl"
    )  # c0 is now cached
    result = run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "--batch-export", "requests.jsonl")
    assert result.returncode == 0 and "3 request(s) in requests.jsonl" in result.stderr
    lines = [orjson.loads(line) for line in (tmp_path / "requests.jsonl").read_bytes().splitlines()]
    for line in lines:
        assert list(line) == ["custom_id", "method", "url", "body"] and line["method"] == "POST"
        assert line["url"] == "/v1/chat/completions" and line["body"]["model"] == "gpt-4o" and line["body"]["messages"]
    assert [line["custom_id"] for line in lines] == [custom_id("conversational_flow_rate", f"c{n}") for n in (1, 2, 3)]
    everything = run_flowrate(
        "eval", "c.jsonl", "--api-base", judge.base_url, "--batch-export", "all.jsonl", "--no-cache"
    )
    assert "4 request(s)" in everything.stderr and judge.requests == 1


def test_import_results_reads_vllm_output_into_rows(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(3))
    run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "--batch-export", "requests.jsonl", "--no-cache")
    out = []
    for n, line in enumerate(orjson.loads(raw) for raw in (tmp_path / "requests.jsonl").read_bytes().splitlines()):
        if n == 2:
            out.append(
                {"id": "x", "custom_id": line["custom_id"], "response": None, "error": {"code": 500, "message": "oom"}}
            )
            continue
        reply = json.dumps({"reason": "r", "key_issues": [], "verdict": "mostly"})
        body = {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }
        out.append(
            {"id": "x", "custom_id": line["custom_id"], "response": {"status_code": 200, "body": body}, "error": None}
        )
    (tmp_path / "vllm-out.jsonl").write_text("".join(json.dumps(item) + "\n" for item in out))
    result = run_flowrate(
        "batch", "import-results", "vllm-out.jsonl", "c.jsonl", "--api-base", judge.base_url, "-o", "rows.jsonl"
    )
    assert "Traceback" not in result.stderr and (tmp_path / "rows.jsonl").exists(), result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "rows.jsonl")}
    assert result.returncode == 3 and len(rows) == 3 and judge.requests == 0
    assert (
        rows["c0"]["verdict"] == "mostly" and rows["c0"]["batch"] and rows["c2"]["error"]["type"] == "BatchLineFailed"
    )


def test_status_and_cancel(batch_server, judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(2))
    batch_server.polls_to_finish = 10_000
    assert run_flowrate(*batch_args(batch_server, "--batch-submit-only")).returncode == 0
    status = run_flowrate("batch", "status")
    assert status.returncode == 0 and "2 requests" in status.stderr and "in_progress, 0 done" in status.stderr
    cancelled = run_flowrate("batch", "cancel", "--all")
    assert cancelled.returncode == 0 and batch_server.cancelled == 1
    batch_server.polls_to_finish = 1
    collected = run_flowrate("batch", "collect")
    assert collected.returncode == 0 and len(read_rows(tmp_path / "out.jsonl")) == 2, collected.stderr  # online


def test_batch_mode_from_the_config_file_with_chat_dates_and_skipped_conversations_counted_once(
    batch_server, judge, run_flowrate, tmp_path
):
    records = [{**record, "metadata": {"started_at": "2026-03-02T10:00:00Z"}} for record in conversations(3)]
    records.append({**turn_record("hr", "q", "a"), "metadata": {"topic": "HR"}})
    write_jsonl(tmp_path / "c.jsonl", records)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "flowrate.yaml").write_text(
        f"batch: true\npoll_interval: 0\napi_base: {batch_server.base_url}\n"
    )
    result = run_flowrate("eval", "c.jsonl", "--exclude", "topic=HR", "--junit", "junit.xml", "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert batch_server.created == 1 and judge.requests == 0 and all(row["batch"] for row in rows)
    assert {row["chat_date"] for row in rows} == {"2026-03-02"}
    suite = (
        __import__("xml.etree.ElementTree").etree.ElementTree.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    )
    assert (suite.get("tests"), suite.get("skipped")) == ("4", "1")
