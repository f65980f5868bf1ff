"""The library behind the commands: one call per command of `flowrate`, for Python users and
for the CLI alike. `evaluate_files` is `flowrate eval`: online or through provider batches,
resume, selection, gates, reports and the history, with listeners to watch it go.

Heavy pieces (LiteLLM, DuckDB, rich) are imported by the stages that need them, when they do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowrate.errors import ConfigError, ExitCode, FlowrateError, OutputError
from flowrate.evaluation.file_run import FileRun
from flowrate.results.book import ReportBook
from flowrate.results.events import Listeners, RunListener
from flowrate.results.files import ResultsFile, read_rows
from flowrate.results.summary import DryRunEstimate, RunSummary
from flowrate.settings.options import EvalSettings, in_github

if TYPE_CHECKING:
    from flowrate.analysis.judge_bench import BenchEstimate, BenchReport, BenchSet


class BatchesLeftRunning(FlowrateError):
    """Ctrl-C (or SIGTERM) while waiting on provider batches: they keep running at the
    provider, and a later `flowrate batch collect` or the same command collects them."""

    exit_code = ExitCode.INTERRUPTED


class HistoryNotUpdated(OutputError):
    """The run's rows could not be added to the history after judging (another process kept it,
    the disk is full): they are kept in `output`, and `flowrate history import output
    --history history` adds them later (each row once)."""

    def __init__(self, message: str, output: str, history: str):
        super().__init__(message)
        self.output = output
        self.history = history


@dataclass
class Evaluation:
    """What `evaluate_files` did: the run's `summary` (gates applied), the notices of the
    reports it wrote, how many rows it added to the history (None: no history asked), and a
    report or history write that failed after judging (`late_error`, raised by the caller once
    the summary is shown: the rows are in the results file already)."""

    settings: EvalSettings
    summary: RunSummary
    reports: list[str] = field(default_factory=list)
    history_rows_added: int | None = None
    late_error: FlowrateError | None = None

    @property
    def exit_code(self) -> ExitCode:
        """The status `flowrate eval` exits with (submit-only batch runs: 0)."""
        if self.settings.batch and self.settings.batch_submit_only and not self.summary.pipe_closed:
            return ExitCode.OK
        return self.summary.exit_code


def evaluate_files(
    paths: list[str],
    settings: EvalSettings,
    listeners: list[RunListener] | None = None,
    batch_command: dict | None = None,
    defer_late_errors: bool = False,
) -> Evaluation:
    """Judge the conversations in `paths` (files, directories, `-` for stdin) as `flowrate eval`
    does, under `settings` (`EvalSettings`, or `resolve_settings` for the CLI's layering).

    Rows go to `settings.output` as they come, and to each of `listeners` (progress, your own
    collector) after it. Online or through the provider's Batch API (`settings.batch`; then
    `batch_command` is recorded so `flowrate batch collect` can finish it), with resume,
    selection, budgets and gates; then the reports (`junit`, `html`, GitHub) and the history.
    Raises `FlowrateError` (an `InputError`, `ConfigError`, `JudgeAccessError`, `OutputError`)
    for what a user can fix, each with its exit code; a run that writes no row leaves an
    existing output as it was. A report or history write that fails after judging raises
    `OutputError` too, unless `defer_late_errors` keeps it on the result (the CLI shows the
    summary first)."""
    try:
        evaluation = asyncio.run(evaluate_files_async(paths, settings, listeners, batch_command))
    except KeyboardInterrupt:  # online runs handle Ctrl-C themselves; this is a batch run's wait
        if settings.batch:
            raise BatchesLeftRunning(
                "interrupted while polling: the batches keep running at the provider (nothing was cancelled)"
            ) from None
        raise
    if evaluation.late_error is not None and not defer_late_errors:
        raise evaluation.late_error
    return evaluation


async def evaluate_files_async(
    paths: list[str],
    settings: EvalSettings,
    listeners: list[RunListener] | None = None,
    batch_command: dict | None = None,
    ray_processor: Any = None,
) -> Evaluation:
    """`evaluate_files` for code that runs an event loop already: the same arguments, and a
    late report or history failure always kept on the result as `late_error`. `ray_processor`
    replaces the HTTP processor of `--engine ray` (`ray_engine.vllm_processor`, say)."""
    from flowrate.evaluation.engines import engine_for

    check_engine(settings)
    run = FileRun(paths, settings)
    try:
        check_history(settings)
    except BaseException:
        run.close()
        raise
    results = ResultsFile(settings.output, append=run.resuming)
    book = ReportBook() if settings.report_settings.wanted else None
    listener = Listeners([results, *([book] if book is not None else []), *(listeners or [])])
    try:
        summary = await engine_for(settings, batch_command, ray_processor)(run, listener)
    finally:
        results.close()
    evaluation = Evaluation(settings, summary)
    if summary.pipe_closed or (settings.batch and settings.batch_submit_only):
        return evaluation
    write_after_run(paths, settings, evaluation, book, listener)
    return evaluation


def write_after_run(
    paths: list[str], settings: EvalSettings, evaluation: Evaluation, book: ReportBook | None, listener: RunListener
) -> None:
    """The Parquet copy, the reports (from `book`) and the history of a run judged into
    `evaluation`, each tried whatever became of the others (they may be on other disks). The
    first failure is `evaluation.late_error` (a history's first: it carries the command that
    adds the rows later); any other is one more notice."""
    failures: list[FlowrateError] = []

    def attempt(step: Callable[[], None]) -> None:
        try:
            step()
        except FlowrateError as error:
            failures.append(error)

    if settings.output_parquet:
        attempt(lambda: evaluation.reports.append(_parquet_copy(settings)))
    if book is not None:
        attempt(lambda: evaluation.reports.extend(write_run_reports(paths, settings, book, evaluation.summary)))
    if settings.history:

        def history() -> None:
            evaluation.history_rows_added = append_history(settings, evaluation.summary.wall_time_s, listener)

        attempt(history)
    failures.sort(key=lambda error: not isinstance(error, HistoryNotUpdated))
    if failures:
        evaluation.late_error = failures[0]
        evaluation.reports.extend(f"error: {error}" for error in failures[1:])


def _parquet_copy(settings: EvalSettings) -> str:
    """Write `--output-parquet` from the results file (its complete rows: `complete_results`);
    returns its notice."""
    from flowrate.results.files import complete_results
    from flowrate.results.parquet import write_parquet

    with complete_results(Path(settings.output)) as rows_file:
        rows = write_parquet(str(rows_file), settings.output_parquet)
    return f"Parquet rows: {settings.output_parquet} ({rows} rows)"


def evaluate_dataset(
    dataset: Any,
    settings: EvalSettings,
    listeners: list[RunListener] | None = None,
    defer_late_errors: bool = False,
    processor: Any = None,
) -> Evaluation:
    """`evaluate_files` on the conversations of a `ray.data.Dataset` (one per row, in the turn or
    the OpenAI-messages shape, as a JSONL record has them; give each an `id`), judged on Ray Data
    as `--engine ray` judges (`settings.engine` is set to "ray"): the same selection, cache, budget,
    resume, gates, reports and history, and the same rows. The rows stream to the driver once,
    into a JSONL file in a temporary directory, which the rows' `source` names (`dataset.jsonl`
    and the row's line). `processor` replaces the HTTP processor: `ray_engine.vllm_processor(
    settings.judge_settings, model_source, actors)` runs vLLM on the workers' GPUs."""
    import tempfile

    from flowrate.evaluation.ray_engine import stage_dataset

    with tempfile.TemporaryDirectory(prefix="flowrate-dataset-") as directory:
        staged = stage_dataset(dataset, Path(directory) / "dataset.jsonl")
        ray_settings = settings.model_copy(update={"engine": "ray"})
        evaluation = asyncio.run(evaluate_files_async([str(staged)], ray_settings, listeners, ray_processor=processor))
    if evaluation.late_error is not None and not defer_late_errors:
        raise evaluation.late_error
    return evaluation


def check_engine(settings: EvalSettings) -> None:
    """The engine options make sense together, before anything is read: `--engine ray` is not
    `--batch`, and `--output-parquet` needs `--output` to be a file it can be written from
    (`FileRun` checks the Parquet file itself, with every other written path)."""
    from flowrate.errors import ConfigError

    if settings.engine == "ray" and settings.batch:
        raise ConfigError("--engine ray and --batch are two ways of sending the requests; choose one")
    if settings.ray_address and settings.engine != "ray":
        raise ConfigError("--ray-address is for --engine ray")
    if settings.output_parquet and settings.output == "-":
        raise ConfigError("--output-parquet needs --output to be a file")


def write_run_reports(paths: list[str], settings: EvalSettings, book: ReportBook, summary: RunSummary) -> list[str]:
    """The reports `settings` asks for (JUnit, HTML with the transcripts read again, GitHub's
    step summary and annotations, the annotations on stdout unless rows are there), from the
    run's `book` and `summary`; returns one notice per report. A write that fails here, after
    every path was checked before the first call, is an `OutputError` (exit 4)."""
    import typer

    from flowrate.inputs.files import load_transcripts
    from flowrate.reports import write_reports

    transcripts = None
    if settings.html:
        ids = {case.id for cases in book.cases.values() for case in cases}
        transcripts = load_transcripts([path for path in paths if path != "-"], ids)
    github = in_github(settings.github)
    annotate = typer.echo if github and settings.output != "-" else None  # workflow commands go to stdout
    try:
        return write_reports(
            book,
            summary,
            junit=settings.junit,
            html=settings.html,
            github=github,
            transcripts=transcripts,
            annotate=annotate,
        )
    except OSError as error:  # JUnit and HTML name themselves (`write_reports`): this is GitHub's step summary
        where = f" {error.filename}" if error.filename else ""
        raise OutputError(
            f"a report could not be written (the GitHub step summary{where}): {error.strerror or error}"
        ) from None


def check_history(settings: EvalSettings) -> None:
    """Before the first call: the history `settings.history`, when it exists, is a DuckDB file
    this process can open (waiting, as `history.writing` does, while another one holds it), so
    that a run is not paid for to find it cannot be stored. Raises `ConfigError` (exit 2)."""
    if not settings.history or settings.output == "-" or not Path(settings.history).expanduser().exists():
        return
    from flowrate.analysis.history import check_history_file, writing

    check_history_file(settings.history)
    with writing(settings.history):
        pass


def append_history(settings: EvalSettings, wall_time_s: float, listener: RunListener) -> int | None:
    """Add the run's rows (from `settings.output`) and the run itself, started `wall_time_s`
    ago, to the history `settings.history`, in one short transaction (waiting while another
    process, the review app, holds the file); returns the rows added (None when the rows went to
    stdout, which `listener` is told). Raises `HistoryNotUpdated` (exit 4) when they could not
    be added: none of them then was."""
    from flowrate.analysis.history import import_results, writing

    if settings.output == "-":
        listener.notice("--history needs --output to be a file; the history was not updated")
        return None
    started = datetime.now(UTC) - timedelta(seconds=wall_time_s)
    try:
        with writing(settings.history) as connection:
            return import_results(connection, settings.output, started.replace(tzinfo=None))
    except FlowrateError as error:
        raise HistoryNotUpdated(
            f"the history {settings.history} was not updated: {error}; the rows are kept in {settings.output}",
            settings.output,
            settings.history,
        ) from None


def estimate_files(paths: list[str], settings: EvalSettings) -> DryRunEstimate:
    """What `flowrate eval --dry-run` prints: every prompt rendered and counted with the model's
    tokenizer, the calls, tokens and cost by the price list; nothing is sent."""
    return FileRun(paths, settings).estimate()


def export_requests(paths: list[str], settings: EvalSettings, path: str) -> int:
    """Write the OpenAI-format batch request file of the run to `path` (`--batch-export`);
    returns the number of requests. Nothing is sent."""
    from flowrate.evaluation.provider_batch import export_batch

    return export_batch(FileRun(paths, settings), path)


def collect_batches(
    paths: list[str], settings: EvalSettings, only: set[str] | None, listeners: list[RunListener] | None = None
) -> RunSummary:
    """Collect the finished provider batches of a run submitted earlier (with its `paths` and
    `settings`, as recorded), restricted to the ids in `only` when given; nothing new is
    submitted and a batch still running is listed in `summary.still_running`."""
    from flowrate.evaluation.provider_batch import judge_in_batches

    run = FileRun(paths, settings)
    results = ResultsFile(settings.output, append=run.resuming)
    try:
        return asyncio.run(judge_in_batches(run, Listeners([results, *(listeners or [])]), submit=False, only=only))
    finally:
        results.close()


def import_batch_file(paths: list[str], settings: EvalSettings, results_file: Path) -> RunSummary:
    """Rows from an OpenAI-format batch output file (`vllm run-batch`), mapped back to the
    conversations in `paths` planned under `settings`, written to `settings.output`."""
    from flowrate.evaluation.provider_batch import import_batch_results

    run = FileRun(paths, settings)
    results = ResultsFile(settings.output, append=False)
    try:
        return asyncio.run(import_batch_results(run, str(results_file), Listeners([results])))
    finally:
        results.close()


@dataclass(frozen=True)
class Judge:
    """A candidate judge of `bench_judges`: a model, and the server it is at (None: its provider)."""

    model: str
    api_base: str | None = None


def bench_judges(
    judges: list[Judge],
    sets: list[BenchSet],
    settings: EvalSettings,
    data_dir: str | None = None,
    work_dir: str = "flowrate-bench",
    stability_conversations: int = 0,
    evaluate: Callable[[list[str], EvalSettings], Evaluation] | None = None,
    estimated: Callable[[BenchEstimate], None] | None = None,
) -> BenchReport:
    """`flowrate judge-bench`: each of `judges` judges each of `sets` (`BenchSet`s, read from
    `data_dir` or, for the user's own labels, from their path) as `flowrate eval` would under
    `settings` (its limit, concurrency, retries, cache and budget), and is scored against the
    set's human label with the agreement statistics and their intervals.

    The rows of each judge and set go to `work_dir/JUDGE/SET.jsonl`. The whole benchmark, the
    stability reruns included, is estimated first (calls the cache does not answer, and their
    cost) and `estimated` is told before any call; `settings.max_cost` then bounds the spend of
    all runs together. With `stability_conversations` N, the first N conversations of each set
    are judged twice more without the cache, and the share given the same verdict every time is
    reported; the reruns' calls, tokens, time and cost are the score's too, and the conversations
    a spent budget left out of a rerun are counted (`Stability.not_judged`).
    `evaluate` runs one evaluation (default `evaluate_files`; the CLI's shows progress).
    Stops after a run Ctrl-C interrupted, with `interrupted` set on the report."""
    from importlib.metadata import version

    from flowrate.analysis.judge_bench import BenchReport, bench_score

    evaluate = evaluate or (lambda paths, run_settings: evaluate_files(paths, run_settings, defer_late_errors=True))
    bench = _Bench(judges, sets, settings, data_dir, work_dir, stability_conversations, evaluate)
    estimate = _bench_estimate(bench)
    if estimated is not None:
        estimated(estimate)
    report = BenchReport(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        flowrate_version=version("flowrate"),
        judges=[judge.model for judge in judges],
        estimate=estimate,
    )
    for (judge, name), output in bench.outputs.items():
        chosen = bench.named[name]
        run = bench.run(name, bench.settings_for(judge, chosen, output))
        rows = _rows_written(run, output)
        score = bench_score(
            judge.model, chosen, rows, bench.labels[name], run.summary, output, bench.selected[judge, name]
        )
        report.scores.append(score)
        if run.summary.interrupted:
            report.interrupted = True
        elif stability_conversations:
            report.interrupted = bench.rerun(judge, chosen, output, rows, score)
        if report.interrupted:
            break
    return report


def _bench_estimate(plan: _Bench) -> BenchEstimate:
    """Every run of `plan`, the stability reruns included: its calls and cost before any call; a
    set with another's file and metric is answered by the cache."""
    from flowrate.analysis.judge_bench import BenchEstimate

    estimate = BenchEstimate()
    seen: dict[tuple, int] = {}
    for (judge, name), output in plan.outputs.items():
        bench = plan.named[name]
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        same = (judge, plan.files[name], bench.metric, bench.cut_logs)
        if same in seen and not plan.settings.no_cache:
            plan.selected[judge, name] = seen[same]
            estimate.conversations += seen[same]
            estimate.cached += seen[same]
        else:
            guess = estimate_files([plan.files[name]], plan.settings_for(judge, bench, output, max_cost=None))
            seen[same] = plan.selected[judge, name] = guess.conversations
            estimate.conversations += guess.conversations
            estimate.add(guess)
        for again in plan.rerun_outputs(output) if plan.stability_conversations else []:
            rerun = plan.settings_for(
                judge, bench, again, max_cost=None, limit=plan.stability_conversations, no_cache=True
            )
            guess = estimate_files([plan.files[name]], rerun)
            estimate.reruns += guess.conversations
            estimate.add(guess)
    return estimate


def _rows_written(run: Evaluation, output: str) -> list:
    """The rows a run wrote: none when it judged nothing (an earlier benchmark's file is then
    left as it was, and is not this run's)."""
    return list(read_rows(Path(output))) if run.summary.rows_written else []


class _Bench:
    """`bench_judges`' plan: each judge and set's output, settings and selection, the estimate,
    the spend so far under the budget, and the stability reruns."""

    def __init__(
        self,
        judges: list[Judge],
        sets: list[BenchSet],
        settings: EvalSettings,
        data_dir: str | None,
        work_dir: str,
        stability_conversations: int,
        evaluate: Callable[[list[str], EvalSettings], Evaluation],
    ):
        from flowrate.analysis.agreement import labels_named
        from flowrate.analysis.judge_bench import set_file, slug

        self.settings = settings
        self.given = settings.model_dump(exclude_unset=True)
        self.stability_conversations = stability_conversations
        self.named = {bench.name: bench for bench in sets}
        self.files = {bench.name: str(set_file(bench, data_dir)) for bench in sets}
        self.labels = {bench.name: labels_named([self.files[bench.name]], bench.label) for bench in sets}
        folders: dict[Judge, str] = {}
        for judge in judges:  # two judges whose names make one file name get one folder each
            name = slug(judge.model)
            folders[judge] = name if name not in folders.values() else f"{name}-{len(folders) + 1}"
        self.outputs = {
            (judge, bench.name): str(Path(work_dir) / folders[judge] / f"{bench.name}.jsonl")
            for judge in judges
            for bench in sets
        }
        self.selected: dict[tuple[Judge, str], int] = {}
        self.spent_usd = 0.0
        self.evaluate = evaluate

    def settings_for(self, judge: Judge, bench: BenchSet, output: str, **update) -> EvalSettings:
        """The settings of one run: the judge's, the set's metric and cut, the budget left."""
        run = {"model": judge.model, "api_base": judge.api_base, "metric": [bench.metric], "cut_logs": bench.cut_logs}
        limits = [count for count in (self.settings.limit, bench.limit, update.pop("limit", None)) if count]
        fixed = {"output": output, "skip_invalid": True, "limit": min(limits) if limits else None}
        budget = {"max_cost": self.budget_left()}
        return EvalSettings(**(self.given | run | fixed | budget | update))

    def budget_left(self) -> float | None:
        """What `settings.max_cost` leaves for the next run (None: no budget)."""
        return None if self.settings.max_cost is None else max(self.settings.max_cost - self.spent_usd, 0.0)

    def run(self, name: str, settings: EvalSettings) -> Evaluation:
        """One evaluation of the set `name`, its spend counted against the budget."""
        done = self.evaluate([self.files[name]], settings)
        self.spent_usd += done.summary.run_cost_usd
        return done

    def rerun_outputs(self, output: str) -> list[str]:
        """Where the stability reruns of the run writing `output` write theirs."""
        from flowrate.analysis.judge_bench import STABILITY_RUNS

        return [output.removesuffix(".jsonl") + f".rerun{number}.jsonl" for number in range(1, STABILITY_RUNS)]

    def rerun(self, judge: Judge, bench: BenchSet, output: str, rows: list, score) -> bool:
        """The stability reruns of the run that wrote `rows` to `output`: judged again without the
        cache, their spend added to `score`, its `stability` set. Returns whether Ctrl-C stopped one."""
        from flowrate.analysis.judge_bench import stability

        runs = [rows]
        wanted = min(self.stability_conversations, self.selected[judge, bench.name])
        for again in self.rerun_outputs(output):
            rerun = self.run(
                bench.name, self.settings_for(judge, bench, again, limit=self.stability_conversations, no_cache=True)
            )
            runs.append(_rows_written(rerun, again))
            score.add_run(runs[-1], rerun.summary)
            if rerun.summary.interrupted:
                score.stability = stability(runs, bench.row, wanted)
                return True
        score.stability = stability(runs, bench.row, wanted)
        return False


@dataclass
class Alignment:
    """What `align_rubric` did: the new rubric at `rubric_path`; the labelled conversations of
    `metric` (`training` ids and `held_out` ids, disjoint), the disagreements among the training
    ones (`corrections`) and those that became worked examples (`examples`); with a holdout, the
    figures of the old rubric (`before`) and the new (`after`) on the held-out conversations, and
    both runs (`runs`, old first)."""

    rubric_path: str
    metric: str
    training: list[str]
    held_out: list[str]
    corrections: int
    examples: list = field(default_factory=list)
    before: object | None = None
    after: object | None = None
    runs: list[Evaluation] = field(default_factory=list)


def align_rubric(
    conversations: list[str],
    rows: list,
    labels: list,
    metric: str,
    output: str,
    settings: EvalSettings | None = None,
    rubric_path: str | None = None,
    comments: dict[str, list[str]] | None = None,
    holdout: float | None = None,
    seed: int = 0,
    budget_tokens: int | None = None,
    max_examples: int | None = None,
    work_dir: str = "flowrate-align",
    evaluate: Callable[[list[str], EvalSettings], Evaluation] | None = None,
) -> Alignment:
    """`flowrate align`: a new rubric file at `output` whose worked examples add corrected cases
    of `metric`, people's value and `comments` (by conversation id) as the reply.

    `rows` are the judge's (the latest per conversation counts), `labels` people's, and
    `conversations` the files holding the conversations' text. The base rubric is `rubric_path`,
    else the packaged one rating `metric`. With `holdout` a fraction, labelled conversations are
    split by a hash of their id seeded with `seed`; only the training part is learnt from, and the
    held-out part is judged under `settings` with the old rubric, then the new (rows in
    `work_dir`), through `evaluate` (default `evaluate_files`: the cache, limits and
    `settings.max_cost`, which bounds both runs together, apply as in any run). The examples'
    tokens stay within `budget_tokens`, their number within `max_examples`. Raises `ConfigError`
    (exit 2) for fewer than `alignment.MIN_LABELS` labelled conversations, or nothing to learn."""
    from flowrate.analysis import alignment
    from flowrate.analysis.judge_report import judge_report, language_of
    from flowrate.judge.model_map import count_tokens
    from flowrate.rubric.model import load_rubric

    rubric, data, criterion = alignment.base_rubric(metric, rubric_path)
    judged = alignment.labelled(rows, labels, metric)
    alignment.need_labels(len(judged), metric)
    training, held = alignment.split(list(judged), holdout, seed)
    if holdout and not held:
        raise ConfigError(f"--holdout {holdout}: holds out none of the {len(judged)} labelled conversations")
    found = alignment.read_conversations(conversations, set(judged))
    languages = {key: language_of(case.metadata) for key, (case, _) in found.items()}
    wrong = alignment.corrections(judged, training, criterion, comments, {k: v for k, v in languages.items() if v})
    by_conversation: dict[str, dict] = {}
    for row in rows:
        by_conversation.setdefault(row.id, {})[row.metric] = row
    candidates = []
    for correction in wrong:
        if correction.conversation_id in found:
            case = found[correction.conversation_id][0]
            example = alignment.example_of(
                correction, case, rubric, by_conversation.get(correction.conversation_id, {})
            )
            if example is not None:
                candidates.append((correction, example))
    if not candidates:
        raise ConfigError(
            f"no labelled conversation of {metric} outside the holdout disagrees with the judge and has its text in"
            f" {', '.join(conversations)}: nothing to correct"
        )
    chosen = alignment.choose(
        candidates,
        rubric,
        criterion,
        budget_tokens or alignment.DEFAULT_EXAMPLE_TOKENS,
        max_examples or alignment.DEFAULT_MAX_EXAMPLES,
        count_tokens,
    )
    if not chosen:
        raise ConfigError(f"no corrected case fits the example budget of {budget_tokens} tokens; raise it")
    try:
        Path(output).write_text(alignment.aligned_rubric_text(data, rubric, chosen, metric), encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"--output {output}: cannot be written: {error.strerror}") from None
    load_rubric(Path(output))  # the file written is a valid rubric, or a ConfigError names the field
    result = Alignment(output, metric, training, held, len(wrong), [correction for correction, _ in chosen])
    if not held:
        return result
    missing = [key for key in held if key not in found]
    if missing:
        raise ConfigError(
            f"{len(missing)} held-out conversation(s) are not in {', '.join(conversations)} (first: {missing[0]})"
        )
    folder = Path(work_dir)
    folder.mkdir(parents=True, exist_ok=True)
    alignment.write_conversations(found, held, folder / "held_out.jsonl")
    evaluate = evaluate or (lambda paths, run_settings: evaluate_files(paths, run_settings, defer_late_errors=True))
    given = (settings or EvalSettings()).model_dump(exclude_unset=True)
    for name in ("metric", "rubric", "output", "resume", "retry_errors", "history", "html", "junit", "batch", "shard",
                 "sample", "limit", "only", "exclude", "min_words", "output_parquet", "batch_export", "max_cost",
                 "min_pass_rate", "min_mean_score", "max_failures", "gates"):  # fmt: skip
        given.pop(name, None)
    budget = (settings or EvalSettings()).max_cost
    held_labels = [label for label in labels if label.metric == metric and label.conversation_id in held]
    scale = [(str(value), criterion.scale.score(value)) for value in criterion.scale.values]
    if criterion.scale.points is not None:
        scale = [(f"{value}/{criterion.scale.points}", score) for value, score in scale]
    for name, run_rubric in (("old", rubric_path), ("new", output)):
        spent = sum(run.summary.run_cost_usd for run in result.runs)
        chosen_rubric = {"rubric": run_rubric} if run_rubric else {"metric": [rubric.name]}
        run_settings = EvalSettings(
            **given,
            **chosen_rubric,
            output=str(folder / f"{name}.jsonl"),
            max_cost=None if budget is None else max(budget - spent, 0.0),
        )
        run = evaluate([str(folder / "held_out.jsonl")], run_settings)
        result.runs.append(run)
        run_rows = list(read_rows(Path(run_settings.output))) if run.summary.rows_written else []
        figures = judge_report(run_rows, held_labels, {metric: scale}).metrics.get(metric)
        setattr(result, "before" if name == "old" else "after", figures)
        if run.summary.interrupted:
            break
    return result


def top_issues(
    paths: list[str] | None = None,
    history: str | None = None,
    *,
    by: str = "week",
    date: str = "evaluated",
    growth: float = 0.05,
    metric: str | None = None,
    name_with_judge: EvalSettings | None = None,
) -> list:
    """`flowrate top-issues`: the failure modes (`analysis.top_issues.FailureMode`) of the
    results files `paths`, or else of the history file `history`, ranked by severity then
    conversations, each with its trend per `by` period (day, week or month) of `date`
    (evaluated or chat), flagged growing past `growth`; `metric` keeps one metric (or a suite).
    With `name_with_judge`, the settings of a judge (model, api_base, max_cost, …) that names
    and merges the modes in one call. For rows already in memory, `analysis.top_issues.top_issues(rows)`."""
    from flowrate.analysis.top_issues import load_top_issues

    run = load_top_issues(paths, history, by, date, growth, metric)
    modes = run.modes()
    if name_with_judge is None:
        return modes
    from flowrate.analysis.mode_naming import name_top_issues

    return name_top_issues(run, modes, name_with_judge)[0]
