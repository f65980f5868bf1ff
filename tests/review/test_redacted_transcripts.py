"""The review app shows a redacted run's transcripts redacted, as the judge saw them, those it
cannot redact as the run did (the run's --config not given) not at all, and the originals only
when started with --keep-originals (read from the local input files)."""

import httpx
import yaml

from tests.helpers import watched, write_jsonl
from tests.redaction_cases import PLANTED, PLANTED_CONVERSATIONS, PLANTED_IN_IDS, RULES

FLOW = "conversational_flow_rate"


def _pages(review):
    with httpx.Client() as client:
        client.get(review.url)
        pages = [client.get(review.base + f"/label/{FLOW}?at={at}") for at in range(1, 5)]
    assert all(page.status_code == 200 for page in pages)
    return "\n".join(page.text for page in pages)


def _redacted_run(scripted, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", PLANTED_CONVERSATIONS)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"redact_rules": RULES}), encoding="utf-8")
    result = run_flowrate(
        "eval", "c.jsonl", "--api-base", scripted.base_url, "--redact", "--config", "rules.yaml", "-o", "results.jsonl"
    )
    assert result.returncode == 0, result.stderr
    return tmp_path / "results.jsonl"


def test_the_app_shows_a_redacted_runs_transcripts_redacted(scripted, run_flowrate, start_review, tmp_path):
    results = _redacted_run(scripted, run_flowrate, tmp_path)
    review = start_review(
        results,
        "--history",
        tmp_path / "h.duckdb",
        "--sample-passing",
        "1",
        "--config",
        "rules.yaml",
        "--reviewer",
        "ann",
    )
    text = _pages(review)
    assert "Olá, meu CPF é" in text  # the transcripts are shown
    assert [value for values in [*PLANTED.values(), PLANTED_IN_IDS] for value in values if value in text] == []
    assert "report my manager" in text  # the conversation whose id held a phone, found by its redacted id


def test_keep_originals_shows_the_original_text_read_from_the_inputs(scripted, run_flowrate, start_review, tmp_path):
    results = _redacted_run(scripted, run_flowrate, tmp_path)
    review = start_review(
        results, "--history", tmp_path / "h.duckdb", "--sample-passing", "1", "--keep-originals", "--reviewer", "ann"
    )
    text = _pages(review)
    assert "529.982.247-25" in text and "John.Doe@Example.com" in text
    assert "report my manager" in text  # found by its redacted id


def test_without_the_runs_config_a_transcript_its_rules_redacted_is_withheld_saying_why(
    scripted, run_flowrate, start_review, chromium, tmp_path
):
    """The run redacted order numbers and a project's name with its config's rules; the app,
    started without that --config, cannot redact them as the run did: in Chromium, that
    conversation's label page and row show none of its text but why and how to see it, and the
    conversations the app redacts as the run did are shown redacted."""
    results = _redacted_run(scripted, run_flowrate, tmp_path)
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--sample-passing", "1", "--reviewer", "ann")
    context = chromium.new_context()
    context.route(
        "**/*", lambda route: route.continue_() if route.request.url.startswith(review.base) else route.abort()
    )
    errors = []
    page = watched(context.new_page(), errors)
    page.goto(review.url)
    home = page.locator("main").inner_text()
    shown, transcripts = {}, {}
    for at in range(1, 5):
        page.goto(review.base + f"/label/{FLOW}?at={at}")
        key = page.locator("#conversation").inner_text()
        shown[key] = page.locator("main").inner_text()
        transcripts[key] = page.locator("#transcript").all_inner_texts()
    page.goto(review.base + f"/row?id=en-billing&metric={FLOW}")
    row, row_transcript = page.locator("main").inner_text(), page.locator("#transcript").all_inner_texts()
    context.close()
    # every conversation has its page, under the id the run gave it (a phone in an id redacted)
    assert len(shown) == len(PLANTED_CONVERSATIONS)
    assert [key for key in shown if any(value in key for value in PLANTED_IN_IDS)] == []
    text = "\n".join([home, row, *shown.values()])  # the row's request to the judge included, as the judge saw it
    assert [value for values in PLANTED.values() for value in values if value.lower() in text.lower()] == []
    assert transcripts["en-billing"] == row_transcript == []  # none of its text, redacted or not
    for page_text in (shown["en-billing"], row):
        assert "Transcript not shown: the run that judged it replaced ORDER 2, PROJECT 1 mention(s)" in page_text
        assert "Give the run's --config" in page_text
    assert "Olá, meu CPF é <CPF_1>" in transcripts["pt-cadastro"][0]  # redacted as the run did: shown
    assert "1 transcript(s) of redacted rows not shown" in home
    assert any("1 transcript(s) of redacted rows not shown" in line for line in review.said)
    assert errors == []
