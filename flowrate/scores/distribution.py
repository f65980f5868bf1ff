"""The judge's distribution over a criterion's levels, read from the token log-probabilities of
its reply (OpenAI's `logprobs.content` shape, which vLLM, llama-server, llama-cpp-python's server
and flowrate's in-process model give), or from the frequencies of its samples.

The value of each criterion is found in the reply's JSON by position; the token where it begins
holds the judge's alternatives there. A level whose first token is its own takes that token's
probability; where several levels share a first token (a "m" for "mostly" and "minor"), the
product of the tokens' probabilities along the reply decides, as far as the reply went; the mass
that no level takes (another word, a token the server did not list) is the mass outside the scale,
and the levels' probabilities are renormalised over the scale without it."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from flowrate.judge.logprobs import Tokens, tokens_fault
from flowrate.rubric.model import Criterion, Rubric, Scale


@dataclass
class LevelProbs:
    """A criterion's distribution: each value's probability renormalised over the scale (`probs`,
    keyed by the level's name, or a rating as text), and the mass that fell outside it
    (`outside`, in [0, 1]: other tokens and those the judge did not list)."""

    probs: dict[str, float]
    outside: float = 0.0

    def expected_score(self, scale: Scale) -> float:
        """Σ p × score over the scale's values."""
        return sum(
            p * scale.score(value if scale.levels is not None else int(value)) for value, p in self.probs.items()
        )


@dataclass(frozen=True)
class MostLikely:
    """The judge's most likely level in a distribution: `levels`, more than one when they tie (in
    the distribution's order, the scale's: lowest score first), its probability over the scale
    (`in_scale`), and among all the judge's alternatives (`p`: the mass outside the scale counts
    against it, so a level the judge gave 0.2 is at 0.2 however little the other levels had)."""

    levels: tuple[str, ...]
    in_scale: float
    p: float

    @property
    def tied(self) -> bool:
        """Whether several levels share the top: the judge did not choose between them."""
        return len(self.levels) > 1

    def unsure_at(self, bound: float) -> bool:
        """Whether the judge was unsure at `bound` (`--uncertain-below`): its most likely level
        had less than `bound` of its mass, or it tied with another."""
        return self.tied or self.p < bound


def most_likely(probs: dict[str, float], outside: float | None) -> MostLikely:
    """The most likely level of a row's `probs` (renormalised over the scale, as `level_probs`)
    with `outside`, the mass that fell outside the scale (`outside_prob`; None: none). Levels tie
    when equal to the 6 places a row keeps."""
    top = max(round(p, 6) for p in probs.values())
    levels = tuple(value for value, p in probs.items() if round(p, 6) == top)
    return MostLikely(levels, top, round(top * (1.0 - (outside or 0.0)), 6))


def distributions(text: str, tokens: Tokens | None, rubric: Rubric) -> dict[str, LevelProbs]:
    """Each criterion's distribution in a reply `text` whose `tokens` carry log-probabilities;
    criteria whose value cannot be found in the tokens, or whose alternatives hold no level, are
    left out (nothing is invented). Empty when the tokens give none (`tokens_fault`: without
    tokens, with a log-probability that is no number, or when they do not spell `text`)."""
    if tokens is None or tokens_fault(text, tokens) is not None:
        return {}
    starts = value_starts(text, rubric)
    found: dict[str, LevelProbs] = {}
    for criterion in rubric.criteria:
        start = starts.get(criterion.name)
        if start is None:
            continue
        probs = distribution_at(text, tokens, start, criterion.scale)
        if probs is not None:
            found[criterion.name] = probs
    return found


def distribution_at(text: str, tokens: Tokens, start: int, scale: Scale) -> LevelProbs | None:
    """The distribution over `scale` of the value that begins at character `start` of a reply
    `text` spelled by `tokens` (checked by the caller: `tokens_fault`); None when the alternatives
    there hold none of its values."""
    ends, position = [], 0
    for token in tokens:
        position += len(str(token.get("token", "")))
        ends.append(position)
    index = next(i for i, end in enumerate(ends) if end > start)
    prefix = text[(ends[index - 1] if index else 0) : start]
    mass = _level_mass(tokens, index, prefix, "", scale, 1.0)
    total = sum(mass.values())
    if total <= 0:
        return None
    probs = {value: mass.get(value, 0.0) / total for value in map(str, scale.values)}
    return LevelProbs(probs, round(max(0.0, 1.0 - total), 6))


def _level_mass(tokens: Tokens, index: int, prefix: str, spelled: str, scale: Scale, weight: float) -> dict[str, float]:
    """The probability of each value of `scale` from token `index` on, given `spelled` (the value's
    characters so far) and `weight` (the probability of the path to here); `prefix` is the part of
    the token before the value (a quote, a space)."""
    values = [str(value) for value in scale.values]
    mass: dict[str, float] = defaultdict(float)
    token = tokens[index]
    chosen = str(token.get("token", ""))
    for alternative in _alternatives(token):
        piece = str(alternative.get("token", ""))
        if not piece.startswith(prefix):
            continue
        p = weight * math.exp(float(alternative.get("logprob", -math.inf)))
        word, closed = _value_part(spelled + piece[len(prefix) :], scale)
        word = word.lower() if scale.levels is not None else word
        if closed:
            if word in values:
                mass[word] += p
            continue
        candidates = [value for value in values if value.startswith(word)]
        if len(candidates) == 1:
            mass[candidates[0]] += p
        elif len(candidates) > 1 and piece == chosen and index + 1 < len(tokens):
            for value, deeper in _level_mass(tokens, index + 1, "", word, scale, p).items():
                mass[value] += deeper
    return dict(mass)


def _alternatives(token: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives listed at a token, the token itself among them (some servers list it only as the token)."""
    listed = list(token.get("top_logprobs") or [])
    if not any(alternative.get("token") == token.get("token") for alternative in listed):
        listed.append({"token": token.get("token"), "logprob": token.get("logprob", -math.inf)})
    return listed


def _value_part(text: str, scale: Scale) -> tuple[str, bool]:
    """The value's characters at the start of `text`, and whether the value ends within it."""
    if scale.levels is not None:
        end = text.find('"')
        return (text, False) if end < 0 else (text[:end], True)
    digits = len(text) - len(text.lstrip("0123456789"))
    return text[:digits], digits < len(text)


def value_starts(text: str, rubric: Rubric) -> dict[str, int]:
    """Where each criterion's value begins in a reply's JSON text (after a string's opening quote),
    by the criterion's name; a criterion whose value is not where the rubric's shape puts it is left out."""
    fields = {criterion.scale.field for criterion in rubric.criteria}
    found: dict[str, int] = {}
    for path, offset in value_offsets(text):
        if rubric.is_suite and len(path) == 3 and path[0] == "criteria" and path[2] in fields:
            found.setdefault(path[1], offset)
        elif not rubric.is_suite and path == (rubric.criteria[0].scale.field,):
            found.setdefault(rubric.criteria[0].name, offset)
    return found


def value_offsets(text: str) -> list[tuple[tuple[str, ...], int]]:
    """The (key path, offset) of every scalar value under an object key in a JSON text, the first
    object on; tolerant of a cut text (what was read so far is returned)."""
    out: list[tuple[tuple[str, ...], int]] = []
    path: list[str] = []
    stack: list[str] = []  # "{" or "[" for each open container
    key: str | None = None
    expecting_value = False
    i, length = text.find("{"), len(text)
    if i < 0:
        return out
    while i < length:
        char = text[i]
        if char == '"':
            end = _string_end(text, i)
            raw = text[i + 1 : end]
            if stack and stack[-1] == "{" and not expecting_value:
                key = raw
            elif expecting_value and key is not None:
                out.append(((*path, key), i + 1))
                expecting_value = False
            i = end + 1
            continue
        if char == ":":
            expecting_value = True
        elif char in "{[":
            if char == "{" and expecting_value and key is not None:
                path.append(key)
            elif char == "{" and stack:
                path.append("")  # an object inside a list
            stack.append(char)
            expecting_value = False
            key = None
        elif char in "}]":
            if stack and stack.pop() == "{" and path:
                path.pop()
            key = None
        elif char == ",":
            expecting_value = False
        elif expecting_value and key is not None and not char.isspace():
            out.append(((*path, key), i))
            expecting_value = False
        i += 1
    return out


def _string_end(text: str, start: int) -> int:
    """The index of the quote that closes the string opening at `start` (the text's end when cut)."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i
        i += 1
    return len(text)


def from_samples(values: list[str | int], criterion: Criterion) -> LevelProbs:
    """A criterion's distribution from the frequencies of its samples' `values`."""
    counts = Counter(str(value) for value in values)
    return LevelProbs({str(value): counts.get(str(value), 0) / len(values) for value in criterion.scale.values})


def mean_of(found: list[LevelProbs]) -> LevelProbs:
    """The mean of several samples' distributions of one criterion, over the scale and the mass
    outside it, renormalised over the scale: a sample weighs by the mass it gave the scale (one
    that gave "none" 0.2 and 0.8 to other words adds 0.1 to "none" of two, not 0.5)."""
    keys = list(found[0].probs)
    outside = sum(d.outside for d in found) / len(found)
    inside = {key: sum(d.probs.get(key, 0.0) * (1.0 - d.outside) for d in found) / len(found) for key in keys}
    total = sum(inside.values())
    return LevelProbs({key: p / total for key, p in inside.items()} if total > 0 else inside, outside)
