"""A redacted run's HTML report in headless Chromium: the totals of what was replaced, the
transcripts with their placeholders drawn as text (not taken for tags), no planted identifier
anywhere on the page; with --keep-originals the transcripts as read."""

import json

import pytest
import yaml

from tests.helpers import CHROMIUM, read_rows, watched, write_jsonl
from tests.redaction_cases import PLANTED, PLANTED_CONVERSATIONS, PLANTED_IN_IDS, RULES

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)"
)


def _report(judge, run_flowrate, tmp_path, *extra):
    write_jsonl(tmp_path / "c.jsonl", PLANTED_CONVERSATIONS)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"redact_rules": RULES}), encoding="utf-8")
    result = run_flowrate(
        "eval", "c.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl", "--html", "report.html",
        "--redact", "--config", "rules.yaml", *extra,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return tmp_path / "report.html"


def _transcript_of(chromium, path, conversation_id):
    """The page's redaction section, its whole text, and the user lines of one conversation's transcript."""
    errors = []
    context = chromium.new_context(offline=True)
    context.route("http*://**", lambda route: route.abort())
    page = watched(context.new_page(), errors)
    page.goto(path.as_uri())
    section = page.locator("#redaction").inner_text() if page.locator("#redaction").count() else None
    rows = page.locator("#results tbody tr")
    texts = [page.locator("body").inner_text()]
    user_lines = []
    for n in range(rows.count()):
        rows.nth(n).click()
        texts.append(page.locator("#transcript").inner_text())
        if page.locator("#transcript h2").inner_text() == conversation_id:
            user_lines = [line.inner_text() for line in page.locator("#transcript .turn .user").all()]
    context.close()
    assert errors == []
    return section, "\n".join(texts), user_lines


def test_the_report_shows_the_totals_and_the_transcripts_redacted(judge, run_flowrate, chromium, tmp_path):
    path = _report(judge, run_flowrate, tmp_path)
    totals = {}
    for row in read_rows(tmp_path / "out.jsonl"):
        for kind, count in row["redactions"].items():
            totals[kind] = totals.get(kind, 0) + count
    section, text, user_lines = _transcript_of(chromium, path, "pt-cadastro")
    shown = ", ".join(f"{kind} {count}" for kind, count in sorted(totals.items()))
    assert section.split() == f"Redaction redacted before judging, in 4 conversation(s): {shown}".split()
    assert user_lines[0] == "user: Olá, meu CPF é <CPF_1> e o e-mail <EMAIL_1>."
    assert [value for values in [*PLANTED.values(), PLANTED_IN_IDS] for value in values if value in text] == []
    assert "report my manager" in text  # the conversation whose id held a phone, found by its redacted id


def test_keep_originals_shows_the_transcripts_as_read(judge, run_flowrate, chromium, tmp_path):
    path = _report(judge, run_flowrate, tmp_path, "--keep-originals")
    _, _, user_lines = _transcript_of(chromium, path, "pt-cadastro")
    assert user_lines[0] == "user: Olá, meu CPF é 529.982.247-25 e o e-mail maria.silva+suporte@exemplo.com.br."
    sent = json.dumps(judge.bodies, ensure_ascii=False)
    assert "<CPF_1>" in sent and "529.982.247-25" not in sent  # the judge still saw only the redacted text
