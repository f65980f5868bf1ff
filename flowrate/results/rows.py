"""The rows a run writes, one per conversation and metric, and eval_lib's result classes built from them."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel, Field

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.backend import Usage


class Verdict(str, Enum):
    """The five levels of Conversational Flow Rate, for eval_lib's users; the scores the
    judge uses come from the rubric's data (`flowrate/rubrics/conversational_flow.yaml`)."""

    FULLY = "fully"
    MOSTLY = "mostly"
    PARTIAL = "partial"
    MINOR = "minor"
    NONE = "none"

    @property
    def score(self) -> float:
        return VERDICT_SCORES[self]


VERDICT_SCORES: dict[Verdict, float] = {
    Verdict.FULLY: 1.0,
    Verdict.MOSTLY: 0.9,
    Verdict.PARTIAL: 0.7,
    Verdict.MINOR: 0.3,
    Verdict.NONE: 0.0,
}


class ErrorInfo(BaseModel):
    type: str
    message: str


class EvaluationRow(BaseModel):
    """One output row: one conversation graded by one metric."""

    id: str
    source: Source | None = None
    metric: str
    suite: str | None = None  #: the suite whose one call rated this criterion (virtual_agent)
    verdict: str | None = None  #: the level, for metrics on named levels
    rating: int | None = None  #: the rating 1..scale, for metrics on points
    scale: int | None = None  #: the number of points of `rating`'s scale
    score: float | None = None  #: in [0, 1] for every metric: the level's score, or rating / scale
    threshold: float
    success: bool | None = None
    reason: str | None = None
    key_issues: list[str] = Field(default_factory=list)
    model: str
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    latency_s: float = 0.0  #: seconds spent in judge calls, retries included
    wait_s: float = 0.0  #: seconds spent waiting on local ceilings (--rpm, --tpm, concurrency slots)
    attempts: int = 0
    error: ErrorInfo | None = None
    rubric_version: str
    evaluated_at: datetime  #: when the verdict (or the error) arrived
    chat_date: str | None = None  #: when the chat happened (YYYY-MM-DD), from its metadata
    number_of_turns: int = 0
    turns_sha256: str | None = None  #: the fingerprint of the turns judged (`conversation.turns_sha256`)
    truncated: bool = False  #: the middle of the conversation was left out to fit the judge's context
    samples: int = 1  #: verdicts the majority was taken over (on an error row: asked for)
    agreement: float | None = None  #: share of samples that agree with the majority (samples > 1)
    sample_verdicts: list[str | int] = Field(default_factory=list)  #: every sample's verdict or rating
    #: the judge's probability of each level (or rating) of the scale, renormalised over it: from
    #: its token log-probabilities, the mean over the samples' (`level_probs_from` "logprobs"), or
    #: from the samples' verdicts (`"samples"`); null when the judge gave neither
    level_probs: dict[str, float] | None = None
    outside_prob: float | None = None  #: the mass of the judge's alternatives that fell outside the scale
    level_probs_from: str | None = None  #: "logprobs" or "samples": where `level_probs` came from
    expected_score: float | None = None  #: Σ level_probs × the level's score, in [0, 1]
    verdict_score: float | None = None  #: the verdict's score (`score` is it unless `score_from` says otherwise)
    #: `--score combined`: the judge's distribution at a first look, the verdict asked alone before any reasoning
    verdict_first_probs: dict[str, float] | None = None
    verdict_first_score: float | None = None  #: Σ verdict_first_probs × the level's score
    combined_score: float | None = None  #: the mean of verdict_score and the verdict-first expected score
    #: `--score checklist` or `fitted`: P(yes) to each of the rubric's yes/no questions (by id), and
    #: `checklist_score`, the weighted mean of P(the good answer); the conversation's, on each of its rows
    checklist_p_yes: dict[str, float] | None = None
    checklist_score: float | None = None
    #: `--turn-look`: P(the reply breaks the flow) of each turn (by the number the transcript shows), and
    #: `problem_turns`, the turns at or above the rubric's turn threshold; the conversation's, on each of its rows
    turn_p_problem: dict[str, float] | None = None
    problem_turns: list[int] | None = None
    fitted_score: float | None = None  #: `--score fitted`: the looks combined by the weights shipped with the rubric
    score_from: str | None = None  #: which value `score` is: verdict, expected, combined, checklist or fitted
    uncertain: bool = False  #: the judge's most likely level had less of its mass than --uncertain-below, or tied
    weights: dict[str, float] | None = None  #: on user_satisfaction rows: the weight of each criterion
    cached: bool = False  #: the verdict came from the response cache: no call, no cost
    batch: bool = False  #: the verdict came from a provider batch
    batch_id: str | None = None  #: that batch
    #: how the rubric's reply schema was sent: "json_schema" (OpenAI, vLLM, llama-server),
    #: "json_object_schema" (llama-cpp-python), "ollama_format"; None when none was
    response_format: str | None = None
    repaired: bool = False  #: a reply was nearly valid JSON (e.g. unescaped quotes) and was repaired to read it
    reasked: str | None = None  #: why the judge was asked again (what its reply got wrong); None: no re-ask
    cut: bool = False  #: a reply reached its token limit (finish_reason "length"); it was read, but may be incomplete
    raw_reply: str | None = None  #: on an error row for an unusable reply: that reply, truncated
    #: `--redact`: the identifiers replaced in the conversation before the judge saw it, by type
    redactions: dict[str, int] | None = None
    redacted_by: str | None = None  #: the detectors that replaced them, with their versions


def looks(row: EvaluationRow) -> dict[str, float]:
    """The looks of the judge at the conversation that `row` carries, by the name `--score fitted`
    weighs them under and the judge card shows them: the verdict's score, the expected score of the
    reply's own distribution (read from log-probabilities), the verdict-first look's, the checklist's."""
    found = {
        "verdict": row.verdict_score,
        "expected": row.expected_score if row.level_probs_from == "logprobs" else None,
        "verdict_first": row.verdict_first_score,
        "checklist": row.checklist_score,
    }
    return {name: value for name, value in found.items() if value is not None}


class MetricResult(BaseModel):
    """A metric's result for one conversation, in eval_lib's shape."""

    name: str
    score: float | None
    success: bool | None
    reason: str | None
    evaluation_cost: float | None
    evaluation_log: dict[str, Any]
    error: ErrorInfo | None = None

    @classmethod
    def from_row(cls, row: EvaluationRow) -> MetricResult:
        return cls(
            name=row.metric,
            score=row.score,
            success=row.success,
            reason=row.reason,
            evaluation_cost=row.cost_usd,
            error=row.error,
            evaluation_log={
                "verdict": row.verdict,
                "rating": row.rating,
                "scale": row.scale,
                "suite": row.suite,
                "weights": row.weights,
                "key_issues": row.key_issues,
                "number_of_turns": row.number_of_turns,
                "threshold": row.threshold,
                "final_reason": row.reason,
                "model": row.model,
                "rubric_version": row.rubric_version,
                "attempts": row.attempts,
                "usage": row.usage.model_dump(),
                "truncated": row.truncated,
                "agreement": row.agreement,
                "sample_verdicts": row.sample_verdicts,
            },
        )


class ConversationResult(BaseModel):
    """Every metric's result for one conversation."""

    test_case: ConversationalEvalTestCase
    metrics_data: list[MetricResult]
