"""Resume and retry-errors: only what is missing is judged again, rows are derived again for new
settings, another judge is refused, and the summary and costs count what this run did."""

import json
import signal
import subprocess
import time

from tests.helpers import (
    FLOWRATE,
    SUITE_MARK,
    distinct,
    ids,
    lines_in,
    read_rows,
    suite_reply,
    wait_for_requests,
    write_jsonl,
)
from tests.helpers import packaged_rubric_text as _packaged_rubric


def read_rows_tolerant(path):
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


def test_resume_after_kill_9_judges_each_conversation_once(judge, tmp_path, cli_env, run_flowrate):
    judge.latency_s = 0.2
    path = write_jsonl(tmp_path / "c.jsonl", distinct(60))
    process = subprocess.Popen(
        [FLOWRATE, "eval", str(path), "--api-base", judge.base_url, "-j", "4", "-o", "out.jsonl", "--no-cache"],
        cwd=tmp_path,
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    output = tmp_path / "out.jsonl"
    deadline = time.monotonic() + 60
    while lines_in(output) < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    with output.open("ab") as handle:
        handle.write(b'{"id": "c59", "metric": "conversational_fl')  # a line the kill cut short
    before = len(read_rows_tolerant(output))
    calls_before = judge.requests
    result = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-j", "4", "-o", "out.jsonl", "--resume", "--no-cache"
    )
    assert result.returncode == 0, result.stderr
    assert "cut a partial last line" in result.stderr
    rows = read_rows(output)
    assert ids(rows) == ids(distinct(60)) and len(rows) == 60  # every conversation exactly once
    assert judge.requests - calls_before == 60 - before
    assert "passed 60" in result.stderr and f"resumed from the output file {before}" in result.stderr, result.stderr


def test_retry_errors_replaces_only_the_error_rows(judge, run_flowrate, tmp_path):
    judge.script("question c1", {"status": 500}, {"status": 500}, {"verdict": "minor"})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    first = run_flowrate("eval", path, "--api-base", judge.base_url, "--max-retries", "1", "-o", "out.jsonl")
    assert first.returncode == 3
    assert judge.requests == 5
    second = run_flowrate("eval", path, "--api-base", judge.base_url, "--retry-errors", "-o", "out.jsonl")
    assert second.returncode == 1 and judge.requests == 6  # one call: only c1 again
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert len(rows) == 4 and rows["c1"]["verdict"] == "minor" and rows["c1"]["error"] is None
    assert "1 error row(s) to judge again" in second.stderr


def test_resume_derives_success_again_for_a_new_threshold(judge, run_flowrate, tmp_path):
    judge.script("question c1", {"verdict": "partial"})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    assert run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl").returncode == 0
    calls = judge.requests
    again = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--resume", "--threshold", "0.8"
    )
    assert again.returncode == 1 and judge.requests == calls
    row = next(row for row in read_rows(tmp_path / "out.jsonl") if row["id"] == "c1")
    assert (row["threshold"], row["success"]) == (0.8, False)


def test_resume_refuses_another_model_or_rubric(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    other = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--resume", "-m", "gpt-4o-mini")
    assert other.returncode == 2
    assert "judged with model 'gpt-4o', this run uses 'gpt-4o-mini'" in other.stderr
    rubric = tmp_path / "r.yaml"
    rubric.write_text(_packaged_rubric() + "\n# mine\n")
    changed = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--resume", "--rubric", rubric
    )
    assert changed.returncode == 2 and "judged with rubric version" in changed.stderr


def test_a_resumed_summary_counts_only_the_conversations_of_this_input(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "all.jsonl", distinct(20))
    assert run_flowrate("eval", "all.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl").returncode == 0
    write_jsonl(tmp_path / "some.jsonl", distinct(5))
    result = run_flowrate("eval", "some.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl", "--resume")
    assert result.returncode == 0
    assert "passed 5  failed 0" in result.stderr
    assert "15 row(s) are for conversations not in this input" in result.stderr


def test_resume_judges_a_suite_again_only_for_its_missing_rows(judge, run_flowrate, tmp_path):
    judge.script(SUITE_MARK, {"content": suite_reply()})
    write_jsonl(tmp_path / "c.jsonl", distinct(2))
    base = (
        "eval",
        "c.jsonl",
        "--metric",
        "virtual_agent",
        "--api-base",
        judge.base_url,
        "-o",
        "out.jsonl",
        "--no-cache",
    )
    run_flowrate(*base)
    output = tmp_path / "out.jsonl"
    lines = output.read_text().splitlines()
    kept = [
        line
        for line in lines
        if not (json.loads(line)["id"] == "c1" and json.loads(line)["metric"] in ("coherence", "user_satisfaction"))
    ]
    output.write_text("\n".join(kept) + "\n")
    calls = judge.requests
    result = run_flowrate(*base, "--resume")
    rows = read_rows(output)
    assert judge.requests == calls + 1 and len(rows) == 18
    assert len({(row["id"], row["metric"]) for row in rows}) == 18 and result.returncode == 1


def test_resume_with_the_offline_repetition_check_judges_only_what_is_missing(run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    first = run_flowrate("eval", path, "--metric", "repetition_check", "--limit", "2", "-o", "out.jsonl")
    assert first.returncode == 0, first.stderr
    again = run_flowrate(
        "eval", path, "--metric", "repetition_check", "--resume", "--threshold", "0.5", "-o", "out.jsonl"
    )
    assert again.returncode == 0, again.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert sorted(row["id"] for row in rows) == ["c0", "c1", "c2", "c3"]
    assert {row["threshold"] for row in rows} == {0.5}


def test_an_interrupted_resume_counts_every_row_the_file_held(judge, tmp_path, start_process, run_flowrate):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(100))
    first = run_flowrate("eval", path, "--api-base", judge.base_url, "--limit", "60", "-o", "out.jsonl")
    assert first.returncode == 0, first.stderr
    judge.reset()
    judge.latency_s = 0.3
    process = start_process("eval", path, "--api-base", judge.base_url, "--resume", "-j", "2", "-o", "out.jsonl")
    wait_for_requests(judge, 2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    rows = read_rows(tmp_path / "out.jsonl")
    new = len(rows) - 60
    assert "resumed from the output file 60" in stderr, stderr
    assert f"interrupted: {100 - 60 - new} conversation(s) not judged yet" in stderr, stderr


def test_after_resume_the_cost_line_shows_this_runs_spend_and_the_files_total(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(5))
    first = run_flowrate("eval", path, "--api-base", judge.base_url, "-m", "gpt-4o", "--limit", "4", "-o", "o.jsonl")
    assert first.returncode == 0, first.stderr
    rows = read_rows(tmp_path / "o.jsonl")
    earlier_prompt = sum(row["usage"]["prompt_tokens"] for row in rows)
    again = run_flowrate("eval", path, "--api-base", judge.base_url, "-m", "gpt-4o", "--resume", "-o", "o.jsonl")
    assert again.returncode == 0, again.stderr
    rows = read_rows(tmp_path / "o.jsonl")
    new = [row for row in rows if row["id"] == "c4"]
    this_run = new[0]["usage"]["prompt_tokens"]
    assert f"this run: tokens {this_run} prompt" in again.stderr, again.stderr
    assert f"the file in all: tokens {earlier_prompt + this_run} prompt" in again.stderr, again.stderr
