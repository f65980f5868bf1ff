"""A run stopped by a signal (Ctrl-C, SIGTERM, a closed pipe): its status, its summary, the resume
command, and no request started after it."""

import json
import signal
import time

from tests.helpers import distinct, read_rows, turn_record, wait_for_requests, write_jsonl


def test_interrupt_exits_130_with_a_summary(judge, conversations, tmp_path, start_process):
    judge.latency_s = 0.5
    path = conversations(*[turn_record(f"c{n}", f"question {n}", "b") for n in range(200)])  # distinct: no cache hits
    process = start_process("eval", path, "--api-base", judge.base_url, "-j", "4", "-o", "out.jsonl")
    wait_for_requests(judge, 8)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert 4 <= len(rows) < 200 and len({row["id"] for row in rows}) == len(rows)
    assert f"resume with: flowrate eval {path} --api-base {judge.base_url} -j 4 -o out.jsonl --resume" in stderr


def test_ctrl_c_ends_rate_waits_at_once_and_starts_no_new_request(judge, tmp_path, start_process):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(40))
    process = start_process("eval", path, "--api-base", judge.base_url, "--rpm", "6", "-o", "out.jsonl")
    wait_for_requests(judge, 1)
    time.sleep(0.3)
    seen = judge.requests
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert time.monotonic() - started < 6 and judge.requests == seen
    assert "resume with: flowrate eval" in stderr and "--resume" in stderr
    assert "Traceback" not in stderr


def test_sigterm_stops_the_run_with_a_summary_a_resume_command_and_the_reports(judge, tmp_path, start_process):
    judge.latency_s = 0.2
    path = write_jsonl(tmp_path / "c.jsonl", distinct(60))
    process = start_process(
        "eval", path, "--api-base", judge.base_url, "-j", "2", "--junit", "j.xml", "-o", "out.jsonl"
    )
    wait_for_requests(judge, 4)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert "interrupted" in stderr and "resume with: flowrate eval" in stderr and "--resume" in stderr
    assert "Traceback" not in stderr
    assert (tmp_path / "j.xml").exists()
    rows = read_rows(tmp_path / "out.jsonl")
    assert 0 < len(rows) < 60 and len({row["id"] for row in rows}) == len(rows)


def test_sigterm_while_the_judge_is_loading_exits_143_without_a_traceback(tmp_path, start_process, judge):
    judge.latency_s = 5.0  # the run cannot be over when the signal comes
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    process = start_process("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    told = process.stderr.readline()  # the first line: "loading the judge (...)"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert "loading the judge" in told, told
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr


def test_a_closed_pipe_stops_quietly_with_sigpipes_status(judge, tmp_path, start_process):
    judge.latency_s = 0.02
    path = write_jsonl(tmp_path / "c.jsonl", distinct(300))
    process = start_process("eval", path, "--api-base", judge.base_url, "-o", "-", "-j", "4", text=False)
    assert json.loads(process.stdout.readline())["id"]
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.wait(timeout=60)
    assert process.returncode == 141, stderr
    assert "Traceback" not in stderr and judge.requests < 300
