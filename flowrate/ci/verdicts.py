"""What a test gives `assert_flow` made a conversation, and the judge's rows read as a test's
outcome: the level it must reach, the failure message (verdict, reason, key issues) and the JUnit
properties (verdict, score, cost)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.reports.escape import log_line
from flowrate.results.rows import EvaluationRow
from flowrate.settings.options import EvalSettings


def as_case(conversation: Any, default_id: str) -> ConversationalEvalTestCase:
    """`conversation` as flowrate judges it: a `ConversationalEvalTestCase`, a record in the turn
    format or OpenAI's messages (a dict), a list of OpenAI messages, or the path of a file of one
    conversation in any format the inputs stage reads; its id, else `default_id`. Bad input
    fails the test with the field that is wrong."""
    __tracebackhide__ = True
    if isinstance(conversation, ConversationalEvalTestCase):
        return conversation if conversation.id else conversation.model_copy(update={"id": default_id})
    if isinstance(conversation, str | os.PathLike) and Path(conversation).is_file():
        from flowrate.ci.session import Wanted, plain_message, read_marked
        from flowrate.errors import FlowrateError

        problem: str | None = None
        try:
            cases = [marked.case for marked in read_marked(Path(conversation), Wanted())]
        except FlowrateError as error:
            problem = plain_message(error)  # told outside the handler: no "During handling of ..."
        if problem is not None:
            pytest.fail(f"assert_flow: {problem}", pytrace=False)
        if len(cases) != 1:
            pytest.fail(f"assert_flow: {conversation} holds {len(cases)} conversations, not one", pytrace=False)
        return cases[0]
    if isinstance(conversation, list):
        conversation = {"messages": conversation}
    from flowrate.inputs.formats import parse_record

    record = parse_record(conversation, Source(path="assert_flow"), default_id, where="assert_flow: the conversation")
    if record.problems or record.case is None:
        pytest.fail("\n".join(record.problems), pytrace=False)
    return record.case


def argument_problem(settings: EvalSettings, at_least: Any) -> str | None:
    """What is wrong with what a test asks, checked before any call (None: nothing): the metrics
    and rubric of `settings` (a batch's, with the test's `metric` and `rubric`) and `at_least`,
    which must be a score in [0, 1] or a level of every row's scale. A call made for an unknown
    metric failed as "the judge gave no verdict", and an unreachable score was paid for."""
    from flowrate.errors import FlowrateError
    from flowrate.metrics.catalog import row_scales

    try:
        rows = row_scales(settings.judge_settings)
    except FlowrateError as error:
        return str(error)
    if at_least is None:
        return None
    if isinstance(at_least, int | float) and not isinstance(at_least, bool):
        return None if 0 <= at_least <= 1 else f"at_least={at_least!r} is not a score in [0, 1]"
    if not isinstance(at_least, str):
        return f"at_least={at_least!r} is neither a level (such as 'partial') nor a score in [0, 1]"
    for name, scale in rows.items():
        if scale is None or scale.levels is None or at_least not in scale.levels:
            known = ", ".join(scale.levels) if scale is not None and scale.levels else "a score in [0, 1]"
            return f"at_least={at_least!r} is not a level of {name} (known: {known})"
    return None


def _level_score(row: EvaluationRow, at_least: str | float | None, rubric: str | None) -> float:
    """The score `row` must reach: `at_least` as a score, or the score of the level it names on
    the row's scale (of `rubric`, else of the packaged metric), else the row's threshold."""
    if at_least is None:
        return row.threshold
    if isinstance(at_least, int | float) and not isinstance(at_least, bool):
        return float(at_least)
    from flowrate.rubric.model import load_rubric

    source = rubric if rubric else (row.suite or row.metric)
    scales = {criterion.name: criterion.scale for criterion in load_rubric(source).criteria}
    scale = scales.get(row.metric)
    if scale is None or scale.levels is None or str(at_least) not in scale.levels:
        known = ", ".join(scale.levels) if scale is not None and scale.levels else "a score in [0, 1]"
        pytest.fail(
            f"assert_flow: at_least={at_least!r} is not a level of {row.metric} (known: {known})", pytrace=False
        )
    return scale.score(str(at_least))


def failures(rows: list[EvaluationRow], at_least: str | float | None, rubric: str | None) -> str | None:
    """The failure message of `rows` below `at_least` (see `_level_score`), None when all pass:
    per row, its verdict against what was needed, the judge's reason and key issues, each line
    as a CI log needs it (`escape.log_line`: a CR in an id shown as `\\x0d`)."""
    __tracebackhide__ = True
    lines = []
    for row in rows:
        if row.score is None:
            continue
        needed = _level_score(row, at_least, rubric)
        if row.score >= needed:
            continue
        shown = row.verdict or (f"{row.rating}/{row.scale}" if row.rating is not None else f"{row.score:.2f}")
        wanted = f"{at_least} ({needed:.2f})" if isinstance(at_least, str) else f"{needed:.2f}"
        lines.append(f"{row.metric}: {row.id} judged {shown} (score {row.score:.2f}), needs at least {wanted}")
        lines.append(f"  reason: {row.reason or '(none given)'}")
        lines += [f"  - {issue}" for issue in row.key_issues]
    # pytest prints the message in its report, which a CI runner reads: each line escaped
    return (
        "\n".join(log_line(line) for line in ["flowrate: the judge failed the conversation", *lines]) if lines else None
    )


def record(properties: list[tuple[str, object]], rows: list[EvaluationRow]) -> None:
    """The rows' verdict, score and cost as JUnit properties of the test (`--junitxml`)."""
    for row in rows:
        suffix = "" if len(rows) == 1 else f"_{row.metric}"
        properties.append((f"flowrate_verdict{suffix}", row.verdict if row.verdict is not None else row.rating))
        properties.append((f"flowrate_score{suffix}", row.score))
        properties.append((f"flowrate_cost_usd{suffix}", row.cost_usd or 0.0))
