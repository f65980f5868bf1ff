"""The small commands: metrics, merge, report, cache, validate, redact, formats."""

from __future__ import annotations

from typing import Annotated

import typer

from flowrate.cli.app import app, cache_app
from flowrate.cli.common import CacheDirOption, Paths, command, print_notices, say, stderr, write_stdout
from flowrate.cli.options import Given, option_of, takes
from flowrate.errors import ExitCode
from flowrate.settings import groups
from flowrate.settings.groups import weight_pairs

WeightOption = Annotated[list[str] | None, option_of(groups.MetricOptions, "weights")]
AllowEmptyOption = Annotated[bool | None, option_of(groups.SelectionOptions, "allow_empty")]
FormatOption = Annotated[str | None, option_of(groups.SelectionOptions, "format")]
ConversationKeyOption = Annotated[str | None, option_of(groups.SelectionOptions, "conversation_key")]


@command(app, "metrics")
def metrics_command(
    weight: WeightOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON on stdout.")] = False,
) -> None:
    """List every metric: its criteria, scales, weights and judge calls per conversation."""
    from dataclasses import asdict

    import orjson

    from flowrate.metrics.catalog import NAMES, check_weights, describe

    weights = weight_pairs(weight) if weight else None
    check_weights(weights or {})
    infos = [describe(name, weights) for name in NAMES]
    if as_json:
        typer.echo(orjson.dumps([asdict(info) for info in infos]).decode())
    for info in infos:
        calls = f"{info.calls_per_conversation} judge call(s) per conversation"
        say(f"{info.name}: {info.title}; {calls}")
        for name, scale, description in info.rows:
            weight_note = f", weight {info.weights[name]:g}" if info.weights and name in info.weights else ""
            say(f"  {name}: {scale}{weight_note}: {description}")


@command(app, "merge")
@takes(groups.GateOptions)
def merge_command(
    paths: Annotated[list[str], typer.Argument(help="Results files of the shards of one run.")],
    output: Annotated[str, typer.Option("--output", "-o", help="The merged results file; - for stdout.")],
    allow_empty: AllowEmptyOption = None,
    *,
    given: Given,
) -> None:
    """Join the results of shards (--shard I/N) into one file and one summary, gates included."""
    from flowrate.api import merge_files
    from flowrate.reports.console import print_summary

    summary = merge_files(paths, output, given.settings(), allow_empty=bool(allow_empty))
    print_summary(stderr(), summary, output)
    raise typer.Exit(int(summary.exit_code))


@command(app, "report")
@takes(also=("keep_originals",))
def report_command(
    paths: Annotated[list[str], typer.Argument(help="Results files (flowrate eval -o FILE).")],
    html: Annotated[str, typer.Option("--html", help="Where the HTML page goes.")],
    inputs: Annotated[
        list[str] | None,
        typer.Option("--inputs", help="The conversations the rows were judged from, for the transcripts; repeatable."),
    ] = None,
    *,
    given: Given,
) -> None:
    """Write a self-contained HTML report of results files: totals, a table of rows, transcripts
    (those of rows judged with --redact redacted again, with the config's rules, unless
    --keep-originals)."""
    from flowrate.api import write_report
    from flowrate.inputs.redaction.redactor import redactor_of

    settings = given.settings(redact=True)
    rows, withheld = write_report(
        paths, html, inputs, redactor_of(settings.redaction_settings), settings.keep_originals
    )
    if withheld:
        say(
            f"{withheld} transcript(s) of redacted rows left out: their run replaced identifiers in them that"
            " this redaction does not (its --config's redact_rules); give the run's --config, or --keep-originals"
        )
    say(f"HTML report: {html} ({rows} rows)")


@command(cache_app, "stats")
def cache_stats_command(
    cache_dir: CacheDirOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the numbers as JSON on stdout.")] = False,
) -> None:
    """Entries per model, size on disk and where the cache is."""
    import orjson

    from flowrate.api import cache_stats

    stats = cache_stats(cache_dir)
    if as_json:
        write_stdout(orjson.dumps(stats).decode())
    models = ", ".join(f"{name}: {count}" for name, count in stats["models"].items()) or "no entries"
    say(f"{stats['entries']} cached replies ({models}), {stats['bytes']} bytes in {stats['path']}")


@command(cache_app, "clear")
def cache_clear_command(cache_dir: CacheDirOption = None) -> None:
    """Remove every cached reply."""
    from flowrate.api import clear_cache

    removed = clear_cache(cache_dir)
    say(f"removed {removed} cached replies")


@command(app, "validate")
def validate_command(
    paths: Paths,
    format: FormatOption = None,
    conversation_key: ConversationKeyOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON on stdout.")] = False,
) -> None:
    """Check the input without calling a judge: record counts per format, and every problem."""
    import orjson

    from flowrate.inputs.files import InputSet
    from flowrate.inputs.selection import barren_lines, raise_for_problems, scan

    inputs = InputSet(paths, format=format, conversation_key=conversation_key)
    try:
        report = scan(inputs)
    finally:
        inputs.close()
    print_notices(inputs.notices)
    counts = {
        "files": report.files,
        "valid": report.valid,
        "invalid": report.invalid,
        "formats": dict(report.formats),
    }
    if as_json:
        typer.echo(orjson.dumps(counts).decode())
    report.problems.extend(barren_lines(report))  # a file that yields nothing is a file misread or misnamed
    raise_for_problems(report, headline="problem(s) in the input")
    formats = ", ".join(f"{count} in {name} format" for name, count in sorted(report.formats.items())) or "none"
    say(f"{report.valid} valid conversation(s) in {report.files} file(s): {formats}")
    raise typer.Exit(int(ExitCode.OK))


@command(app, "redact")
@takes(also=("format", "conversation_key"))
def redact_command(
    paths: Paths,
    output: Annotated[
        str, typer.Option("--output", "-o", help="Where the redacted conversations go (JSONL); - for stdout.")
    ],
    given: Given,
) -> None:
    """Write the conversations as `flowrate eval --redact` would send them, each with its
    redaction counts, without judging: what a privacy reviewer reads (the config's redact_rules
    and redact_regions apply)."""
    from flowrate.api import redact_files

    done = redact_files(paths, output, given.settings())
    print_notices([done.detectors])
    counts = ", ".join(f"{kind} {count}" for kind, count in done.redactions.items()) or "nothing found"
    shown = "stdout" if output == "-" else output
    say(f"{done.conversations} conversation(s) redacted to {shown}: {counts}")


@command(app, "formats")
def formats_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the formats as JSON on stdout.")] = False,
) -> None:
    """List the source formats flowrate reads, in the order a file's format is tried, with the fields each reads."""
    from flowrate.inputs.sources.registry import readers

    listed = [{"name": reader.name, "title": reader.title, "reads": reader.reads} for reader in readers()]
    if as_json:
        import orjson

        write_stdout(orjson.dumps(listed, option=orjson.OPT_INDENT_2).decode())
        return
    for entry in listed:
        typer.echo(f"{entry['name']}: {entry['title']}\n    reads {entry['reads']}")
