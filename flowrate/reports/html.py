"""One self-contained HTML page for a run: no network, no CDN, everything inline (the templates
`report.html` and `top_issues_page.html`, drawn by `reports.templating`).

The run's page holds each metric's totals with its distribution drawn as an SVG bar chart, a
sortable, filterable table of rows in input order, and, for each conversation, its transcript
with every key issue shown at the turn it names. Texts are capped so a 10,000-conversation page stays a
few MB. The data sits in a JSON script element (`escape.json_for_script`), and the page's
script (`static/report.js`) puts every text into the page with `textContent`, never as HTML,
showing the characters of `escape.PAGE_ESCAPED` escaped.
"""

from __future__ import annotations

from pathlib import Path

from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.reports.escape import PAGE_ESCAPED
from flowrate.reports.templating import render as draw
from flowrate.results.book import ReportBook
from flowrate.results.summary import RunSummary, format_score

TEXT_LIMIT = 600  # characters of one message shown; the rest is cut in the middle


def render(book: ReportBook, summary: RunSummary, transcripts: dict[str, ConversationalEvalTestCase]) -> str:
    """The page for `book` and `summary`, as text, with the `transcripts` (by id) of its rows."""
    cases = sorted((case for metric in book.cases for case in book.listed(metric)), key=lambda case: case.place)
    rows = [
        case.model_dump()
        | {
            "score_shown": None if case.score is None else format_score(case.score, case.threshold),
            "cost_shown": None if case.cost_usd is None else format_cost_usd(case.cost_usd),
        }
        for case in cases
    ]
    shown_ids = {row["id"] for row in rows}
    conversations = {
        key: [
            [_cap(turn.input), None if turn.actual_output is None else _cap(turn.actual_output)] for turn in case.turns
        ]
        for key, case in transcripts.items()
        if key in shown_ids
    }
    data = {"rows": rows, "transcripts": conversations, "escaped": PAGE_ESCAPED}
    cards = [_card(name, stats, book) for name, stats in summary.metrics.items()]
    return draw(
        __package__,
        "report.html",
        title="flowrate report",
        sheets=["report.css"],
        cards=cards,
        redaction=summary.redaction_note if summary.redacted_conversations else None,
        issues=top_issues_of(cases, transcripts),
        data=data,
    )


def top_issues_of(cases: list, transcripts: dict[str, ConversationalEvalTestCase]) -> dict:
    """What the "Top issues" section draws for the rows listed (`reports.top_issues.section`),
    each row's number of turns taken from its transcript when there is one."""
    from flowrate.analysis.top_issues import IssueRow, top_issues
    from flowrate.reports.top_issues import section

    rows = [
        IssueRow(
            case.id,
            case.metric,
            case.score,
            case.key_issues,
            len(transcripts[case.id].turns) if case.id in transcripts else 0,
        )
        for case in cases
    ]
    return section(top_issues(rows))


def write_top_issues_page(path: str | Path, modes: list, top: int) -> None:
    """A page with the "Top issues" section alone, its first `top` modes (`flowrate top-issues --html`)."""
    from flowrate.reports.top_issues import section

    text = draw(
        __package__,
        "top_issues_page.html",
        title="flowrate top issues",
        sheets=["report.css"],
        issues=section(modes, top),
    )
    Path(path).write_text(text, encoding="utf-8")


def write_html(
    path: str | Path, book: ReportBook, summary: RunSummary, transcripts: dict[str, ConversationalEvalTestCase]
) -> None:
    """Write the page for `book`, `summary` and the `transcripts` to `path`."""
    Path(path).write_text(render(book, summary, transcripts), encoding="utf-8")


def format_cost_usd(cost_usd: float) -> str:
    """A row's cost for the page: dollars to six decimals (0.006542500000000001 is 0.006543),
    trailing zeros dropped; a cost too small for that shows as <0.000001, never as 0."""
    if 0 < cost_usd < 0.0000005:
        return "<0.000001"
    return f"{cost_usd:.6f}".rstrip("0").removesuffix(".")


def _cap(text: str) -> str:
    if len(text) <= TEXT_LIMIT:
        return text
    half = TEXT_LIMIT // 2
    return text[:half] + " […] " + text[-half:]


def _card(name: str, stats, book: ReportBook) -> dict:
    """What a metric's card draws: its totals and a bar per value, highest scoring first."""
    values = sorted(stats.distribution, key=lambda value: stats.value_scores[value], reverse=True)
    peak = max(stats.distribution.values(), default=1)
    bars = [
        {"x": 10 + index * 48, "height": round(80 * stats.distribution[value] / peak), "value": value}
        | {"count": stats.distribution[value]}
        for index, value in enumerate(values)
    ]
    return {
        "name": name,
        "rows": stats.rows,
        "rate": "n/a" if stats.pass_rate is None else f"{stats.pass_rate:.1%}",
        "mean": "n/a" if stats.mean_score is None else f"{stats.mean_score:.3f}",
        "errors": stats.errors,
        "listed": len(book.listed(name)) if book.truncated(name) else None,
        "total": book.counts.get(name, 0),
        "width": 20 + 48 * max(len(values), 1),
        "bars": bars,
    }
