"""`--redact`'s detectors and placeholders: every planted identifier replaced, in English,
Portuguese and Russian; ordinary support text left alone; the same conversation redacted the
same way every time."""

import re

import pytest

from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.inputs.redaction.detectors import snils_valid
from flowrate.inputs.redaction.redactor import Redactor, Rule, regions_of
from tests.redaction_cases import ORDINARY, PLANTED, PLANTED_CONVERSATIONS, RULES

PLACEHOLDER = re.compile(r"<([A-Z][A-Z0-9_]*)_\d+>")


def redactor():
    return Redactor([Rule.of(rule["type"], rule.get("pattern"), rule.get("term")) for rule in RULES])


def redacted_planted():
    return [redactor().redact(ConversationalEvalTestCase.model_validate(record)) for record in PLANTED_CONVERSATIONS]


def texts_of(case):
    for turn in case.turns:
        yield turn.input
        yield from turn.tool_activity
        if turn.actual_output is not None:
            yield turn.actual_output


def plain(case):
    return "\n".join(texts_of(case))


@pytest.mark.parametrize(
    ("kind", "value"), [(kind, value) for kind, values in PLANTED.items() for value in values], ids=str
)
def test_every_planted_identifier_is_replaced_by_a_placeholder_of_its_type(kind, value):
    cases = redacted_planted()
    text = "\n".join(plain(case) for case in cases)
    assert value.lower() not in text.lower()
    original = [ConversationalEvalTestCase.model_validate(record) for record in PLANTED_CONVERSATIONS]
    where = next(number for number, case in enumerate(original) if value in plain(case))
    assert cases[where].redactions.get(kind, 0) >= 1


def test_the_counts_are_the_mentions_replaced_of_each_type():
    cases = redacted_planted()
    for case in cases:
        shown = [match.group(1) for text in texts_of(case) for match in PLACEHOLDER.finditer(text)]
        counted = {kind: shown.count(kind) for kind in set(shown)}
        assert counted == case.redactions


def test_one_identifier_gets_one_placeholder_wherever_it_is_mentioned():
    english, _, russian, _ = redacted_planted()
    assert english.turns[0].input.count("<EMAIL_1>") == 1 and "<EMAIL_1>" in english.turns[0].actual_output
    assert "<PHONE_1>" in english.turns[0].input and english.turns[3].actual_output.endswith("Phone <PHONE_1>?")
    # 8 (912) ... and +7 912 ... are one Russian number: the same placeholder
    case = redactor().redact(
        ConversationalEvalTestCase(turns=[{"input": "8 (912) 345-67-89 or +7 912 345-67-89", "actual_output": "ok"}])
    )
    assert case.turns[0].input == "<PHONE_1> or <PHONE_1>"
    assert russian.turns[2].actual_output == "Исправили. Перезвоним на <PHONE_1>."


def test_two_identifiers_of_a_type_are_numbered_in_order_of_first_mention():
    case = redactor().redact(
        ConversationalEvalTestCase(
            turns=[
                {"input": "a@example.com then b@example.com", "actual_output": "and A@example.com again"},
            ]
        )
    )
    assert case.turns[0].input == "<EMAIL_1> then <EMAIL_2>"
    assert case.turns[0].actual_output == "and <EMAIL_1> again"


def test_the_same_conversation_is_redacted_the_same_way_on_every_run():
    first = [case.model_dump_json() for case in redacted_planted()]
    second = [case.model_dump_json() for case in redacted_planted()]
    assert first == second


def test_ordinary_support_text_is_left_as_it_was():
    replaced = []
    for sentence in ORDINARY:
        case = redactor().redact(ConversationalEvalTestCase(turns=[{"input": sentence, "actual_output": sentence}]))
        if case.redactions:
            replaced.append((sentence, case.redactions))
    assert replaced == []


def test_a_conversation_with_no_identifier_records_that_nothing_was_replaced():
    hr = redacted_planted()[3]
    assert hr.redactions == {} and hr.redacted_by.startswith("flowrate-patterns 1; phonenumbers ")
    assert hr.turns == ConversationalEvalTestCase.model_validate(PLANTED_CONVERSATIONS[3]).turns


def test_the_system_prompt_tool_activity_and_metadata_are_redacted_too():
    case = Redactor().redact(
        ConversationalEvalTestCase(
            chatbot_role="Escalate to lead@example.com.",
            turns=[{"input": "hi", "actual_output": "done", "tool_activity": ["lookup(ops@example.com) -> ok"]}],
            metadata={"customer": {"email": "ops@example.com"}, "tags": ["x", "lead@example.com"], "n": 3},
        )
    )
    assert case.chatbot_role == "Escalate to <EMAIL_1>."
    assert case.turns[0].tool_activity == ["lookup(<EMAIL_2>) -> ok"]
    assert case.metadata == {"customer": {"email": "<EMAIL_2>"}, "tags": ["x", "<EMAIL_1>"], "n": 3}


def test_a_number_failing_its_check_digits_is_not_taken_for_an_identifier():
    text = "CPF 529.982.247-26, card 4111 1111 1111 1112, IBAN DE89 3704 0044 0532 0130 01, INN 7707083894"
    # no national phone reading here: 770 708 3894 is a valid US number
    case = Redactor(regions=()).redact(ConversationalEvalTestCase(turns=[{"input": text, "actual_output": "ok"}]))
    assert case.turns[0].input == text


def test_a_ten_digit_inn_is_taken_only_where_it_is_labelled():
    text = "tracking 7707083893, ИНН 7707083893"
    case = Redactor(regions=()).redact(ConversationalEvalTestCase(turns=[{"input": text, "actual_output": "ok"}]))
    assert case.turns[0].input == "tracking 7707083893, ИНН <INN_1>"


def test_a_dot_ending_a_sentence_is_not_part_of_the_url_before_it():
    text = "Open https://example.com/login?token=abc123. Then https://example.com/help?page=2."
    case = Redactor().redact(ConversationalEvalTestCase(turns=[{"input": text, "actual_output": "ok"}]))
    assert case.turns[0].input == "Open <URL_1>. Then https://example.com/help?page=2."


def test_snils_control_number_is_checked_as_the_pension_fund_defines_it():
    assert snils_valid("112-233-445 95")
    assert snils_valid("12345678964")
    assert not snils_valid("112-233-445 96")
    assert not snils_valid("001-001-998 00")  # issued before the check existed


@pytest.mark.parametrize(
    ("metadata", "regions"),
    [
        ({"language": "pt-BR"}, ["BR", "US"]),
        ({"language": "ru"}, ["RU", "US"]),
        ({"locale": "en_GB"}, ["GB", "US"]),
        ({"country": "DE"}, ["DE", "US"]),
        ({"language": "Portuguese"}, ["BR", "US"]),
        ({}, ["US"]),
    ],
)
def test_the_phone_regions_are_those_the_metadata_names_then_the_configured_ones(metadata, regions):
    case = ConversationalEvalTestCase(turns=[{"input": "hi", "actual_output": "ok"}], metadata=metadata)
    assert regions_of(case, ["US"]) == regions


def test_a_national_number_is_read_with_the_region_its_conversation_names():
    turns = [{"input": "ligue (21) 98765-4321", "actual_output": "ok"}]
    brazilian = ConversationalEvalTestCase(turns=turns, metadata={"language": "pt-BR"})
    elsewhere = ConversationalEvalTestCase(turns=turns)
    assert Redactor(regions=["US"]).redact(brazilian).turns[0].input == "ligue <PHONE_1>"
    assert Redactor(regions=["US"]).redact(elsewhere).turns[0].input == "ligue (21) 98765-4321"


def test_a_term_rule_matches_the_whole_word_in_any_case_and_a_pattern_rule_its_matches():
    redact = Redactor([Rule.of("PROJECT", term="Falcon"), Rule.of("ORDER", pattern=r"#\d{5}\b")]).redact
    case = redact(
        ConversationalEvalTestCase(turns=[{"input": "FALCON and Falconry, order #12345", "actual_output": "falcon"}])
    )
    assert case.turns[0].input == "<PROJECT_1> and Falconry, order <ORDER_1>"
    assert case.turns[0].actual_output == "<PROJECT_1>"
