"""Real Langfuse exports of agno, AutoGen, BeeAI, the Claude Agent SDK and CrewAI apps
(langfuse/langfuse's framework traces, not committed: `langfuse_exports`), each read as the
conversation it holds: every turn in order with its texts, tool calls and results, and its
system prompt; what cannot be read is named, never judged."""

import ast
import json

from flowrate.inputs.formats import TOOL_TEXT_LIMIT
from tests.inputs.sources.langfuse_exports import langfuse_export
from tests.inputs.sources.sdk_logs import read_file


def observations(path):
    """The export's observations by id, their input and output decoded from the UI's JSON text."""
    found = {}
    for entry in json.loads(path.read_text())["observations"]:
        decoded = dict(entry)
        for side in ("input", "output"):
            if isinstance(entry[side], str):
                try:
                    decoded[side] = json.loads(entry[side])
                except json.JSONDecodeError:
                    decoded[side] = entry[side]
        found[entry["id"]] = decoded
    return found


def clipped(text):
    """`text` as a turn's tool activity shows it: cut at `TOOL_TEXT_LIMIT` characters."""
    return text if len(text) <= TOOL_TEXT_LIMIT else text[: TOOL_TEXT_LIMIT - 1] + "…"


def the_conversation(path):
    """The one record read from `path`, which must have no problem, and the read's notices."""
    records, notices = read_file(path)
    [record] = records
    assert record.problems == [], record.problems
    return record.case, notices


def test_a_crewai_task_in_langfuse_is_its_agents_system_prompt_task_and_answer():
    path = langfuse_export("crewai")
    completion = observations(path)["231c43964b7e7e63"]
    system, task = completion["input"]["messages"]
    case, notices = the_conversation(path)
    assert case.id == "a287bb31e317433610d8827617471140"
    assert case.chatbot_role == system["content"]
    assert system["content"].startswith("You are Software developer. An expert coder")
    assert [(turn.input, turn.actual_output, turn.tool_activity) for turn in case.turns] == [
        (task["content"], completion["output"], [])
    ]
    assert task["content"].startswith("\nCurrent Task: Define the HTML for making a simple website")
    assert completion["output"].startswith("I now can give a great answer  \nFinal Answer: \n```html\n<!DOCTYPE html>")
    assert notices == [f"{path}: 1 generation(s) with no conversation key (sessionId); each trace is one conversation"]


def test_an_autogen_input_written_as_role_prefixed_text_is_its_system_prompt_and_user_turn():
    """AutoGen's chat call in Langfuse: the input is one text, "system: ...\\nuser: ..."."""
    case, notices = the_conversation(langfuse_export("autogen"))
    assert case.id == "session_abc"
    assert case.chatbot_role == (
        "You are a helpful AI assistant. Solve tasks using your tools. Reply with TERMINATE when the task has been"
        " completed."
    )
    assert [(turn.input, turn.actual_output, turn.tool_activity) for turn in case.turns] == [
        ("Say 'Hello World!'", "Hello World!", [])
    ]
    assert notices == []


def test_agnos_messages_written_as_python_reprs_are_its_turns_and_the_transcript_text_copies_are_set_aside():
    """agno's OpenInference generations hold each message as its pydantic repr (`role='user'
    content='...' ...`); the OpenAI client's generation beneath each holds the same call as
    "role: text" transcript text, which is set aside and counted."""
    path = langfuse_export("agno")
    found = observations(path)
    search = found["6581e147aec6793a"]  # the tool's own span: its input, and its output as the tool wrote it
    [result] = [
        entry["output"] for entry in json.loads(path.read_text())["observations"] if entry["id"] == search["id"]
    ]
    answer = found["b38a82eaa62b551e"]["output"]["choices"][0]["message"]["content"]
    case, notices = the_conversation(path)
    assert case.id == "35cc6c90-b657-4819-b66c-c931c03ad569"
    assert (
        case.chatbot_role
        == "<additional_information>\n- Use markdown to format your answers.\n</additional_information>"
    )
    assert [(turn.input, turn.actual_output, turn.tool_activity) for turn in case.turns] == [
        (
            "What is currently trending on Twitter?",
            answer,
            [
                'call duckduckgo_search({"query":"currently trending on Twitter"})',
                clipped(f"result duckduckgo_search: {result}"),
            ],
        )
    ]
    assert search["input"] == {"query": "currently trending on Twitter"}
    assert answer.startswith("To find out what's currently trending on Twitter, you can visit the following resources")
    assert notices == [
        f"{path}: 2 call(s) of 1 conversation(s) given as 'role: text' transcript text were set aside: the same"
        " conversation's calls are given as messages (agno's, with a copy of each call beneath it)"
    ]


def test_a_beeai_agents_calls_with_null_outputs_and_a_streamed_reply_are_one_conversation():
    """BeeAI 0.1.33 through OpenInference: each chat is a `start` generation of its input (output
    null), a `success` one whose output is null and whose streamed tokens are the span attributes
    `llm.output_messages.N` (OpenTelemetry kept the last 128 attributes: the stream's first tokens
    are gone) and a `finish` one of nothing. The reply is the trace's output, which ends as the
    stream does."""
    path = langfuse_export("beeai")
    found = observations(path)
    last = found["4c5c5a7936ca24bc"]["input"]  # the third call: system, user, the agent's two steps
    final = json.loads(json.loads(path.read_text())["trace"]["output"])
    records, notices = read_file(path)
    [record] = records
    assert record.problems == []
    case = record.case
    assert case.id == "096fc09a30ab90d2431778f9ee2b3936"
    assert case.chatbot_role == last[0]["content"] and case.chatbot_role.startswith("# Available functions\n")
    [turn] = case.turns
    assert turn.input == last[1]["content"][0]["text"]
    assert turn.input.startswith("Message: I'm planning a trip to Barcelona, Spain.")
    steps = [message["content"][0]["text"] for message in last[2:]]
    assert steps[0].startswith("Thought: I will first research key attractions and landmarks in Barcelona")
    assert steps[1].startswith("Thought: I found information about Barcelona")
    reply = turn.actual_output
    assert reply.startswith(steps[0] + "\n" + steps[1] + "\n" + "Barcelona is a vibrant city known for")
    assert reply.endswith("the humidity is at 48%. It's a great time to explore the city!")
    assert reply.endswith(ast.literal_eval(final)["text"])  # the agent's answer, a Python dict's repr
    assert turn.tool_activity == []
    assert notices == [
        f"{path}: 1 generation(s) held neither input nor output (BeeAI's chat `finish` events) and were passed over",
        f"{path}: 3 generation(s) with no conversation key (sessionId); each trace is one conversation",
    ]


def test_a_claude_agent_sdk_trace_whose_later_inputs_hold_the_word_role_is_read_from_its_calls_and_tools():
    """LangSmith's Claude Agent SDK tracing logs each turn after the first with the input
    `{"content": "role"}` (the word, no message): such a turn's input is the history so far, the
    trace's earlier turns and the results of the TOOL observations since; the system prompt is on
    the `claude.conversation` span's input (`{"prompt", "system"}`)."""
    path = langfuse_export("claude-agent")
    found = observations(path)
    conversation = found["805dc5dff9e33e32"]["input"]
    case, notices = the_conversation(path)
    assert case.id == "097f1d8982fa909b8cffb14a166ec272"  # no session: the trace
    assert (
        case.chatbot_role
        == conversation["system"]
        == ("You are a friendly travel assistant who helps with weather information.")
    )
    replies = [found[key]["output"]["content"][0]["text"] for key in ("e9aac170e5d48125", "371496f71d82baed")]
    assert [(turn.input, turn.actual_output, turn.tool_activity) for turn in case.turns] == [
        (
            conversation["prompt"],
            "\n".join(replies),
            [
                'call mcp__weather__get_weather({"city":"Berlin"})',
                'call mcp__weather__get_weather({"city":"New York"})',
                "result mcp__weather__get_weather: Weather in Berlin: Cloudy, 59°F",
                "result mcp__weather__get_weather: Weather in New York: Sunny, 75°F",
            ],
        )
    ]
    assert replies[0] == "I'll check the weather in both Berlin and New York for you."
    assert replies[1].startswith("Great! Here's the current weather for both cities:")
    assert notices == [f"{path}: 4 generation(s) with no conversation key (sessionId); each trace is one conversation"]


def test_a_first_turn_whose_input_holds_only_the_word_role_is_named_and_its_conversation_never_judged(tmp_path):
    export = json.loads(langfuse_export("claude-agent").read_text())
    [first] = [entry for entry in export["observations"] if entry["id"] == "e9aac170e5d48125"]
    first["input"] = json.dumps({"content": "role"})
    path = tmp_path / "claude-agent.trace.json"
    path.write_text(json.dumps(export))
    records, _ = read_file(path)
    assert [record.case for record in records] == [None] * len(records)
    assert (
        f"{path}#0: observation 'e9aac170e5d48125': input: holds no message, only the word 'role' where its text"
        ' should be ({"content": "role"}, as LangSmith\'s Claude Agent SDK tracing writes a turn\'s input), and no'
        " earlier turn to continue"
    ) in [problem for record in records for problem in record.problems]


def test_an_input_text_is_split_into_messages_only_where_each_begins_with_a_known_role():
    from flowrate.inputs.sources.langfuse import generation_messages

    def roles(text):
        messages, _ = generation_messages(text, "reply", "input", "output")
        return [(message["role"], message["content"]) for message in messages]

    assert roles("system: Be brief.\nuser: Hi\nthere\nassistant:\nHello\nuser: Bye") == [
        ("system", "Be brief."),
        ("user", "Hi\nthere"),
        ("assistant", "\nHello"),
        ("user", "Bye"),
    ]
    for kept in (
        "user: just one",
        "Note: user: hi\nassistant: hello",
        "Hi\nuser: hi\nassistant: hello",
        "User: a\nBot: b",
    ):
        assert roles(kept) == [("user", kept)]


def test_a_message_written_as_a_python_object_is_read_from_its_literals_and_nothing_of_it_is_run(tmp_path):
    from flowrate.inputs.sources.messages import python_message

    marker = tmp_path / "ran"
    assert python_message("Message(role='assistant', content='Hi, (there)=', tool_calls=None)") == {
        "role": "assistant",
        "content": "Hi, (there)=",
        "tool_calls": None,
    }
    given = f"role='user' content=open({str(marker)!r}, 'w').write('x') name=None timer=<Timer object at 0x1>"
    assert python_message(given) == {"role": "user", "name": None}
    assert not marker.exists()
    assert python_message("role='user' content='unterminated") is None


def test_a_streamed_reply_that_lost_its_first_tokens_is_named_when_the_traces_output_does_not_end_as_it_does(
    tmp_path,
):
    export = json.loads(langfuse_export("beeai").read_text())
    export["trace"]["output"] = json.dumps("{'role': 'assistant', 'text': 'Another answer.'}")
    path = tmp_path / "beeai.trace.json"
    path.write_text(json.dumps(export))
    records, _ = read_file(path)
    assert [record.case for record in records] == [None]
    assert records[0].problems == [
        f"{path}#0: observation 'f50f7bbf13112df9': metadata.attributes.llm.output_messages: the streamed reply lost"
        " its first 233 token(s) (OpenTelemetry keeps a span's last 128 attributes), and the trace's output does not"
        " end as it does"
    ]
