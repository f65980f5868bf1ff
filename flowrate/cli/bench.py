"""`flowrate judge-bench`: which judge agrees with people, on public human-rated sets and your own labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowrate.cli.app import app
from flowrate.cli.common import (
    BackoffMaxOption,
    BackoffOption,
    CacheDirOption,
    ConcurrencyOption,
    CutLogsOption,
    LimitOption,
    MaxCostOption,
    MaxInputTokensOption,
    MaxRetriesOption,
    NoCacheOption,
    SamplesOption,
    TimeoutOption,
    TransportOption,
    command,
    option,
    say,
    stderr,
)
from flowrate.errors import ConfigError, ExitCode


@command(app, "judge-bench")
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
    transport: TransportOption = None,
    data_dir: Annotated[
        str | None,
        option(
            "--data-dir",
            env="FLOWRATE_BENCH_DATA",
            help="The human-rated sets, in the line format of the README's Judge benchmark.",
        ),
    ] = None,
    sets: Annotated[
        str | None,
        typer.Option(
            "--sets",
            help="Sets to judge, comma-separated: fed, fed-overall, ieval, uss-sgd, uss-mwoz, ab-redial, stc3;"
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
    limit: LimitOption = None,
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
    max_cost: MaxCostOption = None,
    concurrency: ConcurrencyOption = None,
    max_retries: MaxRetriesOption = None,
    timeout: TimeoutOption = None,
    backoff: BackoffOption = None,
    backoff_max: BackoffMaxOption = None,
    samples: SamplesOption = None,
    max_input_tokens: MaxInputTokensOption = None,
    cache_dir: CacheDirOption = None,
    no_cache: NoCacheOption = None,
) -> None:
    """Measure which judge agrees with people: each --model judges each set, and is scored with
    Spearman and Kendall and their 95 % intervals, beside the published figures for that set."""
    from flowrate.api import Evaluation, bench_judges
    from flowrate.cli.evaluate import run_with_progress
    from flowrate.inputs.files import check_apart
    from flowrate.reports.bench import print_bench, write_bench_html
    from flowrate.results.files import check_output_path
    from flowrate.settings.options import EvalSettings, resolve_settings

    judges = _judges(model, api_base or [])
    chosen = _sets(sets, labels, label, metric, bool(cut_logs))
    for path, option_name in ((json_path, "--json"), (html_path, "--html")):
        if path is not None:
            check_output_path(str(path), option_name)
    check_apart([("--json", json_path), ("--html", html_path)], [labels] if labels else [], of="judge-bench")
    given = {
        "limit": limit,
        "max_cost": max_cost,
        "concurrency": concurrency,
        "max_retries": max_retries,
        "timeout": timeout,
        "backoff": backoff,
        "backoff_max": backoff_max,
        "samples": samples,
        "max_input_tokens": max_input_tokens,
        "cache_dir": cache_dir,
        "no_cache": no_cache,
        "transport": transport,
    }
    settings = resolve_settings(given, None)

    def announce(estimate) -> None:
        cost = "unknown (no price for a judge)" if estimate.cost_usd is None else f"${estimate.cost_usd:.4f}"
        say(
            f"flowrate: judge-bench: {len(judges)} judge(s) on {', '.join(bench.name for bench in chosen)}:"
            f" {estimate.conversations} conversation(s), {estimate.cached} cached, {estimate.calls} call(s),"
            f" estimated cost {cost}"
        )

    def evaluate_one(paths: list[str], run: EvalSettings) -> Evaluation:
        say(f"flowrate: judge-bench: {run.model} on {Path(run.output).stem}")
        return run_with_progress(paths, run)

    report = bench_judges(
        judges,
        chosen,
        settings,
        data_dir=data_dir,
        work_dir=work_dir,
        stability_conversations=stability,
        evaluate=evaluate_one,
        estimated=announce,
    )
    print_bench(stderr(), report)
    if json_path is not None:
        json_path.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if html_path is not None:
        write_bench_html(report, html_path)
    if report.interrupted:
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    incomplete = any(score.errors or score.n < score.conversations for score in report.scores)
    raise typer.Exit(int(ExitCode.INCOMPLETE if incomplete else ExitCode.OK))


def _judges(models: list[str], bases: list[str]) -> list:
    """The judges of --model and --api-base: one server for all, or one per model in order."""
    from flowrate.api import Judge

    if len(bases) > 1 and len(bases) != len(models):
        raise ConfigError(
            f"option api-base: give one for all judges or one per --model ({len(models)}), not {len(bases)}"
        )
    return [
        Judge(name, bases[0] if len(bases) == 1 else (bases[i] if bases else None)) for i, name in enumerate(models)
    ]


def _sets(sets: str | None, labels: str | None, label: str | None, metric: str, cut_logs: bool) -> list:
    """The sets of --sets, and --labels FILE --label NAME as a set of its own."""
    from flowrate.analysis.judge_bench import own_labels, sets_named
    from flowrate.metrics.catalog import metric_making

    if (labels is None) != (label is None):
        raise ConfigError("options labels and label go together: --labels FILE --label NAME")
    chosen = sets_named(name.strip() for name in (sets or ("" if labels else "fed")).split(",") if name.strip())
    if labels is not None and label is not None:
        chosen.append(own_labels(labels, label, metric_making(metric), metric, cut_logs))
    if not chosen:
        raise ConfigError("option sets: no set to judge")
    return chosen
