"""The yes/no requests asked beside a grading request: a rubric's checklist (`--score checklist`),
the grading request's messages with the questions after them, so a judge that keeps its previous
prompt's cache (llama-cpp-python, in process or served) evaluates the rubric and the conversation
once and only the questions again; and the per-turn look (`--turn-look`), which asks of each
assistant reply on its own, through a window of the turns before it, whether it breaks the flow.
The replies' schemas and how they are read are in `flowrate.scores.checklist`."""

from __future__ import annotations

from flowrate.errors import ConfigError
from flowrate.inputs.conversation import EvalTestCase
from flowrate.rubric.model import Rubric


def checklist_keys(rubric: Rubric) -> list[str]:
    """The keys of a checklist reply: each question's number in the rubric's order ("1", "2", ...).
    Numbers, not the questions' ids: with Qwen2.5's tokenizer an answer (`", "1": "yes`) is 6
    tokens under a number and 7-10 under the flow rubric's ids (`", "misses_frustration": "yes`),
    and a hosted judge bills what it writes; the reader gives each answer back under its
    question's id (`flowrate.scores.checklist`)."""
    return [str(number) for number in range(1, len(rubric.checklist) + 1)]


def checklist_messages(rubric: Rubric, judged_messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The chat messages that ask `rubric`'s checklist about the conversation of
    `judged_messages` (the grading request's messages, the conversation last): those messages
    unchanged, then one user message with the numbered questions and the reply's shape."""
    if not rubric.checklist:
        raise ConfigError(f"rubric {rubric.name} declares no checklist: add `checklist:` questions to use it")
    if not judged_messages or judged_messages[-1].get("role") != "user":
        raise ValueError("the judged messages end with the grading request's user message (the conversation)")
    keys = checklist_keys(rubric)
    questions = "\n".join(f"{key}. {item.question}" for key, item in zip(keys, rubric.checklist))
    # Short: read after the conversation on every call, these tokens are what the checklist costs
    # beyond the verdict (a judge keeping its prompt's cache holds the rubric and the conversation
    # from the calls before; a hosted one bills them again, at its cached price where it caches
    # them); the schema gives the shape.
    shown = [f'"{key}": "{answer}"' for key, answer in zip(keys, ("yes", "no"))]
    ask = (
        'Answer "yes" or "no" about the assistant in that conversation.\n'
        f"{questions}\n"
        f"Reply in JSON, each number and its answer: {{{', '.join(shown)}, ...}}"
    )
    return [*judged_messages, {"role": "user", "content": ask}]


# What the per-turn look asks of each reply where a rubric declares no `turn_question`: the
# lapses ABC-Eval's people marked "ignore" and "irrelevant", which the two exchanges before a
# reply show (a repetition or a contradiction can reach back further than the window).
TURN_QUESTION = (
    "it ignores what the user just said, not responding to their answer, question or request, or jumps to an"
    " unrelated topic"
)
TURN_KEY = "follows_on"  #: the per-turn look's reply: {"follows_on": "yes"|"no"}, "no" when the reply breaks the flow
EXCHANGES_SHOWN = 2  #: the exchanges before the user's turn a per-turn look shows: the topic, in few tokens


def turn_window_messages(rubric: Rubric, turns: list[EvalTestCase], index: int) -> list[dict[str, str]]:
    """The chat messages that ask whether the reply of `turns[index]` breaks the flow, the judge
    shown only that turn and the `EXCHANGES_SHOWN` before it. Asked of each reply on its own: asked
    of every turn at once after the whole transcript, the 1.5B judge answered by the turns'
    positions (docs/judges.md); the system message, the same for every turn, is the prefix a judge
    keeps in its cache."""
    before = turns[max(0, index - EXCHANGES_SHOWN) : index]
    shown = "\n".join(f"User: {one_line(turn.input)}\nChatbot: {one_line(turn.actual_output)}" for turn in before)
    turn = turns[index]
    system = (
        'You check one reply of a chatbot in a conversation. Answer "no" if the reply breaks the flow'
        f' ({rubric.turn_question or TURN_QUESTION}); otherwise answer "yes".'
    )
    ask = (
        f"Earlier:\n{shown or '(the conversation starts here)'}\n\n"
        f"User: {one_line(turn.input)}\nChatbot reply: {one_line(turn.actual_output)}\n\n"
        "Does the chatbot's reply follow on from what the user just said?"
        f' Reply with one JSON object and nothing else: {{"{TURN_KEY}": "yes"|"no"}}'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": ask}]


def one_line(text: str | None) -> str:
    """A message of the window on one line, its line breaks spaces: only the window's own labels
    ("User: ", "Chatbot: ", "Chatbot reply: ") begin a line, so a message holding
    "\\nChatbot reply: ..." cannot pass for the window's structure. A text without line breaks is
    unchanged (every ABC-Eval turn the look was measured on: docs/judges.md)."""
    return " ".join((text or "").splitlines())
