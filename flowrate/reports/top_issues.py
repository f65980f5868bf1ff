"""The failure modes of `flowrate top-issues` for their readers: a table on the terminal, a CSV
file a spreadsheet opens safely, and a section of the HTML report. Presentation only: the modes
come from `flowrate.analysis.top_issues`.

Every text here is the judge's (labels, examples) or the input's (ids): the terminal gets it
through `console.table_text` (one line, no markup, no control characters), the CSV through
`csv_file.csv_text` (quoted, no formula), the page through its template (`reports.templating`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from flowrate.analysis.top_issues import FailureMode
from flowrate.reports.console import counted, print_table, shown, sparkline, table_text
from flowrate.results.csv_file import csv_text

SHOWN_TOP = 10  # modes the terminal and the HTML section list
CSV_COLUMNS = [
    "rank",
    "label",
    "conversations",
    "share",
    "severity",
    "metrics",
    "typical_turn",
    "position",
    "growing",
    "example_1_id",
    "example_1_turn",
    "example_1_text",
    "example_2_id",
    "example_2_turn",
    "example_2_text",
    "example_3_id",
    "example_3_turn",
    "example_3_text",
    "ids",
]


def _where(mode: FailureMode) -> str:
    if mode.typical_turn is None:
        return mode.position or ""
    return f"turn {mode.typical_turn}" + (f" ({mode.position})" if mode.position else "")


def print_top_issues(
    console: Console, modes: list[FailureMode], total: int, top: int = SHOWN_TOP, empty_because: str | None = None
) -> None:
    """The first `top` of `modes` (ranked), out of `total` conversations: a table of label,
    conversations and share, severity, where it sits and, over several periods, a sparkline of
    its share per period marked when growing; then each mode's metrics and examples. With no
    mode, `empty_because` (`TopIssues.empty_because`) says why."""
    trend = any(len(mode.trend) > 1 for mode in modes)
    title = f"Top issues: {counted(len(modes), 'mode')} over {counted(total, 'conversation')}"
    table = Table(title=title, title_justify="left")
    for column in ("#", "failure mode", "conversations", "severity", "where"):
        table.add_column(column)
    if trend:
        table.add_column("trend")
    for rank, mode in enumerate(modes[:top], start=1):
        cells: list[Text | str] = [str(rank), table_text(mode.label), f"{mode.conversations} ({mode.share:.1%})"]
        cells += [f"{mode.severity:.1f}", _where(mode)]
        if trend:
            peak = max((point.share for point in mode.trend), default=0.0) or 1.0
            line = sparkline([point.share / peak for point in mode.trend])
            cells.append(line + (" growing" if mode.growing else ""))
        table.add_row(*cells)
    print_table(console, table, keys=(0, 1), wrapping=(1, 4))
    for rank, mode in enumerate(modes[:top], start=1):
        console.print(shown(f"{rank}. {mode.label} ({', '.join(mode.metrics)})"), markup=False, highlight=False)
        for example in mode.examples:
            console.print(shown(f"   {example.id}: {example.text}"), markup=False, highlight=False)
    if len(modes) > top:
        more = counted(len(modes) - top, "more mode")
        console.print(shown(f"... and {more} (--top N, --json or --csv for all)"), markup=False)
    if not modes and empty_because:
        console.print(shown(f"flowrate: top-issues: {empty_because}"), markup=False, highlight=False)
    if trend:
        periods = [point.period for point in modes[0].trend]
        console.print(
            shown(f"trend: each mode's share of a period's conversations, {periods[0]} to {periods[-1]}"), markup=False
        )


def top_issues_csv(modes: list[FailureMode]) -> str:
    """The modes as CSV (header `CSV_COLUMNS`), one line per mode, ranked, written by
    `csv_file.csv_text` (quoted as RFC 4180, no cell starting a formula); ids joined by spaces."""
    lines = []
    for rank, mode in enumerate(modes, start=1):
        examples: list[object] = []
        for index in range(3):
            example = mode.examples[index] if index < len(mode.examples) else None
            examples += [example.id, example.turn, example.text] if example else ["", "", ""]
        lines.append(
            [
                rank,
                mode.label,
                mode.conversations,
                mode.share,
                mode.severity,
                " ".join(mode.metrics),
                "" if mode.typical_turn is None else mode.typical_turn,
                mode.position or "",
                "yes" if mode.growing else ("no" if len(mode.trend) > 1 else ""),
                *examples,
                " ".join(mode.ids),
            ]
        )
    return csv_text(CSV_COLUMNS, lines)


def section(modes: list[FailureMode], top: int = SHOWN_TOP) -> dict:
    """What the HTML report's "Top issues" section (`templates/top_issues.html`) draws: the first
    `top` modes as table rows, each example a link that opens its conversation, and how many more
    there are. The template escapes every text."""
    shown_modes = [
        {
            "rank": rank,
            "label": mode.label,
            "conversations": f"{mode.conversations} ({mode.share:.1%})",
            "severity": f"{mode.severity:.1f}",
            "where": _where(mode),
            "metrics": ", ".join(mode.metrics),
            "examples": mode.examples,
        }
        for rank, mode in enumerate(modes[:top], start=1)
    ]
    more = max(len(modes) - top, 0)
    return {"modes": shown_modes, "more": more, "more_text": counted(more, "more mode")}
