"""What the input stage's tests share as fixtures."""

import pytest

from tests.inputs.sources.traces import Recorder


@pytest.fixture
def instrumented(monkeypatch):
    """opentelemetry-instrumentation-openai-v2 on the `openai` client, recording to a `Recorder`;
    message content on spans (the current conventions' `gen_ai.input.messages`). Its spans nest under the app's
    turn span even after OpenLLMetry 0.52 was instrumented and uninstrumented in the process,
    which leaves a wrapper making spans of its own between OpenInference's and the app's."""
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    recorder = Recorder()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=recorder.tracer_provider, logger_provider=recorder.logger_provider)
    yield recorder
    instrumentor.uninstrument()
