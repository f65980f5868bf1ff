"""The agent frameworks, each run by itself against the scripted judge over the conversation of
`traces.chat` (fixtures/frameworks/NAME: its make.py, its sidecar naming the versions), read from
the spans its own instrumentation wrote: one conversation of three turns in order, with the
system prompt, the tool's call and result, and nothing else; and the same conversation recorded
with the instrumentation's setting that leaves the messages out is a problem naming the file,
so that no conversation of empty turns reaches the judge."""

import json
from pathlib import Path

import pytest

from tests.helpers import chat_bodies, local_eval
from tests.inputs.sources.sdk_logs import read_file
from tests.inputs.sources.traces import EXCHANGES, SYSTEM

FRAMEWORKS = Path(__file__).parent / "fixtures" / "frameworks"
CALL = 'call get_balance({"account": "checking"})'
REPR = "result get_balance: {'balance': 120}"  # the SDK gives the model Python's str() of the result
#: each framework: the reader that takes its spans, its system prompt, its second turn's tool activity
EXPECTED = {
    "openai-agents": ("openinference", SYSTEM, [CALL, REPR]),
    "agno": ("openinference", SYSTEM, [CALL, REPR]),
    "llama-index": ("openinference", SYSTEM, [CALL, REPR]),
    "autogen": ("openinference", SYSTEM, [CALL, REPR]),
    "beeai": ("openinference", SYSTEM, [CALL, REPR]),
    "agent-framework": ("otel", SYSTEM, [CALL, 'result get_balance: {"balance": 120}']),
    "google-adk": (
        "otel",
        f'{SYSTEM}\n\nYou are an agent. Your internal name is "harbor".',  # ADK adds its own line
        ['call get_balance({"account":"checking"})', 'result get_balance: {"balance":120}'],
    ),
}


@pytest.mark.parametrize("name", EXPECTED)
def test_a_frameworks_own_spans_are_one_conversation_with_its_system_prompt_turns_and_tool_call(name):
    records, notices = read_file(FRAMEWORKS / name / "spans.jsonl")
    [record] = records
    assert record.problems == [] and notices == []
    reader, system, tools = EXPECTED[name]
    case = record.case
    assert (record.format, case.id, case.chatbot_role) == (reader, "harbor-chat-1", system)
    assert [(turn.input, turn.actual_output) for turn in case.turns] == EXCHANGES
    assert [turn.tool_activity for turn in case.turns] == [[], tools, []]


@pytest.mark.parametrize("name", EXPECTED)
def test_a_frameworks_spans_with_the_messages_left_out_are_a_problem_and_never_reach_the_judge(
    name, judge, run_flowrate, tmp_path
):
    path = FRAMEWORKS / name / "hidden.jsonl"
    records, _ = read_file(path)
    assert [record.case for record in records] == [None] and records[0].problems
    assert all(str(path) in problem for problem in records[0].problems)
    assert "hid them" in records[0].problems[0] or "did not capture the messages" in records[0].problems[0]
    result = run_flowrate(*local_eval(judge, path, "--no-cache"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{path.name}:" in result.stderr
    assert chat_bodies(judge) == []


@pytest.mark.parametrize("name", EXPECTED)
def test_eval_shows_the_judge_each_frameworks_conversation_with_its_tool_call(name, judge, run_flowrate, tmp_path):
    result = run_flowrate(*local_eval(judge, FRAMEWORKS / name / "spans.jsonl", "--no-cache"))
    assert result.returncode == 0, result.stderr
    [prompt] = [body["messages"][-1]["content"] for body in chat_bodies(judge)]
    for text in ("Hi there", "Your checking balance is $120.", "Goodbye!", "get_balance"):
        assert json.dumps(text)[1:-1] in prompt, (name, text)


def test_formats_names_each_framework_in_its_readers_title_with_the_conversation_key_it_reads(run_flowrate):
    result = run_flowrate("formats")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    listed = dict(zip(lines[::2], lines[1::2], strict=True))
    titles = {title.split(":")[0]: (title, reads) for title, reads in listed.items()}
    named = {
        "openinference": (["OpenAI Agents SDK", "agno", "LlamaIndex", "AutoGen", "BeeAI"], "session.id"),
        "otel": (["Microsoft Agent Framework", "Google ADK"], "gen_ai.conversation.id"),
    }
    for reader, (frameworks, key) in named.items():
        title, reads = titles[reader]
        assert all(framework in title for framework in frameworks), title
        assert key in reads, reads
    assert "llm.input_messages.N.function.M" in titles["openinference"][1]
    assert "gen_ai.system_instructions" in titles["langfuse"][1] and "ai.toolCall.id" in titles["langfuse"][1]


def test_runs_of_one_conversation_in_traces_of_their_own_without_a_key_are_each_read_and_told():
    """Microsoft Agent Framework names no conversation of a local session: without the app's own
    span carrying `session.id`, each run is a trace, read as a conversation of its own (nothing is
    merged on a guess), and the run says that each of the first two is the beginning of the next."""
    path = FRAMEWORKS / "agent-framework" / "keyless.jsonl"
    records, notices = read_file(path)
    assert [len(record.case.turns) for record in records] == [1, 2, 3]
    first, second, third = (record.case.id for record in records)
    assert notices[-1] == (
        f"{path}: 2 conversation(s) with no conversation key begin as a longer one of the file does (the first:"
        f" {first!r}, the beginning of {third!r}): when they are the runs of one conversation, each is judged"
        " as a conversation of its own; a conversation key on their calls, or --conversation-key, makes them one"
    )
