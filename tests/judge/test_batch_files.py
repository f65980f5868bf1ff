"""Batch files: requests cut into batches by count and bytes, exported as OpenAI batch input, and
batch output (vLLM's, OpenAI's error file) imported as rows."""

import json

import orjson

from flowrate.judge.batch_api import MAX_REQUESTS, custom_id, split
from tests.helpers import batch_args, read_rows, write_jsonl
from tests.helpers import batch_conversations as conversations


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


def test_imported_error_lines_keep_the_provider_error(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(2))
    run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "--batch-export", "requests.jsonl", "--no-cache")
    first, second = (orjson.loads(raw) for raw in (tmp_path / "requests.jsonl").read_bytes().splitlines())
    lines = [
        {"custom_id": first["custom_id"], "response": None, "error": {"code": 500, "message": "out of\nmemory"}},
        {  # OpenAI's error file: the request's own HTTP answer
            "custom_id": second["custom_id"],
            "response": {
                "status_code": 400,
                "body": {"error": {"message": "Invalid 'messages'", "type": "invalid_request_error", "code": None}},
            },
            "error": None,
        },
    ]
    (tmp_path / "out-file.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = run_flowrate(
        "batch", "import-results", "out-file.jsonl", "c.jsonl", "--api-base", judge.base_url, "-o", "rows.jsonl"
    )
    messages = {row["id"]: row["error"]["message"] for row in read_rows(tmp_path / "rows.jsonl")}
    assert result.returncode == 3 and messages == {
        "c0": "failed in the batch: 500: out of memory",
        "c1": "failed in the batch: HTTP 400 invalid_request_error: Invalid 'messages'",
    }
