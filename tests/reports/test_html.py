"""The HTML report as a file: self-contained, its rows in input order, costs as money."""

import re

from flowrate.results.book import ReportBook
from flowrate.results.summary import RunSummary
from tests.helpers import evaluation_row as _row


def test_the_html_report_is_one_self_contained_file(report_page, run_flowrate, tmp_path):
    page = report_page.read_text()
    assert "http://" not in page and "https://" not in page and "<script src" not in page and "<link" not in page
    again = run_flowrate("report", "out.jsonl", "--inputs", "c.jsonl", "--html", "again.html")
    assert again.returncode == 0 and "HTML report: again.html (5 rows)" in again.stderr
    assert (tmp_path / "again.html").read_text().count('class="chart"') == 1


def test_the_html_report_lists_rows_in_input_order_with_money_for_costs():
    import orjson

    from flowrate.reports.html import render

    book, summary = ReportBook(), RunSummary()
    for line, path in [(3, "b.jsonl"), (2, "a.jsonl"), (1, "b.jsonl"), (1, "a.jsonl")]:
        row = _row(f"{path}:{line}", 0.9, line=line, path=path, cost_usd=0.006542500000000001)
        book.add(row)
        summary.add(row)
    page = render(book, summary, {})
    data = orjson.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    assert [row["id"] for row in data["rows"]] == ["a.jsonl:1", "a.jsonl:2", "b.jsonl:1", "b.jsonl:3"]
    assert {row["cost_shown"] for row in data["rows"]} == {"0.006543"}
