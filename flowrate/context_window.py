"""Fitting a long conversation into the judge's context: keep the opening and the end."""

from __future__ import annotations

from collections.abc import Callable

from flowrate.models import ConversationalEvalTestCase, EvalTestCase
from flowrate.rubric import elision_line, turn_line

HEAD_TURNS = 2  # opening turns kept: they set up what the user wants
PER_MESSAGE_OVERHEAD = 8  # role and separators a chat template adds to each message
CLIP_MARK = " […] "


def fit_turns(
    case: ConversationalEvalTestCase, available: int, count_tokens: Callable[[str], int]
) -> tuple[ConversationalEvalTestCase, tuple[int, int] | None]:
    """Keep the first turns and as many of the latest turns as fit in `available` tokens.

    Returns the conversation to show and the (first, last) turn numbers left out (None when
    no turn is). The same object comes back when everything fits; anything else was cut.
    The last turn is always kept, clipped in its middle if it alone is too long: the end
    state matters most.
    """
    costs = [count_tokens(turn_line(number, turn)) for number, turn in enumerate(case.turns, start=1)]
    if sum(costs) <= available:
        return case, None
    available -= count_tokens(elision_line((1, len(case.turns))))
    total = len(case.turns)
    head = min(HEAD_TURNS, total - 1)
    while head and sum(costs[:head]) + costs[-1] > available:
        head -= 1
    used = sum(costs[:head])
    tail_start = total
    while tail_start > head and used + costs[tail_start - 1] <= available:
        tail_start -= 1
        used += costs[tail_start]
    turns = list(case.turns)
    if tail_start == total:  # not even the last turn fits whole
        turns[-1] = _clip_turn(turns[-1], costs[-1], available - used)
        tail_start = total - 1
    kept = turns[:head] + turns[tail_start:]
    elided = (head + 1, tail_start) if tail_start > head else None
    return case.model_copy(update={"turns": kept}), elided


def _clip_turn(turn: EvalTestCase, cost: int, room: int) -> EvalTestCase:
    share = max(room, 1) / max(cost, 1) * 0.9
    return EvalTestCase(
        input=_clip(turn.input, share),
        actual_output=None if turn.actual_output is None else _clip(turn.actual_output, share),
        tool_activity=[_clip(line, share) for line in turn.tool_activity],
    )


def _clip(text: str, share: float) -> str:
    keep = int(len(text) * share)
    if keep >= len(text):
        return text
    return text[: keep // 2] + CLIP_MARK + text[len(text) - keep // 2 :]
