"""Reading a judge's reply by a rubric: its judgement when usable, else what the one re-ask must
say and which criteria it asks again for, and the judgement after that re-ask: the judging step
(`step.Judging`) reads replies by these rules, whatever engine sent the requests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowrate.rubric.model import Rubric
from flowrate.scores.distribution import distributions
from flowrate.scores.reading import (
    REPLY_EXCERPT_CHARS,
    CopiedExample,
    Judgement,
    Reading,
    ReplyCut,
    UnparsableReply,
    copied_example,
    judgement_text,
    parse_reply,
    read_reply,
)


@dataclass
class Look:
    """One reply read: its `judgement` when usable, else what the re-ask must say (`why`), the
    criteria to ask again for (`only`; None: the whole reply), the error `kind` it would be, and
    the `reading` whose usable criteria a partial re-ask keeps."""

    judgement: Judgement | None
    kind: type[UnparsableReply] = UnparsableReply
    why: str = ""
    only: list[str] | None = None
    reading: Reading | None = None


Tokens = list[dict[str, Any]] | None  # a reply's tokens with their log-probabilities


def judged(text: str, tokens: Tokens, rubric: Rubric, judgement: Judgement) -> Judgement:
    """`judgement` read from the reply `text`, with the distributions its `tokens` hold."""
    judgement.tokens = tokens
    judgement.levels = distributions(text, tokens, rubric)
    return judgement


def first_look(rubric: Rubric, reply_limit: int | None, text: str, cut: bool, tokens: Tokens = None) -> Look:
    """Read a reply `text` by `rubric` (`cut`: it stopped at its token limit, `reply_limit`;
    `tokens`: its log-probabilities, None without); see `Look`."""
    reading = read_reply(text, rubric)
    problem = problem_of(rubric, reply_limit, reading, cut)
    if problem is None:
        return Look(judged(text, tokens, rubric, Judgement(reading.ratings, text, repaired=reading.repaired, cut=cut)))
    kind, why, only = problem
    return Look(None, kind, why, only, reading)


def second_look(
    rubric: Rubric,
    reply_limit: int | None,
    text: str,
    cut: bool,
    look: Look,
    retry_text: str,
    retry_cut: bool,
    retry_tokens: Tokens = None,
) -> Judgement:
    """The judgement by `rubric` after a re-ask: `retry_text` is the reply to the re-ask `look`
    called for after `text` (`cut`, `retry_cut`: each stopped at `reply_limit`; `retry_tokens`:
    the re-ask reply's log-probabilities). When only some criteria of a suite were asked again,
    the others are kept from `text`, and the judgement, written out anew, has no distribution
    (no tokens spell it). Raises `UnparsableReply`, `CopiedExample` or `ReplyCut` (with both replies) when the
    re-ask's reply is unusable too."""
    why, only = look.why, look.only
    again = read_reply(retry_text, rubric, only)
    still = problem_of(rubric, reply_limit, again, retry_cut, only)
    if still is not None:
        kind, wrong, _ = still
        replies = f"{excerpt(text)}\n--- the reply to the re-ask ---\n{excerpt(retry_text)}"
        said = f"{wrong} (and again after a re-ask)" if wrong == why else f"{wrong} (asked again after: {why})"
        raise kind(said, replies)
    reading = look.reading  # set whenever `only` is (`first_look`)
    if not only or reading is None:
        return judged(
            retry_text, retry_tokens, rubric, Judgement(again.ratings, retry_text, again.repaired, why, retry_cut)
        )
    ratings = {c.name: (again.ratings.get(c.name) or reading.ratings[c.name]) for c in rubric.criteria}
    repaired = reading.repaired or again.repaired
    return Judgement(ratings, judgement_text(ratings, rubric), repaired, why, cut or retry_cut)


def problem_of(
    rubric: Rubric, reply_limit: int | None, reading: Reading, cut: bool, only: list[str] | None = None
) -> tuple[type[UnparsableReply], str, list[str] | None] | None:
    """What makes a reply's `reading` by `rubric` unusable (`cut`: it stopped at `reply_limit`;
    `only`: the criteria a re-ask asked for): its kind, what to tell the judge, and the criteria
    to ask again for (None: the whole reply). None for a usable reply."""
    if reading.usable:
        copied = copied_example(reading, rubric)
        return (CopiedExample, copied, None) if copied else None
    if cut:
        return (
            ReplyCut,
            f"it stopped at its limit of {reply_limit} tokens before the JSON object was complete;"
            " keep the reason to a few sentences and list only the most serious key issues",
            None,
        )
    if reading.problem is None and rubric.is_suite and reading.ratings and only is None:
        return UnparsableReply, reading.describe(), list(reading.problems)
    return UnparsableReply, reading.describe(), None


def excerpt(text: str) -> str:
    """An unusable reply as kept on its error row: the first half of `REPLY_EXCERPT_CHARS`."""
    limit = REPLY_EXCERPT_CHARS // 2
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parsed_judgements(rubric: Rubric, texts: list[str], logprobs: list[Tokens] | None = None) -> list[Judgement]:
    """The judgements by `rubric` in replies `texts` known to hold one (cached, or a provider
    batch's), with the distributions their tokens' `logprobs` hold."""
    return [
        judged(text, logprobs[index] if logprobs and index < len(logprobs) else None, rubric, parse_reply(text, rubric))
        for index, text in enumerate(texts)
    ]


def cached_judgements(rubric: Rubric, texts: list[str], logprobs: list[Tokens] | None = None) -> list[Judgement]:
    """`parsed_judgements` of cached replies: no reply was read this run, so none is `repaired`."""
    judgements = parsed_judgements(rubric, texts, logprobs)
    for judgement in judgements:
        judgement.repaired = False
    return judgements
