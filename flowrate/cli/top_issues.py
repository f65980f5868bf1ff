"""`flowrate top-issues`: the key issues of a run, or of the history, grouped into failure
modes, ranked by severity then frequency, with each mode's trend per period."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowrate.cli.app import app
from flowrate.cli.common import HistoryOption, ResultsPaths, command, fail, say, stderr, write_stdout
from flowrate.cli.options import Given, takes
from flowrate.errors import ConfigError, FlowrateError
from flowrate.settings import groups

if TYPE_CHECKING:
    from flowrate.analysis.judged.mode_naming import NamingCall


@command(app, "top-issues")
@takes(groups.JudgeOptions, groups.RetryOptions, also=("max_cost", "language"))
def top_issues_command(
    paths: ResultsPaths = None,
    history: HistoryOption = None,
    metric: Annotated[
        str | None, typer.Option("--metric", help="Only this metric's key issues (a suite's name: all its criteria).")
    ] = None,
    by: Annotated[str, typer.Option("--by", help="The trend's periods: day, week (ISO weeks) or month.")] = "week",
    date_kind: Annotated[
        str, typer.Option("--date", help="evaluated: the day a row was judged; chat: the day the chat happened.")
    ] = "evaluated",
    growth: Annotated[
        float,
        typer.Option(
            "--growth",
            help="Flag a mode as growing when its share of a period's conversations rises by more than this"
            " (0.05: five points) from the period before.",
        ),
    ] = 0.05,
    top: Annotated[int, typer.Option("--top", min=1, help="Modes listed on the terminal and in --html.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print every mode as JSON on stdout.")] = False,
    csv_path: Annotated[
        Path | None, typer.Option("--csv", help="Write every mode as CSV here (formula-safe for spreadsheets).")
    ] = None,
    html: Annotated[str | None, typer.Option("--html", help="Write the modes as a self-contained page here.")] = None,
    name_with_judge: Annotated[
        bool,
        typer.Option(
            "--name-with-judge",
            help="One judge call for the whole run names the modes and merges near-duplicates (counted in cost"
            " and --max-cost).",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="With --name-with-judge: show the call, its tokens and cost; call nothing."),
    ] = False,
    *,
    given: Given,
) -> None:
    """Group the key issues of a run (or of the history) into failure modes: label, conversations
    and share, severity, metrics, typical turn, three examples; ranked by severity then frequency,
    with each mode's trend per period."""
    import orjson

    from flowrate.analysis.top_issues import load_top_issues
    from flowrate.inputs.files import check_apart
    from flowrate.reports.html import write_top_issues_page
    from flowrate.reports.top_issues import print_top_issues, top_issues_csv

    late: FlowrateError | None = None
    check_apart(
        [("--csv", csv_path), ("--html", html)], [*(paths or []), *([history] if history else [])], of="top-issues"
    )
    if paths and history:
        raise ConfigError("give results files or --history PATH, not both")
    run = load_top_issues(paths, history, by, date_kind, growth, metric)
    modes = run.modes()
    if name_with_judge:
        from flowrate.analysis.judged.mode_naming import NamingError, NamingOverBudget, name_top_issues

        settings = given.settings()
        try:
            modes, call = name_top_issues(run, modes, settings, dry_run)
        except (NamingError, NamingOverBudget) as error:
            late = error  # the offline modes are still shown
            call = None
        if call is not None:
            say(_call_line(call, settings.model, dry_run))
        if dry_run:
            return
    elif dry_run:
        raise ConfigError("--dry-run shows the --name-with-judge call; without it nothing is called")
    trend = len(run.periods) > 1
    for option, target in (("--csv", csv_path), ("--html", html)):
        if target is None:
            continue
        try:
            if option == "--csv":
                Path(target).write_text(top_issues_csv(modes), encoding="utf-8", newline="")
            else:
                write_top_issues_page(target, modes, top)
        except OSError as error:
            raise ConfigError(f"{option} {target}: cannot be written: {error.strerror}") from None
    print_top_issues(stderr(), modes, run.conversations, top, run.empty_because)
    if as_json:
        write_stdout(orjson.dumps({"modes": [mode.as_json(trend) for mode in modes]}).decode())
    if late is not None:
        raise fail(late)


def _call_line(call: NamingCall, model: str, dry_run: bool) -> str:
    if dry_run:
        cost = "unknown" if call.estimated_cost_usd is None else f"${call.estimated_cost_usd:.6f}"
        return (
            f"flowrate: top-issues --name-with-judge would make 1 call to {model}: about {call.prompt_tokens}"
            f" prompt tokens, at most {call.reply_tokens} reply tokens, estimated cost {cost}"
        )
    cost = "unknown" if call.cost_usd is None else f"${call.cost_usd:.6f}"
    usage = call.usage
    tokens = f"{usage.prompt_tokens} prompt + {usage.completion_tokens} reply tokens" if usage else "no usage reported"
    return (
        f"flowrate: top-issues --name-with-judge: 1 call to {model} ({call.attempts} attempt(s)), {tokens}, cost {cost}"
    )
