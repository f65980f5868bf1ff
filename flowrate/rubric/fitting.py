"""Fitting a conversation to the judge's context: the opening and latest turns kept, the middle left out, and a turn too long on its own clipped in its middle."""

from __future__ import annotations

from collections.abc import Callable

from flowrate.inputs.conversation import ConversationalEvalTestCase, EvalTestCase
from flowrate.rubric.prompt import elision_line, turn_line

HEAD_TURNS = 2  # opening turns kept: they set up what the user wants
PER_MESSAGE_OVERHEAD = 8  # role and separators a chat template adds to each message
CLIP_MARK = " […] "
CHARS_PER_TOKEN_CEILING = 16  # no tokenizer packs more characters than this in a token on real text
ONE_TURN_SHARE = 0.5  # of the budget, at most, for one turn of a conversation with several
CLIP_ROUNDS = 6


def fit_turns(
    case: ConversationalEvalTestCase, available: int, count_tokens: Callable[[str], int]
) -> tuple[ConversationalEvalTestCase, tuple[int, int] | None]:
    """Keep the first turns and as many of the latest turns as fit in `available` tokens.

    Returns the conversation to show and the (first, last) turn numbers left out (None when
    no turn is). The same object comes back when everything fits; anything else was cut.
    A turn larger than its share of the budget is clipped first (see `clip_turn`); the last
    turn is always kept.
    """
    total = len(case.turns)
    cap = available if total == 1 else int(available * ONE_TURN_SHARE)
    turns = [_preclip(turn, cap) for turn in case.turns]
    costs = [count_tokens(turn_line(number, turn)) for number, turn in enumerate(turns, start=1)]
    clipped = any(new is not old for new, old in zip(turns, case.turns))
    if not clipped and sum(costs) <= available:
        return case, None
    available -= count_tokens(elision_line((1, total)))
    cap = available if total == 1 else int(available * ONE_TURN_SHARE)
    for index, cost in enumerate(costs):
        if cost > cap:
            turns[index] = clip_turn(turns[index], index + 1, cap, count_tokens)
            costs[index] = count_tokens(turn_line(index + 1, turns[index]))
    head = min(HEAD_TURNS, total - 1)
    while head and sum(costs[:head]) + costs[-1] > available:
        head -= 1
    used = sum(costs[:head])
    tail_start = total
    while tail_start > head and used + costs[tail_start - 1] <= available:
        tail_start -= 1
        used += costs[tail_start]
    if tail_start == total:  # the last turn is within the cap, so this only happens for a tiny budget
        turns[-1] = clip_turn(turns[-1], total, max(available - used, 1), count_tokens)
        tail_start = total - 1
    kept = turns[:head] + turns[tail_start:]
    elided = (head + 1, tail_start) if tail_start > head else None
    return case.model_copy(update={"turns": kept}), elided


def clip_turn(turn: EvalTestCase, number: int, room: int, count_tokens: Callable[[str], int]) -> EvalTestCase:
    """Cut the middle of the turn's longest text until the turn fits `room` tokens.

    The longest text goes first, so a huge user paste is cut and a short reply stays whole;
    each cut keeps the text's start and end."""
    for _ in range(CLIP_ROUNDS):
        cost = count_tokens(turn_line(number, turn))
        if cost <= room:
            break
        texts = {"input": turn.input, "actual_output": turn.actual_output or ""}
        texts.update({f"tool{i}": line for i, line in enumerate(turn.tool_activity)})
        field = max(texts, key=lambda name: len(texts[name]))
        text = texts[field]
        tokens = max(count_tokens(text), 1)
        target = max(tokens - (cost - room) - PER_MESSAGE_OVERHEAD, 1)
        clipped = _clip(text, int(len(text) * target / tokens))
        if field.startswith("tool"):
            activity = list(turn.tool_activity)
            activity[int(field[4:])] = clipped
            turn = turn.model_copy(update={"tool_activity": activity})
        else:
            turn = turn.model_copy(update={field: clipped})
    return turn


def _preclip(turn: EvalTestCase, cap: int) -> EvalTestCase:
    """Cut texts far longer than any budget by characters first, so the tokenizer never reads
    twenty million of them: no text over `cap` x `CHARS_PER_TOKEN_CEILING` characters fits anyway."""
    limit = max(cap, 1) * CHARS_PER_TOKEN_CEILING
    texts = [turn.input, turn.actual_output or "", *turn.tool_activity]
    if all(len(text) <= limit for text in texts):
        return turn
    return EvalTestCase(
        input=_clip(turn.input, limit),
        actual_output=None if turn.actual_output is None else _clip(turn.actual_output, limit),
        tool_activity=[_clip(line, limit) for line in turn.tool_activity],
    )


def _clip(text: str, keep: int) -> str:
    """The first and last `keep` / 2 characters, with a mark between."""
    if keep >= len(text):
        return text
    half = max(keep, 2) // 2
    return text[:half] + CLIP_MARK + text[len(text) - half :]
