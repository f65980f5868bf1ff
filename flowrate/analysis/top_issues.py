"""Top issues: the key issues of a run grouped into failure modes, ranked by severity, then by
how many conversations they cost; with a history, each mode's trend per period. Data only: the
terminal table, the CSV and the HTML section are in `flowrate.reports.top_issues`.

How a mode is formed (offline, deterministic): each key issue loses its turn reference
("turn 3:", "in turn 2", "ход 2", "no turno 2") and its values (quoted strings, emails, URLs,
order numbers, any token with a digit; an aside in brackets that held one, "(92% alike)", goes
whole), so two issues that differ only there are the same text.
The distinct texts, sorted, are turned into TF-IDF vectors of character 3- to 5-grams within
words (scikit-learn's char_wb analyzer and `TfidfTransformer`, the vectors `TfidfVectorizer`
makes), which match a word across its forms, side by side with TF-IDF vectors of whole words
(`WORD_WEIGHT` of the similarity), which tell the words that share a stem apart: "answer" (a loop
repeats its own) from "answered" (a re-ask asks again for what the user answered). Both are
language-agnostic: English, Russian and Portuguese alike. The texts are grouped by
average-linkage agglomerative clustering on cosine distance with a fixed cut (`DISTANCE_CUT`),
two texts that share fewer than `SHARED_WORDS` content words (or fewer than the shorter one has)
being put at the greatest distance: a loop ("repeats the reply of turn 1") and a re-ask ("repeats
the question after the user answered") share only their verb, and no weighting of the two cosines
kept them apart without splitting a planted mode.
Above `EXACT_LIMIT` distinct texts it goes in rounds: the `ROUND_SIZE` most frequent texts not
yet grouped (ties by text) are clustered so, and every other text not yet grouped joins the nearest
of this round's groups by average cosine distance (one minus its dot product with the group's
mean vector: the distance average linkage would join it at) if that is within the cut; the
rest go on to the next round. Nothing depends on the order of the rows or on a random state, so
the same rows give the same modes on every run; no BLAS routine is involved (the products are
scipy's sparse ones), so on every machine too.

Severity: each issue counts `1 - score` of the row that raised it (how badly that conversation
did on that metric), weighted by where it sits, from `START_WEIGHT` at the first turn to 1 at
the last (later turns weigh more, as the flow rubric says); a conversation counts its worst
issue in the mode, and the mode's severity is the mean over its conversations, in tenths, so
that close severities tie and frequency decides.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flowrate.analysis.trends import PERIODS
from flowrate.errors import ConfigError
from flowrate.rubric.model import USER_SATISFACTION

# the share of whole words in the similarity, the rest being character n-grams. N-grams alone
# read "answer" and "answered" (ответ, ответил; resposta, respondeu) as one word, and put a loop
# ("repeats its reply") and a re-ask ("repeats the question the user answered") in one mode
# (test_a_loop_and_a_re_ask_are_different_modes). Measured on tests/analysis at the cut: 0.25
# keeps them apart and every planted run whole; 0.2 joins them; 0.3 joins the two failures that
# share "for order ref"; all words and word pairs (bigrams) at 0.3 split the planted run with
# topics into 16 modes (13 allowed). bench/top_issues.py: purity 98.8 % with n-grams alone, 98.9 %.
WORD_WEIGHT = 0.25
# words shorter than this are left to the n-grams: in English, Portuguese and Russian most are
# articles, prepositions and conjunctions ("o", "já", "в", "и", "of"), and as whole words they
# put 297 issues of bench/top_issues.py's Portuguese loop ("repete o mesmo passo que o usuário
# já tentou") in its re-ask of the email ("pede o e-mail que o usuário já informou")
SHORTEST_WORD = 3
# cosine distance where average linkage stops joining: tests/analysis pass from 0.74 to 0.75; at
# 0.73 the planted run with topics comes back in 14 modes (13 allowed), at 0.76 two issues that
# differ in a quoted value split. With n-grams alone they passed from 0.70 to 0.77 but for the loop
# and the re-ask, joined at every cut from 0.70 to 0.77.
DISTANCE_CUT = 0.75
# content words two texts must share to be joined (fewer if the shorter has fewer). Issue 25's
# pair alone had a similarity of 0.36 (joined at any cut above 0.64), among the planted run 0.43:
# the rare verb they share weighs most. bench/top_issues.py: purity 98.9 % with and without.
SHARED_WORDS = 2
EXACT_LIMIT = 3000  # distinct texts clustered on their full distance matrix (3000² floats: 72 MB)
# texts clustered exactly in each round above EXACT_LIMIT: on bench/top_issues.py's 70,454 texts
# (with n-grams alone), 3000 took 3.9 s CPU (98.3 % pure), 2000 2.2 s (98.4 %), 1500 1.5 s
# (98.8 %), 1000 1.5 s (98.5 %)
ROUND_SIZE = 1500
NEAREST_BLOCK = 4_000_000  # similarities held at once when texts join their nearest group (16 MB)
START_WEIGHT = 0.5  # the weight of an issue at the first turn; one at the last turn weighs 1
LABEL_LIMIT = 80  # characters of a label
EXAMPLES = 3
DEFAULT_GROWTH = 0.05  # a mode whose share of conversations rises by more than this from one period to the next

_WORDS_FOR_TURN = r"(?:turns?|ход(?:ы|ах|е|ов)?|реплик(?:а|и|е|ах)?|сообщени(?:е|я|и|ях)|turnos?|rodadas?|mensagens?)"
_NUMBERS = r"\d+(?:\s*(?:,|and|&|и|e|-|–|to|до|a)\s*\d+)*"
_TURN_PREFIX = re.compile(rf"^\s*\(?{_WORDS_FOR_TURN}\s*({_NUMBERS})\)?\s*[:.\-–—)]\s*", re.IGNORECASE)
# Values, then turns named anywhere: each pass replaces what it finds with a mark, and a last one
# takes the word pointing at a mark ("in turn 2", "в ходе 2", "no turno 2") and the commas around
# it along. A pass runs only when its trigger is in the text: 40 % faster than one alternation.
_GONE = [
    (set("\"“«„`'"), re.compile(r"\"[^\"]*\"|“[^”]*”|«[^»]*»|„[^“”]*[“”]|`[^`]*`|(?<!\w)'[^']{1,80}'(?!\w)")),
    (set("@"), re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.]+")),  # emails (before their digits)
    (set(":"), re.compile(r"\bhttps?://\S+", re.IGNORECASE)),  # addresses
    (set("$€£₽"), re.compile(r"(?:R\$|US\$|\$|€|£|₽)\s*[\d.,]+")),  # amounts
    (set("0123456789"), re.compile(rf"\b{_WORDS_FOR_TURN}\s*{_NUMBERS}\b", re.IGNORECASE)),  # a turn named
    (set("0123456789"), re.compile(r"#?\b\w*\d[\w./:-]*")),  # order numbers, dates, times, any word with a digit
]
_POINTING = {  # the word before a turn or value that points at it: "of turn 1", "в ходе 2", "desde o turno 2"
    *("in", "at", "on", "of", "from", "since", "after", "before", "to", "until", "by"),
    *("в", "на", "из", "с", "со", "до", "после", "к"),
    *("no", "na", "nos", "nas", "em", "do", "da", "de", "desde", "após", "antes", "ao", "até"),
}
# an aside in brackets that held a value ("(92% alike)", "(12 USD)") says nothing without it: it goes whole
_ASIDE_OF_A_VALUE = re.compile(r"\s*(?:\([^()]*\0[^()]*\)|\[[^\[\]]*\0[^\[\]]*\])")
_EMPTY_BRACKETS = re.compile(r"\(\s*\)|\[\s*\]")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([,.;:!?)])")
_LONE_PUNCTUATION = re.compile(r"([,;:(])\s*(?=[,;:.)]|$)")
_NOT_WORD = re.compile(r"[^\w]+")
_FIRST_NUMBER = re.compile(r"\d+")
# the patterns read a digit only as a digit (\d, never a given one) and `_shown` drops every word
# with one, so an issue with each digit made 0 (one character for one: lengths and places kept)
# reads the same but for its turn, taken from the same place in the issue itself: the key of
# `occurrences`' cache (bench/top_issues.py: 73,652 texts read instead of 97,276)
_DIGIT = re.compile(r"[1-9]")


# -- one issue -----------------------------------------------------------------------
def _turn_reference(text: str) -> tuple[tuple[int, int] | None, str]:
    """Where in `text` the first number of the turn reference at its start is (None: no
    reference), and the issue after that reference."""
    found = _TURN_PREFIX.match(text)
    if not found:
        return None, text.strip()
    return _FIRST_NUMBER.match(text, found.start(1)).span(), text[found.end() :].strip()  # type: ignore[union-attr]


def _turn_in(text: str, where: tuple[int, int] | None) -> int | None:
    return int(text[where[0] : where[1]]) if where else None


def _shown(text: str) -> str:
    """`shown_text` of an issue without its turn reference."""
    characters = set(text)
    marked = False
    for trigger, pattern in _GONE:
        if not trigger.isdisjoint(characters):
            text, found = pattern.subn("\0", text)
            marked = marked or found > 0
    if marked:
        text = _without_marks(_ASIDE_OF_A_VALUE.sub(" ", text))
        text = _EMPTY_BRACKETS.sub("", text)
        text = _LONE_PUNCTUATION.sub("", _SPACE_BEFORE_PUNCTUATION.sub(r"\1", text))
    return " ".join(text.split()).strip(" ,;:-–—")


def _without_marks(text: str) -> str:
    """Each mark left by `_GONE` taken out with the word pointing at it and the commas around it
    (string operations: a regex for this tried every position, 28 µs a text)."""
    parts = text.split("\0")
    for index in range(len(parts) - 1):
        before = parts[index].rstrip(" ,;:")
        head, _, last = before.rpartition(" ")
        if last.lower() in _POINTING:
            before = head.rstrip(" ,;:")
        parts[index] = before
        parts[index + 1] = parts[index + 1].lstrip(" ,;")
    return " ".join(part for part in parts if part)


def _words(shown: str) -> str:
    return _NOT_WORD.sub(" ", shown.lower()).strip()


# -- the input -------------------------------------------------------------------------
@dataclass(slots=True)  # slots, not frozen: 0.2 s less in making 100,000 (bench/top_issues.py)
class Occurrence:
    """One key issue of one row."""

    id: str
    metric: str
    text: str  #: as the judge wrote it
    turn: int | None
    position: float | None  #: 0 at the first turn, 1 at the last; None when unknown
    weight: float  #: how much it counts towards severity: (1 - score) by position
    key: str  #: its grouping text
    shown: str  #: its text as a label shows it
    period: str | None = None


def _position(turn: int | None, turns: int) -> float | None:
    if turn is None or turns <= 0:
        return None
    if turns == 1:
        return 1.0
    return min(max((turn - 1) / (turns - 1), 0.0), 1.0)


def occurrences(rows: Iterable[Any], by: str | None = None, date: str = "evaluated") -> list[Occurrence]:
    """Every key issue of `rows` (results rows, or any objects with `id`, `metric`, `score`,
    `key_issues` and optionally `number_of_turns`, `evaluated_at`, `chat_date`), user_satisfaction
    rows left out (their score is the criteria's mean; the criteria carry the issues). With `by`
    (day, week or month), each is given the period of its row's `date` (evaluated or chat)."""
    found = []
    # a text judges repeat, or one that differs only in its digits, is read once
    read: dict[str, tuple[tuple[int, int] | None, str, str]] = {}
    for row in rows:
        if row.metric == USER_SATISFACTION or not row.key_issues:
            continue
        badness = 1.0 - row.score if row.score is not None else 0.5
        period = _period_of(row, by, date) if by else None
        for text in row.key_issues:
            masked = _DIGIT.sub("0", text)
            if masked not in read:
                where_turn, rest = _turn_reference(masked)
                shown = _shown(rest)
                read[masked] = (where_turn, _words(shown), shown)
            where_turn, key, shown = read[masked]
            if not key:
                continue
            turn = _turn_in(text, where_turn)
            position = _position(turn, getattr(row, "number_of_turns", 0) or 0)
            where = 0.5 if position is None else position
            weight = badness * (START_WEIGHT + (1 - START_WEIGHT) * where)
            found.append(Occurrence(row.id, row.metric, text, turn, position, weight, key, shown, period))
    return found


def _period_of(row: Any, by: str, date: str) -> str | None:
    if by not in PERIODS:
        raise ConfigError(f"option by: {by!r} must be day, week or month")
    if date == "chat":
        value = getattr(row, "chat_date", None)
        return datetime.fromisoformat(value).strftime(PERIODS[by]) if value else None
    at = getattr(row, "evaluated_at", None)
    return at.strftime(PERIODS[by]) if at else None


def conversation_ids(rows: Iterable[Any]) -> set[str]:
    """The conversations `rows` cover: a mode's share is of these."""
    return {row.id for row in rows}


# -- grouping ------------------------------------------------------------------------------
def word_counts(texts: list[str]) -> tuple[Any, Any]:
    """How often each word occurs in each of `texts` (a sparse matrix, a row per text), and the
    words (its columns): what both the vectors and the content words are read from."""
    import numpy
    from sklearn.feature_extraction.text import CountVectorizer

    words = CountVectorizer(analyzer=str.split, dtype=numpy.float32)
    return words.fit_transform(texts), words.get_feature_names_out()


def vectors(per_text: Any, names: Any) -> Any:
    """The unit vectors (sparse) of the texts counted in `per_text` (its words `names`, from
    `word_counts`) whose dot products are the similarities grouping reads: TF-IDF of character
    3- to 5-grams within words and TF-IDF of the words of `SHORTEST_WORD` characters or more, each L2-normalised, side by side with weights
    `1 - WORD_WEIGHT` and `WORD_WEIGHT` on their squares, so a dot product is the weighted
    mean of the two cosines (a text, or all texts, of only shorter words: the n-grams alone).
    The n-grams are what `TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5),
    sublinear_tf=True)` gives, made from each distinct word's n-grams once (the texts' word
    counts times the words' n-gram counts), since char_wb n-grams never cross a word: 0.9 s
    instead of 6.3 s for 70,000 texts."""
    import numpy
    import scipy.sparse
    from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer
    from sklearn.preprocessing import normalize

    grams = CountVectorizer(analyzer="char_wb", ngram_range=(3, 5), lowercase=False, dtype=numpy.float32)
    by_grams = TfidfTransformer(sublinear_tf=True).fit_transform(per_text @ grams.fit_transform(names))
    long = [index for index, word in enumerate(names) if len(word) >= SHORTEST_WORD]
    if not long:
        return by_grams
    by_words = TfidfTransformer(sublinear_tf=True).fit_transform(per_text[:, long])
    # scaled in place, in float32: a scaled copy is float64, and stacking it took 0.4 to 1.5 s more
    by_grams.data *= numpy.float32(numpy.sqrt(1 - WORD_WEIGHT))
    by_words.data *= numpy.float32(numpy.sqrt(WORD_WEIGHT))
    return normalize(scipy.sparse.hstack([by_grams, by_words], format="csr"))


def _content_words(per_text: Any, names: Any) -> Any:
    """Which content words each text counted in `per_text` has (0/1, a row per text; None when
    no text has one): its whole words of `SHORTEST_WORD` characters or more but English's
    function words (scikit-learn's list; other languages' function words count, which only lets
    more pairs join)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    content = [
        index for index, word in enumerate(names) if len(word) >= SHORTEST_WORD and word not in ENGLISH_STOP_WORDS
    ]
    if not content:
        return None
    words = per_text[:, content].tocsr()
    words.data[:] = 1.0
    return words


def _cluster(matrix: Any, frequencies: list[int], words: Any) -> list[int]:
    """The group of each text (row of `matrix`), numbered in the texts' order; `frequencies`
    (how often each text occurs) choose which texts are clustered first above `EXACT_LIMIT`;
    `words` (from `_content_words`, None: no content words) keep apart texts that share too few."""
    count = len(frequencies)
    if count < 2:
        return [0] * count
    labels = _exact(matrix, words) if count <= EXACT_LIMIT else _in_rounds(matrix, frequencies, words)
    numbering: dict[int, int] = {}
    return [numbering.setdefault(int(label), len(numbering)) for label in labels]


def _exact(matrix: Any, words: Any) -> Any:
    """Average linkage on the full cosine distance matrix, pairs sharing fewer than
    `SHARED_WORDS` of their content `words` (or than the shorter has) put at distance 1."""
    import numpy
    from sklearn.cluster import AgglomerativeClustering

    if matrix.shape[0] < 2:
        return numpy.zeros(matrix.shape[0], dtype=numpy.int64)
    distances = 1.0 - (matrix @ matrix.T).toarray().astype(numpy.float64)
    numpy.clip(distances, 0.0, 2.0, out=distances)
    if words is not None:
        shared = (words @ words.T).toarray()
        own = numpy.diag(shared)
        needed = numpy.minimum(numpy.minimum.outer(own, own), SHARED_WORDS)
        distances[shared < needed] = 1.0
    numpy.fill_diagonal(distances, 0.0)
    model = AgglomerativeClustering(
        n_clusters=None, metric="precomputed", linkage="average", distance_threshold=DISTANCE_CUT
    )
    return model.fit_predict(distances)


def _in_rounds(matrix: Any, frequencies: list[int], words: Any) -> Any:
    """Many texts: in rounds, the `ROUND_SIZE` most frequent texts not yet grouped (ties: the
    first in sorted order) are clustered exactly, and every other text not yet grouped joins the
    group of this round nearest it if that is within the cut (by its mean vector: `words` keep
    texts apart only within a round); the rest go on to the next round."""
    import numpy

    labels = numpy.full(len(frequencies), -1, dtype=numpy.int64)
    indices = numpy.arange(len(frequencies))
    left = indices[numpy.lexsort((indices, -numpy.asarray(frequencies)))]
    groups = 0
    while len(left):
        core, rest = left[:ROUND_SIZE], left[ROUND_SIZE:]
        found = _exact(matrix[core], None if words is None else words[core])
        labels[core] = found + groups
        if len(rest):
            nearest, distance = _nearest_group(matrix[core], found, matrix[rest])
            joins = distance < DISTANCE_CUT
            labels[rest[joins]] = nearest[joins] + groups
            rest = rest[~joins]
        groups += int(found.max()) + 1
        left = rest
    return labels


def _nearest_group(members: Any, found: Any, others: Any) -> tuple[Any, Any]:
    """For each row of `others`, the group in `found` (of `members`' rows) with the least
    average cosine distance to it, and that distance: one minus its dot product with the
    group's mean vector, the distance average linkage would join it at. Sparse products, in
    blocks of rows (no BLAS routine, so the same on every machine)."""
    import numpy
    import scipy.sparse

    count = int(found.max()) + 1
    sizes = numpy.bincount(found, minlength=count).astype(numpy.float32)
    which = scipy.sparse.csr_matrix(
        (1.0 / sizes[found], (found, numpy.arange(len(found)))), shape=(count, len(found)), dtype=numpy.float32
    )
    means = (which @ members).T
    nearest = numpy.empty(others.shape[0], dtype=numpy.int64)
    distance = numpy.empty(others.shape[0], dtype=numpy.float64)
    step = max(1, NEAREST_BLOCK // count)
    for start in range(0, others.shape[0], step):
        similarity = (others[start : start + step] @ means).toarray()
        best = similarity.argmax(axis=1)
        nearest[start : start + step] = best
        distance[start : start + step] = 1.0 - similarity[numpy.arange(len(best)), best]
    return nearest, distance


# -- failure modes --------------------------------------------------------------------------
class Example(BaseModel):
    """An example of a mode: the conversation, the turn the issue names (None: none named), the issue as written."""

    id: str
    turn: int | None
    text: str


class ModePoint(BaseModel):
    """A mode in one period: the conversations it cost, their share of the period's
    conversations, and whether that share grew by more than the set growth since the period before."""

    period: str
    conversations: int
    share: float
    growing: bool = False


class FailureMode(BaseModel):
    """One failure mode: its label (from its own issues' words), the conversations it cost and
    their share of the conversations given, its severity (0 to 1, in tenths), the metrics that
    raised it (most first), every member conversation id (sorted), three examples (the worst
    first), the typical turn and where that sits (start, middle or end), how many issues it
    groups, a key that names it across calls (a hash of its members' texts), and, over periods,
    its trend and whether it is growing (the latest period grew)."""

    label: str
    conversations: int
    share: float
    severity: float
    metrics: list[str]
    ids: list[str]
    examples: list[Example]
    typical_turn: int | None = None
    position: str | None = None
    issues: int = 0
    key: str = ""
    texts: list[str] = []  #: the distinct grouping texts of its issues, sorted
    group: int = 0  #: its group's number in the `Grouping` it was made from
    trend: list[ModePoint] = []
    growing: bool = False

    def as_json(self, trend: bool = False) -> dict[str, Any]:
        """The mode as `flowrate top-issues --json` writes it; `trend` adds "trend" and "growing"."""
        shown: dict[str, Any] = {
            "label": self.label,
            "conversations": self.conversations,
            "share": self.share,
            "severity": self.severity,
            "metrics": self.metrics,
            "ids": self.ids,
            "examples": [example.model_dump() for example in self.examples],
        }
        if trend:
            shown["trend"] = [point.model_dump() for point in self.trend]
            shown["growing"] = self.growing
        return shown


@dataclass
class Grouping:
    """Occurrences, the distinct grouping texts (sorted) with their vectors (`matrix`, a row per
    text), and the group of each text; `merge` joins groups (the judge's naming), `labels`
    names groups in place of the words of their most central text."""

    occurrences: list[Occurrence]
    texts: list[str]
    matrix: Any
    group_of: dict[str, int]
    labels: dict[int, str] = field(default_factory=dict)

    def members(self) -> dict[int, list[Occurrence]]:
        found: dict[int, list[Occurrence]] = defaultdict(list)
        for occurrence in self.occurrences:
            found[self.group_of[occurrence.key]].append(occurrence)
        return found

    def merge(self, groups: list[int]) -> int:
        """Join `groups` into the first of them; returns it."""
        target = groups[0]
        for text, group in self.group_of.items():
            if group in groups:
                self.group_of[text] = target
        return target


def group(found: list[Occurrence]) -> Grouping:
    """The occurrences grouped by the similarity of their grouping texts (see the module)."""
    texts = sorted({occurrence.key for occurrence in found})
    matrix = words = None
    if texts:
        per_text, names = word_counts(texts)
        matrix, words = vectors(per_text, names), _content_words(per_text, names)
    frequency = Counter(occurrence.key for occurrence in found)
    groups = _cluster(matrix, [frequency[text] for text in texts], words)
    return Grouping(found, texts, matrix, dict(zip(texts, groups, strict=True)))


def _central_text(grouping: Grouping, members: list[Occurrence]) -> str:
    """The grouping text nearest the centre of the members' vectors (counted as often as it
    occurs): the words of the label. Ties: the more frequent, then the shorter, then the first."""
    import numpy

    counts = Counter(occurrence.key for occurrence in members)
    places = sorted(bisect.bisect_left(grouping.texts, text) for text in counts)  # the texts are sorted
    weights = numpy.array([counts[grouping.texts[place]] for place in places], dtype=numpy.float64)
    block = grouping.matrix[places]
    centre = numpy.asarray(block.T @ weights).ravel()
    # in steps of 0.05, so that among texts about as central the more frequent, then the shorter, wins
    closeness = numpy.round(numpy.asarray(block @ centre).ravel() / weights.sum() * 20) / 20
    best = min(
        range(len(places)),
        key=lambda i: (-closeness[i], -weights[i], len(grouping.texts[places[i]]), grouping.texts[places[i]]),
    )
    return grouping.texts[places[best]]


def _label(grouping: Grouping, members: list[Occurrence]) -> str:
    central = _central_text(grouping, members)
    shown = Counter(o.shown for o in members if o.key == central)
    text = min(shown, key=lambda candidate: (-shown[candidate], candidate))
    return text if len(text) <= LABEL_LIMIT else text[: LABEL_LIMIT - 1].rstrip() + "…"


def _where(positions: list[float]) -> str | None:
    if not positions:
        return None
    middle = statistics.median(positions)
    return "start" if middle < 1 / 3 else ("end" if middle > 2 / 3 else "middle")


def _examples(worst: dict[str, Occurrence]) -> list[Example]:
    chosen = sorted(worst.values(), key=lambda o: (-o.weight, o.id, o.turn or 0, o.text))[:EXAMPLES]
    return [Example(id=o.id, turn=o.turn, text=o.text) for o in chosen]


def failure_mode(grouping: Grouping, number: int, members: list[Occurrence], conversations: int) -> FailureMode:
    """The mode of group `number`, its `members`, out of `conversations` conversations."""
    worst: dict[str, Occurrence] = {}
    for occurrence in members:
        kept = worst.get(occurrence.id)
        if kept is None or (-occurrence.weight, occurrence.text) < (-kept.weight, kept.text):
            worst[occurrence.id] = occurrence
    by_metric = Counter(occurrence.metric for occurrence in {(o.id, o.metric): o for o in members}.values())
    turns = [o.turn for o in members if o.turn is not None]
    texts = sorted({o.key for o in members})
    return FailureMode(
        label=grouping.labels.get(number) or _label(grouping, members),
        conversations=len(worst),
        share=round(len(worst) / conversations, 4) if conversations else 0.0,
        severity=round(statistics.fmean(o.weight for o in worst.values()), 1) + 0.0,
        metrics=sorted(by_metric, key=lambda name: (-by_metric[name], name)),
        ids=sorted(worst),
        examples=_examples(worst),
        typical_turn=statistics.median_low(turns) if turns else None,
        position=_where([o.position for o in members if o.position is not None]),
        issues=len(members),
        key=hashlib.sha256("\n".join(texts).encode()).hexdigest()[:12],
        texts=texts,
        group=number,
    )


def ranked(modes: list[FailureMode]) -> list[FailureMode]:
    """Modes by severity, then conversations, then label (and key, for a full order)."""
    return sorted(modes, key=lambda mode: (-mode.severity, -mode.conversations, mode.label, mode.key))


# -- a run, or a history over periods ---------------------------------------------------------
class TopIssues:
    """The failure modes of `rows` (see `top_issues`); kept whole so that the judge's naming
    can merge and rename groups (`grouping`) and the modes be made again (`modes`).
    `empty_because` says why no mode was formed (None: some row has a key issue). A `metric`
    no row has is a `ConfigError` naming the metrics the rows have."""

    def __init__(
        self,
        rows: Iterable[Any],
        by: str | None = None,
        date: str = "evaluated",
        growth: float = DEFAULT_GROWTH,
        metric: str | None = None,
    ):
        if date not in ("evaluated", "chat"):
            raise ConfigError(f"option date: {date!r} must be evaluated or chat")
        if growth < 0:
            raise ConfigError(f"option growth: {growth} must be at least 0")
        rows = list(rows)
        kept = [row for row in rows if metric is None or metric in (row.metric, getattr(row, "suite", None))]
        if metric is not None and rows and not kept:
            known = sorted({row.metric for row in rows} | {row.suite for row in rows if getattr(row, "suite", None)})
            raise ConfigError(f"option metric: no row of metric {metric!r} (the rows have: {', '.join(known)})")
        self.empty_because = _nothing_grouped(kept)
        self.growth = growth
        self.conversations = len(conversation_ids(kept))
        self.periods: dict[str, set[str]] = defaultdict(set)
        if by:
            for row in kept:
                period = _period_of(row, by, date)
                if period is not None:
                    self.periods[period].add(row.id)
        self.grouping = group(occurrences(kept, by, date))

    def modes(self) -> list[FailureMode]:
        """The modes, ranked; each with its trend when periods were asked for."""
        made = [
            failure_mode(self.grouping, number, members, self.conversations)
            for number, members in sorted(self.grouping.members().items())
        ]
        if self.periods:
            members = self.grouping.members()
            for mode in made:
                self._trend(mode, members[mode.group])
        return ranked(made)

    def _trend(self, mode: FailureMode, members: list[Occurrence]) -> None:
        hit: dict[str, set[str]] = defaultdict(set)
        for occurrence in members:
            if occurrence.period is not None:
                hit[occurrence.period].add(occurrence.id)
        previous = None
        for period in sorted(self.periods):
            share = round(len(hit[period]) / len(self.periods[period]), 4)
            growing = previous is not None and share - previous > self.growth + 1e-9
            mode.trend.append(ModePoint(period=period, conversations=len(hit[period]), share=share, growing=growing))
            previous = share
        mode.growing = bool(mode.trend) and mode.trend[-1].growing


def _nothing_grouped(rows: list[Any]) -> str | None:
    """Why `rows` raise no mode, or None when some row has a key issue to group."""
    if any(row.metric != USER_SATISFACTION and row.key_issues for row in rows):
        return None
    if not rows:
        return "no result rows to group"
    errors = sum(1 for row in rows if row.score is None)
    if errors == len(rows):
        return f"nothing to group: all {len(rows)} row(s) are errors, which carry no key issues"
    return f"nothing to group: no judged row has a key issue ({len(rows) - errors} judged, {errors} error(s))"


def top_issues(
    rows: Iterable[Any],
    by: str | None = None,
    date: str = "evaluated",
    growth: float = DEFAULT_GROWTH,
    metric: str | None = None,
) -> list[FailureMode]:
    """The failure modes of `rows` (results rows, or any objects with `id`, `metric`, `score`,
    `key_issues`, and optionally `number_of_turns`, `suite`, `evaluated_at`, `chat_date`),
    ranked by severity then conversations. `metric` keeps that metric's rows (or a suite's);
    `by` (day, week or month) adds each mode's trend over the periods of `date` (evaluated or
    chat), a point flagged growing when its share rose by more than `growth` since the period
    before. The same rows, in any order, give the same modes."""
    return TopIssues(rows, by, date, growth, metric).modes()


@dataclass(frozen=True)
class IssueRow:
    """What grouping reads of a row, for rows that are not results rows (the history's, a
    report's): `top_issues` takes these as it takes `EvaluationRow`s."""

    id: str
    metric: str
    score: float | None
    key_issues: list[str]
    number_of_turns: int = 0
    suite: str | None = None
    evaluated_at: datetime | None = None
    chat_date: str | None = None


def history_rows(connection: Any) -> list[IssueRow]:
    """Every row of the history on `connection` (`history.connect`) as an `IssueRow`; rows
    imported before the history kept key issues (migration m003) have none."""
    import orjson

    found = connection.execute(
        "SELECT conversation_id, metric, score, key_issues, number_of_turns, suite, evaluated_at, chat_date FROM rows"
        " ORDER BY conversation_id, metric, evaluated_at"
    ).fetchall()
    return [
        IssueRow(
            id=key,
            metric=metric,
            score=score,
            key_issues=[str(issue) for issue in orjson.loads(issues)] if issues else [],
            number_of_turns=turns or 0,
            suite=suite,
            evaluated_at=at,
            chat_date=chat.isoformat() if chat else None,
        )
        for key, metric, score, issues, turns, suite, at, chat in found
    ]


def load_top_issues(
    paths: list[str] | None = None,
    history: str | None = None,
    by: str = "week",
    date: str = "evaluated",
    growth: float = DEFAULT_GROWTH,
    metric: str | None = None,
) -> TopIssues:
    """The rows of results files `paths` (flowrate eval -o FILE), or else of the history
    file `history`, made into a `TopIssues` (see `top_issues` for the other arguments)."""
    from flowrate.results.files import read_rows

    if paths:
        rows: list[Any] = [row for path in paths for row in read_rows(Path(path))]
    elif history:
        from flowrate.analysis.history import connect

        connection = connect(history, read_only=True)
        try:
            rows = history_rows(connection)
        finally:
            connection.close()
    else:
        raise ConfigError("give results files, or --history PATH")
    return TopIssues(rows, by, date, growth, metric)
