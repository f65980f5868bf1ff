"""The keys that name a conversation in a log of calls: the sessions the tools write on spans
(OpenLLMetry's association property, the Vercel AI SDK's telemetry metadata, plain and as
@arizeai/openinference-vercel copies it), and `--conversation-key NAME` for any other, as a flag,
a `FLOWRATE_` variable and a config key."""

import pytest

from flowrate.inputs.files import InputSet
from tests.helpers import local_eval, read_rows
from tests.inputs.sources.sdk_logs import openai_chat_calls, write_jsonl
from tests.inputs.sources.test_otel import collector_lines, write_lines
from tests.inputs.sources.traces import USER_TURNS, Recorder, chat


def records_of(path, conversation_key=None):
    inputs = InputSet([str(path)], **({"conversation_key": conversation_key} if conversation_key else {}))
    try:
        return list(inputs.records())
    finally:
        inputs.close()


def turn_spans(attributes):
    """A `chat` turn in the application's own span carrying `attributes`, in a trace of its own."""
    from opentelemetry.trace import get_tracer

    def turn(tracer_provider):
        tracer = get_tracer("harbor", tracer_provider=tracer_provider)
        return lambda number: tracer.start_as_current_span(f"turn {number}", attributes=attributes)

    return turn


@pytest.mark.filterwarnings("ignore:Support for class-based `config` is deprecated")  # OpenLLMetry 0.52's own models
def test_openllmetrys_association_property_session_id_makes_one_conversation(judge, tmp_path):
    """traceloop-sdk's `Traceloop.set_association_properties({"session_id": ...})` writes the
    property as `traceloop.association.properties.session_id` (opentelemetry-semantic-conventions-ai's
    `SpanAttributes.TRACELOOP_ASSOCIATION_PROPERTIES`, then the property's name) on the spans it starts."""
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.semconv_ai import SpanAttributes

    recorder = Recorder()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=recorder.tracer_provider)
    attribute = f"{SpanAttributes.TRACELOOP_ASSOCIATION_PROPERTIES}.session_id"
    try:
        chat(judge, turn=turn_spans({attribute: "s-tl-1"})(recorder.tracer_provider))
    finally:
        instrumentor.uninstrument()
    path = write_lines(tmp_path / "traces.jsonl", collector_lines(recorder))

    [record] = records_of(path)

    assert record.problems == [] and record.case.id == "s-tl-1"
    assert [turn.input for turn in record.case.turns] == list(USER_TURNS)
    assert record.case.metadata["session_id"] == "s-tl-1"


def test_the_vercel_ai_sdks_telemetry_session_id_makes_one_conversation(judge, instrumented, tmp_path):
    """The Vercel AI SDK writes `experimental_telemetry: {metadata: {sessionId}}` as the span
    attribute `ai.telemetry.metadata.sessionId` (ai 5, core/telemetry/get-base-telemetry-attributes);
    @arizeai/openinference-vercel 2.8.1 copies it to `metadata.sessionId` (dist/src/utils.js,
    getMetadataAttributes): both are session keys of every span reader (`otlp.SESSION_KEYS`).
    The calls here are opentelemetry-instrumentation-openai-v2's, in the app's turn spans."""
    for attribute, session in (("ai.telemetry.metadata.sessionId", "s-vercel-1"), ("metadata.sessionId", "s-oi-1")):
        instrumented.spans.clear()
        instrumented.logs.clear()
        chat(judge, turn=turn_spans({attribute: session})(instrumented.tracer_provider))
        path = write_lines(tmp_path / "traces.jsonl", collector_lines(instrumented))

        [record] = records_of(path)

        assert record.problems == [] and record.case.id == session
        assert [turn.input for turn in record.case.turns] == list(USER_TURNS)


def test_conversation_key_names_a_span_attribute_of_the_apps_own(judge, instrumented, tmp_path):
    chat(judge, turn=turn_spans({"harbor.chat_ref": "chat-77"})(instrumented.tracer_provider))
    path = write_lines(tmp_path / "traces.jsonl", collector_lines(instrumented))
    assert len(records_of(path)) == 3  # without the key: each turn's trace alone

    [record] = records_of(path, conversation_key="harbor.chat_ref")

    assert record.problems == [] and record.case.id == "chat-77"
    assert [turn.input for turn in record.case.turns] == list(USER_TURNS)


@pytest.mark.parametrize("given", ["flag", "environment", "config"])
def test_conversation_key_is_a_flag_a_variable_and_a_config_key(given, judge, run_flowrate, cli_env, tmp_path):
    write_jsonl(tmp_path / "log.jsonl", openai_chat_calls(metadata={"chat_ref": "chat-42"}))
    extra, env = [], dict(cli_env)
    if given == "flag":
        extra = ["--conversation-key", "chat_ref"]
    elif given == "environment":
        env["FLOWRATE_CONVERSATION_KEY"] = "chat_ref"
    else:
        (tmp_path / "flowrate.yaml").write_text("conversation_key: chat_ref\n")
        extra = ["--config", "flowrate.yaml"]
    result = run_flowrate(*local_eval(judge, "log.jsonl", "--metric", "conversational_flow_rate", *extra), env=env)
    assert result.returncode == 0, result.stderr
    assert [row["id"] for row in read_rows(tmp_path / "out.jsonl")] == ["chat-42"] and judge.requests == 1


def test_validate_takes_the_conversation_key(run_flowrate, tmp_path):
    write_jsonl(tmp_path / "log.jsonl", openai_chat_calls(metadata={"chat_ref": "chat-42"}))
    result = run_flowrate("validate", "log.jsonl", "--conversation-key", "chat_ref", "--json")
    assert result.returncode == 0, result.stderr
    assert '"valid":1' in result.stdout
