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
    "ConversationalEvalTestCase": "flowrate.models",
    "ConversationalFlowRateMetric": "flowrate.metric",
    "ConversationResult": "flowrate.models",
    "CustomLLMClient": "flowrate.judge",
    "EvalTestCase": "flowrate.models",
    "EvaluationRow": "flowrate.models",
    "ExitCode": "flowrate.exit_codes",
    "JudgeAccessError": "flowrate.exit_codes",
    "MetricResult": "flowrate.models",
    "RepetitionCheck": "flowrate.metrics.repetition",
    "RepetitivePatternDetectionMetric": "flowrate.metric",
    "RubricMetric": "flowrate.metric",
    "VirtualAgentSuite": "flowrate.metric",
    "RetryPolicy": "flowrate.judge",
    "Rubric": "flowrate.rubric",
    "Verdict": "flowrate.models",
    "evaluate_conversations": "flowrate.evaluation.engine",
    "load_rubric": "flowrate.rubric",
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
    "load_rubric",
]

if TYPE_CHECKING:
    from flowrate.evaluation.engine import evaluate_conversations
    from flowrate.exit_codes import ExitCode, JudgeAccessError
    from flowrate.judge import CustomLLMClient, RetryPolicy
    from flowrate.metric import (
        ConversationalFlowRateMetric,
        RepetitivePatternDetectionMetric,
        RubricMetric,
        VirtualAgentSuite,
    )
    from flowrate.metrics.repetition import RepetitionCheck
    from flowrate.models import (
        ConversationalEvalTestCase,
        ConversationResult,
        EvalTestCase,
        EvaluationRow,
        MetricResult,
        Verdict,
    )
    from flowrate.rubric import Rubric, load_rubric


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'flowrate' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
