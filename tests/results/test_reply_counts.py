"""The summary counts repaired, re-asked, cut and copied replies once per judge call, however many
rows the call made (a suite's criteria)."""

from flowrate.results.rows import ErrorInfo
from flowrate.results.summary import RunSummary
from tests.helpers import evaluation_row


def test_each_call_with_a_repaired_reasked_cut_or_copied_reply_is_counted_once():
    summary = RunSummary()
    for criterion in ("coherence", "slot_filling", "user_satisfaction"):  # one suite call: three rows
        row = evaluation_row("a", 1.0, metric=criterion)
        row.suite, row.repaired, row.reasked = "virtual_agent", True, "rating 5 for slot_filling is not on its scale"
        summary.add(row)
    cut = evaluation_row("b", 1.0)
    cut.cut = True
    summary.add(cut)
    copied = evaluation_row("c", 1.0)
    copied.score, copied.error = None, ErrorInfo(type="CopiedExample", message="it repeats the rubric's example")
    summary.add(copied)
    assert (summary.repaired, summary.reasked, summary.cut, summary.copied) == (1, 1, 1, 1)
