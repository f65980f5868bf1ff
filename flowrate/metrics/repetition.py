"""`repetition_check`: an offline check for repetition, with no LLM, no key and no cost.

It looks at the assistant's replies with RapidFuzz's string similarity and reports, as key
issues naming their turns:
- a reply that nearly repeats an earlier one (`fuzz.ratio` >= 90 on the normalised text,
  replies of three words or more);
- a question asked again after the user answered it (a question sentence whose
  `fuzz.token_sort_ratio` with an earlier question is >= 60, or whose `token_set_ratio` is
  >= 80 with at least two shared words of three letters or more, where the user spoke in
  between);
- an empty reply;
- a final user message left unanswered (more than three words, or a question).

score = max(0, 1 - 0.4 x findings): 1.0 with none, 0.6 with one (below the default
threshold 0.7), 0.2 with two, 0 with three or more. Questions are found by `?`, `？` or `¿`,
so the check works in any language that writes them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source, chat_date, turns_sha256
from flowrate.metrics.planning import CallEstimate, JudgePlan
from flowrate.results.rows import EvaluationRow
from flowrate.settings.groups import DEFAULT_THRESHOLD

NAME = "repetition_check"
RULES_VERSION = "repetition-check-1"  # bump when a rule or threshold below changes
NEAR_DUPLICATE = 90
SAME_QUESTION_SORTED = 60
SAME_QUESTION_SET = 80
PENALTY = 0.4
_QUESTION = re.compile(r"[^.!?？¿\n]*[?？]|¿[^?]*\?")
_WORD = re.compile(r"\w{3,}")


def findings(case: ConversationalEvalTestCase) -> list[str]:
    """The repetition findings of one conversation, each naming its turns, in turn order."""
    from rapidfuzz import fuzz
    from rapidfuzz.utils import default_process

    found: list[tuple[int, str]] = []
    replies = [(number, turn.actual_output) for number, turn in enumerate(case.turns, start=1)]
    seen: list[tuple[int, str]] = []
    repeated: set[int] = set()
    for number, reply in replies:
        if reply is None:
            continue
        if not reply.strip() and not case.turns[number - 1].tool_activity:
            found.append((number, f"turn {number}: empty reply"))
            continue
        text = default_process(reply)
        if len(text.split()) >= 3:
            for earlier, earlier_text in seen:
                similarity = fuzz.ratio(text, earlier_text)
                if similarity >= NEAR_DUPLICATE:
                    found.append(
                        (number, f"turn {number}: repeats the reply of turn {earlier} ({similarity:.0f}% alike)")
                    )
                    repeated.add(number)
                    break
            seen.append((number, text))
    asked: list[tuple[int, str]] = []
    for number, reply in replies:
        for question in _questions(reply or ""):
            if number not in repeated:
                for earlier, earlier_question in asked:
                    answered = any(case.turns[n - 1].input.strip() for n in range(earlier + 1, number + 1))
                    if answered and _same_question(question, earlier_question, fuzz, default_process):
                        found.append(
                            (number, f"turn {number}: repeats the question of turn {earlier} after the user answered")
                        )
                        repeated.add(number)
                        break
            asked.append((number, question))
    last = case.turns[-1]
    if last.actual_output is None and (len(last.input.split()) > 3 or _questions(last.input)):
        found.append((len(case.turns), f"turn {len(case.turns)}: the user's last message has no reply"))
    return [text for _, text in sorted(found, key=lambda item: item[0])]


def _questions(text: str) -> list[str]:
    return [match.group(0).strip() for match in _QUESTION.finditer(text) if match.group(0).strip(" ?？¿")]


def _same_question(one: str, other: str, fuzz, process) -> bool:
    a, b = process(one), process(other)
    if fuzz.token_sort_ratio(a, b) >= SAME_QUESTION_SORTED:
        return True
    shared = set(_WORD.findall(a)) & set(_WORD.findall(b))
    return len(shared) >= 2 and fuzz.token_set_ratio(a, b) >= SAME_QUESTION_SET


def score_for(count: int) -> float:
    return round(max(0.0, 1.0 - PENALTY * count), 4)


class RepetitionCheck:
    """The offline repetition check as a metric: the same protocol as `RubricMetric`, with no
    judge. `threshold` (or `thresholds["repetition_check"]`) is the pass mark; `date_field` as
    `RubricMetric`'s."""

    name = NAME
    row_names = [NAME]
    cache = None
    backend = None
    model = "offline"
    samples = 1
    calls_per_conversation = 0

    def __init__(
        self,
        threshold: float = DEFAULT_THRESHOLD,
        thresholds: dict[str, float] | None = None,
        date_field: str | None = None,
    ):
        self.threshold = (thresholds or {}).get(NAME, threshold)
        self.thresholds = {NAME: self.threshold}
        self.date_field = date_field
        self.judge_identity = {"model": self.model, "rubric version": RULES_VERSION}

    def warm_up(self) -> None:
        import rapidfuzz  # noqa: F401  (loaded now, not on the first conversation)

    def plan(self, case: ConversationalEvalTestCase, lookup: bool = True) -> JudgePlan:
        return JudgePlan(case, [], False, [], None, 0)

    def fill_from_cache(self, plans: list[JudgePlan]) -> None:
        return None

    def estimate(self, plan: JudgePlan, exact: bool = False) -> CallEstimate:
        return CallEstimate()

    async def evaluate(
        self, case: ConversationalEvalTestCase, source: Source | None = None, *, plan=None, gate=None
    ) -> list[EvaluationRow]:
        """One row: the findings as key issues, and the score they leave."""
        issues = findings(case)
        row = self.new_row(case, source)
        row.score = score_for(len(issues))
        row.success = row.score >= self.threshold
        row.reason = f"{len(issues)} repetition finding(s)" if issues else "no repetition found"
        row.key_issues = issues
        row.cost_usd = 0.0
        return [row]

    def new_row(
        self, case: ConversationalEvalTestCase, source: Source | None = None, name: str | None = None
    ) -> EvaluationRow:
        """A row for `case`, before the check has run."""
        return EvaluationRow(
            id=case.id or "",
            source=source,
            metric=NAME,
            threshold=self.threshold,
            model=self.model,
            rubric_version=RULES_VERSION,
            evaluated_at=datetime.now(UTC),
            number_of_turns=len(case.turns),
            turns_sha256=turns_sha256(case),
            chat_date=chat_date(case, self.date_field),
            redactions=case.redactions,
            redacted_by=case.redacted_by,
        )
