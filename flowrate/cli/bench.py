"""`flowrate judge-bench`: which judge agrees with people, on public human-rated sets and your own labels."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowrate.cli.app import app
from flowrate.cli.common import command, option, say, stderr
from flowrate.cli.options import Given, option_of, takes
from flowrate.errors import ExitCode
from flowrate.settings import groups

if TYPE_CHECKING:
    from flowrate.analysis.judge_bench import BenchEstimate, BenchReport, BenchSet
    from flowrate.analysis.judged.bench import Judge
    from flowrate.api import Evaluation
    from flowrate.settings.options import EvalSettings

CutLogsOption = Annotated[bool | None, option_of(groups.PromptOptions, "cut_logs")]


@command(app, "judge-bench")
@takes(
    groups.JudgeOptions, groups.RetryOptions, groups.CacheOptions,
    also=("max_cost", "concurrency", "samples", "max_input_tokens", "limit", "score", "reply_order", "logprobs", "turn_look"),
    config=False,
)  # fmt: skip
def judge_bench_command(
    model: Annotated[
        list[str],
        typer.Option(
            "--model", "-m", metavar="MODEL", help="A candidate judge, as --model of eval takes it; repeat for several."
        ),
    ],
    api_base: Annotated[
        list[str] | None,
        typer.Option(
            "--api-base",
            metavar="URL",
            help="The server of the judges: one for all, or one per --model in the same order.",
        ),
    ] = None,
    data_dir: Annotated[
        str | None,
        option(
            "--data-dir",
            env="FLOWRATE_BENCH_DATA",
            help="The directory of the human-rated sets, in their line format (docs/commands.md: Getting the sets).",
        ),
    ] = None,
    sets: Annotated[
        str | None,
        typer.Option(
            "--sets",
            help="Sets to judge, comma-separated: fed, fed-overall, ieval, uss-sgd, uss-mwoz, abc-eval, ab-redial, stc3;"
            " NAME:N judges its first N conversations. [default: fed, or none with --labels]",
        ),
    ] = None,
    labels: Annotated[
        str | None,
        typer.Option("--labels", help="Conversations of your own whose records carry human labels (with --label)."),
    ] = None,
    label: Annotated[str | None, typer.Option("--label", help="The label of --labels to compare with.")] = None,
    metric: Annotated[
        str,
        typer.Option("--metric", help="The metric judging --labels (its row, for a criterion of the suite)."),
    ] = "conversational_flow_rate",
    cut_logs: CutLogsOption = None,
    stability: Annotated[
        int,
        typer.Option(
            "--stability",
            min=0,
            help="Judge the first N conversations of each set twice more without the cache: the share with the"
            " same verdict every time.",
        ),
    ] = 0,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
    html_path: Annotated[Path | None, typer.Option("--html", help="Write the report as an HTML page here.")] = None,
    work_dir: Annotated[
        str, typer.Option("--work-dir", help="Where each judge's rows of each set go: DIR/JUDGE/SET.jsonl.")
    ] = "flowrate-bench",
    card_path: Annotated[
        Path | None,
        typer.Option(
            "--card",
            help="Write the first judge's card here as JSONL: a line per dialogue with set, id, each look's score,"
            " their mean, and the looks combined with weights fit on the other sets (with fit_on).",
        ),
    ] = None,
    fit_path: Annotated[
        Path | None,
        typer.Option(
            "--fit",
            help="Write the looks' weights fit on every set judged here, with their provenance, as the JSON"
            " a rubric ships beside it (RUBRIC.combination.json) for --score fitted; a per-turn threshold"
            " already in the file stays.",
        ),
    ] = None,
    *,
    given: Given,
) -> None:
    """Measure which judge agrees with people: each --model judges each set, and is scored with
    Spearman and Kendall and their 95 % intervals, beside the published figures for that set."""
    from flowrate.analysis.judged.bench import judges_of, sets_chosen
    from flowrate.api import bench_judges
    from flowrate.inputs.files import check_apart
    from flowrate.results.files import check_output_path

    judges = judges_of(model, api_base or [])
    chosen = sets_chosen(sets, labels, label, metric, bool(cut_logs))
    outputs = [("--json", json_path), ("--html", html_path), ("--card", card_path), ("--fit", fit_path)]
    for option_name, path in outputs:
        if path is not None:
            check_output_path(str(path), option_name)
    check_apart(outputs, [labels] if labels else [], of="judge-bench")
    settings = given.settings()

    report = bench_judges(
        judges,
        chosen,
        settings,
        data_dir=data_dir,
        work_dir=work_dir,
        stability_conversations=stability,
        evaluate=_evaluate_one,
        estimated=_announcer(judges, chosen),
    )
    _write_card(report, card_path, fit_path)
    _finish(report, settings.max_cost is not None, json_path, html_path)


def _write_card(report: BenchReport, card_path: Path | None, fit_path: Path | None) -> None:
    """The card's lines at `card_path` and the weights fit on every set at `fit_path`, each when given."""
    import sys

    from flowrate.analysis.combination import card_lines, fit_combination, shared_looks, write_card
    from flowrate.errors import ConfigError
    from flowrate.rubric.combination import read_combination, write_combination

    if card_path is not None and report.dialogues:
        write_card(card_path, card_lines(report.dialogues, report.held_out))
    if fit_path is not None and report.dialogues:
        command = " ".join(["flowrate", "judge-bench", *sys.argv[2:]])
        combination = fit_combination(
            report.dialogues, shared_looks(report.dialogues), date=report.created_at[:10], command=command
        )
        combination.labels = {score.set: score.label for score in report.scores if score.set in combination.fit_on}
        try:  # a per-turn threshold in the file was fit on other data (bench/turn_look.py --ship): it stays
            before = read_combination(fit_path) if fit_path.exists() else None
        except ConfigError:
            before = None
        if before is not None:
            combination.turn_threshold, combination.turn_fit_on = before.turn_threshold, before.turn_fit_on
        write_combination(fit_path, combination)


def _finish(report: BenchReport, budgeted: bool, json_path: Path | None, html_path: Path | None) -> None:
    """The report on stderr, in `json_path` and `html_path` when given, and the exit status: 130
    interrupted, 3 when a judge left conversations unjudged or a stability rerun short (the
    budget spent, when `budgeted`), else 0."""
    from flowrate.analysis.judge_bench import stability_gaps
    from flowrate.reports.bench import print_bench, write_bench_html

    print_bench(stderr(), report)
    if json_path is not None:
        json_path.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if html_path is not None:
        write_bench_html(report, html_path)
    if report.interrupted:
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    gaps = stability_gaps(report)
    for gap in gaps:
        say(f"flowrate: judge-bench: {gap}" + (" (the --max-cost budget was spent)" if budgeted else ""))
    incomplete = gaps or any(score.errors or score.n < score.conversations for score in report.scores)
    raise typer.Exit(int(ExitCode.INCOMPLETE if incomplete else ExitCode.OK))


def _announcer(judges: list[Judge], chosen: list[BenchSet]) -> Callable[[BenchEstimate], None]:
    """What judge-bench says of its estimate before any call."""

    def announce(estimate: BenchEstimate) -> None:
        cost = "unknown (no price for a judge)" if estimate.cost_usd is None else f"${estimate.cost_usd:.4f}"
        if estimate.cost_usd is not None and estimate.uncached_cost_usd > estimate.cost_usd:
            cost += f" with the rubric's prefix cached (${estimate.uncached_cost_usd:.4f} uncached, which --max-cost holds back)"
        say(
            f"flowrate: judge-bench: {len(judges)} judge(s) on {', '.join(bench.name for bench in chosen)}:"
            f" {estimate.conversations} conversation(s), {estimate.cached} cached, {estimate.calls} call(s),"
            f" estimated cost {cost}"
        )

    return announce


def _evaluate_one(paths: list[str], run: EvalSettings) -> Evaluation:
    """One judge on one set, with progress on stderr."""
    from flowrate.cli.evaluate import run_with_progress

    say(f"flowrate: judge-bench: {run.model} on {Path(run.output).stem}")
    return run_with_progress(paths, run)
