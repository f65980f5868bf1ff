"""The `otel` reader: OpenTelemetry GenAI spans in OTLP/JSON, written in the test by the real
opentelemetry-sdk with opentelemetry-instrumentation-openai-v2 driving the real `openai` client
against the scripted judge; grouped into one conversation per `gen_ai.conversation.id`."""

import contextlib
import json

import orjson
import pytest

from flowrate.errors import ExitCode
from flowrate.inputs.conversation import chat_date
from flowrate.inputs.files import InputSet
from tests.helpers import read_rows
from tests.inputs.sources.sdk_logs import beginnings_notice
from tests.inputs.sources.traces import EXCHANGES, SYSTEM, TOOL_RESULT, USER_TURNS, Recorder, chat

CONVERSATION = "conv-harbor-1"
KEYS = (
    "gen_ai.conversation.id or session.id or traceloop.association.properties.session_id"
    " or ai.telemetry.metadata.sessionId or metadata.sessionId or langfuse.session.id"
)


def agent_conversation(judge, recorder, conversation=CONVERSATION):
    """The conversation with each turn in util-genai's `invoke_agent` span carrying
    `gen_ai.conversation.id` (as the GenAI agent-span conventions place it), and the tool run in
    its `execute_tool` span: eight spans in three traces."""
    from opentelemetry.util.genai.handler import TelemetryHandler

    handler = TelemetryHandler(tracer_provider=recorder.tracer_provider)

    @contextlib.contextmanager
    def turn(number):
        with handler.invoke_local_agent(agent_name="harbor") as agent:
            agent.conversation_id = conversation
            yield

    chat(judge, turn, tool=lambda call: handler.tool(call.function.name, tool_call_id=call.id))


def test_a_conversation_over_eight_spans_with_a_tool_call_is_judged_once_as_one_conversation(
    judge, instrumented, run_flowrate, tmp_path
):
    agent_conversation(judge, instrumented)
    document = instrumented.traces_json()
    spans = [span for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]
    assert len(spans) == 8 and len({span["traceId"] for span in spans}) == 3
    (tmp_path / "traces.json").write_bytes(orjson.dumps(document))

    result = run_flowrate("eval", "traces.json", "--api-base", judge.base_url, "-o", "out.jsonl")

    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["id"] == CONVERSATION and row["error"] is None and row["number_of_turns"] == 3
    assert judge.requests == 1
    judged = json.dumps(judge.bodies[0]["messages"])
    assert all(text in judged for text in (*USER_TURNS, "Your checking balance is $120.", "Goodbye!", "get_balance"))


def test_with_closed_after_30m_a_conversation_whose_last_span_is_a_minute_old_is_skipped_as_open(
    judge, instrumented, run_flowrate, tmp_path
):
    agent_conversation(judge, instrumented)
    document = instrumented.traces_json()
    sent = judge.requests
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:  # the conversation ended a minute ago
                for field in ("startTimeUnixNano", "endTimeUnixNano"):
                    span[field] = str(int(span[field]) - 60 * 10**9)
    (tmp_path / "traces.json").write_bytes(orjson.dumps(document))

    still_open = run_flowrate("eval", "traces.json", "--api-base", judge.base_url, "--closed-after", "30m")
    assert still_open.returncode == 2, still_open.stderr
    assert "skipped 1 open conversation(s) (--closed-after)" in still_open.stderr
    assert judge.requests == sent and not (tmp_path / "flowrate-results.jsonl").exists()

    closed = run_flowrate("eval", "traces.json", "--api-base", judge.base_url, "--closed-after", "30s", "-o", "o.jsonl")
    assert closed.returncode == 0, closed.stderr
    assert [row["id"] for row in read_rows(tmp_path / "o.jsonl")] == [CONVERSATION] and judge.requests == sent + 1


def test_the_turns_roles_tool_call_chat_date_and_metadata_come_from_the_spans(judge, instrumented, tmp_path):
    agent_conversation(judge, instrumented)
    path = tmp_path / "traces.json"
    path.write_bytes(orjson.dumps(instrumented.traces_json()))

    [record] = list(InputSet([str(path)]).records())

    assert record.problems == [] and record.format == "otel"
    case = record.case
    assert case.id == CONVERSATION and case.chatbot_role == SYSTEM
    assert [(turn.input, turn.actual_output) for turn in case.turns] == EXCHANGES
    assert case.turns[1].tool_activity == [
        'call get_balance({"account":"checking"})',
        f"result get_balance: {TOOL_RESULT}",
    ]
    spans = instrumented.spans.get_finished_spans()
    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time)
    first_ns = min(s.start_time for s in chats)
    metadata = case.metadata
    assert metadata["conversation_id"] == CONVERSATION and metadata["model"] == "gpt-4o"
    assert metadata["service_name"] == "harbor-bot"
    assert metadata["span_ids"] == [format(s.context.span_id, "016x") for s in chats]
    assert len(metadata["trace_ids"]) == 3 and metadata["trace_id"] == format(chats[0].context.trace_id, "032x")
    assert metadata["started_at"].startswith(chat_date(case)) and chat_date(case) is not None
    assert abs(_seconds(metadata["started_at"]) - first_ns / 1e9) < 1e-3


def _seconds(iso):
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def collector_lines(recorder):
    """The spans as the Collector's file exporter writes them: one export request a line, here a
    line per trace (a batch), and the log records' export on a line of its own when there are any."""
    document = recorder.traces_json()
    lines = []
    [resource] = document["resourceSpans"]
    for scope in resource["scopeSpans"]:
        for trace_id in dict.fromkeys(span["traceId"] for span in scope["spans"]):
            spans = [span for span in scope["spans"] if span["traceId"] == trace_id]
            lines.append({"resourceSpans": [{**resource, "scopeSpans": [{**scope, "spans": spans}]}]})
    logs = recorder.logs_json()
    if logs.get("resourceLogs"):
        lines.append(logs)
    return lines


def write_lines(path, lines):
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def test_one_export_a_line_as_the_collector_writes_them_reads_as_the_whole_export(judge, instrumented, tmp_path):
    agent_conversation(judge, instrumented)
    path = write_lines(tmp_path / "traces.jsonl", collector_lines(instrumented))

    [record] = list(InputSet([str(path)]).records())

    assert record.problems == [] and record.case.id == CONVERSATION and len(record.case.turns) == 3


def legacy_conversation(judge, recorder, capture_content):
    """The per-message events of the v1.30 conventions, as opentelemetry-instrumentation-openai-v2
    2.4b0 writes them on its legacy path: log records `gen_ai.*.message` and `gen_ai.choice`
    naming the chat span. Its `_instrument` takes that path when util-genai's
    `is_experimental_mode()` is false, which util-genai 1.1b0 (the release 2.4b0 imports) never
    says; so `Completions.create` is wrapped here with the library's own legacy wrapper, as
    `_instrument` does then. Each turn runs in the application's span carrying `session.id`."""
    from opentelemetry._logs import get_logger
    from opentelemetry.instrumentation.openai_v2.instruments import Instruments
    from opentelemetry.instrumentation.openai_v2.patch import chat_completions_create_v_old
    from opentelemetry.metrics import get_meter
    from opentelemetry.trace import get_tracer
    from wrapt import wrap_function_wrapper

    tracer = get_tracer("harbor", tracer_provider=recorder.tracer_provider)
    logger = get_logger("harbor", logger_provider=recorder.logger_provider)
    wrapper = chat_completions_create_v_old(tracer, logger, Instruments(get_meter("harbor")), capture_content)
    wrap_function_wrapper("openai.resources.chat.completions", "Completions.create", wrapper)

    @contextlib.contextmanager
    def turn(number):
        with tracer.start_as_current_span(f"turn {number}", attributes={"session.id": "sess-9"}):
            yield

    try:
        chat(judge, turn)
    finally:
        import openai.resources.chat.completions as completions
        from opentelemetry.instrumentation.utils import unwrap

        unwrap(completions.Completions, "create")


def test_the_per_message_log_records_make_the_same_conversation(judge, tmp_path):
    recorder = Recorder()
    legacy_conversation(judge, recorder, capture_content=True)
    path = write_lines(tmp_path / "traces.jsonl", collector_lines(recorder))

    [record] = list(InputSet([str(path)]).records())

    assert record.problems == [], record.problems
    case = record.case
    assert case.id == "sess-9" and case.chatbot_role == SYSTEM and case.metadata["session_id"] == "sess-9"
    assert [(turn.input, turn.actual_output) for turn in case.turns] == EXCHANGES
    assert case.turns[1].tool_activity == [
        'call get_balance({"account": "checking"})',
        f"result get_balance: {TOOL_RESULT}",
    ]


def test_messages_not_captured_are_a_problem_and_nothing_is_judged(judge, run_flowrate, tmp_path):
    recorder = Recorder()
    legacy_conversation(judge, recorder, capture_content=False)
    write_lines(tmp_path / "traces.jsonl", collector_lines(recorder))

    result = run_flowrate("eval", "traces.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl")

    assert result.returncode == ExitCode.USAGE and judge.requests == 0
    assert "traces.jsonl:1: span " in result.stderr
    assert "event gen_ai.system.message: no content: the instrumentation did not capture the messages" in result.stderr
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out.jsonl").exists()


def test_without_a_conversation_key_each_trace_is_a_conversation_and_the_run_says_so_once(
    judge, instrumented, run_flowrate, tmp_path
):
    chat(judge)
    write_lines(tmp_path / "traces.jsonl", collector_lines(instrumented))

    result = run_flowrate("eval", "traces.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl")

    assert result.returncode == 0, result.stderr
    traces = {span.context.trace_id for span in instrumented.spans.get_finished_spans()}
    rows = read_rows(tmp_path / "out.jsonl")
    assert {row["id"] for row in rows} == {format(trace, "032x") for trace in traces} and len(rows) == 4
    assert result.stderr.count(f"some spans name no conversation ({KEYS})") == 1


def _edit_span(lines, line_number, edit):
    """Apply `edit` to the attributes of the first chat span on `line_number` (1-based); its id."""
    spans = lines[line_number - 1]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    span = next(span for span in spans if span["name"].startswith("chat"))
    edit({pair["key"]: pair["value"] for pair in span["attributes"]})
    return span["spanId"]


def _set(attributes_of_span, key, text):
    attributes_of_span[key]["stringValue"] = text


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ('[{"role": "user", "parts": [', "attribute gen_ai.input.messages: not JSON"),
        ('[{"parts": [{"type": "text", "content": "hi"}]}]', "attribute gen_ai.input.messages: message 1: has no role"),
    ],
)
def test_a_broken_span_is_named_by_file_line_span_and_attribute(
    judge, instrumented, run_flowrate, tmp_path, broken, said
):
    agent_conversation(judge, instrumented)
    lines = collector_lines(instrumented)
    span_id = _edit_span(lines, 2, lambda attributes: _set(attributes, "gen_ai.input.messages", broken))
    write_lines(tmp_path / "traces.jsonl", lines)

    result = run_flowrate("validate", "traces.jsonl")

    assert result.returncode == ExitCode.USAGE
    assert f"traces.jsonl:2: span {span_id}: {said}" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_forked_history_is_reported_naming_both_spans(judge, instrumented, run_flowrate, tmp_path):
    agent_conversation(judge, instrumented)
    lines = collector_lines(instrumented)

    def fork(attributes):
        messages = json.loads(attributes["gen_ai.input.messages"]["stringValue"])
        messages[1]["parts"][0]["content"] = "Hello, a different first question"
        _set(attributes, "gen_ai.input.messages", json.dumps(messages))

    forked = _edit_span(lines, 3, fork)
    write_lines(tmp_path / "traces.jsonl", lines)

    result = run_flowrate("validate", "traces.jsonl")

    assert result.returncode == ExitCode.USAGE
    [line] = [line for line in result.stderr.splitlines() if "edited or forked" in line]
    assert f"traces.jsonl:3: span {forked}" in line and "traces.jsonl:2: span " in line and "at message 2" in line


@pytest.mark.filterwarnings("ignore:Support for class-based `config` is deprecated")  # OpenLLMetry 0.52's own models
def test_the_older_flattened_prompt_and_completion_attributes_make_the_same_conversation(judge, run_flowrate, tmp_path):
    """OpenLLMetry's opentelemetry-instrumentation-openai 0.52 writes `gen_ai.prompt.N.*` and
    `gen_ai.completion.N.*`; each turn runs in the application's span carrying `session.id`."""
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.trace import get_tracer

    recorder = Recorder()
    tracer = get_tracer("harbor", tracer_provider=recorder.tracer_provider)
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=recorder.tracer_provider)
    try:
        chat(
            judge, turn=lambda number: tracer.start_as_current_span(f"turn {number}", attributes={"session.id": "s-1"})
        )
    finally:
        instrumentor.uninstrument()
    path = write_lines(tmp_path / "traces.jsonl", collector_lines(recorder))
    chats = [span for span in recorder.spans.get_finished_spans() if span.name == "openai.chat"]
    assert len(chats) == 4 and "gen_ai.prompt.1.content" in chats[0].attributes

    [record] = list(InputSet([str(path)]).records())

    assert record.problems == [] and record.format == "otel" and record.case.id == "s-1"
    assert [(turn.input, turn.actual_output) for turn in record.case.turns] == EXCHANGES
    assert record.case.turns[1].tool_activity == [
        'call get_balance({"account": "checking"})',
        f"result get_balance: {TOOL_RESULT}",
    ]
    result = run_flowrate("eval", "traces.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert [row["id"] for row in read_rows(tmp_path / "out.jsonl")] == ["s-1"] and judge.requests == 1


def test_messages_on_the_inference_details_event_instead_of_the_span_make_the_same_conversation(
    judge, instrumented, monkeypatch, tmp_path
):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "event_only")
    agent_conversation(judge, instrumented)
    spans = instrumented.spans.get_finished_spans()
    assert not any("gen_ai.input.messages" in span.attributes for span in spans)
    path = write_lines(tmp_path / "traces.jsonl", collector_lines(instrumented))

    [record] = list(InputSet([str(path)]).records())

    assert record.problems == [] and record.case.id == CONVERSATION
    assert [turn.actual_output for turn in record.case.turns] == [
        "Hello! How can I help?",
        "Your checking balance is $120.",
        "Goodbye!",
    ]
    assert record.case.turns[1].tool_activity[0] == 'call get_balance({"account":"checking"})'


def test_two_conversations_in_one_file_stay_apart(judge, instrumented, tmp_path):
    agent_conversation(judge, instrumented)
    first = instrumented.traces_json()
    instrumented.spans.clear()
    agent_conversation(judge, instrumented, conversation="conv-harbor-2")
    path = write_lines(tmp_path / "traces.jsonl", [instrumented.traces_json(), first])

    records = list(InputSet([str(path)]).records())

    assert [record.problems for record in records] == [[], []]
    assert sorted(record.case.id for record in records) == ["conv-harbor-1", "conv-harbor-2"]
    assert [len(record.case.turns) for record in records] == [3, 3]


def test_ids_in_base64_as_protobufs_own_json_mapping_writes_them_are_read_as_hex(judge, instrumented, tmp_path):
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    agent_conversation(judge, instrumented)
    spans = instrumented.spans.get_finished_spans()
    path = tmp_path / "traces.json"
    path.write_bytes(orjson.dumps(MessageToDict(encode_spans(spans))))

    [record] = list(InputSet([str(path)]).records())

    assert record.problems == [] and record.case.id == "conv-harbor-1" and len(record.case.turns) == 3
    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time)
    assert record.case.metadata["span_ids"] == [format(s.context.span_id, "016x") for s in chats]


def test_hostile_otlp_documents_are_problems_named_by_line_never_a_traceback(run_flowrate, tmp_path):
    chat_span = {
        "traceId": 5,
        "spanId": [],
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
    }
    lines = [
        {"resourceSpans": [1, {"resource": "x", "scopeSpans": [{"spans": [{"attributes": "bad"}, "span"]}]}]},
        {
            "resourceSpans": [
                {"resource": {"attributes": [{"key": "k", "value": {"arrayValue": [1]}}]}, "scopeSpans": "x"}
            ]
        },
        {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"kvlistValue": "x"}, "eventName": 3}]}]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": [chat_span]}]}]},
        {"not": "otlp"},
    ]
    write_lines(tmp_path / "traces.jsonl", lines)

    result = run_flowrate("validate", "traces.jsonl")

    assert result.returncode == ExitCode.USAGE and "Traceback" not in result.stderr
    assert (
        "traces.jsonl:4: span (no spanId): no message content: the instrumentation did not capture the messages"
        in result.stderr
    )
    assert "traces.jsonl:5: has no `resourceSpans` list (an OTLP/JSON trace export)" in result.stderr


def test_a_readers_notice_is_kept_once_however_often_the_file_is_read(judge, instrumented, tmp_path):
    chat(judge)
    path = write_lines(tmp_path / "traces.jsonl", collector_lines(instrumented))
    inputs = InputSet([str(path)])

    records = list(inputs.records())
    assert len(records) == len(list(inputs.records())) == 4

    ids = [record.case.id for record in records]
    assert inputs.notices == [
        f"{path}: some spans name no conversation ({KEYS}); each of their traces is taken as one conversation",
        beginnings_notice(path, 3, ids[0], ids[3]),
    ]


def test_langfuse_session_id_set_on_the_apps_span_as_langfuse_documents_is_the_conversation(
    judge, instrumented, tmp_path
):
    """Langfuse's guide for apps sending their own OpenTelemetry spans sets `langfuse.session.id`
    and `langfuse.user.id` on the app's span: each turn here is such a span, its chat spans
    written by opentelemetry-instrumentation-openai-v2 beneath it, one trace a turn."""
    tracer = instrumented.tracer_provider.get_tracer("harbor-app")

    @contextlib.contextmanager
    def turn(number):
        with tracer.start_as_current_span(f"turn {number}") as span:
            span.set_attribute("langfuse.session.id", "lf-session-9")
            span.set_attribute("langfuse.user.id", "user-9")
            yield

    chat(judge, turn)
    path = write_lines(tmp_path / "traces.jsonl", collector_lines(instrumented))

    [record] = list(InputSet([str(path)]).records())

    assert record.problems == [] and record.format == "otel"
    assert record.case.id == "lf-session-9" and len(record.case.turns) == 3
    assert record.case.metadata["session_id"] == "lf-session-9" and record.case.metadata["user"] == "user-9"
    assert len(record.case.metadata["trace_ids"]) == 3
