"""A run's summary built row by row: totals over all rows and per metric, notes on failures, errors and skips, spend, and the exit status that follows."""

from __future__ import annotations

import bisect

from pydantic import BaseModel, Field, PrivateAttr

from flowrate.errors import ExitCode, exit_code_for_outcome
from flowrate.results.rows import EvaluationRow
from flowrate.scores.distribution import most_likely

FAILURES_KEPT = 50


class FailureNote(BaseModel):
    id: str
    metric: str
    detail: str
    order: int = 0  #: the conversation's place in the input: notes are listed in input order


class Totals(BaseModel):
    """Counts over rows: judged (with a score), passed, failed, errors, and the scores' sum."""

    judged: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    score_sum: float = 0.0

    def count(self, row: EvaluationRow) -> None:
        if row.error is not None:
            self.errors += 1
            return
        self.judged += 1
        self.score_sum += row.score or 0.0
        if row.success:
            self.passed += 1
        else:
            self.failed += 1

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.judged if self.judged else None

    @property
    def mean_score(self) -> float | None:
        return self.score_sum / self.judged if self.judged else None


class MetricStats(Totals):
    """One metric's totals, its scale and the distribution of its values."""

    rows: int = 0
    scale: int | None = None  #: the points of its rating scale, for rated criteria
    distribution: dict[str, int] = Field(default_factory=dict)  #: verdict, rating or score -> rows
    value_scores: dict[str, float] = Field(default_factory=dict)  #: each value's score, to order them

    def add(self, row: EvaluationRow) -> None:
        """Count one `row` of the metric: its totals and, judged, its scale and its value."""
        self.rows += 1
        self.count(row)
        if row.error is not None:
            return
        self.scale = row.scale
        value = row.verdict or (str(row.rating) if row.rating is not None else f"{row.score:.1f}")
        self.distribution[value] = self.distribution.get(value, 0) + 1
        self.value_scores[value] = row.score or 0.0


def mean4(values: list[float]) -> float | None:
    """The mean rounded to 4 places, as reports give scores; None for no values."""
    return round(sum(values) / len(values), 4) if values else None


def format_score(score: float, threshold: float | None = None, digits: int = 2) -> str:
    """`score` for the screen with `digits` decimals, or more where fewer would put it on the
    other side of `threshold`: a failing 2/3 at threshold 0.7 shows as 0.67, never 0.7, and a
    failing 0.6999 as 0.6999. Rows keep the exact score."""
    text = f"{score:.{digits}f}"
    if threshold is not None:
        while (float(text) >= threshold) != (score >= threshold) and digits < 17:
            digits += 1
            text = f"{score:.{digits}f}"
    return text


def shown_value(row: EvaluationRow) -> str:
    """A row's judgement as people read it: the verdict, the rating on its scale, or the score
    (`format_score` against the row's threshold). Raises `ValueError` for a row without a
    judgement (an error row)."""
    if row.verdict is not None:
        return row.verdict
    if row.rating is not None:
        return f"{row.rating}/{row.scale}"
    if row.score is None:
        raise ValueError(f"the row of {row.id} {row.metric} has no judgement (an error row)")
    return format_score(row.score, row.threshold)


class GateResult(BaseModel):
    metric: str
    gate: str
    limit: float
    actual: float | None  # None: nothing judged
    passed: bool

    def describe(self) -> str:
        """One line: the gate, what it needs, what the run had, and by how much it missed."""
        if self.actual is None:
            return f"{self.metric}: {self.gate} {self.limit:g}: nothing judged"
        if self.gate == "max_failures":
            shown = f"{self.actual:g} failure{'' if self.actual == 1 else 's'}, at most {self.limit:g} allowed"
            miss = self.actual - self.limit
            return f"{self.metric}: max_failures: {shown}" + ("" if self.passed else f" ({miss:g} too many)")
        shown = f"{self.actual:.4f}, at least {self.limit:g} needed"
        return f"{self.metric}: {self.gate}: {shown}" + (
            "" if self.passed else f" (short by {self.limit - self.actual:.4f})"
        )


class Redacted(BaseModel):
    """`--redact`'s totals: the identifiers replaced by type, over the conversations with a row,
    and those conversations (each counted once: its counts are on each of its rows)."""

    redactions: dict[str, int] = Field(default_factory=dict)
    redacted_conversations: int = 0
    _redacted_ids: set[str] = PrivateAttr(default_factory=set)

    def count_redactions(self, row: EvaluationRow) -> None:
        """Add the redaction counts of `row`'s conversation, once."""
        if row.redactions is None or row.id in self._redacted_ids:
            return
        self._redacted_ids.add(row.id)
        self.redacted_conversations += 1
        for kind, count in row.redactions.items():
            self.redactions[kind] = self.redactions.get(kind, 0) + count

    @property
    def redaction_note(self) -> str:
        """The totals as one line: the conversations and the identifiers replaced by type."""
        counts = ", ".join(f"{kind} {count}" for kind, count in sorted(self.redactions.items())) or "none found"
        return f"redacted before judging, in {self.redacted_conversations} conversation(s): {counts}"


class Spend(BaseModel):
    """Tokens and USD of a run's rows, and of them what resumed rows had spent in earlier runs."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  #: of `prompt_tokens`, those the provider read from its prompt cache
    reasoning_tokens: int = 0  #: of `completion_tokens`, the judge's hidden reasoning
    cost_usd: float = 0.0
    rows_without_cost: int = 0  #: judged rows (not error rows) whose model has no known price
    #: of the totals above, what rows resumed from the output file had spent in earlier runs
    resumed_prompt_tokens: int = 0
    resumed_completion_tokens: int = 0
    resumed_cost_usd: float = 0.0

    def spend(self, row: EvaluationRow, resumed: bool) -> None:
        """Count what `row` spent (`resumed`: in an earlier run, its row in the output already)."""
        if resumed:
            self.resumed_prompt_tokens += row.usage.prompt_tokens
            self.resumed_completion_tokens += row.usage.completion_tokens
            self.resumed_cost_usd += row.cost_usd or 0.0
        self.prompt_tokens += row.usage.prompt_tokens
        self.completion_tokens += row.usage.completion_tokens
        self.cached_tokens += row.usage.cached_tokens
        self.reasoning_tokens += row.usage.reasoning_tokens
        if row.cost_usd is not None:
            self.cost_usd += row.cost_usd
        elif row.error is None or row.usage.prompt_tokens or row.usage.completion_tokens:
            self.rows_without_cost += (
                1  # an error row that reached no judge has no price; one whose calls were answered does
            )

    @property
    def token_details(self) -> str:
        """How much of the file's input the provider's cache served, and the reasoning in its
        output, as the run's summary says them ("" when neither)."""
        details = []
        if self.cached_tokens:
            share = self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
            details.append(f"{self.cached_tokens} prompt tokens ({share:.0%}) read from the judge's prompt cache")
        if self.reasoning_tokens:
            details.append(f"{self.reasoning_tokens} completion tokens of reasoning")
        return "; ".join(details)

    @property
    def run_prompt_tokens(self) -> int:
        """Prompt tokens this run spent (resumed rows left out)."""
        return self.prompt_tokens - self.resumed_prompt_tokens

    @property
    def run_completion_tokens(self) -> int:
        """Completion tokens this run spent (resumed rows left out)."""
        return self.completion_tokens - self.resumed_completion_tokens

    @property
    def run_cost_usd(self) -> float:
        """USD this run spent by the price list (resumed rows left out)."""
        return self.cost_usd - self.resumed_cost_usd


class Skips(BaseModel):
    """Conversations a run did not judge, by why: the --max-cost budget, an unreachable judge,
    one that refuses every call the same way; a note for each (the first `FAILURES_KEPT`)."""

    skipped: int = 0
    budget_skipped: int = 0
    unreachable_skipped: int = 0  #: not judged: the run stopped because the judge could not be reached
    unreachable: str | None = None  #: the endpoint that could not be reached
    refused_skipped: int = 0  #: not judged: the judge refused every call as invalid, the same way
    refused: str | None = None  #: that refusal: the error's type and message
    #: not kept: the results file could not be written (a full disk); `--resume` judges them
    unwritten_skipped: int = 0
    skipped_notes: list[str] = Field(default_factory=list)

    def skip_for_budget(self, conversation_id: str | None, rows: int = 1) -> None:
        """A judge call not made because the --max-cost budget is spent; `rows` it would have made."""
        self.skipped += rows
        self.budget_skipped += rows
        _keep(self.skipped_notes, f"{conversation_id}: not judged, the --max-cost budget is spent")

    def skip_refused(self, conversation_id: str | None, rows: int = 1) -> None:
        """A judge call not made because the judge refused every call so far the same way."""
        self.skipped += rows
        self.refused_skipped += rows
        _keep(self.skipped_notes, f"{conversation_id}: not judged, the judge refused every call the same way")

    def skip_unwritten(self, conversation_id: str | None, rows: int = 1) -> None:
        """Rows not kept because the results file could not be written (judged or not)."""
        self.skipped += rows
        self.unwritten_skipped += rows
        _keep(self.skipped_notes, f"{conversation_id}: not kept, the results file could not be written")

    def skip_unreachable(self, conversation_id: str | None, rows: int = 1) -> None:
        """A judge call not made because the judge could not be reached; `rows` it would have made."""
        self.skipped += rows
        self.unreachable_skipped += rows
        _keep(self.skipped_notes, f"{conversation_id}: not judged, the judge could not be reached")

    def skip_invalid(self, records: int, problems: list[str]) -> None:
        """Invalid records left out by --skip-invalid: counted once each, every problem noted."""
        self.skipped += records
        for problem in problems:
            _keep(self.skipped_notes, problem)


class FlaggedCalls:
    """The judge calls whose reply was repaired, re-asked, cut at its token limit or copied from
    the rubric's example, each counted once: its flags are on every row the call made (each
    criterion of a suite)."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str]] = set()

    def first_flags(self, row: EvaluationRow) -> tuple[bool, bool, bool, bool] | None:
        """(repaired, re-asked, cut, copied) of `row`'s call the first time a row of it shows a
        flag; None for a row with none, or of a call counted already."""
        copied = row.error is not None and row.error.type == "CopiedExample"
        cut = row.cut or (row.error is not None and row.error.type == "ReplyCut")
        if not (row.repaired or row.reasked or cut or copied):
            return None
        call = (row.id, row.suite or row.metric)
        if call in self.seen:
            return None
        self.seen.add(call)
        return row.repaired, row.reasked is not None, cut, copied


class Doubts(BaseModel):
    """The rows whose judge was unsure: its most likely level less probable than --uncertain-below
    (the mass outside the scale counted against it), or tied with another."""

    uncertain: int = 0
    uncertain_notes: list[FailureNote] = Field(default_factory=list)

    def count_uncertain(self, row: EvaluationRow, order: int) -> None:
        """Count `row` (of the conversation at `order`) if it is marked uncertain."""
        if row.uncertain and row.level_probs:
            self.uncertain += 1
            top = most_likely(row.level_probs, row.outside_prob)
            if top.tied:
                said = f"levels tied: {' and '.join(top.levels)} at {top.p:.0%} each"
            else:
                said = f"level {top.levels[0]} at {top.p:.0%}"
            if (row.outside_prob or 0.0) >= 0.005:  # shown as 1 % or more
                said += f" ({top.in_scale:.0%} over the scale, {row.outside_prob:.0%} outside it)"
            detail = f"{shown_value(row)}, the judge's most likely {said}"
            _keep(self.uncertain_notes, FailureNote(id=row.id, metric=row.metric, detail=detail, order=order))


class RunSummary(Totals, Spend, Skips, Redacted, Doubts):
    """Totals of a run, built row by row: over all rows, and per metric in `metrics`."""

    expected_rows: int | None = None  #: rows this run should end with (selected conversations x metrics)
    pipe_closed: bool = False  #: the reader of stdout went away (`... -o - | head`)
    unstable: int = 0
    truncated: int = 0
    #: judge calls (a conversation's, per metric) whose reply was repaired, re-asked, cut at its
    #: token limit, or copied from the rubric's example (counted once per call, not per row)
    repaired: int = 0
    reasked: int = 0
    cut: int = 0
    copied: int = 0
    cached: int = 0
    resumed: int = 0
    resumed_elsewhere: int = 0  #: rows in a resumed output for conversations not in this run's input
    metrics: dict[str, MetricStats] = Field(default_factory=dict)
    left_out: dict[str, int] = Field(default_factory=dict)  #: conversations the selection left out, by reason
    batches: list[str] = Field(default_factory=list)  #: provider batches this run submitted or collected
    batch_online: int = 0  #: batch lines that went the online way (failed, expired, unparsable)
    still_running: list[str] = Field(default_factory=list)  #: batches not finished when collection stopped
    gates: list[GateResult] = Field(
        default_factory=list
    )  #: set by `results.gates.apply_gates`; empty: none checked yet
    wall_time_s: float = 0.0
    interrupted: bool = False
    terminated: bool = False  #: the interruption was SIGTERM (a CI runner's or Kubernetes' stop), not Ctrl-C
    output_error: str | None = None  #: a write of the results file failed part-way (disk full): what the system said
    failures: list[FailureNote] = Field(default_factory=list)
    error_notes: list[FailureNote] = Field(default_factory=list)
    unstable_notes: list[FailureNote] = Field(default_factory=list)

    _flagged_calls: FlaggedCalls = PrivateAttr(default_factory=FlaggedCalls)

    def add(self, row: EvaluationRow, order: int = 0, resumed: bool = False) -> None:
        """Count one row; `order` is its conversation's place in the input, `resumed` says it
        was in the output file already (its tokens and cost were spent by an earlier run)."""
        self.resumed += resumed
        self.metrics.setdefault(row.metric, MetricStats()).add(row)
        self.count(row)
        self.spend(row, resumed)
        self.cached += row.cached
        flags = self._flagged_calls.first_flags(row)
        if flags is not None:
            repaired, reasked, cut, copied = flags
            self.repaired += repaired
            self.reasked += reasked
            self.cut += cut
            self.copied += copied
        self.count_redactions(row)
        if row.error is not None:
            detail = f"{row.error.type}: {row.error.message}"
            _keep(self.error_notes, FailureNote(id=row.id, metric=row.metric, detail=detail, order=order))
            return
        self.truncated += row.truncated
        if row.agreement is not None and row.agreement < 1.0:
            self.unstable += 1
            split = ", ".join(str(value) for value in row.sample_verdicts)
            detail = f"{shown_value(row)} with {row.agreement:.0%} agreement ({split})"
            _keep(self.unstable_notes, FailureNote(id=row.id, metric=row.metric, detail=detail, order=order))
        self.count_uncertain(row, order)
        if not row.success:
            first = row.key_issues[0] if row.key_issues else (row.reason or "")
            detail = f"{shown_value(row)}: {first}"
            _keep(self.failures, FailureNote(id=row.id, metric=row.metric, detail=detail, order=order))

    @property
    def rows_written(self) -> int:
        return self.judged + self.errors

    @property
    def not_judged(self) -> int:
        """Rows still missing: conversations an interruption left unjudged."""
        if self.expected_rows is None:
            return 0
        return max(
            self.expected_rows
            - self.rows_written
            - self.budget_skipped
            - self.unreachable_skipped
            - self.refused_skipped
            - self.unwritten_skipped,
            0,
        )

    @property
    def gates_failed(self) -> int:
        return sum(not gate.passed for gate in self.gates)

    @property
    def exit_code(self) -> ExitCode:
        return exit_code_for_outcome(
            errors=self.errors,
            failed=self.gates_failed if self.gates else self.failed,
            interrupted=self.interrupted,
            terminated=self.terminated,
            incomplete=self.budget_skipped + self.unreachable_skipped + self.refused_skipped > 0,
            pipe_closed=self.pipe_closed,
            output_failed=self.output_error is not None,
        )


def _keep(notes: list, note: object) -> None:
    """Keep the first `FAILURES_KEPT` notes; `FailureNote`s by input order, whatever order they came in."""
    if isinstance(note, FailureNote):
        bisect.insort(notes, note, key=lambda kept: kept.order)
        del notes[FAILURES_KEPT:]
    elif len(notes) < FAILURES_KEPT:
        notes.append(note)


class DryRunEstimate(BaseModel):
    """What a run would send and cost, with no call made."""

    conversations: int = 0
    cached: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  #: of `prompt_tokens`, the rubric's prefix the provider will serve from its cache
    cost_usd: float | None = None  #: with `cached_tokens` at the cached price
    uncached_cost_usd: float = 0.0  #: the same with nothing cached
    notices: list[str] = []  #: what the run would tell before judging (the scan's, the options')
