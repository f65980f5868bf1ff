"""`flowrate judge-bench`, the judging half: each candidate judge judges each human-rated set as
`flowrate eval` would, under one budget, with the stability reruns; `analysis.judge_bench` (data
only) reads the sets and scores the rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flowrate.analysis.agreement import labels_named
from flowrate.analysis.combination import dialogue_looks, leave_one_set_out, shared_looks
from flowrate.analysis.judge_bench import (
    STABILITY_RUNS,
    BenchEstimate,
    BenchReport,
    BenchScore,
    BenchSet,
    bench_score,
    own_labels,
    set_file,
    sets_named,
    slug,
    stability,
)
from flowrate.analysis.judged import Evaluate, Evaluated
from flowrate.analysis.turn_labels import read_turn_flags, turn_report
from flowrate.errors import ConfigError
from flowrate.evaluation.file_run import FileRun
from flowrate.results.files import read_rows
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import DryRunEstimate
from flowrate.settings.options import EvalSettings


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
    *,
    evaluate: Evaluate,
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
    `evaluate` runs one evaluation (`flowrate.api.evaluate_files`; the CLI's shows progress).
    Stops after a run Ctrl-C interrupted, with `interrupted` set on the report."""
    from importlib.metadata import version

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
        if chosen.turn_labels:
            score.turns = turn_report(rows, read_turn_flags(bench.files[name]), chosen.row)
        report.scores.append(score)
        if judge is judges[0]:  # the card's dialogues: the first judge's looks, set by set
            report.dialogues += dialogue_looks(name, rows, bench.labels[name], chosen.row, chosen.better)
        if run.summary.interrupted:
            report.interrupted = True
        elif stability_conversations:
            report.interrupted = bench.rerun(judge, chosen, output, rows, score)
        if report.interrupted:
            break
    if not report.interrupted and len({d.set for d in report.dialogues}) > 1:
        looks = shared_looks(report.dialogues)
        try:
            report.held_out = leave_one_set_out(report.dialogues, looks, date=report.created_at[:10])
        except ConfigError as error:  # too few dialogues, or a look the same on all of them
            report.held_out_problem = str(error)
    return report


def _bench_estimate(plan: _Bench) -> BenchEstimate:
    """Every run of `plan`, the stability reruns included: its calls and cost before any call; a
    set with another's file and metric is answered by the cache."""
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
            guess = _estimate([plan.files[name]], plan.settings_for(judge, bench, output, max_cost=None))
            seen[same] = plan.selected[judge, name] = guess.conversations
            estimate.conversations += guess.conversations
            estimate.add(guess)
        for again in plan.rerun_outputs(output) if plan.stability_conversations else []:
            rerun = plan.settings_for(
                judge, bench, again, max_cost=None, limit=plan.stability_conversations, no_cache=True
            )
            guess = _estimate([plan.files[name]], rerun)
            estimate.reruns += guess.conversations
            estimate.add(guess)
    return estimate


def _rows_written(run: Evaluated, output: str) -> list[EvaluationRow]:
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
        evaluate: Evaluate,
    ):
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

    def settings_for(self, judge: Judge, bench: BenchSet, output: str, **update: Any) -> EvalSettings:
        """The settings of one run: the judge's, the set's metric and cut, the budget left."""
        run = {"model": judge.model, "api_base": judge.api_base, "metric": [bench.metric], "cut_logs": bench.cut_logs}
        limits = [count for count in (self.settings.limit, bench.limit, update.pop("limit", None)) if count]
        fixed = {"output": output, "skip_invalid": True, "limit": min(limits) if limits else None}
        budget = {"max_cost": self.budget_left()}
        return EvalSettings(**(self.given | run | fixed | budget | update))

    def budget_left(self) -> float | None:
        """What `settings.max_cost` leaves for the next run (None: no budget)."""
        return None if self.settings.max_cost is None else max(self.settings.max_cost - self.spent_usd, 0.0)

    def run(self, name: str, settings: EvalSettings) -> Evaluated:
        """One evaluation of the set `name`, its spend counted against the budget."""
        done = self.evaluate([self.files[name]], settings)
        self.spent_usd += done.summary.run_cost_usd
        return done

    def rerun_outputs(self, output: str) -> list[str]:
        """Where the stability reruns of the run writing `output` write theirs."""
        return [output.removesuffix(".jsonl") + f".rerun{number}.jsonl" for number in range(1, STABILITY_RUNS)]

    def rerun(self, judge: Judge, bench: BenchSet, output: str, rows: list[EvaluationRow], score: BenchScore) -> bool:
        """The stability reruns of the run that wrote `rows` to `output`: judged again without the
        cache, their spend added to `score`, its `stability` set. Returns whether Ctrl-C stopped one."""
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


def _estimate(paths: list[str], settings: EvalSettings) -> DryRunEstimate:
    """What `flowrate eval --dry-run` would say of one run: calls, tokens and cost; nothing is sent."""
    return FileRun(paths, settings).estimate()


def judges_of(models: list[str], bases: list[str]) -> list[Judge]:
    """The judges of `models` (`--model`) at `bases` (`--api-base`): one server for all, or one
    per model in order; none: each model's provider. Another count is a `ConfigError`."""
    if len(bases) > 1 and len(bases) != len(models):
        raise ConfigError(
            f"option api-base: give one for all judges or one per --model ({len(models)}), not {len(bases)}"
        )
    return [
        Judge(name, bases[0] if len(bases) == 1 else (bases[i] if bases else None)) for i, name in enumerate(models)
    ]


def sets_chosen(sets: str | None, labels: str | None, label: str | None, metric: str, cut_logs: bool) -> list[BenchSet]:
    """The sets named in `sets` (comma-separated, `NAME:N` for the first N conversations;
    default: fed, or none with `labels`), and the conversations of `labels` with the human label
    `label`, judged by `metric` (cut as `cut_logs` says), as a set of its own. `labels` without
    `label` (or the other way), or no set at all, is a `ConfigError`."""
    from flowrate.metrics.catalog import metric_making

    if (labels is None) != (label is None):
        raise ConfigError("options labels and label go together: --labels FILE --label NAME")
    chosen = sets_named(name.strip() for name in (sets or ("" if labels else "fed")).split(",") if name.strip())
    if labels is not None and label is not None:
        chosen.append(own_labels(labels, label, metric_making(metric), metric, cut_logs))
    if not chosen:
        raise ConfigError("option sets: no set to judge")
    return chosen
