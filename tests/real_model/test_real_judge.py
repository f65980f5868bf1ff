"""flowrate end to end against a real model (issue 16): SmolLM2-135M-Instruct served by
llama-cpp-python on 127.0.0.1 (`bash .ci/real_model` starts it), reached by the installed
`flowrate` as a real process through a counting proxy (see conftest.py).

These tests assert the pipeline, never the verdicts of a 135M model: what was sent (the
schema in the form the server takes, a reply limit, `n`), how many requests a conversation
took, that each conversation ends in the output exactly once, that sample counts are the
choices really obtained, that a long conversation is cut to the server's window, the cache,
and Ctrl-C with --resume.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.real_model.conftest import (
    PROCESS_LIMIT_S,
    CountingProxy,
    Exchange,
    Run,
    read_rows,
    run_flowrate,
    start_flowrate,
    wait_until,
)

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_conversations"
FLOW = "conversational_flow_rate"
SUITE_ROWS = [
    "request_completion",
    "intent_accuracy",
    "slot_filling",
    "smoothness",
    "context_retention",
    "truthfulness",
    "conciseness",
    "coherence",
    "user_satisfaction",
]
JUDGED_OR_FAILED = (0, 1)  # the gate's verdict on a 135M model's ratings is not the pipeline's business


# -- what the input holds, read without flowrate ---------------------------------------------
def sample_ids() -> list[str]:
    """The ids of the sample conversations, read straight from the files."""
    ids = []
    for path in sorted(SAMPLES.iterdir()):
        if path.suffix == ".jsonl":
            ids += [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        elif path.suffix in (".yaml", ".yml"):
            ids += [record["id"] for record in yaml.safe_load(path.read_text(encoding="utf-8"))["conversations"]]
    return ids


def short_conversations(path: Path, count: int, tag: str) -> list[str]:
    """`count` short, distinct conversations (no two share a cache entry) in a JSONL file."""
    records = [
        {
            "id": f"{tag}-{n}",
            "turns": [
                {
                    "input": f"Hi, what time does your shop on street {n} open on Saturday?",
                    "actual_output": "It opens at 9:00 on Saturdays.",
                },
                {"input": "Thanks, and when does it close?", "actual_output": "At 17:00. Anything else?"},
            ],
        }
        for n in range(1, count + 1)
    ]
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return [record["id"] for record in records]


# -- what the proxy saw ----------------------------------------------------------------------
def form_refusals(completions: list[Exchange]) -> list[Exchange]:
    """Requests the server refused for the form of their response_format (llama-cpp-python's 500
    "Input should be 'text' or 'json_object'"): how flowrate learns the form, once per run."""
    return [e for e in completions if e.status != 200 and "response_format" in json.dumps(e.answer)]


def assert_schema_sent_as_the_server_takes_it(exchange: Exchange, required: set[str]) -> None:
    """The rubric's reply schema went in llama-cpp-python's form, with a reply limit and one choice."""
    body = exchange.body
    form = body.get("response_format")
    assert isinstance(form, dict) and form.get("type") == "json_object", form
    schema = form.get("schema")
    assert isinstance(schema, dict) and required <= set(schema.get("required", [])), schema
    assert isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 0, body.get("max_tokens")
    assert body.get("n", 1) == 1


def assert_ran(run: Run) -> None:
    """The run went through: no usage error, no failed write, no traceback (its verdicts and
    error rows are for the assertions that follow)."""
    assert run.returncode not in (2, 4) and "Traceback" not in run.stderr, run.stderr


def assert_each_once(rows: list[dict], ids: list[str], metrics: list[str]) -> None:
    """Every conversation ends in the file exactly once per row name, and nothing else is there."""
    counts = Counter((row["id"], row["metric"]) for row in rows)
    assert counts == Counter({(cid, metric): 1 for cid in ids for metric in metrics}), counts


COPIED = "repeats the rubric's worked example"  # a reply read fine, rejected for its content


def exit_codes_for(rows: list[dict]) -> tuple[int, ...]:
    """The exit statuses flowrate's contract gives these rows, whatever a 135M model rated: 3 when
    a reply was unusable as a copy of a rubric example (an error row: the summary counts it), else
    0 or 1 (the gate's verdict on its ratings). Any other error row is the pipeline's own: none."""
    errors = [row for row in rows if row["error"]]
    if any(not rejected(row) for row in errors):
        return ()
    return (3,) if errors else JUDGED_OR_FAILED


def rejected(row: dict) -> bool:
    """The row's reply came back under the schema's grammar but flowrate could not use it as a
    judgement, and re-asked once: a copy of a rubric example, or JSON without the rubric's
    object (SmolLM2 on this machine's llama.cpp build does both for one sample each, the old code
    alike). What a 135M model answers, which these tests never assert on; the error row, the
    re-ask and the exit status 3 are the pipeline's, and they are asserted."""
    error = row["error"] or {}
    return copied_example(row) or error.get("type") == "UnparsableReply"


def copied_example(row: dict) -> bool:
    """The row's reply was valid JSON on its scales, rejected as a copy of the rubric's worked
    example (and re-asked once): what a judgement says, which these tests never assert on."""
    error = row["error"] or {}
    return COPIED in (row["reasked"] or "") or error.get("type") == "CopiedExample"


def assert_parsed_on_the_first_call(run: Run, ids: list[str], required: set[str]) -> None:
    """Each conversation's first reply read as it came, thanks to the schema sent in the form
    the server took: no repair, no cut, no re-ask for its JSON or its scales, no error but a
    copied example. One request per conversation; the only extra requests a run may make are the
    one the server refused for the schema's form and one re-ask per copied reply."""
    problems = {
        row["id"]: f"{row['id']}: error {row['error']}, reasked {row['reasked']!r}, repaired {row['repaired']},"
        f" cut {row['cut']}, attempts {row['attempts']}"
        for row in run.rows
        if row["attempts"] and not rejected(row) and (row["error"] or row["reasked"] or row["repaired"] or row["cut"])
    }
    assert not problems, "replies not read on the first call:\n" + "\n".join(problems.values())
    copies = {row["id"] for row in run.rows if row["attempts"] and rejected(row)}
    assert {row["response_format"] for row in run.rows} == {"json_object_schema"}
    refused = form_refusals(run.completions)
    accepted = [e for e in run.completions if e.status == 200]
    assert len(refused) <= 1 and len(accepted) + len(refused) == len(run.completions), [
        (e.status, e.answer) for e in run.completions if e.status != 200
    ]
    assert len(accepted) == len(ids) + len(copies)
    for exchange in accepted:
        assert_schema_sent_as_the_server_takes_it(exchange, required)
        assert len(exchange.answer["choices"]) == 1
    attempts = Counter()
    for row in run.rows:
        attempts[row["id"]] += row["attempts"]
    extra = Counter({conversation: 1 for conversation in copies})
    assert sum(attempts.values()) == len(ids) + len(refused) + len(copies), attempts
    assert all(attempts[conversation] - extra[conversation] in (1, 2) for conversation in ids), attempts


# -- the sample conversations with the flow metric, then again from the cache ----------------
@pytest.fixture(scope="module")
def flow_samples(real_judge, tmp_path_factory):
    """One run of the flow metric over the sample conversations, and the proxy it went through."""
    workdir = tmp_path_factory.mktemp("flow-samples")
    proxy = CountingProxy(real_judge.root).start()
    try:
        run = run_flowrate(proxy, workdir, workdir / "cache", "eval", SAMPLES, "-m", real_judge.model,
                           "--api-base", proxy.url, "-j", "1")  # fmt: skip
        yield run, proxy, workdir
    finally:
        proxy.stop()


def test_each_sample_conversation_is_judged_once_with_its_reply_read_on_the_first_call(flow_samples):
    run, _, _ = flow_samples
    assert_ran(run)
    assert_each_once(run.rows, sample_ids(), [FLOW])
    assert_parsed_on_the_first_call(run, sample_ids(), {"reason", "key_issues", "verdict"})
    assert run.returncode in exit_codes_for(run.rows), run.stderr


def test_a_rerun_from_the_cache_sends_no_request_and_gives_the_same_rows(real_judge, flow_samples):
    first, proxy, workdir = flow_samples
    again = run_flowrate(proxy, workdir, workdir / "cache", "eval", SAMPLES, "-m", real_judge.model,
                         "--api-base", proxy.url, "-j", "1", output="again.jsonl")  # fmt: skip
    assert again.returncode in exit_codes_for(again.rows), again.stderr
    assert_each_once(again.rows, sample_ids(), [FLOW])
    unusable = {row["id"] for row in first.rows if row["error"]}  # never cached, so asked again
    cached = [row for row in again.rows if row["id"] not in unusable]
    assert all(row["cached"] and row["attempts"] == 0 for row in cached), [
        (row["id"], row["cached"], row["attempts"]) for row in cached
    ]
    assert len(again.completions) == sum(row["attempts"] for row in again.rows if row["id"] in unusable)
    verdicts = {row["id"]: (row["verdict"], row["reason"]) for row in first.rows if row["id"] not in unusable}
    assert {row["id"]: (row["verdict"], row["reason"]) for row in cached} == verdicts


# -- a conversation longer than the server's window ------------------------------------------
def long_conversation(path: Path, n_ctx: int) -> list[dict]:
    """One conversation of some 6 characters per token of the window: well past it in any tokenizer."""
    turns = []
    n = 0
    while sum(len(t["input"]) + len(t["actual_output"]) for t in turns) < 6 * n_ctx:
        n += 1
        turns.append(
            {
                "input": f"Turn {n}: my parcel {1000 + n} went to depot {n % 7} and the tracking page shows"
                f" status code E{n:03d}; the courier said it would come on day {n % 28 + 1}. Where is it now?",
                "actual_output": f"I checked parcel {1000 + n}: it left depot {n % 7} this morning and is due"
                f" on day {n % 28 + 2}. Code E{n:03d} only means the scan at the depot was late.",
            }
        )
    turns[-1] = {"input": "FINAL-QUESTION: can you send it to my office instead?", "actual_output": "FINAL-ANSWER."}
    path.write_text(json.dumps({"id": "long", "turns": turns}) + "\n", encoding="utf-8")
    return turns


def test_a_conversation_past_the_servers_window_is_cut_to_the_window_its_refusal_names(real_judge, proxy, tmp_path):
    assert real_judge.n_ctx > 0, "FLOWRATE_REAL_JUDGE_CTX must give the server's n_ctx"
    turns = long_conversation(tmp_path / "long.jsonl", real_judge.n_ctx)
    run = run_flowrate(proxy, tmp_path, tmp_path / "cache", "eval", "long.jsonl", "-m", real_judge.model,
                       "--api-base", proxy.url, "-j", "1")  # fmt: skip

    # llama-cpp-python tells its window nowhere but in its refusal: one 400, not retried as it
    # was; the conversation is cut to the window it names, and judged on the next call.
    refusals = [e for e in run.completions if e.status == 400]
    accepted = [e for e in run.completions if e.status == 200]
    assert len(refusals) == 1 and len(accepted) == 1, [(e.status, e.answer) for e in run.completions]
    assert len(run.completions) == 2 + len(form_refusals(run.completions))
    assert f"{real_judge.n_ctx}" in json.dumps(refusals[0].answer)
    (row,) = run.rows
    assert run.returncode in exit_codes_for(run.rows), run.stderr
    assert row["truncated"] is True and row["error"] is None and row["reasked"] is None, row
    sent = accepted[0].body
    prompt = json.dumps(sent["messages"], ensure_ascii=False)
    assert turns[0]["input"][:40] in prompt and "FINAL-QUESTION" in prompt and "FINAL-ANSWER" in prompt
    middle = turns[len(turns) // 2]["input"]
    assert middle not in prompt
    used = accepted[0].answer["usage"]
    assert used["prompt_tokens"] + sent["max_tokens"] <= real_judge.n_ctx, (used, sent["max_tokens"])


# -- --samples 3 against a server that ignores n ---------------------------------------------
def test_three_samples_are_three_choices_really_obtained_from_a_server_that_ignores_n(real_judge, proxy, tmp_path):
    ids = short_conversations(tmp_path / "one.jsonl", 1, "samples")
    run = run_flowrate(proxy, tmp_path, tmp_path / "cache", "eval", "one.jsonl", "-m", real_judge.model,
                       "--api-base", proxy.url, "-j", "1", "--samples", "3")  # fmt: skip
    assert run.returncode in exit_codes_for(run.rows), run.stderr
    assert_each_once(run.rows, ids, [FLOW])
    (row,) = run.rows
    accepted = [e for e in run.completions if e.status == 200]
    # three samples at temperature 0 would be three copies of one verdict
    sampled = [e for e in accepted if e.body.get("temperature", 1.0) > 0]
    assert row["attempts"] == len(run.completions)
    if row["reasked"] or row["error"]:  # a sample drawn at 0.7 came back a copied example: asked once more,
        assert COPIED in (row["reasked"] or "") or rejected(row), row  # which the row says; how many is the draw's
        assert len(sampled) >= 3, [e.body.get("temperature") for e in accepted]
        return
    assert sampled == accepted, [e.body.get("temperature") for e in accepted]
    assert row["error"] is None and row["reasked"] is None, row
    obtained = sum(len(e.answer["choices"]) for e in accepted)
    asked = [e.body.get("n", 1) for e in accepted]
    assert obtained == 3 and row["samples"] == 3 and len(row["sample_verdicts"]) == 3, (asked, obtained, row)
    assert len(accepted) == 3, asked  # llama-cpp-python answers n=3 with one choice: two more calls


# -- Ctrl-C mid-run, then --resume ------------------------------------------------------------
def test_ctrl_c_mid_run_keeps_each_row_once_and_resume_completes_the_rest(real_judge, proxy, tmp_path):
    ids = short_conversations(tmp_path / "four.jsonl", 4, "interrupt")
    cache = tmp_path / "cache"
    process = start_flowrate(tmp_path, cache, "eval", "four.jsonl", "-m", real_judge.model,
                             "--api-base", proxy.url, "-j", "1", "-o", "out.jsonl")  # fmt: skip
    output = tmp_path / "out.jsonl"

    def mid_run() -> bool:  # a row is in the file and the next conversation's request is at the server
        return (
            output.exists()
            and output.read_text().count("\n") >= 1
            and any(e.status is None for e in proxy.completions())
        )

    wait_until(lambda: process.poll() is not None or mid_run(), PROCESS_LIMIT_S)
    in_flight = mid_run()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=PROCESS_LIMIT_S)
    assert in_flight, stderr
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    before = read_rows(output)
    assert 1 <= len(before) < len(ids) and len({row["id"] for row in before}) == len(before), before
    resume = re.search(r"^resume with: (.+)$", stderr, re.MULTILINE)
    assert resume, stderr
    words = shlex.split(resume.group(1))
    assert words[0] == "flowrate" and words[-1] == "--resume", words

    seen = len(proxy.completions())
    process = start_flowrate(tmp_path, cache, *words[1:])
    _, stderr = process.communicate(timeout=PROCESS_LIMIT_S)
    after = read_rows(output)
    assert process.returncode in exit_codes_for(after), stderr
    assert_each_once(after, ids, [FLOW])
    assert [row for row in after if row["id"] in {r["id"] for r in before}] == before  # kept as they were
    new = [row for row in after if row["id"] not in {r["id"] for r in before}]
    completions = proxy.completions()[seen:]
    assert sum(row["attempts"] for row in new) == len(completions)
    assert sum(e.status == 200 for e in completions) == sum(not row["cached"] for row in new)
    assert f"resumed from the output file {len(before)}" in stderr, stderr


# -- the suite, last: its rubric is another prompt prefix for the server's cache --------------
def test_the_suite_rates_each_sample_conversation_in_one_request_read_on_the_first_call(real_judge, proxy, tmp_path):
    run = run_flowrate(proxy, tmp_path, tmp_path / "cache", "eval", SAMPLES, "-m", real_judge.model,
                       "--api-base", proxy.url, "--metric", "virtual_agent", "-j", "1")  # fmt: skip
    assert_ran(run)
    assert_each_once(run.rows, sample_ids(), SUITE_ROWS)
    assert_parsed_on_the_first_call(run, sample_ids(), {"criteria"})
    copied = any(copied_example(row) and row["error"] for row in run.rows)
    assert run.returncode in exit_codes_for(run.rows), run.stderr
    if copied:  # counted, as the summary says
        assert "copied a rubric example" in run.stderr, run.stderr


# -- --score combined: the distribution of the reply, and of a verdict-first look -------------------
def test_the_real_servers_log_probabilities_give_each_row_its_distributions(real_judge, proxy, tmp_path):
    ids = short_conversations(tmp_path / "two.jsonl", 2, "logprobs")
    run = run_flowrate(proxy, tmp_path, tmp_path / "cache", "eval", "two.jsonl", "-m", real_judge.model,
                       "--api-base", proxy.url, "-j", "1", "--score", "combined")  # fmt: skip
    assert run.returncode in exit_codes_for(run.rows), run.stderr
    assert_each_once(run.rows, ids, [FLOW])
    accepted = [e for e in run.completions if e.status == 200]
    assert all(e.body.get("logprobs") is True and e.body.get("top_logprobs") == 10 for e in accepted)
    looks = [e for e in accepted if list(e.body["response_format"]["schema"]["properties"]) == ["verdict"]]
    assert len(looks) == len([row for row in run.rows if row["error"] is None]), [e.body for e in accepted]
    assert "log-probabilities" not in run.stderr, run.stderr  # llama-cpp-python 0.3.36 gives them by default
    for row in (row for row in run.rows if row["error"] is None):
        for probs in (row["level_probs"], row["verdict_first_probs"]):
            assert set(probs) == {"fully", "mostly", "partial", "minor", "none"}, row
            assert abs(sum(probs.values()) - 1) < 1e-4
        assert row["level_probs"][row["verdict"]] > 0 and row["level_probs_from"] == "logprobs"
        assert row["score_from"] == "combined"
        assert row["score"] == pytest.approx((row["verdict_score"] + row["verdict_first_score"]) / 2)
