"""A rubric's checklist (issue 46): yes/no questions declared in the rubric, asked after the
grading request's messages in one call, the reply's schema an answer per question, and each
answer read as P(yes) from the log-probabilities at its value's token (1 or 0 from the text
without them), the checklist's score their weighted mean."""

import math

import orjson
import pytest

from flowrate.errors import ConfigError
from flowrate.inputs.conversation import ConversationalEvalTestCase, EvalTestCase
from flowrate.rubric.checklist import checklist_messages
from flowrate.rubric.model import load_rubric
from flowrate.scores.checklist import checklist_reading, checklist_schema

RUBRIC = """\
name: small
instructions: Grade it.
criteria:
  - {name: small, scale: {levels: {fully: 1.0, none: 0.0}}}
checklist:
  - {id: answers, question: "Does each reply answer the user?", good: "yes", weight: 3}
  - {id: repeats, question: "Does the assistant repeat itself?", good: "no", weight: 1}
"""


@pytest.fixture
def rubric(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(RUBRIC)
    return load_rubric(path)


def scripted_tokens(reply: dict[str, str], alternatives: dict[str, dict[str, float]]) -> tuple[str, list[dict]]:
    """A reply's text as a judge writes it, cut into tokens as Qwen's tokenizer cuts its JSON
    (`{"`, the key, `":"`, the value, `","` ...), with `alternatives` (probabilities) at the
    value of each key named there, in OpenAI's `logprobs.content` shape."""
    tokens: list[dict] = []

    def add(piece: str, top: dict[str, float] | None = None) -> None:
        listed = [{"token": token, "logprob": math.log(p)} for token, p in (top or {piece: 1.0}).items()]
        chosen = next((item["logprob"] for item in listed if item["token"] == piece), -math.inf)
        tokens.append({"token": piece, "logprob": chosen, "top_logprobs": listed})

    for number, (key, value) in enumerate(reply.items()):
        add(('{"' if number == 0 else ',"') + key + '":"')
        add(value, alternatives.get(key))
        add('"')
    add("}")
    return "".join(token["token"] for token in tokens), tokens


def test_the_checklist_request_is_the_grading_request_unchanged_then_every_question_by_its_number(rubric):
    case = ConversationalEvalTestCase(turns=[EvalTestCase(input="MARK-Q where is my order?", actual_output="Shipped.")])
    judged = rubric.build_messages(case)
    messages = checklist_messages(rubric, judged)
    assert messages[: len(judged)] == judged  # the same prefix: a judge keeping its prompt cache reuses it
    ask = messages[-1]
    assert ask["role"] == "user" and len(messages) == len(judged) + 1
    assert "\n1. Does each reply answer the user?\n2. Does the assistant repeat itself?\n" in ask["content"]
    assert ask["content"].endswith('{"1": "yes", "2": "no", ...}')  # the shape, short: read on every call
    assert "answers" not in ask["content"] and "repeats" not in ask["content"]  # the ids are the rows' names, not asked


def test_the_checklist_schema_asks_one_yes_or_no_per_question_in_the_rubrics_order(rubric):
    schema = checklist_schema(rubric)
    assert schema["required"] == ["1", "2"] and schema["additionalProperties"] is False
    assert all(part == {"type": "string", "enum": ["yes", "no"]} for part in schema["properties"].values())


def test_each_answer_is_read_as_p_yes_at_its_values_token_under_its_questions_id_and_the_score_is_the_weighted_mean(
    rubric,
):
    text, tokens = scripted_tokens(
        {"1": "yes", "2": "no"}, {"1": {"yes": 0.6, "no": 0.3, "maybe": 0.1}, "2": {"no": 0.8, "yes": 0.2}}
    )
    reading = checklist_reading(rubric, text, tokens)
    assert reading.answers == {"answers": "yes", "repeats": "no"} and reading.problems == {}
    assert reading.p_yes["answers"] == pytest.approx(0.6 / 0.9)  # "maybe" is outside the two answers
    assert reading.p_yes["repeats"] == pytest.approx(0.2)
    assert reading.p_yes_from == {"answers": "logprobs", "repeats": "logprobs"}
    # "answers" is good when yes (weight 3), "repeats" when no (weight 1)
    assert reading.score == pytest.approx((3 * (0.6 / 0.9) + 1 * (1 - 0.2)) / 4)


def test_an_answer_spelled_in_two_tokens_takes_the_product_along_the_reply():
    rubric = load_rubric()  # the flow rubric's checklist
    answers = {str(number): "no" for number in range(1, len(rubric.checklist) + 1)}
    text, tokens = scripted_tokens(answers, {})
    # split the first answer "no" into "n" + "o", with "y" (for "yes") beside "n" at the first
    first = next(i for i, token in enumerate(tokens) if token["token"] == "no")
    tokens[first : first + 1] = [
        {
            "token": "n",
            "logprob": math.log(0.7),
            "top_logprobs": [{"token": "n", "logprob": math.log(0.7)}, {"token": "y", "logprob": math.log(0.3)}],
        },
        {"token": "o", "logprob": 0.0, "top_logprobs": [{"token": "o", "logprob": 0.0}]},
    ]
    reading = checklist_reading(rubric, text, tokens)
    first_id = rubric.checklist[0].id
    assert reading.p_yes[first_id] == pytest.approx(0.3) and reading.p_yes_from[first_id] == "logprobs"


def test_without_log_probabilities_each_answer_is_one_or_zero_from_its_text(rubric):
    reading = checklist_reading(rubric, '{"1": "no", "2": "yes"}', None)
    assert reading.p_yes == {"answers": 0.0, "repeats": 1.0}
    assert reading.p_yes_from == {"answers": "text", "repeats": "text"} and reading.score == 0.0


def test_tokens_that_do_not_spell_the_reply_are_not_read_and_the_text_decides(rubric):
    text, tokens = scripted_tokens({"1": "yes", "2": "no"}, {"1": {"yes": 0.6, "no": 0.4}})
    reading = checklist_reading(rubric, text + " ", tokens)
    assert reading.p_yes == {"answers": 1.0, "repeats": 0.0} and set(reading.p_yes_from.values()) == {"text"}


def test_a_missing_or_unknown_answer_is_named_and_left_out_of_the_score_never_invented(rubric):
    reading = checklist_reading(rubric, '{"1": "perhaps", "answers": "yes"}', None)  # an id is not a key
    assert reading.answers == {} and reading.score is None
    assert reading.problems == {
        "answers": 'the answer \'perhaps\' to question 1 (expected "yes" or "no")',
        "repeats": 'no answer to question 2 (expected "yes" or "no")',
    }
    partly = checklist_reading(rubric, '{"2": "no"}', None)
    assert partly.score == 1.0 and list(partly.problems) == ["answers"]
    assert checklist_reading(rubric, "I cannot answer.", None).problems.keys() == {"answers", "repeats"}


def test_the_flow_rubric_declares_a_checklist_from_its_criteria_and_its_rules():
    rubric = load_rubric()
    ids = [item.id for item in rubric.checklist]
    for wanted in (
        "answers_latest",
        "redundant_ask",
        "contradicts",
        "off_topic",
        "derails",
        "ends_well",
    ):
        assert wanted in ids
    # no question the negation of another: each is read after the conversation on every call
    assert not {"ignores_request", "left_hanging"} & set(ids)
    assert {item.good for item in rubric.checklist} == {"yes", "no"} and all(
        item.weight > 0 for item in rubric.checklist
    )
    assert checklist_schema(rubric)["required"] == [str(number) for number in range(1, len(ids) + 1)]


def test_a_rubric_without_a_checklist_is_refused_with_a_plain_message(tmp_path):
    path = tmp_path / "bare.yaml"
    path.write_text(RUBRIC.split("checklist:")[0])
    with pytest.raises(ConfigError, match="rubric small declares no checklist"):
        checklist_messages(load_rubric(path), [{"role": "user", "content": "x"}])


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ('{id: a, question: "Q?", good: "maybe"}', "checklist.0.good"),
        ('{id: a, question: "Q?", good: "yes", weight: 0}', "checklist.0.weight"),
        ('{id: A b, question: "Q?", good: "yes"}', "checklist.0.id"),
    ],
)
def test_a_broken_checklist_question_names_the_file_and_field(tmp_path, item, field):
    path = tmp_path / "r.yaml"
    path.write_text(RUBRIC.split("checklist:")[0] + f"checklist:\n  - {item}\n")
    with pytest.raises(ConfigError, match=rf"r.yaml: rubric field {field}"):
        load_rubric(path)


def test_repeated_checklist_ids_are_refused_naming_them(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(RUBRIC + '  - {id: repeats, question: "Again?", good: "no"}\n')
    with pytest.raises(ConfigError, match=r"rubric field checklist: .*repeats repeat"):
        load_rubric(path)


def test_the_reply_written_by_the_schema_parses_as_json_for_every_question():
    rubric = load_rubric()
    text = orjson.dumps(dict.fromkeys(checklist_schema(rubric)["required"], "yes")).decode()
    reading = checklist_reading(rubric, text, None)
    assert reading.problems == {} and len(reading.p_yes) == len(rubric.checklist)


def test_the_virtual_agent_suite_declares_a_checklist_covering_its_criteria():
    rubric = load_rubric("virtual_agent")
    ids = {item.id for item in rubric.checklist}
    assert {"requests_done", "misreads_user", "value_asked_again", "loops", "forgets_context"} <= ids
    assert {"makes_things_up", "padding", "confusing"} <= ids
    schema = checklist_schema(rubric)
    assert len(schema["required"]) == len(ids) and all(item.weight > 0 for item in rubric.checklist)
