"""Reading a judge's reply into scores, with everything derived from the rubric's data:
the JSON schema asked for, the parser, the corrective re-ask and the majority of samples.

A rubric with one criterion asks for a flat object, `{"reason", "key_issues", FIELD}`,
where FIELD is `verdict` (a named level) or `rating` (1..S). A suite asks for
`{"criteria": {NAME: {"reason", "key_issues", "rating" | "verdict"}, ...}}`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from flowrate.rubric.model import Criterion, Rubric
from flowrate.scores.distribution import LevelProbs

REPLY_EXCERPT_CHARS = 2000  # of an unusable reply, kept on its error row: a screenful, enough to see what went wrong


class UnparsableReply(ValueError):
    """The judge's reply holds no usable judgement; `reply` is the text that could not be used."""

    def __init__(self, message: str, reply: str | None = None):
        super().__init__(message)
        self.reply = reply


class CopiedExample(UnparsableReply):
    """The reply repeats one of the rubric's worked examples: a judgement of another conversation."""


class ReplyCut(UnparsableReply):
    """The reply reached its token limit (`finish_reason: length`) before it held a usable judgement."""


@dataclass
class Rating:
    """One criterion's judgement: the value on its scale, its score in [0, 1], reason and key issues."""

    value: str | int
    score: float
    reason: str
    key_issues: list[str]


@dataclass
class Judgement:
    """One sample's ratings, by criterion name in the rubric's order. `text` is the reply as the
    judge wrote it, or, when it had to be repaired or partly asked again, the judgement written
    out as a clean reply (what the cache keeps). `repaired`: read from nearly valid JSON;
    `reasked`: why a re-ask was needed (None when none was); `cut`: the reply hit its token limit;
    `levels`: each criterion's distribution over its scale, read from the reply's log-probabilities
    (`scores.distribution`; a criterion without them is absent); `tokens`: those log-probabilities."""

    ratings: dict[str, Rating]
    text: str
    repaired: bool = False
    reasked: str | None = None
    cut: bool = False
    levels: dict[str, LevelProbs] = field(default_factory=dict)
    tokens: list[dict[str, Any]] | None = None


@dataclass
class Reading:
    """What one reply holds: the criteria it rates validly, and what is wrong with the others.

    `problem` is about the reply as a whole (no JSON object, invalid JSON, no "criteria");
    `problems` names what is wrong with single criteria (missing, off the scale)."""

    text: str
    ratings: dict[str, Rating]
    problems: dict[str, str]
    problem: str | None = None
    repaired: bool = False

    @property
    def usable(self) -> bool:
        return self.problem is None and not self.problems

    def describe(self) -> str:
        """What is wrong, in one line."""
        return self.problem or "; ".join(self.problems.values())


# -- reading the reply --------------------------------------------------------------------------
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
EXCERPT_CHARS = 40  # of the reply on each side of a JSON error, shown in the re-ask


def parse_reply(text: str, rubric: Rubric) -> Judgement:
    """Find the judgement in a reply (bare JSON, fenced JSON, JSON inside prose, or nearly valid
    JSON a repair makes whole) and check every value against its scale. Raises `UnparsableReply`
    saying what is wrong when any criterion is missing or off its scale."""
    reading = read_reply(text, rubric)
    if not reading.usable:
        raise UnparsableReply(reading.describe(), text)
    return Judgement(ratings=reading.ratings, text=text, repaired=reading.repaired)


def read_reply(text: str, rubric: Rubric, only: list[str] | None = None) -> Reading:
    """Every criterion a reply rates validly, and what is wrong with the rest; `only` names the
    criteria a partial re-ask asked for (default: all)."""
    wanted_names = only or [criterion.name for criterion in rubric.criteria]
    criteria = [criterion for criterion in rubric.criteria if criterion.name in wanted_names]
    if rubric.is_suite:
        wanted = lambda value: isinstance(value.get("criteria"), dict)  # noqa: E731
        missing = 'the reply holds no "criteria" object'
    else:
        field_name = criteria[0].scale.field
        wanted = lambda value: field_name in value  # noqa: E731
        missing = f'the reply has no "{field_name}" field'
    found, repaired, problem = _find_object(text, wanted)
    if found is None:
        return Reading(text, {}, {}, problem or missing)
    parts = found["criteria"] if rubric.is_suite else {criteria[0].name: found}
    ratings, problems = {}, {}
    for criterion in criteria:
        part = parts.get(criterion.name)
        if not isinstance(part, dict):
            problems[criterion.name] = f"criterion {criterion.name!r} is missing from the reply"
            continue
        try:
            ratings[criterion.name] = _rating(part, criterion)
        except UnparsableReply as wrong:
            problems[criterion.name] = str(wrong)
    return Reading(text, ratings, problems, repaired=repaired)


def _rating(part: dict[str, Any], criterion: Criterion) -> Rating:
    scale = criterion.scale
    raw = part.get(scale.field)
    expected = ", ".join(str(value) for value in reversed(scale.values))
    if raw is None:
        raise UnparsableReply(f'{criterion.name} has no "{scale.field}" (expected {expected})')
    if scale.levels is not None:
        value: str | int = str(raw).strip().lower()
        if value not in scale.levels:
            raise UnparsableReply(f"unknown {scale.field} {raw!r} for {criterion.name} (expected {expected})")
    else:
        try:
            number = float(str(raw).strip())
        except ValueError:
            number = float("nan")
        if not number.is_integer() or not 1 <= number <= scale.top_rating:
            raise UnparsableReply(f"rating {raw!r} for {criterion.name} is not on its scale 1..{scale.points}")
        value = int(number)
    issues = part.get("key_issues") or []
    if isinstance(issues, str):
        issues = [issues]
    if not isinstance(issues, list):
        issues = [str(issues)]
    return Rating(
        value=value,
        score=scale.score(value),
        reason=str(part.get("reason") or "").strip(),
        key_issues=[str(issue).strip() for issue in issues if str(issue).strip()],
    )


def _find_object(text: str, wanted) -> tuple[dict[str, Any] | None, bool, str | None]:
    """The judgement object in a reply, whether it took a repair, and what is wrong when none is found.

    Valid JSON is looked for first (the whole reply, fenced blocks, any object inside prose);
    then the span from the first `{` is repaired (json_repair: unescaped quotes, a missing
    closing brace, trailing commas), which recovers what small models get nearly right."""
    candidates = [text.strip(), *_FENCE.findall(text)]
    for chunk in candidates:
        try:
            value = orjson.loads(chunk)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict) and wanted(value):
            return value, False, None
    decoder = json.JSONDecoder()
    objects = []
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            if wanted(value):
                return value, False, None
            objects.append(value)
    start = text.find("{")
    if start < 0:
        return None, False, "the reply holds no JSON object"
    if objects:  # valid JSON, but not the judgement's shape
        return None, False, None
    span = _json_span(text, start)
    import json_repair  # imported here: only a broken reply needs it

    try:
        repaired = json_repair.loads(span)
    except Exception:  # the repair library gives up on some input: the reply stays unusable
        repaired = None
    if isinstance(repaired, dict) and wanted(repaired):
        return repaired, True, None
    return None, False, _json_error(text, start, span)


def _json_span(text: str, start: int) -> str:
    """The reply from its first `{` to its last `}` (to its end when it never closes: a cut reply)."""
    end = text.rfind("}")
    return text[start : end + 1] if end > start else text[start:]


def _json_error(text: str, start: int, span: str) -> str:
    """Where the JSON breaks, as a person or a model can find it: line, column, character, excerpt."""
    try:
        json.loads(span)
    except json.JSONDecodeError as error:
        position = start + error.pos
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
        near = text[max(position - EXCERPT_CHARS, 0) : position + EXCERPT_CHARS]
        return (
            f"the reply is not valid JSON: {error.msg} at line {line}, column {column} (character {position}),"
            f" near {near!r}"
        )
    return "the reply's JSON object is not a judgement"


# -- a judgement of another conversation ------------------------------------------------------
def _normal(text: str) -> str:
    return " ".join(str(text).split()).casefold()


_EXAMPLE_TEXTS: dict[int, tuple[Rubric, list[dict[str, tuple[str, set[str]]]]]] = {}


def _example_texts(rubric: Rubric) -> list[dict[str, tuple[str, set[str]]]]:
    """Each worked example's reason and key issues per criterion, normalised once per rubric
    (every reply is checked against them: 18 normalisations a reply before)."""
    kept = _EXAMPLE_TEXTS.get(id(rubric))
    if kept is not None and kept[0] is rubric:
        return kept[1]
    texts = []
    for example in rubric.examples:
        parts = example.reply.get("criteria", {}) if rubric.is_suite else {rubric.criteria[0].name: example.reply}
        texts.append(
            {
                name: (_normal(part.get("reason") or ""), {_normal(issue) for issue in part.get("key_issues") or []})
                for name, part in parts.items()
                if isinstance(part, dict)
            }
        )
    _EXAMPLE_TEXTS[id(rubric)] = (rubric, texts)
    return texts


def copied_example(judgement: Judgement | Reading, rubric: Rubric) -> str | None:
    """Which worked example the reply repeats, if it does: a criterion copies an example when its
    reason is the example's reason for that criterion, or one of its key issues is one of the
    example's, word for word (case and spacing aside). A reply copies the example when at least
    half of its criteria do. Returns a description, or None."""
    ratings = judgement.ratings
    if not ratings:
        return None
    given = {name: (_normal(r.reason), {_normal(issue) for issue in r.key_issues}) for name, r in ratings.items()}
    for number, (example, normalised) in enumerate(zip(rubric.examples, _example_texts(rubric)), start=1):
        copied = []
        for name, (reason, issues) in given.items():
            example_reason, example_issues = normalised.get(name, ("", set()))
            if (example_reason and reason == example_reason) or issues & example_issues:
                copied.append(name)
        if copied and len(copied) * 2 >= len(ratings):
            title = f" ({example.title})" if example.title else ""
            which = f"{len(copied)} of {len(ratings)} criteria" if rubric.is_suite else "its reason or key issues"
            return (
                f"it repeats the rubric's worked example {number}{title} word for word ({which}), a judgement of"
                " another conversation"
            )
    return None


def judgement_text(ratings: dict[str, Rating], rubric: Rubric) -> str:
    """A judgement written out as the clean reply the rubric asks for."""

    def one(criterion: Criterion) -> dict[str, Any]:
        rating = ratings[criterion.name]
        return {"reason": rating.reason, "key_issues": rating.key_issues, criterion.scale.field: rating.value}

    if not rubric.is_suite:
        return orjson.dumps(one(rubric.criteria[0])).decode()
    return orjson.dumps({"criteria": {c.name: one(c) for c in rubric.criteria}}).decode()


# -- several samples, and the derived mean ---------------------------------------------------------
def majority(judgements: list[Judgement], name: str) -> tuple[Rating, float, list[str | int]]:
    """For one criterion: the most common value (a tie goes to the lower score, the cautious
    side for a gate), the first rating that gave it, the share that agrees, and every value."""
    ratings = [judgement.ratings[name] for judgement in judgements]
    counts = Counter(rating.value for rating in ratings)
    scores = {rating.value: rating.score for rating in ratings}
    winner = max(counts, key=lambda value: (counts[value], -scores[value]))
    chosen = next(rating for rating in ratings if rating.value == winner)
    return chosen, round(counts[winner] / len(ratings), 4), [rating.value for rating in ratings]


def weighted_mean(scores: dict[str, float], weights: dict[str, float]) -> float:
    """SUM(score x weight) / SUM(weight), exact (rounding is for the screen); a criterion the
    weights do not name has weight 1."""
    total = sum(weights.get(name, 1.0) for name in scores)
    return sum(score * weights.get(name, 1.0) for name, score in scores.items()) / total if total else 0.0
