"""The review app shows a redacted run's transcripts redacted, as the judge saw them, and the
originals only when started with --keep-originals (read from the local input files)."""

import httpx
import yaml

from tests.helpers import write_jsonl
from tests.redaction_cases import PLANTED, PLANTED_CONVERSATIONS, PLANTED_IN_IDS, RULES


def _pages(review):
    with httpx.Client() as client:
        client.get(review.url)
        pages = [client.get(review.base + f"/label/conversational_flow_rate?at={at}") for at in range(1, 5)]
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
