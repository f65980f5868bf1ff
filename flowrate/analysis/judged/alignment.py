"""`flowrate align`, the judging half: a new rubric whose worked examples are people's
corrections of the judge (chosen by `analysis.alignment`, data only), and, with a holdout, the
held-out conversations judged with the old rubric and the new, side by side."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowrate.analysis import alignment
from flowrate.analysis.judge_report import Figures, judge_report, language_of
from flowrate.analysis.judged import Evaluate, Evaluated
from flowrate.analysis.labels import Label
from flowrate.errors import ConfigError
from flowrate.results.files import read_rows
from flowrate.results.rows import EvaluationRow
from flowrate.rubric.model import Criterion, Rubric
from flowrate.settings.options import EvalSettings

# what a held-out run takes of the settings given: the judge, retries, limits and the cache, not
# the run's own files, selection, gates or budget (the budget is what both runs share)
NOT_CARRIED = ("metric", "rubric", "output", "resume", "retry_errors", "history", "html", "junit", "batch", "shard",
               "sample", "limit", "only", "exclude", "min_words", "output_parquet", "batch_export", "max_cost",
               "min_pass_rate", "min_mean_score", "max_failures", "gates")  # fmt: skip


@dataclass
class Alignment:
    """What `align_rubric` did: the new rubric at `rubric_path`; the labelled conversations of
    `metric` (`training` ids and `held_out` ids, disjoint), the disagreements among the training
    ones (`corrections`) and those that became worked examples (`examples`); with a holdout, the
    figures of the old rubric (`before`) and the new (`after`) on the held-out conversations, and
    both runs (`runs`, old first)."""

    rubric_path: str
    metric: str
    training: list[str]
    held_out: list[str]
    corrections: int
    examples: list[alignment.Correction] = field(default_factory=list)
    before: Figures | None = None
    after: Figures | None = None
    runs: list[Evaluated] = field(default_factory=list)


def align_rubric(
    conversations: list[str],
    rows: list[EvaluationRow],
    labels: list[Label],
    metric: str,
    output: str,
    settings: EvalSettings | None = None,
    rubric_path: str | None = None,
    comments: dict[str, list[str]] | None = None,
    holdout: float | None = None,
    seed: int = 0,
    budget_tokens: int | None = None,
    max_examples: int | None = None,
    work_dir: str = "flowrate-align",
    *,
    evaluate: Evaluate,
) -> Alignment:
    """`flowrate align`: a new rubric file at `output` whose worked examples add corrected cases
    of `metric`, people's value and `comments` (by conversation id) as the reply.

    `rows` are the judge's (the latest per conversation counts), `labels` people's, and
    `conversations` the files holding the conversations' text. The base rubric is `rubric_path`,
    else the packaged one rating `metric`. With `holdout` a fraction, labelled conversations are
    split by a hash of their id seeded with `seed`; only the training part is learnt from, and the
    held-out part is judged under `settings` with the old rubric, then the new (rows in
    `work_dir`), through `evaluate` (`flowrate.api.evaluate_files`: the cache, limits and
    `settings.max_cost`, which bounds both runs together, apply as in any run). The examples'
    tokens stay within `budget_tokens`, their number within `max_examples`. Raises `ConfigError`
    (exit 2) for an `output` that is the base rubric or a conversations file (`check_apart`), fewer than `alignment.MIN_LABELS` labelled
    conversations, or nothing to learn."""
    from flowrate.inputs.files import check_apart
    from flowrate.judge.model_map import count_tokens
    from flowrate.rubric.model import load_rubric

    check_apart([("--output", output)], [*([rubric_path] if rubric_path else []), *conversations], of="align")
    rubric, data, criterion = alignment.base_rubric(metric, rubric_path)
    judged = alignment.labelled(rows, labels, metric)
    alignment.need_labels(len(judged), metric)
    training, held = alignment.split(list(judged), holdout, seed)
    if holdout and not held:
        raise ConfigError(f"--holdout {holdout}: holds out none of the {len(judged)} labelled conversations")
    found = alignment.read_conversations(conversations, set(judged))
    languages = {key: language_of(case.metadata) for key, (case, _) in found.items()}
    wrong = alignment.corrections(judged, training, criterion, comments, {k: v for k, v in languages.items() if v})
    candidates = _candidates(wrong, found, rows, rubric)
    if not candidates:
        raise ConfigError(
            f"no labelled conversation of {metric} outside the holdout disagrees with the judge and has its text in"
            f" {', '.join(conversations)}: nothing to correct"
        )
    chosen = alignment.choose(
        candidates,
        rubric,
        criterion,
        budget_tokens or alignment.DEFAULT_EXAMPLE_TOKENS,
        max_examples or alignment.DEFAULT_MAX_EXAMPLES,
        count_tokens,
    )
    if not chosen:
        raise ConfigError(f"no corrected case fits the example budget of {budget_tokens} tokens; raise it")
    try:
        Path(output).write_text(alignment.aligned_rubric_text(data, rubric, chosen, metric), encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"--output {output}: cannot be written: {error.strerror}") from None
    load_rubric(Path(output))  # the file written is a valid rubric, or a ConfigError names the field
    result = Alignment(output, metric, training, held, len(wrong), [correction for correction, _ in chosen])
    if held:
        missing = [key for key in held if key not in found]
        if missing:
            raise ConfigError(
                f"{len(missing)} held-out conversation(s) are not in {', '.join(conversations)} (first: {missing[0]})"
            )
        folder = Path(work_dir)
        folder.mkdir(parents=True, exist_ok=True)
        alignment.write_conversations(found, held, folder / "held_out.jsonl")
        held_labels = [label for label in labels if label.metric == metric and label.conversation_id in held]
        _judge_held_out(
            result,
            folder,
            rubric,
            criterion,
            rubric_path,
            held_labels,
            settings or EvalSettings.model_validate({}),
            evaluate,
        )
    return result


def _candidates(
    wrong: list[alignment.Correction],
    found: dict[str, tuple[Any, Any]],
    rows: list[EvaluationRow],
    rubric: Rubric,
) -> list[tuple[alignment.Correction, Any]]:
    """The corrections whose conversation's text was found, each with its worked example."""
    by_conversation: dict[str, dict[str, EvaluationRow]] = {}
    for row in rows:
        by_conversation.setdefault(row.id, {})[row.metric] = row
    candidates = []
    for correction in wrong:
        if correction.conversation_id in found:
            case = found[correction.conversation_id][0]
            example = alignment.example_of(
                correction, case, rubric, by_conversation.get(correction.conversation_id, {})
            )
            if example is not None:
                candidates.append((correction, example))
    return candidates


def _judge_held_out(
    result: Alignment,
    folder: Path,
    rubric: Rubric,
    criterion: Criterion,
    rubric_path: str | None,
    held_labels: list[Label],
    settings: EvalSettings,
    evaluate: Evaluate,
) -> None:
    """Judge `folder/held_out.jsonl` with the old rubric (`rubric_path`, else the packaged
    `rubric`), then the new (`result.rubric_path`), under what `settings.max_cost` leaves, rows in
    `folder`; sets `result.before`, `after` and `runs`, and stops after a run Ctrl-C interrupted."""
    given = settings.model_dump(exclude_unset=True)
    for name in NOT_CARRIED:
        given.pop(name, None)
    budget = settings.max_cost
    scale = [(str(value), criterion.scale.score(value)) for value in criterion.scale.values]
    if criterion.scale.points is not None:
        scale = [(f"{value}/{criterion.scale.points}", score) for value, score in scale]
    for name, run_rubric in (("old", rubric_path), ("new", result.rubric_path)):
        spent = sum(run.summary.run_cost_usd for run in result.runs)
        chosen_rubric: dict[str, Any] = {"rubric": run_rubric} if run_rubric else {"metric": [rubric.name]}
        run_fields = {
            "output": str(folder / f"{name}.jsonl"),
            "max_cost": None if budget is None else max(budget - spent, 0.0),
        }
        run_settings = EvalSettings(**(given | chosen_rubric | run_fields))
        run = evaluate([str(folder / "held_out.jsonl")], run_settings)
        result.runs.append(run)
        run_rows = list(read_rows(Path(run_settings.output))) if run.summary.rows_written else []
        figures = judge_report(run_rows, held_labels, {result.metric: scale}).metrics.get(result.metric)
        setattr(result, "before" if name == "old" else "after", figures)
        if run.summary.interrupted:
            break
