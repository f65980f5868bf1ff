"""flowrate: grade multi-turn chatbot conversations with an LLM judge.

The Python API keeps eval_lib's names, so switching is one import::

    from flowrate import ConversationalFlowRateMetric, ConversationalEvalTestCase, EvalTestCase, evaluate_conversations

Names are loaded on first use: `import flowrate` (and so `flowrate --help`) does not load
the judging engine.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_WHERE = {
    "ConversationalEvalTestCase": "flowrate.inputs.conversation",
    "ConversationalFlowRateMetric": "flowrate.metrics.rubric_metric",
    "ConversationResult": "flowrate.results.rows",
    "CustomLLMClient": "flowrate.judge.backend",
    "EvalTestCase": "flowrate.inputs.conversation",
    "EvaluationRow": "flowrate.results.rows",
    "ExitCode": "flowrate.errors",
    "JudgeAccessError": "flowrate.errors",
    "MetricResult": "flowrate.results.rows",
    "RepetitionCheck": "flowrate.metrics.repetition",
    "RepetitivePatternDetectionMetric": "flowrate.metrics.rubric_metric",
    "RubricMetric": "flowrate.metrics.rubric_metric",
    "VirtualAgentSuite": "flowrate.metrics.rubric_metric",
    "RetryPolicy": "flowrate.judge.retry",
    "Rubric": "flowrate.rubric.model",
    "Verdict": "flowrate.results.rows",
    "evaluate_conversations": "flowrate.evaluation.engine",
    "evaluate_files": "flowrate.api",
    "evaluate_files_async": "flowrate.api",
    "Evaluation": "flowrate.api",
    "EvalSettings": "flowrate.settings.options",
    "RunListener": "flowrate.results.events",
    "load_rubric": "flowrate.rubric.model",
    "JudgeRequest": "flowrate.metrics.step",
    "Reply": "flowrate.metrics.step",
    "StepResult": "flowrate.metrics.step",
    "build_request": "flowrate.metrics.step",
    "reply_from_answer": "flowrate.metrics.step",
    "rows_from_reply": "flowrate.metrics.step",
    "evaluate_dataset": "flowrate.api",
    "assert_flow": "flowrate.ci.pytest_plugin",
}
__all__ = [
    "ConversationalEvalTestCase",
    "ConversationalFlowRateMetric",
    "ConversationResult",
    "CustomLLMClient",
    "EvalTestCase",
    "EvaluationRow",
    "ExitCode",
    "JudgeAccessError",
    "MetricResult",
    "RepetitionCheck",
    "RepetitivePatternDetectionMetric",
    "RubricMetric",
    "VirtualAgentSuite",
    "RetryPolicy",
    "Rubric",
    "Verdict",
    "evaluate_conversations",
    "evaluate_files",
    "evaluate_files_async",
    "Evaluation",
    "EvalSettings",
    "RunListener",
    "load_rubric",
    "JudgeRequest",
    "Reply",
    "StepResult",
    "build_request",
    "reply_from_answer",
    "rows_from_reply",
    "evaluate_dataset",
    "assert_flow",
]

if TYPE_CHECKING:
    from flowrate.api import Evaluation, evaluate_dataset, evaluate_files, evaluate_files_async
    from flowrate.ci.pytest_plugin import assert_flow
    from flowrate.errors import ExitCode, JudgeAccessError
    from flowrate.evaluation.engine import evaluate_conversations
    from flowrate.inputs.conversation import ConversationalEvalTestCase, EvalTestCase
    from flowrate.judge.backend import CustomLLMClient
    from flowrate.judge.retry import RetryPolicy
    from flowrate.metrics.repetition import RepetitionCheck
    from flowrate.metrics.rubric_metric import (
        ConversationalFlowRateMetric,
        RepetitivePatternDetectionMetric,
        RubricMetric,
        VirtualAgentSuite,
    )
    from flowrate.metrics.step import JudgeRequest, Reply, StepResult, build_request, reply_from_answer, rows_from_reply
    from flowrate.results.events import RunListener
    from flowrate.results.rows import ConversationResult, EvaluationRow, MetricResult, Verdict
    from flowrate.rubric.model import Rubric, load_rubric
    from flowrate.settings.options import EvalSettings


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'flowrate' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
