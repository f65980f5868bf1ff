"""Provider batch mode, against a local fake of the Files and Batches endpoints
(tests/batch_server.py): failed and expired lines judged online, the batch price, submit and
collect, a killed or interrupted run, and real `flowrate` processes where signals are tested."""

import json
import os
import signal
import subprocess
import time

import pytest

from tests.helpers import FLOWRATE, MARK_FAIL, TEST_KEY, batch_args, read_rows, turn_record, write_jsonl
from tests.helpers import batch_conversations as conversations
from tests.judge_server import checklist_step


def submitted_and_polling(batch_server):
    """Wait until a real process has recorded its batch and polled it once (it records a batch
    before its first poll: a created batch alone may not be recorded yet on a loaded machine),
    and is now waiting for the next poll."""
    deadline = time.monotonic() + 60
    while not any(batch_server.polls.values()) and time.monotonic() < deadline:
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
        submitted_and_polling(batch_server)
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


@pytest.mark.parametrize("state", ["made by a batch run", "not made yet"])
def test_a_batch_run_whose_cache_is_on_a_full_disk_tells_what_it_could_not_keep_and_judges_everything(
    state, batch_server, judge, run_flowrate, tmp_path, cli_env
):
    from tests.helpers import fill_disk, small_disk

    with small_disk(tmp_path / "disk", 256) as disk:
        env = dict(cli_env, FLOWRATE_CACHE_DIR=str(disk / "cache"))
        write_jsonl(tmp_path / "c.jsonl", conversations(2))
        first = batch_args(batch_server, output="first.jsonl")
        if state == "not made yet":  # an online run made the cache; no batch state is there
            first = [arg for arg in first if arg not in ("--batch", "--poll-interval", "0")]
        assert run_flowrate(*first, env=env).returncode == 0
        assert (disk / "cache" / "batches.sqlite3").exists() == (state == "made by a batch run")
        fill_disk(disk)
        write_jsonl(tmp_path / "c.jsonl", conversations(6))
        result = run_flowrate(*batch_args(batch_server), env=env)
    assert result.returncode == 0, result.stderr
    assert len(read_rows(tmp_path / "out.jsonl")) == 6
    assert "Traceback" not in result.stderr
    assert "could not be recorded" in result.stderr and "batches.sqlite3" in result.stderr
    assert "no room for the batch files" in result.stderr
    assert "replies could not be cached" in result.stderr


def test_a_batch_run_whose_results_file_fills_the_disk_exits_4_and_leaves_the_batch_to_collect_again(
    batch_server, judge, run_flowrate, tmp_path
):
    from tests.helpers import fill_disk, small_disk

    write_jsonl(tmp_path / "c.jsonl", conversations(30))
    with small_disk(tmp_path / "disk", 256) as disk:
        filler = fill_disk(disk, leave_bytes=8192)
        result = run_flowrate(*batch_args(batch_server, output=disk / "out.jsonl"))
        assert result.returncode == 4, result.stderr
        assert "Traceback" not in result.stderr and "writing the results stopped" in result.stderr
        whole = (disk / "out.jsonl").read_bytes().count(b"\n")
        assert 0 < whole < 30
        assert f"passed {whole}  failed 0  errors 0  skipped {30 - whole}" in result.stderr
        filler.unlink()
        collected = run_flowrate("batch", "collect")
        assert collected.returncode == 0, collected.stderr
        assert sorted(row["id"] for row in read_rows(disk / "out.jsonl")) == sorted(
            record["id"] for record in conversations(30)
        )


# the judge says "fully" (1.0) and is torn: 0.6 on it, 0.4 on "none" (0.0)
TORN = {"verdict": "fully", "reason": "torn", "key_issues": [], "logprobs": {"fully": -0.5108, "none": -0.9163}}
DISTRIBUTION = (
    "level_probs",
    "outside_prob",
    "level_probs_from",
    "expected_score",
    "verdict_score",
    "score",
    "score_from",
    "success",
    "uncertain",
)


def test_a_batch_asks_the_distribution_and_its_rows_carry_what_flowrate_eval_gives(
    batch_server, judge, run_flowrate, tmp_path
):
    write_jsonl(tmp_path / "c.jsonl", conversations(4))
    judge.script("question 2", TORN)
    score = ["--score", "expected", "--uncertain-below", "0.7", "--no-cache"]
    online = run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "-o", "online.jsonl", *score)
    judge.reset()
    judge.script("question 2", TORN)
    batched = run_flowrate(*batch_args(batch_server, *score))
    assert batched.returncode == online.returncode == 1, batched.stderr
    [line_file] = [data for data in batch_server.files.values() if b'"custom_id"' in data and b'"body"' in data][:1]
    assert all(json.loads(line)["body"]["logprobs"] is True for line in line_file.splitlines())
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert all(row["batch"] for row in rows.values()) and judge.requests == 0
    for expected in read_rows(tmp_path / "online.jsonl"):
        assert {key: rows[expected["id"]][key] for key in DISTRIBUTION} == {key: expected[key] for key in DISTRIBUTION}
    torn = rows["c2"]
    assert torn["level_probs"]["fully"] == pytest.approx(0.6, abs=1e-3) and torn["uncertain"] is True
    assert torn["score"] == torn["expected_score"] == pytest.approx(0.6, abs=1e-3) and torn["success"] is False
    assert rows["c0"]["expected_score"] == 1.0 and rows["c0"]["uncertain"] is False


def test_a_batchs_distributions_are_cached_and_read_back_on_a_rerun(batch_server, judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(3))
    judge.script("question 1", TORN)
    cache = ["--score", "expected", "--cache-dir", str(tmp_path / "cache")]
    assert run_flowrate(*batch_args(batch_server, *cache)).returncode == 1
    again = run_flowrate(*batch_args(batch_server, *cache, output="again.jsonl"))
    assert again.returncode == 1 and judge.requests == 0 and batch_server.created == 1, again.stderr
    first = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    for row in read_rows(tmp_path / "again.jsonl"):
        assert row["cached"] is True
        assert (row["level_probs"], row["expected_score"]) == (
            first[row["id"]]["level_probs"],
            first[row["id"]]["expected_score"],
        )


JUDGED = (
    "verdict", "score", "score_from", "combined_score", "verdict_first_score", "expected_score", "level_probs",
    "reasked", "error", "samples", "checklist_score", "checklist_p_yes", "turn_p_problem", "problem_turns",
)  # fmt: skip
OPTION_SETS = {
    "combined, a look beside each call": ["--score", "combined"],
    # the scripted judge answers "no" to every question it is not told: 8 of the flow checklist's 12 weight, 0.667
    "a checklist beside each call": ["--score", "checklist", "--threshold", "0.6"],
    "a per-turn look beside each call": ["--turn-look"],
    "three samples in one request": ["--samples", "3"],
    "verdict first, expected score": ["--reply-order", "verdict-first", "--score", "expected"],
    "log-probabilities kept": ["--logprobs", "--uncertain-below", "0.7"],
}


@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
def test_a_batch_gives_the_rows_eval_gives_online_for_every_option_that_shapes_a_judgement(
    options, batch_server, judge, run_flowrate, tmp_path
):
    write_jsonl(tmp_path / "c.jsonl", conversations(4))
    torn = {"verdict": "fully", "reason": "torn", "logprobs": {"fully": -0.5108, "none": -0.9163}}

    def script():
        checklist = checklist_step({"ends_well": "yes"}, {"ends_well": {"yes": -0.3567, "no": -1.204}})
        turns = {"answers": {"follows_on": "no"}, "logprobs": {"follows_on": {"no": -0.2231, "yes": -1.6094}}}
        judge.script(
            "question 1",
            {"verdict": "mostly", "look": torn, "checklist": checklist, "turns": turns,
             "logprobs": {"mostly": -0.2, "partial": -1.8}},
        )  # fmt: skip
        judge.script("question 2", {"content": "The flow is fine, I think."}, {"verdict": "partial", "reason": "ok"})

    script()
    options = [*options, "--no-cache"]
    online = run_flowrate("eval", "c.jsonl", "--api-base", batch_server.base_url, "-o", "online.jsonl", *options)
    assert online.returncode == 0, online.stderr
    sent_online = judge.requests
    judge.reset()
    script()
    result = run_flowrate(*batch_args(batch_server, *options))
    assert result.returncode == 0, result.stderr
    reasks = 3 if "--samples" in options else 1  # one for each of c2's unusable replies
    assert batch_server.created == 1 and judge.requests == reasks  # the re-asks, online; the rest in the batch
    assert sent_online == 4 * (2 if {"combined", "checklist", "--turn-look"} & set(options) else 1) + reasks
    batched = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    for row in read_rows(tmp_path / "online.jsonl"):
        assert {key: batched[row["id"]][key] for key in JUDGED} == {key: row[key] for key in JUDGED}, row["id"]
        assert batched[row["id"]]["batch"]
    assert batched["c2"]["reasked"]


def test_a_batch_whose_output_carries_no_log_probabilities_keeps_the_verdicts_score_and_says_so_once(
    batch_server, judge, run_flowrate, tmp_path
):
    write_jsonl(tmp_path / "c.jsonl", conversations(3))
    judge.behave_as("ollama")  # asked for them, its output carries none
    result = run_flowrate(*batch_args(batch_server, "--score", "expected", "--no-cache"))
    assert result.returncode == 0, result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert len(rows) == 3 and all(row["batch"] for row in rows) and judge.requests == 0
    assert all(row["level_probs"] is None and row["score_from"] == "verdict" for row in rows)
    said = "3 judge reply(ies) came without the token log-probabilities asked for"
    assert result.stderr.count(said) == 1, result.stderr


def test_nan_log_probabilities_in_a_batchs_output_are_read_as_no_distribution_and_said_once(
    batch_server, judge, run_flowrate, tmp_path
):
    write_jsonl(tmp_path / "c.jsonl", conversations(3))
    # the output file as json.dumps writes a NaN: not JSON orjson reads
    judge.script("question 1", {"verdict": "fully", "logprobs": {"fully": float("nan"), "none": -2.3}})
    judge.script("question 2", {"verdict": "fully", "logprobs": {"fully": float("nan")}})
    result = run_flowrate(*batch_args(batch_server, "--score", "expected", "--no-cache"))
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert all(row["batch"] and row["error"] is None for row in rows.values()) and judge.requests == 0
    assert rows["c1"]["level_probs"] is None and rows["c2"]["score_from"] == "verdict"
    assert rows["c0"]["level_probs"]["fully"] == 1.0 and rows["c0"]["score_from"] == "expected"
    said = "2 judge reply(ies) came with log-probabilities that are not numbers (NaN)"
    assert result.stderr.count(said) == 1, result.stderr


def test_imported_batch_results_without_the_log_probabilities_asked_for_say_so_once(judge, run_flowrate, tmp_path):
    from tests.judge_server import _completion

    write_jsonl(tmp_path / "c.jsonl", conversations(2))
    export = ("eval", "c.jsonl", "--api-base", judge.base_url, "--batch-export", "requests.jsonl", "--no-cache")
    assert run_flowrate(*export, "--logprobs").returncode == 0
    requests = [json.loads(raw) for raw in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert all(request["body"]["logprobs"] is True for request in requests)
    # the scripted judge's answers to those very requests, from a server that ignores `logprobs`
    answers = [_completion(request["body"], judge.default_step, "") for request in requests]
    lines = [{"custom_id": r["custom_id"], "response": {"status_code": 200, "body": a}, "error": None}
             for r, a in zip(requests, answers, strict=True)]  # fmt: skip
    write_jsonl(tmp_path / "answers.jsonl", lines)
    result = run_flowrate(
        "batch", "import-results", "answers.jsonl", "c.jsonl", "--api-base", judge.base_url, "-o", "rows.jsonl",
        "--logprobs", "--score", "expected",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = read_rows(tmp_path / "rows.jsonl")
    assert len(rows) == 2 and all(row["level_probs"] is None and row["score_from"] == "verdict" for row in rows)
    assert result.stderr.count("2 judge reply(ies) came without the token log-probabilities asked for") == 1


def test_batch_collect_says_once_that_the_output_carried_no_log_probabilities(
    batch_server, judge, run_flowrate, tmp_path
):
    write_jsonl(tmp_path / "c.jsonl", conversations(2))
    judge.behave_as("ollama")  # asked for them, its output carries none
    submitted = run_flowrate(*batch_args(batch_server, "--batch-submit-only", "--logprobs", "--no-cache"))
    assert submitted.returncode == 0, submitted.stderr
    collected = run_flowrate("batch", "collect")
    assert collected.returncode == 0, collected.stderr
    assert all(row["level_probs"] is None for row in read_rows(tmp_path / "out.jsonl"))
    said = "2 judge reply(ies) came without the token log-probabilities asked for"
    assert collected.stderr.count(said) == 1, collected.stderr


def test_engine_batch_is_the_batch_engine_and_batch_its_synonym(batch_server, judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(3))
    args = [arg for arg in batch_args(batch_server) if arg != "--batch"]
    result = run_flowrate(*args, "--engine", "batch")
    assert result.returncode == 0, result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert batch_server.created == 1 and judge.requests == 0 and len(rows) == 3 and all(row["batch"] for row in rows)
    both = run_flowrate(*batch_args(batch_server, "--engine", "ray"))
    assert both.returncode == 2 and "choose one" in both.stderr
