"""The checklist request: a rubric's yes/no questions asked about the conversation a grading
request just showed the judge. The request is the grading request's messages with the questions
after them, so a judge that keeps its previous prompt's cache (llama-cpp-python, in process or
served) evaluates the rubric and the conversation once and only the questions again; the reply's
schema and how it is read are in `flowrate.scores.checklist`."""

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
    shape = ", ".join(f'{orjson.dumps(item.id).decode()}: "yes"|"no"' for item in rubric.checklist)
    ask = (
        "Do not grade the conversation this time. Answer each question below about the same"
        " conversation (the transcript between the markers above), judging the assistant's replies."
        ' Answer every question with "yes" or "no".\n'
        f"{questions}\n"
        f"Reply with one JSON object and nothing else: {{{shape}}}"
    )
    return [*judged_messages, {"role": "user", "content": ask}]
