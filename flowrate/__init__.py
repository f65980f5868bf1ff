"""flowrate: grade multi-turn chatbot conversations with an LLM judge.

The Python API keeps eval_lib's names, so switching is one import::

    from flowrate import ConversationalFlowRateMetric, ConversationalEvalTestCase, EvalTestCase, evaluate_conversations
"""

from flowrate.exit_codes import ExitCode, JudgeAccessError
from flowrate.judge import CustomLLMClient, RetryPolicy
from flowrate.metric import ConversationalFlowRateMetric
from flowrate.models import (
    ConversationalEvalTestCase,
    ConversationResult,
    EvalTestCase,
    EvaluationRow,
    MetricResult,
    Verdict,
)
from flowrate.rubric import Rubric, load_rubric
from flowrate.runner import evaluate_conversations

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
    "RetryPolicy",
    "Rubric",
    "Verdict",
    "evaluate_conversations",
    "load_rubric",
]
