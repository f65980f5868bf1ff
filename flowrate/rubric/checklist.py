"""The yes/no requests asked about the conversation a grading request just showed the judge: a
rubric's checklist (`--score checklist`), and the per-turn look (`--turn-look`), which asks of
each assistant reply whether it breaks the flow. Each is the grading request's messages with the
questions after them, so a judge that keeps its previous prompt's cache (llama-cpp-python, in
process or served) evaluates the rubric and the conversation once and only the questions again;
the replies' schemas and how they are read are in `flowrate.scores.checklist`."""

from __future__ import annotations

import orjson

from flowrate.errors import ConfigError
from flowrate.rubric.model import Rubric


def checklist_messages(rubric: Rubric, judged_messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The chat messages that ask `rubric`'s checklist about the conversation of
    `judged_messages` (the grading request's messages, the conversation last): those messages
    unchanged, then one user message with the questions and the reply's shape."""
    if not rubric.checklist:
        raise ConfigError(f"rubric {rubric.name} declares no checklist: add `checklist:` questions to use it")
    if not judged_messages or judged_messages[-1].get("role") != "user":
        raise ValueError("the judged messages end with the grading request's user message (the conversation)")
    questions = "\n".join(f"- {orjson.dumps(item.id).decode()}: {item.question}" for item in rubric.checklist)
    # Short: read after the conversation on every call, these tokens are what the checklist costs
    # in process (the 1.5B judge reads about 50 a second on 2 cores); the schema gives the shape.
    shown = [f'{orjson.dumps(item.id).decode()}: "{answer}"' for item, answer in zip(rubric.checklist, ("yes", "no"))]
    ask = (
        'Now answer each question below about the assistant\'s replies in that conversation, "yes" or "no".\n'
        f"{questions}\n"
        f"Reply with one JSON object of each question's id and its answer, nothing else: {{{', '.join(shown)}, ...}}"
    )
    return [*judged_messages, {"role": "user", "content": ask}]


# What the per-turn look asks of each reply where a rubric declares no `turn_question`: the
# lapses ABC-Eval's people marked turn by turn (ignoring, irrelevant, redundant), in the flow
# rubric's words.
TURN_QUESTION = (
    "it ignores or does not answer what the user said just before it, goes off topic, contradicts"
    " itself, or repeats itself or asks again for something already said"
)


def turn_messages(rubric: Rubric, judged_messages: list[dict[str, str]], turns: list[int]) -> list[dict[str, str]]:
    """The chat messages that ask, of each of `turns` (the numbers the transcript of
    `judged_messages` shows), whether its assistant reply breaks the flow: those messages
    unchanged, then one user message with the question and the reply's shape, a key per turn."""
    if not turns:
        raise ValueError("the per-turn look needs at least one turn with an assistant reply")
    if not judged_messages or judged_messages[-1].get("role") != "user":
        raise ValueError("the judged messages end with the grading request's user message (the conversation)")
    shown = [f'"{number}": "yes"|"no"' for number in turns]
    if len(shown) > 3:
        shown = [*shown[:2], "...", shown[-1]]
    ask = (
        "Do not grade the conversation this time. Go through the same conversation (the transcript"
        ' between the markers above) turn by turn. For each turn, answer "yes" if its assistant reply'
        f' breaks the flow ({rubric.turn_question or TURN_QUESTION}), else "no".\n'
        f"Reply with one JSON object and nothing else, a key per turn number: {{{', '.join(shown)}}}"
    )
    return [*judged_messages, {"role": "user", "content": ask}]
