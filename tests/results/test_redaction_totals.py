"""The summary's redaction totals: a conversation's counts once, however many rows it has."""

from flowrate.results.summary import RunSummary
from tests.helpers import evaluation_row


def test_a_conversations_counts_are_added_once_over_its_rows_of_every_metric():
    summary = RunSummary()
    counts = {"EMAIL": 2, "PHONE": 1}
    for metric in ("request_completion", "coherence", "user_satisfaction"):
        summary.add(evaluation_row("a", 0.8, metric=metric, redactions=counts))
    summary.add(evaluation_row("b", 0.8, redactions={"EMAIL": 1}))
    summary.add(evaluation_row("c", 0.8, redactions={}))
    summary.add(evaluation_row("d", 0.8))  # judged without --redact
    assert summary.redactions == {"EMAIL": 3, "PHONE": 1}
    assert summary.redacted_conversations == 3
    assert summary.redaction_note == "redacted before judging, in 3 conversation(s): EMAIL 3, PHONE 1"


def test_a_redacted_run_where_nothing_was_found_says_so():
    summary = RunSummary()
    summary.add(evaluation_row("a", 0.8, redactions={}))
    assert summary.redaction_note == "redacted before judging, in 1 conversation(s): none found"
