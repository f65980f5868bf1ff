"""Selection: which conversations a run judges (shards, a seeded sample, filters, a limit), and the scan that validates every record once before any call."""

from __future__ import annotations

import copy
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from flowrate.errors import InputError
from flowrate.inputs.conversation import DATE_FIELDS, ConversationalEvalTestCase, Source, chat_date, turns_sha256
from flowrate.inputs.files import InputSet, with_duplicates_marked
from flowrate.inputs.sources.calls import seconds_of

MAX_PROBLEMS_SHOWN = 50


@dataclass
class ScanReport:
    """The validation pass: counts per format, and every problem found."""

    formats: Counter = field(default_factory=Counter)
    files: int = 0
    valid: int = 0
    selected: int = 0  # valid and chosen by the run's selection (its shard)
    problems: list[str] = field(default_factory=list)
    invalid_sources: set[str] = field(default_factory=set)
    invalid_records: list[Source] = field(default_factory=list)
    invalid_names: dict[str, str] = field(default_factory=dict)  # str(source) -> `Record.name`
    left_out: dict[str, int] = field(default_factory=dict)  # valid conversations not chosen, by reason
    unreadable_dates: int = 0  # chosen conversations whose chat date is there but cannot be read
    first_unreadable_date: str = ""  # the first of them: where, its id, the field and value
    untimed: int = 0  # conversations `--closed-after` counted as closed: they have no time
    unreadable_times: int = 0  # conversations `--closed-after` found a time in that cannot be read
    first_unreadable_time: str = ""  # the first of them: where, its id, the field and value
    barren: list[str] = field(default_factory=list)  # the files that yielded no conversation, valid or not

    @property
    def invalid(self) -> int:
        return len(self.invalid_sources)


class Selection:
    """Which valid conversations a run judges, the same on every run and every machine.

    In order: the shard (`I/N` by id hash), the sample (a `fraction` of ids by a seeded
    hash), `min_words` (words of both sides), `only` and `exclude` (`FIELD=VALUE` on the
    metadata; a value is compared as written in JSON, so `handoff=true` matches `true`),
    `open` (with `closed_after_s`: the last message, `last_message_s`, is newer than
    `now_s` less that; a conversation with no time counts as closed, and `untimed` counts
    it; one with a time that cannot be read is decided by its other times, closed if none,
    `unreadable_times` counts it and `time_problem` names the field), `judged` (its id and
    `turns_sha256`, as `judged_as` makes them, are in `judged`: the history holds its rows),
    then `limit` (the first N that pass, in input order). `left_out` counts each reason;
    a conversation outside the shard is another machine's, not counted.
    """

    def __init__(
        self,
        shard: tuple[int, int] | None = None,
        sample: float | None = None,
        sample_seed: int = 0,
        min_words: int | None = None,
        only: list[str] | None = None,
        exclude: list[str] | None = None,
        limit: int | None = None,
        closed_after_s: float | None = None,
        now_s: float | None = None,
        judged: set[tuple[str, str]] | None = None,
        judged_as: Callable[[ConversationalEvalTestCase], ConversationalEvalTestCase] | None = None,
    ):
        self.shard = shard
        self.sample = sample
        self.sample_seed = sample_seed
        self.min_words = min_words
        self.only = [item.split("=", 1) for item in only or []]
        self.exclude = [item.split("=", 1) for item in exclude or []]
        self.limit = limit
        self.closed_after_s = closed_after_s
        self.now_s = time.time() if now_s is None else now_s  # one "now" for every pass over the input
        self.judged = judged or set()
        #: the conversation as the judge saw it (`--redact`: redacted), whose id and turns `judged` holds
        self.judged_as = judged_as
        self.untimed = 0  # conversations `closed_after_s` counted as closed for want of a time
        self.unreadable_times = 0  # conversations with a time `closed_after_s` could not read
        self.time_problem: str | None = None  # the last conversation's unreadable time: field and value
        self.left_out: Counter = Counter()
        self.last_reason: str | None = None  # why the last conversation was not chosen
        self._taken = 0

    @property
    def full(self) -> bool:
        """The selection has taken its `limit`: no conversation after this one is chosen."""
        return self.limit is not None and self._taken >= self.limit

    def fresh(self) -> Selection:
        """The same selection, with its counts and its limit reset, for another pass."""
        again = copy.copy(self)
        again.left_out, again.last_reason, again._taken, again.untimed = Counter(), None, 0, 0
        again.unreadable_times, again.time_problem = 0, None
        return again

    def choose(self, case: ConversationalEvalTestCase) -> bool:
        """True when the run judges `case`; else `last_reason` says why not."""
        self.time_problem = None
        reason = self.last_reason = self._reason(case)
        if reason is None:
            self._taken += 1
            return True
        if reason != "shard":
            self.left_out[reason] += 1
        return False

    def _reason(self, case: ConversationalEvalTestCase) -> str | None:
        if self.shard is not None and stable_hash(case.id or "") % self.shard[1] != self.shard[0] - 1:
            return "shard"
        if self.sample is not None and stable_hash(f"{self.sample_seed}:{case.id}") / 16**16 >= self.sample:
            return "sample"
        if self.min_words is not None and word_count(case) < self.min_words:
            return "min_words"
        if any(_metadata_value(case, field) != value for field, value in self.only):
            return "only"
        if any(_metadata_value(case, field) == value for field, value in self.exclude):
            return "exclude"
        if self.closed_after_s is not None and self._open(case):
            return "open"
        if self.judged:
            seen = case if self.judged_as is None else self.judged_as(case)
            if (seen.id, turns_sha256(seen)) in self.judged:
                return "judged"
        if self.limit is not None and self._taken >= self.limit:
            return "limit"
        return None

    def _open(self, case: ConversationalEvalTestCase) -> bool:
        problems: list[str] = []
        last_s = last_message_s(case, problems)
        if problems:
            self.unreadable_times += 1
            self.time_problem = problems[0]
        if last_s is None:
            self.untimed += not problems
            return False
        return last_s > self.now_s - self.closed_after_s  # type: ignore[operator]


def last_message_s(case: ConversationalEvalTestCase, problems: list[str] | None = None) -> float | None:
    """When `case`'s last message was, in Unix seconds: metadata `ended_at`, else the latest of
    `chat_date`, `started_at` and `timestamp` (as `seconds_of` reads a time; a date alone is its
    midnight UTC); None when none of them is there and readable. Each field read that is there
    but cannot be read adds a line naming it and its value to `problems`, if given."""
    found = []
    for name in ("ended_at", *DATE_FIELDS):
        value = case.metadata.get(name)
        moment = seconds_of(value)
        if moment is None and value is not None and problems is not None:
            shown = repr(value)
            problems.append(f"metadata.{name}: {shown if len(shown) <= 60 else shown[:59] + '…'} is not a time")
        if name == "ended_at" and moment is not None:
            return moment
        found.append(moment)
    return max((moment for moment in found if moment is not None), default=None)


def stable_hash(text: str) -> int:
    """A 64-bit number from a hash of `text`: the same on every machine and every run."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:16], 16)


def word_count(case: ConversationalEvalTestCase) -> int:
    """Words of both sides of the conversation."""
    return sum(len(turn.input.split()) + len((turn.actual_output or "").split()) for turn in case.turns)


def _metadata_value(case: ConversationalEvalTestCase, field: str) -> str | None:
    if field not in case.metadata:
        return None
    value = case.metadata[field]
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def scan(inputs: InputSet, selection: Selection | None = None, date_field: str | None = None) -> ScanReport:
    """Validate every record and count those the `selection` chooses. Duplicate ids are problems too.
    Chosen conversations whose chat date (`date_field`, as `chat_date` reads it) is there but
    cannot be read are counted, the first named: their rows will have no chat date."""
    report = ScanReport(files=len(inputs.files))
    seen: dict[str, str] = {}
    selection = selection or Selection()
    inputs.push_down(selection)  # a Parquet file's query skips what the selection cannot choose
    for record in with_duplicates_marked(inputs.records(), seen):
        case = record.case  # a record without problems has its conversation (`parse_record`)
        if record.problems or case is None:
            report.invalid_sources.add(str(record.source))
            report.invalid_records.append(record.source)
            report.invalid_names[str(record.source)] = record.name
            report.problems.extend(record.problems)
        else:
            report.valid += 1
            chosen = selection.choose(case)
            report.selected += chosen
            if selection.time_problem and not report.first_unreadable_time:
                report.first_unreadable_time = f"{record.source} id {case.id!r}: {selection.time_problem}"
            report.formats[record.format] += 1
            unreadable: list[str] = []
            if chosen and chat_date(case, date_field, unreadable) is None and unreadable:
                report.unreadable_dates += 1
                if not report.first_unreadable_date:
                    report.first_unreadable_date = f"{record.source} id {case.id!r}: {unreadable[0]}"
    report.left_out = dict(selection.left_out)
    report.untimed = selection.untimed
    report.unreadable_times = selection.unreadable_times
    report.barren = list(inputs.barren)
    report.files -= len(inputs.passed_over)  # a CSV no format takes is named, not counted as read
    return report


def barren_lines(report: ScanReport) -> list[str]:
    """A line for each file of the scan that yielded no conversation."""
    return [f"{shown}: no conversation in this file" for shown in report.barren]


SKIP_INVALID_HINT = "fix them, or pass --skip-invalid to judge the valid conversations only"


def raise_for_problems(
    report: ScanReport, hint: str | None = None, headline: str = "problem(s) in the input; no conversation was judged"
) -> None:
    """Raise `InputError` listing the scan's problems (at most `MAX_PROBLEMS_SHOWN`) under
    `headline`, with `hint` after them."""
    if report.problems:
        shown = report.problems[:MAX_PROBLEMS_SHOWN]
        if len(report.problems) > MAX_PROBLEMS_SHOWN:
            shown.append(f"... and {len(report.problems) - MAX_PROBLEMS_SHOWN} more problems")
        raise InputError(shown, total=len(report.problems), hint=hint, headline=headline)


def nothing_to_judge(paths: Sequence[Any], left_out: dict[str, int] | None = None) -> InputError:
    """The error for a run that selects no conversation: a gate never passes on nothing. The
    open and already judged conversations `left_out` counts are named: they are not lost."""
    named = ", ".join(map(str, paths)) or "the input"
    return InputError(
        [f"{named}: no conversation selected to judge", *skipped_lines(left_out or {})],
        headline="nothing to judge",
        hint="pass --allow-empty if an empty input is expected",
        counted=False,
    )


#: the selection's reasons that are told as conversations skipped, each in these words
LEFT_OUT_SKIPS = {"open": ("open", "--closed-after"), "judged": ("already judged", "--history")}


def skipped_lines(left_out: dict[str, int]) -> list[str]:
    """One line per reason of `left_out` (counts by reason) told as conversations skipped:
    "skipped 2 open conversation(s) (--closed-after)"."""
    return [
        f"skipped {count} {LEFT_OUT_SKIPS[reason][0]} conversation(s) ({LEFT_OUT_SKIPS[reason][1]})"
        for reason, count in left_out.items()
        if reason in LEFT_OUT_SKIPS
    ]
