"""A judge that learns from corrections (`flowrate align`), the data half: which labelled
conversations train and which are held out, the disagreements among the training ones, the
corrected cases chosen as worked examples, and the new rubric file holding them.

A corrected case is a conversation where people's answer (the mean of its labels, on the
nearest value of the scale) differs from the judge's. As a worked example, its reply is the
people's value, with the reviewers' comments as its reason. Cases are chosen level by level in
turn (the levels the rubric has fewest examples of first), so the examples cover the scale;
inside a level a judge value and a language it has fewest of first, then the largest gap; each
only while the examples' tokens (counted as `judge.model_map.count_tokens` counts the prompt)
stay within the budget. The held-out split is by a seeded hash of the id, so it is the same on
every run, and held-out labels never become examples.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
import yaml

from flowrate.analysis.interrater import nearest_value
from flowrate.analysis.labels import Label
from flowrate.errors import ConfigError
from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.inputs.selection import stable_hash
from flowrate.results.rows import EvaluationRow
from flowrate.rubric.model import EXAMPLES_LANGUAGE, PACKAGED, Criterion, Rubric, RubricExample, load_rubric
from flowrate.rubric.prompt import grading_request

MIN_LABELS = 20  # labelled, judged conversations of the metric before align learns from them
DEFAULT_EXAMPLE_TOKENS = 3000  # what the corrected examples may add to every prompt
DEFAULT_MAX_EXAMPLES = 6


@dataclass(frozen=True)
class Correction:
    """One labelled conversation where people and the judge differ: people's value (on the
    scale) and mean score, the judge's, the reviewers' comments, and its language if known."""

    conversation_id: str
    metric: str
    human_value: str | int
    human_score: float
    judge_value: str | int
    judge_score: float
    comments: tuple[str, ...] = ()
    language: str | None = None

    @property
    def gap(self) -> float:
        return self.human_score - self.judge_score


def held_out(conversation_id: str, fraction: float, seed: int = 0) -> bool:
    """Whether a labelled conversation is held out: a seeded hash of its id below `fraction`,
    the same on every run and machine (`inputs.selection.stable_hash`)."""
    return stable_hash(f"align:{seed}:{conversation_id}") / 16**16 < fraction


def split(ids: list[str], fraction: float | None, seed: int = 0) -> tuple[list[str], list[str]]:
    """(training ids, held-out ids), each sorted; nothing is held out without a `fraction`."""
    held = sorted(key for key in ids if fraction and held_out(key, fraction, seed))
    return sorted(set(ids) - set(held)), held


def base_rubric(metric: str, rubric_path: str | None = None) -> tuple[Rubric, bytes, Criterion]:
    """The rubric that judged `metric` (a file, else the packaged one making it), its file's
    bytes, and the criterion whose rows are `metric`. Raises `ConfigError` when it has none."""
    from flowrate.metrics.catalog import metric_making

    if rubric_path is not None:
        rubric = load_rubric(Path(rubric_path))
        data = Path(rubric_path).read_bytes()
    else:
        name = metric_making(metric)
        if name not in PACKAGED:
            raise ConfigError(f"option metric: no packaged rubric rates {metric!r}; name its rubric with --rubric FILE")
        rubric = load_rubric(name)
        data = resources.files("flowrate.rubrics").joinpath(PACKAGED[name]).read_bytes()
    criterion = next((item for item in rubric.criteria if item.name == metric), None)
    if criterion is None:
        known = ", ".join(item.name for item in rubric.criteria)
        raise ConfigError(f"option metric: rubric {rubric.name} has no criterion {metric!r} (it has: {known})")
    return rubric, data, criterion


def labelled(rows: list[EvaluationRow], labels: list[Label], metric: str) -> dict[str, tuple[EvaluationRow, float]]:
    """Each labelled conversation of `metric` with a usable row: its latest row and the mean label."""
    from flowrate.analysis.judge_report import latest_rows

    latest = latest_rows(rows)
    scores: dict[str, list[float]] = defaultdict(list)
    for label in labels:
        if label.metric == metric:
            scores[label.conversation_id].append(label.score)
    found = {}
    for key, given in scores.items():
        row = latest.get((key, metric))
        if row is not None and row.score is not None:
            found[key] = (row, sum(given) / len(given))
    return found


def need_labels(count: int, metric: str) -> None:
    """Raise `ConfigError` (exit 2) when fewer than `MIN_LABELS` labelled conversations exist."""
    if count < MIN_LABELS:
        raise ConfigError(
            f"align needs at least {MIN_LABELS} labelled conversations of {metric} that have a judged row;"
            f" found {count}"
        )


def corrections(
    judged: dict[str, tuple[EvaluationRow, float]],
    ids: list[str],
    criterion: Criterion,
    comments: dict[str, list[str]] | None = None,
    languages: dict[str, str] | None = None,
) -> list[Correction]:
    """The conversations of `ids` where people's value differs from the judge's, on the
    criterion's scale; `comments` by conversation id (the reviewers'), `languages` by id."""
    scale = criterion.scale
    values: list[str | int] = list(scale.values)
    scores = [scale.score(value) for value in values]
    found = []
    for key in ids:
        row, human = judged[key]
        human_value = values[nearest_value(human, scores)]
        judge_value = row.verdict if scale.levels is not None else row.rating
        if judge_value is None or str(judge_value) == str(human_value):
            continue
        found.append(
            Correction(
                key,
                criterion.name,
                human_value,
                human,
                judge_value,
                row.score,  # type: ignore[arg-type]
                tuple((comments or {}).get(key, [])),
                (languages or {}).get(key),
            )
        )
    return found


def example_of(
    correction: Correction, case: ConversationalEvalTestCase, rubric: Rubric, others: dict[str, EvaluationRow]
) -> RubricExample | None:
    """The corrected case as a worked example: people's value and comments as the reply. In a
    suite, the other criteria keep the judge's answers (`others`, its rows of this conversation
    by criterion); None when one of them is missing."""
    reason = (
        " ".join(correction.comments) or f"People who reviewed this conversation rated it {correction.human_value}."
    )
    parts: dict[str, dict[str, Any]] = {}
    for criterion in rubric.criteria:
        if criterion.name == correction.metric:
            parts[criterion.name] = {"reason": reason, "key_issues": [], criterion.scale.field: correction.human_value}
            continue
        row = others.get(criterion.name)
        if row is None:
            return None
        value = row.verdict if criterion.scale.levels is not None else row.rating
        if value is None:
            return None
        parts[criterion.name] = {
            "reason": row.reason or "",
            "key_issues": list(row.key_issues),
            criterion.scale.field: value,
        }
    reply = {"criteria": parts} if rubric.is_suite else parts[correction.metric]
    return RubricExample(
        title=f"corrected by people: {correction.conversation_id}",
        chatbot_role=case.chatbot_role,
        turns=case.turns,
        reply=reply,
    )


def example_tokens(example: RubricExample, rubric: Rubric, count_tokens: Callable[[str], int]) -> int:
    """What `example` adds to every prompt: its request and its reply, as the judge is sent them."""
    shown = ConversationalEvalTestCase(turns=example.turns, chatbot_role=example.chatbot_role)
    return count_tokens(grading_request(shown, EXAMPLES_LANGUAGE, rubric.task)) + count_tokens(
        orjson.dumps(example.reply).decode()
    )


def choose(
    candidates: list[tuple[Correction, RubricExample]],
    rubric: Rubric,
    criterion: Criterion,
    budget_tokens: int,
    max_examples: int,
    count_tokens: Callable[[str], int],
) -> list[tuple[Correction, RubricExample]]:
    """The corrected cases to add, at most `max_examples`: level by level in turn (the levels the
    rubric has fewest examples of first, then lowest first); inside a level a judge value, then a
    language, that level has fewest of so far, then the language fewest chosen overall, then the
    largest gap, then the id's hash; each only if it fits what is left of `budget_tokens`."""
    values = [str(value) for value in criterion.scale.values]
    have: defaultdict[str, int] = defaultdict(int)
    for example in rubric.examples:
        part = example.reply.get("criteria", {}).get(criterion.name) if rubric.is_suite else example.reply
        if isinstance(part, dict):
            have[str(part.get(criterion.scale.field))] += 1
    queues: dict[str, list[tuple[Correction, RubricExample]]] = defaultdict(list)
    for item in candidates:
        queues[str(item[0].human_value)].append(item)
    order = sorted((value for value in values if queues[value]), key=lambda value: (have[value], values.index(value)))
    chosen: list[tuple[Correction, RubricExample]] = []
    left = budget_tokens
    while order and len(chosen) < max_examples:
        for value in list(order):
            if len(chosen) >= max_examples:
                break
            picked = _next_in_level(queues[value], chosen, rubric, left, count_tokens)
            if picked is None:
                order.remove(value)
                continue
            chosen.append(picked[0])
            left -= picked[1]
    return chosen


def _next_in_level(queue, chosen, rubric: Rubric, left: int, count_tokens) -> tuple[Any, int] | None:
    """The best case left in one level's `queue` that fits `left` tokens (taken off the queue)."""
    if not queue:
        return None
    level = [item[0] for item in chosen if str(item[0].human_value) == str(queue[0][0].human_value)]

    def rank(item) -> tuple:
        correction = item[0]
        return (
            sum(str(other.judge_value) == str(correction.judge_value) for other in level),
            sum(other.language == correction.language for other in level),
            sum(other[0].language == correction.language for other in chosen),
            -abs(correction.gap),
            stable_hash(correction.conversation_id),
        )

    queue.sort(key=rank)
    while queue:
        item = queue.pop(0)
        cost = example_tokens(item[1], rubric, count_tokens)
        if cost <= left:
            return item, cost
    return None


def aligned_rubric_text(
    data: bytes, rubric: Rubric, chosen: list[tuple[Correction, RubricExample]], metric: str
) -> str:
    """The new rubric file: the base rubric's data with the corrected examples added after its
    own, and a comment saying where it came from (its sha256 is the new `rubric_version`)."""
    raw = yaml.safe_load(data)
    raw["examples"] = list(raw.get("examples") or []) + [
        example.model_dump(mode="json", exclude_defaults=True) for _, example in chosen
    ]
    ids = orjson.dumps([correction.conversation_id for correction, _ in chosen]).decode()  # one line, escaped
    header = (
        f"# Written by flowrate align from {rubric.name} ({rubric.version}): {len(chosen)} worked example(s)\n"
        f"# corrected by people's labels of {orjson.dumps(metric).decode()}, conversations {ids}\n"
    )
    return header + yaml.dump(raw, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100)


class _BlockDumper(yaml.SafeDumper):
    """Safe YAML with multi-line text (the instructions) as `|` blocks, as the packaged rubrics write it."""


def _text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_BlockDumper.add_representer(str, _text)


def read_conversations(paths: list[str], ids: set[str]) -> dict[str, tuple[ConversationalEvalTestCase, Any]]:
    """The conversations of `paths` with one of `ids`, each with its `Source`; invalid records
    are passed over (`flowrate validate` names them)."""
    from flowrate.inputs.files import InputSet, iter_cases

    inputs = InputSet(paths)
    found: dict[str, tuple[ConversationalEvalTestCase, Any]] = {}
    try:
        for record in iter_cases(inputs):
            case = record.case
            if case is not None and case.id is not None and case.id in ids:
                found[case.id] = (case, record.source)
        return found
    finally:
        inputs.close()


def write_conversations(found: dict[str, tuple[ConversationalEvalTestCase, Any]], ids: list[str], path: Path) -> None:
    """The conversations `ids` of `found` as one JSONL file to judge: a JSONL record as its file
    holds it, with its id written in (so the judge sees what it saw before, under the same id),
    any other as a turn record (a chat record's tool calls are not carried over then)."""
    lines: dict[str, list[bytes]] = {}
    with open(path, "wb") as handle:
        for key in ids:
            case, source = found[key]
            if source.path.endswith(".jsonl") and source.line is not None and Path(source.path).is_file():
                if source.path not in lines:
                    lines[source.path] = Path(source.path).read_bytes().removeprefix(b"\xef\xbb\xbf").splitlines()
                raw = orjson.loads(lines[source.path][source.line - 1])
                handle.write(orjson.dumps({**raw, "id": key}) + b"\n")
                continue
            turns = [turn for turn in case.turns if turn.actual_output is not None]
            record: dict[str, Any] = {
                "id": key,
                "turns": [{"input": turn.input, "actual_output": turn.actual_output} for turn in turns],
                "metadata": case.metadata,
            }
            if case.turns[-1].actual_output is None:
                record["trailing_user_utterance"] = case.turns[-1].input
            if case.chatbot_role is not None:
                record["chatbot_role"] = case.chatbot_role
            if case.log_cut is not None:
                record["log_cut"] = case.log_cut
            handle.write(orjson.dumps(record) + b"\n")
