"""The message shapes real tools write, read by the one normaliser (`inputs.sources.messages`),
on real Langfuse exports of apps built with the common frameworks (each fixture's
`.source.md` names its origin and the versions that wrote it): the OpenTelemetry GenAI
conventions' messages, Gemini and Vertex AI contents, OpenAI Responses items, the Vercel AI SDK's
messages, LangChain.js's tool messages and pydantic-ai's `gen_ai.choice` event are turns with
their texts, tool calls and results, never empty turns or a refusal."""

import json
from pathlib import Path

from flowrate.inputs.sources.messages import normalised
from tests.inputs.sources.langfuse_exports import langfuse_export
from tests.inputs.sources.sdk_logs import read_file
from tests.inputs.sources.traces import EXCHANGES, REPLIES, SYSTEM, TOOL_RESULT, USER_TURNS, Recorder

FIXTURES = Path(__file__).parent / "fixtures" / "langfuse"


def conversation(name):
    """The one conversation read from the fixture `name`: (system prompt, turns as (user text,
    reply, tool activity))."""
    records, _ = read_file(langfuse_export(name))
    [record] = records
    assert record.problems == [], record.problems
    case = record.case
    return case.chatbot_role, [(turn.input, turn.actual_output, turn.tool_activity) for turn in case.turns]


def observation(name, observation_id):
    """The generation `observation_id` of the fixture `name`, its input and output decoded."""
    trace = json.loads(langfuse_export(name).read_text())
    [found] = [entry for entry in trace["observations"] if entry["id"] == observation_id]
    return {
        side: json.loads(found[side]) if isinstance(found[side], str) else found[side] for side in ("input", "output")
    }


def test_pydantic_ai_on_gemini_in_langfuse_reads_its_genai_convention_messages_as_a_real_turn():
    system, [(question, reply, tools)] = conversation("pydantic-ai-with-gemini")
    assert question.startswith("what is 1+1?\nOutput format:\n```json")
    assert reply.startswith('{"answer": "2", "rationale": "The operation 1+1 is a basic arithmetic addition.')
    assert (system, tools) == (None, [])


def test_pydantic_ai_tool_results_under_result_are_the_tool_messages_the_judge_reads():
    """pydantic-ai writes a `tool_call_response` part's result under `result` (the conventions'
    key is `response`), in a user message beside the tool calls' ids."""
    given = observation("pydantic-ai-tools", "00d2804abb764b1b")["input"]
    messages = normalised(given, "input")
    assert [message["role"] for message in messages] == ["system", "user", "assistant", "tool", "tool", "tool"]
    calls = [(call["function"]["name"], call["function"]["arguments"]) for call in messages[2]["tool_calls"]]
    assert calls == [
        ("get_pun_suggestion", '{"topic":"programming"}'),
        ("get_dad_joke_suggestion", '{"topic":"programming"}'),
        ("get_one_liner_suggestion", '{"topic":"programming"}'),
    ]
    assert [(message["name"], message["content"]) for message in messages[3:]] == [
        (
            "get_pun_suggestion",
            "Pun idea: Play on words related to 'programming' - think about homophones or double meanings",
        ),
        (
            "get_dad_joke_suggestion",
            "Dad joke idea: Use a classic setup-punchline format about 'programming' with a groan-worthy twist",
        ),
        (
            "get_one_liner_suggestion",
            "One-liner idea: Make a quick, witty observation about 'programming' in a single sentence",
        ),
    ]


def test_microsoft_extensions_ai_messages_keep_the_tool_response_and_hide_its_reasoning_parts():
    system, [(question, reply, tools)] = conversation("csharp-agent-with-gemini")
    assert question.startswith("What are my month over month performance insights the past quarter, by cost,")
    assert reply.startswith("I couldn't retrieve the month-over-month performance insights for the past quarter")
    assert "ReasoningContent" not in reply and "protectedData" not in reply
    assert [entry.split("(")[0].split(":")[0] for entry in tools] == [
        "call get_custom_report",
        "result get_custom_report",
        "call final_result",
    ]
    assert tools[1].startswith('result get_custom_report: {"response_status":"Error","message":"ERROR: No data found')
    # Microsoft.Extensions.AI writes the system prompt as the generation's gen_ai.system_instructions
    assert system.startswith("You are an expert on statistical analysis for the adtech company Criteo.\nYour goal")


def test_pydantic_ai_events_and_its_gen_ai_choice_body_are_the_system_prompt_question_and_reply():
    system, [(question, reply, tools)] = conversation("pydantic-ai")
    assert system == "You are a helpful assistant that answers questions clearly and concisely."
    assert question == "What is Langfuse?"
    assert reply.startswith("Langfuse is a tool designed for observability and monitoring of applications")
    assert tools == []


def test_google_adk_contents_give_the_system_instruction_the_function_call_and_its_response():
    system, [(question, reply, tools)] = conversation("google-adk")
    assert system == 'Always greet using the say_hello tool.\n\nYou are an agent. Your internal name is "hello_agent".'
    assert (question, reply) == ("hi", "Hello Langfuse 👋!\n")
    assert tools == ["call say_hello({})", 'result say_hello: {"greeting":"Hello Langfuse 👋"}']


def test_vertex_ai_and_google_genai_requests_and_candidates_are_a_turn():
    for name in ("vertex-ai", "google-gemini"):
        system, [(question, reply, tools)] = conversation(name)
        assert question == "What is Langfuse?", name
        assert reply.startswith("**Langfuse** is an **open-source observability and evaluation platform"), name
        assert (system, tools) == (None, []), name


def test_openai_agents_responses_items_and_response_object_keep_the_tool_call_and_the_instructions():
    system, [(question, reply, tools)] = conversation("openai-agents")
    assert system == "You are a helpful agent."
    assert question == "What's the weather in Tokyo?"
    assert reply.startswith("The weather in Tokyo is currently sunny.")
    assert tools == ['call get_weather({"city":"Tokyo"})', "result get_weather: The weather in Tokyo is sunny."]


def test_vercel_ai_sdk_messages_its_prompt_and_its_listed_tool_calls_are_read():
    """Read message by message: the example's app stopped at the tool call, so its trace has no reply."""
    call = [
        {
            "id": "call_DgKARp7a7IhJPDczfifMp6Ra",
            "function": {"name": "getWeather", "arguments": '{"location":"San Francisco"}'},
        }
    ]
    question = [{"role": "user", "content": "What is the weather like today in San Francisco?"}]
    for observation_id in ("1dc6768109615657", "91a17a2274bfd23f"):  # ai.generateText ({prompt}), its doGenerate
        given = observation("vercel-aisdk", observation_id)
        assert normalised(given["input"], "input") == question, observation_id
        assert normalised(given["output"], "output", None, "assistant") == [
            {"role": "assistant", "content": None, "tool_calls": call}
        ], observation_id


def test_a_langchain_js_tool_message_whose_role_is_the_tool_name_is_that_tool_result():
    system, [(question, reply, tools)] = conversation("langgraph-js")
    assert question == "What's the weather in San Francisco?"
    assert reply.startswith("It's always sunny in San Francisco! \n\nWould you like more details")
    assert tools == [
        'call get_weather({"city":"San Francisco"})',
        "result get_weather: It's always sunny in San Francisco!",
    ]
    assert system is None


def pydantic_ai_conversation(judge, recorder):
    """The conversation of `traces.chat` through pydantic-ai's own agent (its OpenAI chat model
    against the scripted judge, a real tool, the history carried from run to run), its spans
    written by pydantic-ai's instrumentation (format version 5, its default), which names the
    conversation by `gen_ai.conversation.id` itself."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    judge.script(SYSTEM, *REPLIES)
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=judge.base_url, api_key="sk-test"))
    settings = InstrumentationSettings(tracer_provider=recorder.tracer_provider)
    agent = Agent(model, system_prompt=SYSTEM, capabilities=[Instrumentation(settings=settings)])

    @agent.tool_plain
    def get_balance(account: str) -> dict:
        return json.loads(TOOL_RESULT)

    history = []
    for text in USER_TURNS:
        history = agent.run_sync(text, message_history=history).all_messages()
    judge.reset()


def test_pydantic_ai_spans_give_the_tool_result_it_writes_under_result(judge, tmp_path):
    from tests.inputs.sources.test_otel import collector_lines, write_lines

    recorder = Recorder()
    pydantic_ai_conversation(judge, recorder)
    path = write_lines(tmp_path / "traces.jsonl", collector_lines(recorder))

    records, _ = read_file(path)

    [record] = records
    assert record.problems == [] and record.format == "otel"
    case = record.case
    assert case.id == case.metadata["conversation_id"] and case.chatbot_role == SYSTEM
    assert [(turn.input, turn.actual_output) for turn in case.turns] == EXCHANGES
    assert case.turns[1].tool_activity == [
        'call get_balance({"account": "checking"})',
        'result get_balance: {"balance":120}',
    ]


def vercel_spans():
    """The spans the Vercel AI SDK recorded of one generateText with a tool (fixtures/vercel-ai-sdk)."""
    path = FIXTURES.parent / "vercel-ai-sdk" / "spans.json"
    return json.loads(path.read_text())["spans"]


def test_vercel_ai_sdk_prompt_messages_give_the_tool_call_and_its_json_tool_result():
    [first, second] = [span["attributes"] for span in vercel_spans() if span["name"] == "ai.generateText.doGenerate"]
    assert normalised(json.loads(second["ai.prompt.messages"]), "ai.prompt.messages") == [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_0", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}],
        },
        {"role": "tool", "content": '{"city":"Paris","temp_c":18}', "name": "get_weather"},
    ]
    listed = normalised(json.loads(first["ai.response.toolCalls"]), "ai.response.toolCalls", None, "assistant")
    assert listed == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_0", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}],
        }
    ]


def test_vercel_ai_sdk_prompt_of_system_and_text_is_the_system_prompt_and_user_message():
    [call] = [span["attributes"] for span in vercel_spans() if span["name"] == "ai.generateText"]
    assert normalised(json.loads(call["ai.prompt"]), "ai.prompt") == [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What's the weather in Paris?"},
    ]


class _Sent(Exception):
    """Raised once boto3 has written a request, so that nothing is sent."""


def bedrock_converse_request(messages):
    """The body boto3 writes for a Bedrock `converse` call (after checking the arguments against
    botocore's bedrock-runtime service model), taken before it would be sent."""
    import boto3

    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="AKIDTEST", aws_secret_access_key="test"
    )
    written = []

    def take(request, **_):
        written.append(json.loads(request.body))
        raise _Sent

    client.meta.events.register("before-send.bedrock-runtime.Converse", take)
    tools = {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": {"type": "object"}}}}]}
    try:
        client.converse(
            modelId="anthropic.claude-3-haiku-20240307-v1:0",
            system=[{"text": "You are a weather assistant."}],
            messages=messages,
            toolConfig=tools,
        )
    except _Sent:
        pass
    [body] = written
    return body


def test_bedrock_converse_messages_give_the_tool_use_and_its_json_result_and_hide_reasoning():
    body = bedrock_converse_request(
        [
            {"role": "user", "content": [{"text": "What's the weather in Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "The tool knows.", "signature": "c2ln"}}},
                    {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "tooluse_1",
                            "content": [{"json": {"temp_c": 18}}],
                            "status": "success",
                        }
                    }
                ],
            },
            {"role": "assistant", "content": [{"text": "It is 18°C in Paris."}]},
        ]
    )
    assert normalised(body, "request") == [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "tooluse_1", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}],
        },
        {"role": "tool", "content": '{"temp_c":18}', "name": "get_weather"},
        {"role": "assistant", "content": "It is 18°C in Paris."},
    ]


def test_koogs_tool_calls_written_as_text_then_as_tool_messages_are_the_calls_of_one_history():
    system, turns = conversation("koog")
    assert system == "You are a nice and polite assistant."
    assert turns == [
        (
            "Greet and say goodbye to the user in the same message. Use provided tools to generate a proper greeting."
            " The user name is Bob.",
            "Hello my darling Bob! And, bye my dear Bob!",
            [
                'call HelloTool({"name": "Bob"})',
                "result HelloTool: Hello my darling Bob!",
                'call ByeTool({"name": "Bob"})',
                "result ByeTool: Bye my dear Bob!",
            ],
        )
    ]


def test_a_reply_whose_text_is_a_json_list_of_other_things_stays_its_text():
    for text in ('[{"function": "summary", "type": "note"}]', '[{"a": 1}]', "[{not json"):
        assert normalised([{"role": "assistant", "content": text}], "output") == [
            {"role": "assistant", "content": text}
        ]
