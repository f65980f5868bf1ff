"""Which judge agrees with people: the human-rated sets `flowrate judge-bench` knows, the published
figures beside them, and what one judge scored on one set (agreement, parsing, errors, spend,
verdict stability). Data only: `analysis.judged.bench` runs the judges.

A set is a JSONL file in flowrate's turns format whose records carry human ratings in `labels`
(the line format of the public dialogue-ratings collection; see the README's "Judge benchmark").
Each set declares the label it is compared with, that label's scale, the metric that judges it,
and how its dialogues are presented: `cut_logs` for a set rated at a point where the user's last
message was never meant to be answered (FED).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import BaseModel, Field

from flowrate.analysis.agreement import agreement_report, pair_up
from flowrate.analysis.bench_scores import Gap, ScoreAgreement, by_score, calibration_error, largest_gaps
from flowrate.analysis.combination import DialogueLooks, HeldOut
from flowrate.analysis.statistics import Statistic
from flowrate.analysis.turn_labels import TurnReport
from flowrate.errors import ConfigError
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import DryRunEstimate, RunSummary, shown_value

STABILITY_RUNS = 3  # the first judgement and two reruns without the cache


class Anchor(BaseModel):
    """A published figure to read a judge's agreement against: Spearman on the same set and
    label (`value`; `shown` when it is a range), and where it comes from."""

    name: str
    value: float | None
    shown: str
    source: str


@dataclass(frozen=True)
class BenchSet:
    """One human-rated set: its `file` (in the data directory, or a path of the user's own), the
    human `label` and its `scale` (lowest, highest), the `metric` run and the `row` metric its
    verdicts are read from, whether its logs end cut (`cut_logs`), the published `anchors`, and
    how many of its conversations to judge (`limit`, None: all), and whether its records carry
    per-turn behaviour labels to score the turns the judge names against (`turn_labels`)."""

    name: str
    file: str
    label: str
    scale: tuple[float, float]
    metric: str = "conversational_flow_rate"
    row: str = "conversational_flow_rate"
    cut_logs: bool = False
    about: str = ""
    anchors: tuple[Anchor, ...] = ()
    limit: int | None = None  #: judge only the first N conversations of the set (`--sets NAME:N`)
    turn_labels: bool = False  #: its records carry people's per-turn behaviour labels (`turn_labels`)
    better: int = 1  #: +1 when a higher label is better, -1 when lower is (a rate of violations)


_FED = "Mehri & Eskenazi 2020 (SIGDIAL), FED dialog level"
_RATERS = "one rater against the mean of the others, from the set's raw ratings (dialogue-ratings README)"
_ABC = "Finch, Paek & Choi 2023 (SIGDIAL), redundant / ignore / irrelevant turns"
_GPT4 = "GPT-4 prompted on FED, one run: computed from the outputs released with Zhang et al. (AAAI 2024)"

SETS: dict[str, BenchSet] = {
    bench.name: bench
    for bench in (
        BenchSet(
            "fed",
            "fed_dialog_level.jsonl",
            "Coherent",
            (0, 2),
            cut_logs=True,
            about="FED: 125 open-domain chats, rated after the user's last message, so it is left out",
            anchors=(
                Anchor(name="FED metric", value=0.251, shown="0.251", source=_FED),
                Anchor(name="one human", value=0.45, shown="0.45", source=_RATERS),
                Anchor(name="GPT-4", value=0.60, shown="0.60", source=_GPT4),
            ),
        ),
        BenchSet(
            "fed-overall",
            "fed_dialog_level.jsonl",
            "Overall",
            (0, 4),
            cut_logs=True,
            about="FED, its Overall rating: the same prompts as fed, so the cache answers a second pass",
            anchors=(
                Anchor(name="FED metric", value=0.443, shown="0.443", source=_FED),
                Anchor(name="one human", value=0.47, shown="0.47", source=_RATERS),
            ),
        ),
        BenchSet(
            "ieval",
            "ieval_dialog_level.jsonl",
            "making_sense",
            (1, 5),
            about="iEval: 1,920 short empathetic chats, rated by the person who chatted",
        ),
        BenchSet(
            "uss-sgd",
            "uss_sgd.jsonl",
            "overall_satisfaction",
            (1, 5),
            metric="virtual_agent",
            row="user_satisfaction",
            about="USS on Schema-Guided Dialogue: 1,000 task-oriented sessions, judged with the suite",
            anchors=(Anchor(name="one human", value=None, shown="0.26-0.36", source=_RATERS + ", USS"),),
        ),
        BenchSet(
            "uss-mwoz",
            "uss_mwoz.jsonl",
            "overall_satisfaction",
            (1, 5),
            metric="virtual_agent",
            row="user_satisfaction",
            about="USS on MultiWOZ 2.1: 1,000 sessions ending with the user's goodbye, judged with the suite",
            anchors=(Anchor(name="one human", value=None, shown="0.26-0.36", source=_RATERS + ", USS"),),
        ),
        BenchSet(
            "abc-eval",
            "abc_eval_test_behaviors.jsonl",
            "flow_violation_rate",
            (0, 1),
            about="ABC-Eval: 108 chats with per-turn behaviour labels by two people; the flow score should fall"
            " as the share of redundant, ignoring and irrelevant turns rises (a negative Spearman)",
            anchors=(
                Anchor(name="ChatGPT-3.5 turn F1", value=None, shown="32.9 / 24.9 / 40.6", source=_ABC),
                Anchor(name="two humans turn F1", value=None, shown="58.7 / 61.6 / 54.3", source=_ABC),
            ),
            turn_labels=True,
            better=-1,
        ),
        BenchSet(
            "ab-redial",
            "ab_redial_dialog_level.jsonl",
            "dialogue-overall",
            (1, 5),
            about="AB-ReDial: 195 movie-recommendation chats",
        ),
        BenchSet(
            "stc3",
            "stc3_en_dialog_quality.jsonl",
            "customer_satisfaction",
            (-2, 2),
            metric="virtual_agent",
            row="user_satisfaction",
            about="NTCIR-14 STC-3: 1,672 helpdesk exchanges, judged with the suite",
            anchors=(Anchor(name="one human", value=None, shown="0.40-0.49", source=_RATERS + ", STC-3"),),
        ),
    )
}
OWN_LABELS = "labels"  # the set name of --labels FILE


def sets_named(names: Iterable[str]) -> list[BenchSet]:
    """The known sets by name, in the order given, each `NAME` or `NAME:N` (its first N
    conversations); `ConfigError` naming an unknown set or a bad N."""
    chosen: list[BenchSet] = []
    for given in names:
        name, _, count = given.partition(":")
        if name not in SETS:
            raise ConfigError(f"option sets: unknown set {name!r} (known: {', '.join(SETS)})")
        if count and not (count.isdigit() and int(count) > 0):
            raise ConfigError(f"option sets: {given!r}: the part after ':' must be a number of conversations")
        if any(bench.name == name for bench in chosen):
            raise ConfigError(f"option sets: {name!r} is named twice")
        chosen.append(replace(SETS[name], limit=int(count) if count else None))
    return chosen


def own_labels(path: str, label: str, metric: str, row: str, cut_logs: bool) -> BenchSet:
    """A set of the user's own: conversations in `path` whose records carry `label` in `labels`."""
    return BenchSet(OWN_LABELS, path, label, (math.nan, math.nan), metric, row, cut_logs, f"your labels in {path}")


def set_file(bench: BenchSet, data_dir: str | None) -> Path:
    """Where a set's file is: under `data_dir` for a known set, as given for the user's own."""
    if bench.name == OWN_LABELS:
        path = Path(bench.file)
    elif data_dir is None:
        raise ConfigError(f"set {bench.name!r} is read from --data-dir, which was not given")
    else:
        path = Path(data_dir) / bench.file
    if not path.is_file():
        raise ConfigError(f"{path}: no such file (set {bench.name!r})")
    return path


def slug(text: str) -> str:
    """A judge's name as a file name: letters, digits, dots and dashes."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-.") or "judge"


class Stability(BaseModel):
    """The same verdict on reruns without the cache: of `conversations` judged `runs` times,
    `same_verdict` got one verdict every time (an error on any run counts as a change);
    `not_judged` of the conversations meant for the reruns were left out of one (a spent budget,
    an interruption), and are not in `conversations`."""

    conversations: int
    runs: int
    same_verdict: int
    share: float | None
    not_judged: int = 0


class BenchScore(BaseModel):
    """One judge on one set: agreement with people, how its replies read, and what it spent."""

    judge: str
    set: str
    label: str
    metric: str
    cut_logs: bool
    n: int  #: conversations judged and labeled: the pairs the statistics are over
    spearman: Statistic
    kendall: Statistic
    conversations: int  #: selected from the set
    not_judged: int  #: selected, but given no row: the budget was spent, or the run was interrupted
    parsed_first_call: int  #: replies read without a repair or a re-ask
    repaired: int
    reasked: int
    errors: int
    calls: int
    cached: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  #: None: no price is known for this judge
    latency_s: float
    verdicts: dict[str, int] = Field(default_factory=dict)
    #: the agreement of each score the rows carry (`bench_scores.SCORES`), with its share of ties
    by_score: list[ScoreAgreement] = Field(default_factory=list)
    calibration_error: float | None = None  #: of the level probabilities, where people rated on the judge's scale
    largest_gaps: list[Gap] = Field(default_factory=list)  #: where the judge's expected score and people's differ most
    turns: TurnReport | None = None  #: the turns the judge named against people's, for a set with turn labels
    stability: Stability | None = None
    results_file: str
    anchors: list[Anchor] = Field(default_factory=list)

    def add_run(self, rows: list[EvaluationRow], summary: RunSummary) -> None:
        """Count another run of this judge on this set (a stability rerun, its `rows` and
        `summary`) in the calls, tokens, time in calls and cost."""
        self.calls += sum(row.attempts for row in rows)
        self.prompt_tokens += summary.run_prompt_tokens
        self.completion_tokens += summary.run_completion_tokens
        self.latency_s = round(self.latency_s + sum(row.latency_s for row in rows), 3)
        if self.cost_usd is not None:
            self.cost_usd = None if summary.rows_without_cost else round(self.cost_usd + summary.run_cost_usd, 6)


class BenchEstimate(BaseModel):
    """What the benchmark would send before any call, the stability reruns included: calls not
    answered by the cache, and their cost by the price list (None when a judge has no price)."""

    conversations: int = 0
    cached: int = 0
    calls: int = 0
    cost_usd: float | None = 0.0  #: the rubric's prefix at the cached price where the provider caches it
    uncached_cost_usd: float = 0.0  #: the same with nothing cached: what `--max-cost` holds back per call
    reruns: int = 0  #: conversations judged again for stability (their calls are in `calls`)

    def add(self, guess: DryRunEstimate) -> None:
        """Count one run's estimate (`DryRunEstimate`) in the cached rows, calls and cost."""
        self.cached += guess.cached
        self.calls += guess.calls
        self.uncached_cost_usd += guess.uncached_cost_usd
        if self.cost_usd is not None:
            self.cost_usd = None if guess.cost_usd is None else self.cost_usd + guess.cost_usd


class BenchReport(BaseModel):
    """What `flowrate judge-bench` measured: one score per judge and set."""

    created_at: str
    flowrate_version: str
    judges: list[str]
    estimate: BenchEstimate
    scores: list[BenchScore] = Field(default_factory=list)
    interrupted: bool = False
    #: each set's dialogues with every look the first judge's rows carry (the card's lines)
    dialogues: list[DialogueLooks] = Field(default_factory=list, exclude=True)
    held_out: list[HeldOut] = Field(default_factory=list)  #: the looks combined on the other sets, set by set
    held_out_problem: str | None = None  #: why the looks could not be combined


def bench_score(
    judge: str,
    bench: BenchSet,
    rows: list[EvaluationRow],
    labels: dict[str, float],
    summary: RunSummary,
    path: str,
    selected: int,
) -> BenchScore:
    """Score one judge's rows (`rows`, from the results file `path`, with the run's `summary`)
    of one set against the set's `labels` by conversation id; `selected` conversations were to
    be judged, so those without a row (a spent budget, an interruption) count as not judged."""
    mine = [row for row in rows if row.metric == bench.row]
    usable = [row for row in mine if row.error is None]
    try:
        pairs, _ = pair_up(labels, mine, bench.label, bench.row)
        report = agreement_report(pairs, bench.label, bench.row)
        spearman, kendall = report.spearman, report.kendall
    except ConfigError:  # nothing judged: no statistic
        pairs, spearman, kendall = [], Statistic(value=None), Statistic(value=None)
    return BenchScore(
        judge=judge,
        set=bench.name,
        label=bench.label,
        metric=bench.row,
        cut_logs=bench.cut_logs,
        n=len(pairs),
        spearman=spearman,
        kendall=kendall,
        conversations=selected,
        not_judged=max(selected - len({row.id for row in mine}), 0),
        parsed_first_call=sum(1 for row in usable if not row.repaired and row.reasked is None),
        repaired=sum(1 for row in usable if row.repaired),
        reasked=sum(1 for row in usable if row.reasked is not None),
        errors=sum(1 for row in mine if row.error is not None),
        calls=sum(row.attempts for row in rows),  # a call's attempts are on its first row
        cached=sum(1 for row in mine if row.cached),
        prompt_tokens=summary.run_prompt_tokens,
        completion_tokens=summary.run_completion_tokens,
        cost_usd=None if summary.rows_without_cost else round(summary.run_cost_usd, 6),
        latency_s=round(sum(row.latency_s for row in rows), 3),
        verdicts=dict(Counter(shown_value(row) for row in usable).most_common()),
        by_score=by_score(mine, labels, bench.label, bench.row),
        calibration_error=_calibration(bench, mine, labels),
        largest_gaps=largest_gaps(mine, labels, bench.row, bench.scale),
        results_file=path,
        anchors=list(bench.anchors),
    )


def _calibration(bench: BenchSet, rows: list[EvaluationRow], labels: dict[str, float]) -> float | None:
    """`calibration_error` of `rows` on the set's metric's own scale (a suite's mean has none)."""
    from flowrate.rubric.model import load_rubric

    try:
        criteria = {criterion.name: criterion for criterion in load_rubric(bench.metric).criteria}
    except ConfigError:
        return None
    criterion = criteria.get(bench.row)
    return calibration_error(rows, labels, bench.row, criterion.scale) if criterion is not None else None


def stability(runs: list[list[EvaluationRow]], row_metric: str, wanted: int) -> Stability:
    """Of the `wanted` conversations meant for every run (the first run and its reruns), those
    with a row of `row_metric` in every run, and how many of them got the same verdict in every
    run; the rest are `not_judged`."""
    verdicts = [
        {row.id: (shown_value(row) if row.error is None else None) for row in run if row.metric == row_metric}
        for run in runs
    ]
    ids = sorted(set.intersection(*(set(run) for run in verdicts))) if verdicts else []
    same = sum(
        1
        for conversation in ids
        if verdicts[0][conversation] is not None
        and all(run[conversation] == verdicts[0][conversation] for run in verdicts[1:])
    )
    return Stability(
        conversations=len(ids),
        runs=len(runs),
        same_verdict=same,
        share=round(same / len(ids), 4) if ids else None,
        not_judged=max(wanted - len(ids), 0),
    )


def stability_gaps(report: BenchReport) -> list[str]:
    """A line for each judge and set whose stability reruns left conversations unjudged (the
    budget spent, an interruption): what was dropped, and what the share is over."""
    return [
        f"{score.judge} on {score.set}: {score.stability.not_judged} conversation(s) meant for the stability"
        f" reruns were not judged on every run; the share is over the other {score.stability.conversations}"
        for score in report.scores
        if score.stability is not None and score.stability.not_judged
    ]
