"""Batch commands as issue 14 found them (items 11 and 16): against the local fake of the Files
and Batches endpoints (tests/batch_server.py), real `flowrate` processes where the terminal or
signals are what is tested."""

import json
import os
import re
import signal
import subprocess
import time

import orjson

from flowrate.judge.batch_api import BatchState, redacted_url
from tests.conftest import FLOWRATE, TEST_KEY, read_rows, write_jsonl
from tests.test_batch import MARK_FAIL, batch_args, conversations


def submitted_id(result) -> str:
    """The batch id a `--batch-submit-only` run printed."""
    found = re.search(r"submitted 1 batch\(es\): (\S+)", result.stderr)
    assert found, result.stderr
    return found.group(1)


def submit_only(batch_server, run_flowrate, tmp_path, count=2) -> str:
    write_jsonl(tmp_path / "c.jsonl", conversations(count))
    return submitted_id(run_flowrate(*batch_args(batch_server, "--batch-submit-only")))


# -- batch cancel ---------------------------------------------------------------------------
def test_cancel_all_with_nothing_to_cancel_says_so_and_exits_0(batch_server, judge, run_flowrate, tmp_path):
    fresh = run_flowrate("batch", "cancel", "--all")
    assert fresh.returncode == 0 and fresh.stderr.strip() == "flowrate: no batches to cancel", fresh.stderr
    write_jsonl(tmp_path / "c.jsonl", conversations(2))
    assert run_flowrate(*batch_args(batch_server)).returncode == 0  # submitted and collected
    collected = run_flowrate("batch", "cancel", "--all")
    assert collected.returncode == 0 and collected.stderr.strip() == "flowrate: no batches to cancel"
    assert batch_server.cancelled == 0
    unnamed = run_flowrate("batch", "cancel")
    assert unnamed.returncode == 2 and "name the batches to cancel, or --all" in unnamed.stderr


def test_cancelling_a_finished_batch_reports_it_finished_and_cancels_nothing(
    batch_server, judge, run_flowrate, tmp_path
):
    batch_id = submit_only(batch_server, run_flowrate, tmp_path)
    assert "completed, 2 done" in run_flowrate("batch", "status").stderr  # the fake finishes it when asked
    result = run_flowrate("batch", "cancel", "--all")
    assert result.returncode == 0, result.stderr
    assert (
        f"{batch_id}: already completed, nothing to cancel" in result.stderr
        and "cancelled " + batch_id not in result.stderr
    )
    assert batch_server.cancelled == 0
    collected = run_flowrate("batch", "collect")
    rows = read_rows(tmp_path / "out.jsonl")
    assert collected.returncode == 0 and len(rows) == 2 and all(row["batch"] for row in rows) and judge.requests == 0


def test_cancelling_a_running_batch_reports_the_state_the_provider_gives(batch_server, judge, run_flowrate, tmp_path):
    batch_server.polls_to_finish = 10_000
    batch_id = submit_only(batch_server, run_flowrate, tmp_path)
    result = run_flowrate("batch", "cancel", batch_id)
    assert result.returncode == 0 and f"{batch_id}: cancelling" in result.stderr, result.stderr
    assert batch_server.cancelled == 1
    assert f"{batch_id}: 2 requests" in (status := run_flowrate("batch", "status").stderr) and "cancelled" in status


# -- unknown ids ----------------------------------------------------------------------------
def test_an_unknown_batch_id_is_an_error_naming_it_and_the_known_ones(batch_server, judge, run_flowrate, tmp_path):
    batch_server.polls_to_finish = 10_000
    batch_id = submit_only(batch_server, run_flowrate, tmp_path)
    for command in ("collect", "status", "cancel"):
        result = run_flowrate("batch", command, "bogus-id")
        assert result.returncode == 2, (command, result.stderr)
        assert "unknown batch id bogus-id" in result.stderr and batch_id in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    out = tmp_path / "out.jsonl"
    assert batch_server.cancelled == 0 and not (out.exists() and out.read_text().strip())
    assert "in_progress" in run_flowrate("batch", "status", batch_id).stderr  # still recorded, still running


def test_a_fresh_state_names_no_known_batch(batch_server, judge, run_flowrate):
    result = run_flowrate("batch", "collect", "bogus-id")
    assert result.returncode == 2 and "unknown batch id bogus-id; no batch is recorded" in result.stderr


# -- failed lines ---------------------------------------------------------------------------
def test_a_failed_batch_line_keeps_the_provider_error_on_one_line_without_secrets(
    batch_server, judge, run_flowrate, tmp_path
):
    write_jsonl(tmp_path / "c.jsonl", conversations(4, fail_every=4))
    batch_server.fail_marker = MARK_FAIL
    batch_server.fail_error = {"code": "invalid_prompt", "message": f"the prompt\nwas refused\tfor key {TEST_KEY}"}
    result = run_flowrate(*batch_args(batch_server, "--batch-no-fallback"))
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert result.returncode == 3 and rows["c0"]["error"]["type"] == "BatchLineFailed"
    assert rows["c0"]["error"]["message"] == "failed in the batch: invalid_prompt: the prompt was refused for key ***"
    assert TEST_KEY not in (tmp_path / "out.jsonl").read_text()


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


# -- provider errors ------------------------------------------------------------------------
def test_a_provider_error_in_a_batch_command_is_one_plain_line(batch_server, judge, run_flowrate, tmp_path):
    batch_id = submit_only(batch_server, run_flowrate, tmp_path)
    batch_server.batches.clear()  # the provider no longer knows it
    result = run_flowrate("batch", "status")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert re.fullmatch(
        rf"flowrate: error: the batch API at {re.escape(batch_server.base_url)} refused to retrieve batch {batch_id}"
        r" \(404\): .*No batch found.*",
        result.stderr.strip(),
    ), result.stderr


# -- the terminal ---------------------------------------------------------------------------
def test_no_litellm_coroutine_warning_reaches_the_terminal(batch_server, judge, run_process, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(3))
    runs = [run_process(*batch_args(batch_server))]
    runs.append(run_process(*batch_args(batch_server, "--batch-submit-only", "--no-cache", output="later.jsonl")))
    runs.append(run_process("batch", "status"))  # retrieves a finished batch, as collect does
    runs.append(run_process("batch", "collect"))
    assert [run.returncode for run in runs] == [0, 0, 0, 0], [run.stderr for run in runs]
    for run in runs:
        assert "never awaited" not in run.stderr and "Warning" not in run.stderr, run.stderr
    assert len(read_rows(tmp_path / "later.jsonl")) == 3


def test_sigint_stops_polling_in_a_process_started_with_sigint_ignored(
    batch_server, judge, run_flowrate, tmp_path, cli_env
):
    """As `flowrate eval ... &` from a script: the shell starts it with SIGINT ignored."""
    write_jsonl(tmp_path / "c.jsonl", conversations(3))
    batch_server.polls_to_finish = 10_000
    process = subprocess.Popen(
        [
            FLOWRATE,
            "eval",
            "c.jsonl",
            "--batch",
            "--api-base",
            batch_server.base_url,
            "--poll-interval",
            "30",
            "-o",
            "out.jsonl",
        ],
        cwd=tmp_path,
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        deadline = time.monotonic() + 60
        while not any(batch_server.polls.values()) and time.monotonic() < deadline:
            time.sleep(0.05)  # submitted, polled once, and now waiting for the next poll
        time.sleep(0.3)
        os.kill(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "keep running at the provider" in stderr and "batch collect" in stderr and batch_server.cancelled == 0
    batch_server.polls_to_finish = 1
    collected = run_flowrate("batch", "collect")
    assert collected.returncode == 0 and len(read_rows(tmp_path / "out.jsonl")) == 3 and judge.requests == 0


# -- secrets --------------------------------------------------------------------------------
def test_redacted_url_drops_credentials_and_masks_secret_query_values():
    assert redacted_url("http://user:pass@host:8000/v1") == "http://host:8000/v1"
    assert redacted_url("https://token@gw.example/v1") == "https://gw.example/v1"
    assert (
        redacted_url("https://gw.example/openai?api-key=k-123&api-version=2024-06-01&sig=abc")
        == "https://gw.example/openai?api-key=***&api-version=2024-06-01&sig=***"
    )
    assert redacted_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert redacted_url(None) is None


def test_the_batch_state_file_never_holds_a_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_TOKEN", "tok-0123456789-gateway")
    secrets = ["pa55-w0rd-x", "alice", "qk-1234567890", "tok-0123456789-gateway", "sk-live-abcdef123456"]
    api_base = "http://alice:pa55-w0rd-x@gw.example/v1?api-key=qk-1234567890&api-version=2024-06-01"
    command = {
        "paths": ["/data/c.jsonl"],
        "settings": {
            "api_base": api_base,
            "api_key": "sk-live-abcdef123456",
            "only": ["team=tok-0123456789-gateway"],
            "max_input_tokens": 4096,
        },
    }
    state = BatchState(tmp_path)
    state.record("batch-1", "openai", "gpt-4o", api_base, "file-1", "/r/out.jsonl", ["x"], command)
    state.close()
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("batches.sqlite3*"))
    assert b"batch-1" in stored and b"2024-06-01" in stored
    for secret in secrets:
        assert secret.encode() not in stored, secret
    (batch,) = BatchState(tmp_path).all()
    assert batch.api_base == "http://gw.example/v1?api-key=***&api-version=2024-06-01"
    assert batch.command["settings"] == {
        "api_base": "http://gw.example/v1?api-key=***&api-version=2024-06-01",
        "api_key": "***",
        "only": ["team=***"],
        "max_input_tokens": 4096,
    }
