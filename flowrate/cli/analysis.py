"""The commands over results, labels and the history: agreement, compare, labels, history, calibrate, trends."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowrate.cli.app import app, history_app, labels_app
from flowrate.cli.common import HistoryOption, ResultsPaths, command, labels_history, say, stderr, write_stdout
from flowrate.cli.options import Given, takes
from flowrate.errors import ConfigError, ExitCode
from flowrate.settings import groups


@command(app, "agreement")
@takes(
    groups.JudgeOptions, groups.RetryOptions, groups.CacheOptions, groups.PromptOptions,
    also=("concurrency", "rpm", "tpm", "skip_invalid", "verbose", "weights", "history"),
)  # fmt: skip
def agreement_command(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="Labelled conversation files (with --label); with --history or --labels, the conversations"
            " whose metadata gives each one's language."
        ),
    ] = None,
    label: Annotated[
        str | None,
        typer.Option("--label", help='The human label to compare with, as named in each record\'s "labels".'),
    ] = None,
    results: Annotated[
        Path | None, typer.Option("--results", help="Use the rows of an earlier run instead of calling the judge.")
    ] = None,
    labels_file: Annotated[
        Path | None, typer.Option("--labels", help="With --results: people's labels from this JSONL or CSV file.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    metric: Annotated[
        str | None,
        typer.Option(
            "--metric",
            help="The metric whose rows are compared with the label: a metric, or a criterion of a suite"
            " (coherence judges with virtual_agent). [default: conversational_flow_rate]",
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            envvar="FLOWRATE_OUTPUT",
            help="Where the judged rows go. [default: flowrate-agreement.jsonl]",
        ),
    ] = None,
    *,
    given: Given,
) -> None:
    """Measure how well the judge agrees with human labels: Spearman, Kendall, Pearson, kappa;
    with --results and --history or --labels, the judge report on people's labels."""
    rubric = given.values.get("rubric")
    if label is not None and (labels_file is not None or "history" in given.typed):
        raise ConfigError("--label reads labels on the conversation records; with --history or --labels leave it out")
    history = None if label is not None else labels_history(given, labels_file)
    if history is not None or labels_file is not None:
        _judge_report_form(paths or [], results, history, labels_file, metric, rubric, as_json)
        return
    if label is None or not paths:
        raise ConfigError("give labelled conversation files and --label NAME, or --results with --history or --labels")
    from flowrate.analysis.judged.agreement import agree_with_labels
    from flowrate.cli.evaluate import run_with_progress
    from flowrate.reports.console import print_agreement

    compared = metric or "conversational_flow_rate"
    # the run adds no rows to a history: agreement reads people's labels from one, and a labelled
    # set judged here is no run of the project's conversations
    settings = None
    if results is None:
        settings = given.settings(output=output or "flowrate-agreement.jsonl").model_copy(update={"history": None})
    measured = agree_with_labels(
        paths, label, compared, rubric, results=results, settings=settings, evaluate=run_with_progress
    )
    report = measured.report
    print_agreement(stderr(), report)
    if measured.unpaired:
        where = f" in {results}" if results is not None else ""
        say(
            f"flowrate: {measured.unpaired} of {measured.labelled} labeled conversation(s) have no usable {compared}"
            f" row{where} (missing, or an error row); they are left out of n"
        )
    if as_json:
        typer.echo(report.model_dump_json())
    raise typer.Exit(int(ExitCode.INCOMPLETE if measured.incomplete or measured.unpaired else ExitCode.OK))


def _judge_report_form(
    paths: list[str],
    results: Path | None,
    history: str | None,
    labels_file: Path | None,
    metric: str | None,
    rubric: str | None,
    as_json: bool,
) -> None:
    """`agreement --results RESULTS (--history FILE | --labels FILE)`: the judge report."""
    import orjson

    from flowrate.analysis.sources import judge_report_of
    from flowrate.reports.agreement import print_judge_report

    if results is None:
        raise ConfigError("--history and --labels compare people's labels with the rows of --results RESULTS")
    report = judge_report_of(results, history, labels_file, metric, paths, rubric)
    print_judge_report(stderr(), report)
    if as_json:
        write_stdout(orjson.dumps(report.model_dump(mode="json")).decode())


@command(app, "compare")
def compare_command(
    baseline: Annotated[Path, typer.Argument(help="The results of the last good run.")],
    current: Annotated[Path, typer.Argument(help="The results of this run.")],
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            help="A metric's drop fails (exit 1) when the upper end of the 95 % interval of its mean delta is below -this.",
        ),
    ] = 0.0,
    fail_on_any_regression: Annotated[
        bool, typer.Option("--fail-on-any-regression", help="Exit 1 when any one conversation got worse.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON on stdout.")] = False,
    as_markdown: Annotated[
        bool, typer.Option("--markdown", help="Print a Markdown fragment for a pull-request comment on stdout.")
    ] = False,
) -> None:
    """Compare a run with a baseline: changed verdicts, regressions first, and per metric the
    mean score delta with a seeded bootstrap 95 % interval."""
    from flowrate.analysis.compare import compare_files
    from flowrate.reports.console import comparison_markdown, print_comparison

    comparison = compare_files(baseline, current, tolerance)
    print_comparison(stderr(), comparison)
    if as_json:
        write_stdout(comparison.model_dump_json())
    if as_markdown:
        write_stdout(comparison_markdown(comparison), nl=False)
    worse = any(change.delta < 0 for change in comparison.changes)
    failed = comparison.regressed or (fail_on_any_regression and worse)
    raise typer.Exit(int(ExitCode.FAILED if failed else ExitCode.OK))


@command(labels_app, "template")
def labels_template_command(
    paths: Annotated[list[str], typer.Argument(help="Results files (flowrate eval -o FILE).")],
    output: Annotated[str, typer.Option("--output", "-o", help="The CSV to write.")] = "labels.csv",
    sample: Annotated[
        float | None, typer.Option("--sample", help="Keep this fraction of conversations, by a seeded id hash.")
    ] = None,
    sample_seed: Annotated[int, typer.Option("--sample-seed", help="The seed of --sample.")] = 0,
) -> None:
    """Write the CSV a person fills in: id, metric, the judge's score and reason, empty label columns."""
    from flowrate.analysis.labels import write_template
    from flowrate.analysis.sources import rows_of
    from flowrate.inputs.files import check_apart

    check_apart([("--output", output)], paths, of="labels template")
    try:
        rows = rows_of(paths)
        written = write_template(rows, output, sample, sample_seed)
    except OSError as error:
        raise ConfigError(f"--output {output}: cannot be written: {error.strerror}") from None
    say(f"{written} row(s) to label in {output}: fill in one of rating, verdict or score, and labeled_at")


@command(labels_app, "import")
def labels_import_command(
    path: Annotated[Path, typer.Argument(help="A labels file, JSONL or CSV.")],
    history: HistoryOption = None,
) -> None:
    """Add labels to the history (each distinct label once)."""
    from flowrate.analysis.sources import import_label_file

    added = import_label_file(history, path)
    say(f"{added} new label(s) in {history}")


@command(history_app, "import")
def history_import_command(
    paths: Annotated[list[str], typer.Argument(help="Results files (flowrate eval -o FILE).")],
    history: HistoryOption = None,
) -> None:
    """Add results files to the history; a row already there is not added again."""
    from flowrate.analysis.sources import import_results_files

    added = import_results_files(history, paths)
    say(f"{added} new row(s) in {history} from {len(paths)} file(s)")


@command(app, "calibrate")
def calibrate_command(
    paths: ResultsPaths = None,
    labels: Annotated[
        Path | None, typer.Option("--labels", help="Human labels, JSONL or CSV. [default: the history's]")
    ] = None,
    history: HistoryOption = None,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="The day the window ends (YYYY-MM-DD). [default: today]")
    ] = None,
    window: Annotated[
        str, typer.Option("--window", help="Labels dated in this window count: months (6mo) or days (90d).")
    ] = "6mo",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    adjusted_output: Annotated[
        str | None, typer.Option("--adjusted-output", help="Write the rows with adjusted_score added here.")
    ] = None,
) -> None:
    """How far the judge sits from human labels, per metric, and scores adjusted by that band."""
    import orjson

    from flowrate.analysis.sources import calibrate_files
    from flowrate.reports.console import print_calibration

    report = calibrate_files(paths, history, labels, as_of, window, adjusted_output)
    print_calibration(stderr(), report)
    if as_json:
        write_stdout(orjson.dumps(report.model_dump()).decode())


@command(app, "trends")
def trends_command(
    paths: ResultsPaths = None,
    history: HistoryOption = None,
    by: Annotated[str, typer.Option("--by", help="day, week (ISO weeks) or month.")] = "week",
    date_kind: Annotated[
        str, typer.Option("--date", help="evaluated: the day a row was judged; chat: the day the chat happened.")
    ] = "evaluated",
    metric: Annotated[str | None, typer.Option("--metric", help="Only this metric.")] = None,
    labels: Annotated[
        Path | None, typer.Option("--labels", help="Human labels, JSONL or CSV. [default: the history's]")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the trend as JSON on stdout.")] = False,
    html: Annotated[
        str | None, typer.Option("--html", help="Write a self-contained page with a chart per metric here.")
    ] = None,
) -> None:
    """Per period and metric: conversations, mean score, pass rate; with labels, the mean human
    score, the adjusted mean and the deviation band."""
    import orjson

    from flowrate.analysis.sources import trends_of
    from flowrate.inputs.files import check_apart
    from flowrate.reports.console import print_trends
    from flowrate.reports.trends_page import write_trends

    try:
        inputs: list[str | Path] = [*(paths or []), *([history] if history else []), *([labels] if labels else [])]
        check_apart([("--html", html)], inputs, of="trends")
        points, undated = trends_of(paths, history, labels, by, date_kind, metric)
        if html:
            write_trends(html, points)
    except OSError as error:
        raise ConfigError(f"--html {html}: cannot be written: {error.strerror}") from None
    if undated:
        say(
            f"flowrate: {undated} row(s) have no chat date and are left out of --date chat"
            " (eval --date-field names the metadata field with the chat's date)"
        )
    print_trends(stderr(), points)
    if html:
        say(f"HTML trends: {html}")
    if as_json:
        write_stdout(orjson.dumps([point.model_dump() for point in points]).decode())
