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
    assert hr.redactions == {} and hr.redacted_by.startswith("flowrate-patterns 2; phonenumbers ")
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


def test_an_unlabelled_number_failing_its_check_digits_is_not_taken_for_an_identifier():
    text = "Codes 529.982.247-26, 4111 1111 1111 1112, DE89 3704 0044 0532 0130 01 and 7707083894 are not ids."
    # no national phone reading here: 770 708 3894 is a valid US number
    case = Redactor(regions=()).redact(ConversationalEvalTestCase(turns=[{"input": text, "actual_output": "ok"}]))
    assert case.turns[0].input == text


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("SSN 078-05-1120", "SSN <SSN_1>"),  # python-stdnum: invalid (the Woolworth wallet's number)
        ("my SSN is 536904399.", "my SSN is <SSN_1>."),
        ("Social security number: 536 90 4399", "Social security number: <SSN_1>"),
        ("CPF 529.982.247-26", "CPF <CPF_1>"),
        ("card 4111 1111 1111 1112", "card <CARD_1>"),
        ("IBAN DE89 3704 0044 0532 0130 01 is wrong", "IBAN <IBAN_1> is wrong"),
        ("ИНН 7707083894", "ИНН <INN_1>"),
        ("СНИЛС 11223344595", "СНИЛС <SNILS_1>"),
        ("СНИЛС 112-233-445 96", "СНИЛС <SNILS_1>"),
    ],
)
def test_a_number_its_label_names_is_taken_whatever_its_check_digits_say(text, redacted):
    case = Redactor(regions=()).redact(ConversationalEvalTestCase(turns=[{"input": text, "actual_output": "ok"}]))
    assert case.turns[0].input == redacted


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("Meu documento é 52998224725, confere?", "Meu documento é <CPF_1>, confere?"),
        ("Hamilton Lodge's phone number is 01223575314.", "Hamilton Lodge's phone number is <PHONE_1>."),
        ("iban de89 3704 0044 0532 0130 00 is mine", "iban <IBAN_1> is mine"),
        ("pay to gb82west12345698765432 today", "pay to <IBAN_1> today"),
        ("The IP is 192.168.10.24.", "The IP is <IP_1>."),
        ("Blocked from IP 192.168.10.24. Retry?", "Blocked from IP <IP_1>. Retry?"),
    ],
)
def test_an_identifier_written_bare_or_in_lower_case_is_taken_with_its_type(text, redacted):
    case = Redactor().redact(ConversationalEvalTestCase(turns=[{"input": text, "actual_output": "ok"}]))
    assert case.turns[0].input == redacted


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "my key is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_AbCdEfGh, sorry",
            "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_AbCdEfGh",
        ),
        (
            "sk-ant-api03-Zx9yW8vU7tS6rQ5pO4nM3lK2jI1hG0fE_dC-bA9876543210zyxwvutsrqpAA",
            "sk-ant-api03-Zx9yW8vU7tS6rQ5pO4nM3lK2jI1hG0fE_dC-bA9876543210zyxwvutsrqpAA",
        ),
        ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        (
            "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        ),
        ("ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R", "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"),
        (
            "github_pat_11ABCDEFG0abcdefghijklmnopqrstuvwxyz0123456789",
            "github_pat_11ABCDEFG0abcdefghijklmnopqrstuvwxyz0123456789",
        ),
        (
            "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        ),
        (
            "xoxp-1234567890-1234567890-1234567890-0123456789abcdef0123456789abcdef",
            "xoxp-1234567890-1234567890-1234567890-0123456789abcdef0123456789abcdef",
        ),
        (
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        ),
        ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
        ("glpat-xxxxxxxxxxxxxxxxxxxx1234", "glpat-xxxxxxxxxxxxxxxxxxxx1234"),
        ("AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe", "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe"),
        ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
        ),
        ("my password is hunter2!Blue", "hunter2!Blue"),
        ('password: "correct horse battery staple"', "correct horse battery staple"),
        ("minha senha é Abc@1234", "Abc@1234"),
        ("мой пароль: qwerty123", "qwerty123"),
        ("api key: abc123def456ghi789", "abc123def456ghi789"),
        ("PIN 4721", "4721"),
    ],
)
def test_a_credential_is_replaced_by_a_secret_placeholder(text, secret):
    case = Redactor().redact(ConversationalEvalTestCase(turns=[{"input": text, "actual_output": "ok"}]))
    assert case.redactions == {"SECRET": 1}, case.turns[0].input
    assert case.turns[0].input == text.replace(secret, "<SECRET_1>")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("my .env has DB_PASSWORD=Sup3rS3cret and the app fails", "Sup3rS3cret"),
        ("POSTGRES_PASSWORD: hunter2x", "hunter2x"),
        ('the login tool got {"username": "ann", "password": "Sup3rS3cret"}', "Sup3rS3cret"),
        ("{'password': 'correct horse battery staple'}", "correct horse battery staple"),
        ('config: {"api_key": "abc123def456ghi789"}', "abc123def456ghi789"),
        ("export STRIPE_SECRET=AbC123dEf456GhI789jk", "AbC123dEf456GhI789jk"),
    ],
)
def test_a_password_or_key_pasted_as_an_env_line_or_a_json_field_is_replaced(text, secret):
    # detect-secrets' keyword plugin reads these shapes (DB_PASSWORD=..., "password": "..."): a
    # label joined to a prefix by "_" and a label in quotes, as .env files and JSON write them
    case = Redactor().redact(ConversationalEvalTestCase(turns=[{"input": text, "actual_output": "ok"}]))
    assert case.turns[0].input == text.replace(secret, "<SECRET_1>")
    assert case.redactions == {"SECRET": 1}


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "DATABASE_URL is postgres://admin:S3cretPass@db.example.com:5432/app and it fails",
            "DATABASE_URL is postgres://admin:<SECRET_1>@db.example.com:5432/app and it fails",
        ),
        ("redis://:S3cretPass@10.0.0.5:6379/0", "redis://:<SECRET_1>@<IP_1>:6379/0"),
        (
            "mongodb+srv://bob:p%40ss123@cluster0.abcde.mongodb.net/test",
            "mongodb+srv://bob:<SECRET_1>@cluster0.abcde.mongodb.net/test",
        ),
        ("ftp://anna:qwerty12@files.local/pub", "ftp://anna:<SECRET_1>@files.local/pub"),
    ],
)
def test_the_password_of_a_url_with_credentials_is_replaced_and_its_host_kept(text, redacted):
    # detect-secrets' basic_auth plugin (scheme://user:password@host); before, the password and the
    # host were taken for an email, and a password before an IP address reached the judge
    case = Redactor().redact(ConversationalEvalTestCase(turns=[{"input": text, "actual_output": "ok"}]))
    assert case.turns[0].input == redacted


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


def test_an_identifier_in_a_conversation_id_gets_a_placeholder_named_by_its_digest_the_same_every_time():
    def redacted_id(conversation_id):
        turns = [{"input": "hi", "actual_output": "ok"}]
        return Redactor().redact(ConversationalEvalTestCase(id=conversation_id, turns=turns))

    first = redacted_id("whatsapp:+14155552671")
    assert re.fullmatch(r"whatsapp:<PHONE_[0-9a-f]{12}>", first.id) and first.redactions == {}
    assert redacted_id("whatsapp:+14155552671").id == first.id  # rows, resumes and labels still join
    assert redacted_id("whatsapp:+14155550199").id not in (first.id, None)  # two customers stay two
    assert re.fullmatch(r"email:<EMAIL_[0-9a-f]{12}>", redacted_id("email:ops@acme.io").id)
    assert redacted_id("en-billing").id == "en-billing"


def test_a_term_rule_matches_its_words_split_by_any_whitespace():
    redact = Redactor([Rule.of("PROJECT", term="Project  Falcon")]).redact
    text = "project falcon, Project  Falcon and Project\nFalcon, not Project Falconry"
    case = redact(ConversationalEvalTestCase(turns=[{"input": text, "actual_output": "ok"}]))
    assert case.turns[0].input == "<PROJECT_1>, <PROJECT_1> and <PROJECT_1>, not Project Falconry"


def test_a_term_rule_matches_the_whole_word_in_any_case_and_a_pattern_rule_its_matches():
    redact = Redactor([Rule.of("PROJECT", term="Falcon"), Rule.of("ORDER", pattern=r"#\d{5}\b")]).redact
    case = redact(
        ConversationalEvalTestCase(turns=[{"input": "FALCON and Falconry, order #12345", "actual_output": "falcon"}])
    )
    assert case.turns[0].input == "<PROJECT_1> and Falconry, order <ORDER_1>"
    assert case.turns[0].actual_output == "<PROJECT_1>"
