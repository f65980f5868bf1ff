"""`flowrate align`: a new rubric whose worked examples are people's corrections of the judge,
checked on held-out labels with the old rubric and the new side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowrate.cli.app import app
from flowrate.cli.common import Paths, command, labels_history, say, stderr, write_stdout
from flowrate.cli.options import Given, takes
from flowrate.errors import ConfigError, ExitCode
from flowrate.settings import groups

if TYPE_CHECKING:
    from flowrate.analysis.judged.alignment import Alignment


@command(app, "align")
@takes(
    groups.JudgeOptions, groups.RetryOptions, groups.LimitOptions, groups.CacheOptions,
    also=("language", "samples", "max_input_tokens", "history"),
)  # fmt: skip
def align_command(
    paths: Paths,
    results: Annotated[
        Path | None,
        typer.Option("--results", help="The judge's rows (flowrate eval -o FILE). [default: the history's rows]"),
    ] = None,
    labels_file: Annotated[
        Path | None, typer.Option("--labels", help="People's labels from this JSONL or CSV file.")
    ] = None,
    metric: Annotated[
        str,
        typer.Option("--metric", help="The metric (a criterion of a suite included) whose labels correct the judge."),
    ] = "conversational_flow_rate",
    rubric: Annotated[
        str | None,
        typer.Option("--rubric", help="The rubric to start from. [default: the packaged one rating --metric]"),
    ] = None,
    output: Annotated[
        str, typer.Option("--output", "-o", help="Where the new rubric file goes.")
    ] = "rubric.aligned.yaml",
    holdout: Annotated[
        float | None,
        typer.Option(
            "--holdout",
            min=0.0,
            max=0.9,
            help="Hold out this fraction of the labelled conversations (by a seeded id hash), never learnt from;"
            " judge them with the old and the new rubric and compare.",
        ),
    ] = None,
    holdout_seed: Annotated[int, typer.Option("--holdout-seed", help="The seed of --holdout's hash.")] = 0,
    example_tokens: Annotated[
        int, typer.Option("--example-tokens", min=1, help="Tokens the corrected examples may add to every prompt.")
    ] = 3000,
    max_examples: Annotated[int, typer.Option("--max-examples", min=1, help="Corrected examples at most.")] = 6,
    work_dir: Annotated[
        str, typer.Option("--work-dir", help="Where the held-out conversations and both runs' rows go.")
    ] = "flowrate-align",
    as_json: Annotated[bool, typer.Option("--json", help="Print what was done as JSON on stdout.")] = False,
    *,
    given: Given,
) -> None:
    """Write a rubric whose worked examples are people's corrections of the judge; with
    --holdout, judge held-out conversations with the old and the new rubric, side by side."""
    from flowrate.analysis.sources import review_comments, rows_and_labels
    from flowrate.api import align_rubric
    from flowrate.cli.evaluate import run_with_progress
    from flowrate.inputs.files import check_apart

    # the rows and labels are read here; the rubric and the conversations `align_rubric` checks itself
    history = labels_history(given, labels_file)
    check_apart([("--output", output)], [path for path in (results, history, labels_file) if path], of="align")
    if history is None and labels_file is None:
        raise ConfigError("--history FILE or --labels FILE gives people's labels")
    if results is None and history is None:
        raise ConfigError("--results RESULTS gives the judge's rows (or --history, with its rows)")
    rows, labels = rows_and_labels([str(results)] if results else None, history, labels_file)
    comments = review_comments(history, metric) if history is not None else {}
    alignment = align_rubric(
        paths,
        rows,
        labels or [],
        metric,
        output,
        given.settings(),
        rubric_path=rubric,
        comments=comments,
        holdout=holdout or None,
        seed=holdout_seed,
        budget_tokens=example_tokens,
        max_examples=max_examples,
        work_dir=work_dir,
        evaluate=lambda run_paths, run_settings: run_with_progress(run_paths, run_settings),
    )
    _tell(alignment, output, metric, as_json)
    if any(run.summary.interrupted for run in alignment.runs):
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    unjudged = any(run.summary.budget_skipped or run.summary.errors for run in alignment.runs)
    raise typer.Exit(int(ExitCode.INCOMPLETE if unjudged else ExitCode.OK))


def _tell(alignment: Alignment, output: str, metric: str, as_json: bool) -> None:
    """What was aligned, on stderr; with `as_json`, as JSON on stdout too."""
    from flowrate.reports.agreement import print_side_by_side

    say(
        f"flowrate: {output}: {len(alignment.examples)} corrected example(s) of {metric} from"
        f" {alignment.corrections} disagreement(s) among {len(alignment.training)} labelled conversation(s);"
        f" {len(alignment.held_out)} held out"
    )
    if alignment.held_out:
        print_side_by_side(stderr(), metric, alignment.before, alignment.after)
        for name, run in zip(("old", "new"), alignment.runs):
            summary = run.summary
            if summary.budget_skipped or summary.errors or summary.interrupted:
                say(
                    f"flowrate: the {name} rubric's run left conversations unjudged ({summary.budget_skipped} over"
                    f" --max-cost, {summary.errors} error(s){', interrupted' if summary.interrupted else ''})"
                )
    if as_json:
        import orjson

        write_stdout(
            orjson.dumps(
                {
                    "rubric": output,
                    "metric": metric,
                    "training": len(alignment.training),
                    "held_out": alignment.held_out,
                    "corrections": alignment.corrections,
                    "examples": [correction.conversation_id for correction in alignment.examples],
                    "before": alignment.before.model_dump(mode="json") if alignment.before else None,
                    "after": alignment.after.model_dump(mode="json") if alignment.after else None,
                    "cost_usd": round(sum(run.summary.run_cost_usd for run in alignment.runs), 6),
                }
            ).decode()
        )
