"""`--model gguf:PATH` end to end with a real model file (issue 16): SmolLM2-135M-Instruct run in
the `flowrate` process through llama-cpp-python, no server. `bash .ci/real_model` installs the
extra and names the file in FLOWRATE_REAL_GGUF; without it these tests are skipped.

They assert the pipeline, never the verdicts: every reply read on its first call through the
schema's grammar, each conversation once, the model's own window respected by the cut, and the
cache."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from flowrate.rubric.combination import turn_threshold
from flowrate.rubric.model import load_rubric
from tests.conftest import FLOWRATE
from tests.real_model.conftest import PROCESS_LIMIT_S, flowrate_env, read_rows
from tests.real_model.test_real_judge import (
    FLOW,
    SAMPLES,
    assert_each_once,
    copied_example,
    exit_codes_for,
    long_conversation,
    sample_ids,
)

pytestmark = pytest.mark.real_model
LIMIT = 4  # sample conversations judged: each call is seconds of CPU on 2 cores


@pytest.fixture(scope="module")
def model_file() -> str:
    path = os.environ.get("FLOWRATE_REAL_GGUF")
    if not path:
        pytest.skip("no model file: FLOWRATE_REAL_GGUF is unset (bash .ci/real_model sets it)")
    pytest.importorskip("llama_cpp", reason="the flowrate[local] extra is not installed")
    return path


def run_gguf(workdir: Path, *args, env: dict[str, str] | None = None) -> tuple[int, str, list[dict]]:
    process = subprocess.run(
        [FLOWRATE, *map(str, args), "-o", "out.jsonl"],
        cwd=workdir,
        env={**flowrate_env(workdir / "cache"), **(env or {})},
        capture_output=True,
        text=True,
        timeout=PROCESS_LIMIT_S,
    )
    return process.returncode, process.stderr, read_rows(workdir / "out.jsonl")


def test_a_model_file_judges_in_process_each_reply_read_on_its_first_call_then_from_the_cache(model_file, tmp_path):
    status, stderr, rows = run_gguf(tmp_path, "eval", SAMPLES, "--model", f"gguf:{model_file}", "--limit", LIMIT)
    assert status in exit_codes_for(rows) and "Traceback" not in stderr, stderr
    ids = sample_ids()[:LIMIT]
    assert_each_once(rows, ids, [FLOW])
    unread = [row for row in rows if not copied_example(row) and (row["error"] or row["reasked"] or row["repaired"])]
    assert unread == [], unread
    assert {row["response_format"] for row in rows} == {"gguf_grammar"}
    assert all(row["model"] == f"gguf:{Path(model_file).name}" and row["cost_usd"] is None for row in rows)
    assert all(row["usage"]["prompt_tokens"] > 1000 and row["usage"]["completion_tokens"] > 0 for row in rows)

    again_status, again_stderr, again = run_gguf(
        tmp_path, "eval", SAMPLES, "--model", f"gguf:{model_file}", "--limit", LIMIT
    )
    assert again_status in exit_codes_for(again), again_stderr
    unusable = {row["id"] for row in rows if row["error"]}  # a copied example is never cached: asked again
    assert all(row["cached"] and row["attempts"] == 0 for row in again if row["id"] not in unusable)
    assert {r["id"]: r["verdict"] for r in again} == {r["id"]: r["verdict"] for r in rows}


def test_a_conversation_past_the_loaded_window_is_cut_to_it_by_the_models_own_token_counts(model_file, tmp_path):
    window = 4096  # the flow rubric alone is about 2,950 of SmolLM2's tokens
    turns = long_conversation(tmp_path / "long.jsonl", window)
    status, stderr, rows = run_gguf(
        tmp_path, "eval", "long.jsonl", "--model", f"gguf:{model_file}", env={"FLOWRATE_GGUF_N_CTX": str(window)}
    )
    assert status in exit_codes_for(rows), stderr
    (row,) = rows
    assert row["truncated"] is True and row["error"] is None and row["attempts"] == 1, row
    assert row["usage"]["prompt_tokens"] + 512 <= window, row["usage"]
    assert len(json.dumps(turns)) > 4 * window


def test_logprobs_in_process_give_each_row_a_distribution_over_the_levels(model_file, tmp_path):
    status, stderr, rows = run_gguf(
        tmp_path, "eval", SAMPLES, "--model", f"gguf:{model_file}", "--limit", 2, "--logprobs"
    )
    assert status in exit_codes_for(rows) and "Traceback" not in stderr, stderr
    judged = [row for row in rows if row["error"] is None]
    assert judged, rows
    for row in judged:
        probs = row["level_probs"]
        assert row["level_probs_from"] == "logprobs" and set(probs) == {"fully", "mostly", "partial", "minor", "none"}
        assert abs(sum(probs.values()) - 1) < 1e-4 and probs[row["verdict"]] > 0, row
        assert 0 <= row["outside_prob"] <= 1 and 0 <= row["expected_score"] <= 1
    again_status, _, again = run_gguf(
        tmp_path, "eval", SAMPLES, "--model", f"gguf:{model_file}", "--limit", 2, "--logprobs"
    )
    assert again_status in exit_codes_for(again)
    cached = {row["id"]: row["level_probs"] for row in again if row["cached"]}
    assert cached and all(cached[i] == r["level_probs"] for i, r in ((r["id"], r) for r in judged) if i in cached)


def _asked_again():
    """A conversation whose assistant asks for what the user had already given."""
    from flowrate.inputs.conversation import ConversationalEvalTestCase, EvalTestCase

    return ConversationalEvalTestCase(
        turns=[
            EvalTestCase(input="Where is order 12?", actual_output="Which order do you mean?"),
            EvalTestCase(input="Order 12, as I said.", actual_output="Order 12 ships today."),
        ]
    )


def test_a_checklist_asked_after_the_grading_request_is_read_from_the_models_own_log_probabilities(model_file):
    """The checklist's pipeline on a real model's logits (issue 46): every question answered
    under the schema, each P(yes) read at its answer's token, never from the text."""
    import asyncio

    from flowrate.judge.address import JudgeAddress
    from flowrate.judge.local_model import LocalModel
    from flowrate.rubric.checklist import checklist_messages
    from flowrate.rubric.model import load_rubric
    from flowrate.scores.checklist import checklist_reading, checklist_schema

    rubric = load_rubric()
    case = _asked_again()
    messages = checklist_messages(rubric, rubric.build_messages(case))
    backend = LocalModel(JudgeAddress.parse(f"gguf:{model_file}"))
    backend.asks_logprobs = True
    schema = backend.structured_output("checklist", checklist_schema(rubric))
    completion = asyncio.run(backend.complete(messages, n=1, timeout=600, response_format=schema, max_tokens=256))
    reading = checklist_reading(rubric, completion.texts[0], completion.tokens(0))
    assert reading.problems == {} and set(reading.answers) == {item.id for item in rubric.checklist}, completion.texts
    assert set(reading.p_yes_from.values()) == {"logprobs"}
    assert all(0.0 <= p <= 1.0 for p in reading.p_yes.values()) and 0.0 <= reading.score <= 1.0
    # a value the model chose is one it gave some probability: never an answer read as impossible
    assert all((p > 0) if reading.answers[i] == "yes" else (p < 1) for i, p in reading.p_yes.items())


def test_score_fitted_and_turn_look_in_process_ask_every_look_and_read_them_again_from_the_cache(model_file, tmp_path):
    """Every look of `--score fitted` and the per-turn look through the judging step on a real
    model (issue 46): the verdict-first look, the checklist and a P(yes) per turn with a reply on
    each judged row, combined by the shipped weights, and all of it found in the cache on a rerun."""
    fitted = ("eval", SAMPLES, "--model", f"gguf:{model_file}", "--limit", 2, "--score", "fitted", "--turn-look")
    status, stderr, rows = run_gguf(tmp_path, *fitted)
    assert status in exit_codes_for(rows) and "Traceback" not in stderr, stderr
    judged = [row for row in rows if row["error"] is None]
    assert judged, rows
    questions = {item.id for item in load_rubric().checklist}
    for row in judged:
        assert set(row["checklist_p_yes"]) == questions and all(0 <= p <= 1 for p in row["checklist_p_yes"].values())
        assert row["verdict_first_score"] is not None and 0 <= row["checklist_score"] <= 1
        assert (row["score_from"], row["score"]) == ("fitted", row["fitted_score"]) and 0 <= row["score"] <= 1
        numbers = [int(turn) for turn in row["turn_p_problem"]]
        assert numbers and numbers == sorted(set(numbers)) and 1 <= numbers[0] <= numbers[-1] <= row["number_of_turns"]
        assert all(0 <= p <= 1 for p in row["turn_p_problem"].values())
        at = turn_threshold(load_rubric().combination)
        assert row["problem_turns"] == [int(turn) for turn, p in row["turn_p_problem"].items() if p >= at]
    again_status, _, again = run_gguf(tmp_path, *fitted)
    assert again_status in exit_codes_for(again)
    before = {row["id"]: row for row in judged}
    for row in again:
        if row["id"] in before:
            assert row["cached"] and row["attempts"] == 0, row
            assert row["checklist_p_yes"] == before[row["id"]]["checklist_p_yes"]
            assert row["fitted_score"] == before[row["id"]]["fitted_score"]
            assert row["turn_p_problem"] == before[row["id"]]["turn_p_problem"]


def test_a_yes_no_reply_read_where_the_model_chooses_answers_as_token_by_token_generation_does(model_file):
    """The checklist's reply in process (`local_choices`): the prompt is the tokens the chat
    handler evaluates, the schema's text around the answers is evaluated in batches, and each answer
    is the model's likelier value under the grammar, so its answers and P(yes) are those of the
    reply generated token by token; the grading reply's schema (free reasoning) is not a choice."""
    import threading

    from flowrate.judge.backend import TOP_LOGPROBS
    from flowrate.judge.local_choices import chat_prompt, choice_fields
    from flowrate.judge.local_model import generate, load_llama
    from flowrate.rubric.checklist import checklist_messages
    from flowrate.scores.checklist import checklist_reading, checklist_schema
    from flowrate.scores.schema import reply_schema

    rubric = load_rubric()
    case = _asked_again()
    messages = checklist_messages(rubric, rubric.build_messages(case))
    llama = load_llama(Path(model_file))
    response_format = {"type": "json_object", "schema": checklist_schema(rubric)}
    assert choice_fields(llama, {"type": "json_object", "schema": reply_schema(rubric)}) is None
    assert choice_fields(llama, response_format) is not None
    stop = threading.Event()
    by_tokens = generate(llama, messages, response_format, 0.0, 512, stop, TOP_LOGPROBS, choices=False)
    prompt = chat_prompt(llama, messages)
    assert list(llama.input_ids[: len(prompt)]) == prompt  # the very tokens the chat handler evaluated
    by_choices = generate(llama, messages, response_format, 0.0, 512, stop, TOP_LOGPROBS)
    assert by_choices.usage.prompt_tokens == len(prompt)
    # the whole prompt held: the reply generated before left it in the model, so only the reply's first stretch is new
    assert by_choices.usage.cached_tokens == len(prompt)
    assert by_choices.usage.completion_tokens == len(llama.tokenize(by_choices.texts[0].encode(), add_bos=False))
    tokens_read = checklist_reading(rubric, by_tokens.texts[0], by_tokens.tokens(0))
    choices_read = checklist_reading(rubric, by_choices.texts[0], by_choices.tokens(0))
    assert choices_read.problems == {} and set(choices_read.p_yes_from.values()) == {"logprobs"}
    assert choices_read.answers == tokens_read.answers, (by_tokens.texts, by_choices.texts)
    # the same kind of reading at each answer; the stretches between answers are tokenised as written,
    # not as the model split them, which moved P(yes) by up to 0.051 here (SmolLM2) and 0.022 with the
    # 1.5B judge (bench/local_choices.py)
    assert max(abs(choices_read.p_yes[key] - tokens_read.p_yes[key]) for key in tokens_read.p_yes) < 0.1


def test_a_reply_of_choices_reads_the_same_answers_whether_its_guesses_were_right_or_wrong(model_file):
    """The reply is evaluated in one batch with each answer guessed (the answers the calls before
    gave); from the first answer the model did not choose as guessed, the rest is evaluated again
    after its choice. So every guess wrong, every guess right and no guesses at all read the same
    answers and the same P(yes); the guesses are the answers given, for the next call."""
    import threading

    from flowrate.judge.backend import TOP_LOGPROBS
    from flowrate.judge.local_model import generate, load_llama
    from flowrate.rubric.checklist import checklist_keys, checklist_messages
    from flowrate.scores.checklist import checklist_reading, checklist_schema

    rubric = load_rubric()
    messages = checklist_messages(rubric, rubric.build_messages(_asked_again()))
    llama = load_llama(Path(model_file))
    response_format = {"type": "json_object", "schema": checklist_schema(rubric)}
    stop = threading.Event()
    first: dict[str, str] = {}
    plain = generate(llama, messages, response_format, 0.0, 512, stop, TOP_LOGPROBS, guesses=first)
    read = checklist_reading(rubric, plain.texts[0], plain.tokens(0))
    # the guesses are kept under the reply's keys (the questions' numbers), the reading under their ids
    given = {key: read.answers[item.id] for key, item in zip(checklist_keys(rubric), rubric.checklist)}
    assert first == given and len(first) == len(rubric.checklist)
    flipped = {key: "no" if answer == "yes" else "yes" for key, answer in given.items()}
    for guesses in ({**first}, flipped):
        llama.reset()  # the prompt evaluated afresh each time, as on the first call
        again = generate(llama, messages, response_format, 0.0, 512, stop, TOP_LOGPROBS, guesses=guesses)
        reading = checklist_reading(rubric, again.texts[0], again.tokens(0))
        assert again.texts == plain.texts and guesses == given
        # a batch split otherwise moves llama.cpp's sums in their last digits, not further
        assert max(abs(reading.p_yes[key] - read.p_yes[key]) for key in read.p_yes) < 1e-3
