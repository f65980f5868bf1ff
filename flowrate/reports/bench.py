"""`flowrate judge-bench`'s report: a table on stderr with the published figures beside each
judge's, their sources as numbered notes, and the same as a standalone HTML page."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from flowrate.analysis.judge_bench import Anchor, BenchReport, BenchScore
from flowrate.analysis.statistics import Statistic
from flowrate.reports.console import print_table, table_text
from flowrate.reports.templating import render

HEADERS = (
    "judge",
    "set",
    "label",
    "n",
    "spearman",
    "kendall",
    "published (spearman)",
    "replies",
    "calls",
    "cost",
    "same verdict on reruns",
)


def _statistic(statistic: Statistic) -> str:
    if statistic.value is None:
        return "n/a"
    interval = f" [{statistic.ci95[0]:.3f}, {statistic.ci95[1]:.3f}]" if statistic.ci95 else ""
    return f"{statistic.value:.3f}{interval}"


def _replies(score: BenchScore) -> str:
    """How the replies read: first-call parses, re-asks and errors, of the conversations."""
    return (
        f"{score.parsed_first_call}/{score.conversations} first call, {score.reasked} re-asked, {score.errors} errors"
    )


def _cost(score: BenchScore) -> str:
    return "unknown" if score.cost_usd is None else f"${score.cost_usd:.4f}"


def _stability(score: BenchScore) -> str:
    found = score.stability
    if found is None or found.share is None:
        return ""
    return f"{found.same_verdict}/{found.conversations} ({found.share:.0%}) over {found.runs} runs"


def _sources(report: BenchReport) -> list[Anchor]:
    """Every anchor once, in the order the table shows them: their note numbers."""
    seen: list[Anchor] = []
    for score in report.scores:
        for anchor in score.anchors:
            if anchor not in seen:
                seen.append(anchor)
    return seen


def print_bench(console: Console, report: BenchReport) -> None:
    """Per judge, a table of its Spearman on each set with the published figures beside it;
    then per judge and set Kendall, how the replies read, the verdicts, calls, cost and
    stability; then the sources of the published figures, numbered."""
    sources = _sources(report)
    for judge in report.judges:
        table = Table(title=table_text(f"{judge}: agreement with people"), title_justify="left")
        table.add_column("set")
        table.add_column("n", justify="right")
        table.add_column("spearman [95% CI]")
        table.add_column("published spearman")
        for score in (score for score in report.scores if score.judge == judge):
            published = "\n".join(f"{a.name} {a.shown} [{sources.index(a) + 1}]" for a in score.anchors)
            table.add_row(table_text(score.set), str(score.n), _statistic(score.spearman), published or "none")
        print_table(console, table, wrapping=(2, 3))
    for score in report.scores:
        shown = "; logs cut: a final unanswered user message left out" if score.cut_logs else ""
        verdicts = ", ".join(f"{value} {count}" for value, count in score.verdicts.items()) or "none"
        lines = [
            f"{score.judge} on {score.set} ({score.label} by {score.metric}{shown}):",
            f"  kendall tau-b {_statistic(score.kendall)}; n {score.n} of {score.conversations} conversations",
            f"  replies: {_replies(score)}, {score.repaired} repaired",
            f"  verdicts: {verdicts}",
            f"  {score.calls} call(s), {score.cached} cached, {score.latency_s:.0f} s in calls, cost {_cost(score)}",
        ]
        if _stability(score):
            lines.append(f"  same verdict on reruns without the cache: {_stability(score)}")
        lines += [f"  {line}" for line in distribution_lines(score)]
        lines.append(f"  rows: {score.results_file}")
        for line in lines:
            console.print(table_text(line))
    for line in held_out_lines(report):
        console.print(table_text(line))
    for number, anchor in enumerate(sources, start=1):
        console.print(table_text(f"[{number}] {anchor.name}: {anchor.source}"))


def held_out_lines(report: BenchReport) -> list[str]:
    """The looks combined on the other sets, set by set: the weights and the held-out agreement."""
    lines = [f"looks not combined: {report.held_out_problem}"] if report.held_out_problem else []
    for held in report.held_out:
        combination = held.combination
        weights = ", ".join(f"{look} {weight:.2f}" for look, weight in combination.weights.items())
        alone = ", ".join(f"{look} {_statistic(stat)}" for look, stat in held.looks.items())
        lines += [
            f"{report.judges[0]} on {held.set}, the looks combined with weights fit on {', '.join(combination.fit_on)}:",
            f"  spearman {_statistic(held.combined)}, n {held.n}; weights {weights}",
            f"  each look alone on the same {held.n}: {alone}",
        ]
    return lines


def distribution_lines(score: BenchScore) -> list[str]:
    """Each score the rows carry with its agreement and ties, the calibration of the level
    probabilities, and the conversations the expected score misjudges most."""
    lines = [
        f"by {found.score}: spearman {_statistic(found.spearman)}, kendall {_statistic(found.kendall)},"
        f" n {found.n}, ties {'n/a' if found.ties is None else f'{found.ties:.1%}'}"
        for found in score.by_score
    ]
    if score.calibration_error is not None:
        lines.append(f"expected calibration error of the level probabilities: {score.calibration_error:.3f}")
    if score.turns is not None:
        lines.append(f"turns named against people's, {score.turns.dialogues} dialogues (P / R / F1, %):")
        for who, found in (
            ("judge", score.turns.judge),
            ("ChatGPT-3.5", score.turns.chatgpt),
            ("two people", score.turns.people),
            ("every turn named", score.turns.every_turn),
            (f"per-turn look ({score.turns.turn_look_dialogues} dialogues)", score.turns.turn_look),
        ):
            if not found:
                continue
            lines.append(
                f"  {who}: "
                + "; ".join(
                    f"{t.behaviour} {_percent(t.precision)} / {_percent(t.recall)} / {_percent(t.f1)}" for t in found
                )
            )
    lines += [
        f"gap {gap.gap:+.2f}: {gap.id} (judge {gap.verdict}, expected {gap.expected_score:.2f}, people {gap.people:.2f})"
        for gap in score.largest_gaps
    ]
    return lines


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def write_bench_html(report: BenchReport, path: str | Path) -> None:
    """The report as one HTML page with no script and a CSP that allows none (`templates/bench.html`),
    every text escaped by its template."""
    sources = _sources(report)
    rows = [
        {
            "before": [
                score.judge,
                score.set + (" (cut logs)" if score.cut_logs else ""),
                score.label,
                score.n,
                _statistic(score.spearman),
                _statistic(score.kendall),
            ],
            "published": [
                {"name": anchor.name, "shown": anchor.shown, "number": sources.index(anchor) + 1}
                for anchor in score.anchors
            ],
            "after": [_replies(score), score.calls, _cost(score), _stability(score)],
            "distribution": distribution_lines(score),
        }
        for score in report.scores
    ]
    estimate = report.estimate
    page = render(
        __package__,
        "bench.html",
        created_at=report.created_at,
        version=report.flowrate_version,
        calls=estimate.calls,
        cost="unknown" if estimate.cost_usd is None else f"${estimate.cost_usd:.4f}",
        interrupted=report.interrupted,
        headers=HEADERS,
        rows=rows,
        sources=sources,
    )
    Path(path).write_text(page, encoding="utf-8")
