"""`--redact`: a conversation with every identifier the detectors find replaced by a typed
placeholder, `<EMAIL_1>`, `<PHONE_2>`, numbered in order of first mention inside that
conversation (the same identifier, the same placeholder, wherever it is mentioned), so the same
conversation is redacted the same way on every run and the response cache answers a rerun.
Its id, which rows, resumes and labels join on, gets placeholders named by a digest of what they
replace (`whatsapp:<PHONE_5d41402abc4b>`): the same id, the same redacted id, on every run."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.inputs.redaction.detectors import (
    AFTER_PHONES,
    PATTERN_DETECTORS,
    Span,
    detector_versions,
    find_phones,
)

if TYPE_CHECKING:
    from flowrate.settings.groups import RedactionOptions

# Phone regions read from a conversation's metadata (language, locale, country): a language alone
# stands for the country of the three seed languages' users.
LANGUAGE_REGIONS = {"en": "US", "english": "US", "pt": "BR", "portuguese": "BR", "português": "BR"}
LANGUAGE_REGIONS |= {"ru": "RU", "russian": "RU", "русский": "RU"}
REGION_FIELDS = ("region", "country", "locale", "language", "lang")


@dataclass(frozen=True)
class Rule:
    """A rule of the config's own (`redact_rules`): `pattern`, a compiled regular expression,
    whose matches are replaced by placeholders of `kind` (an order number's shape, a project's name)."""

    kind: str
    pattern: re.Pattern[str]

    @classmethod
    def of(cls, kind: str, pattern: str | None = None, term: str | None = None) -> Rule:
        """The rule of `kind` matching the regular expression `pattern`, or else the literal `term`
        as whole words in any case, however many spaces or line breaks split them."""
        if pattern is not None:
            return cls(kind, re.compile(pattern))
        words = r"\s+".join(re.escape(word) for word in (term or "").split())  # split by spaces or a line break
        return cls(kind, re.compile(rf"(?<!\w){words}(?!\w)", re.IGNORECASE))

    def find(self, text: str) -> Iterable[Span]:
        """The non-empty matches of the rule in `text`, keyed in lower case with single spaces."""
        for match in self.pattern.finditer(text):
            if match.end() > match.start():
                yield Span(match.start(), match.end(), self.kind, " ".join(match.group(0).lower().split()))


def regions_of(case: ConversationalEvalTestCase, regions: Sequence[str]) -> list[str]:
    """The phone regions `case` is read with: those its metadata names (`REGION_FIELDS`: a
    country code, a locale such as pt-BR, or a seed language), then `regions`, each once."""
    found = []
    for name in REGION_FIELDS:
        value = case.metadata.get(name)
        if not isinstance(value, str) or not value.strip():
            continue
        text = value.strip()
        language, _, country = text.replace("_", "-").partition("-")
        if len(country) == 2:
            found.append(country.upper())
        elif len(text) == 2 and text.isupper():
            found.append(text)
        elif language.lower() in LANGUAGE_REGIONS:
            found.append(LANGUAGE_REGIONS[language.lower()])
    return list(dict.fromkeys([*found, *(region.upper() for region in regions)]))


class Redactor:
    """Replaces identifiers in conversations: the config's `rules` first, then the pattern
    detectors, then phone numbers read with each case's `regions_of(case, regions)` (the longest
    reading first: "8 (912) 345-67-89" is a Russian number, not a US one after the 8); where two
    spans overlap, the one found first in that order is kept; a bare CPF comes after the phones."""

    def __init__(self, rules: Sequence[Rule] = (), regions: Sequence[str] = ("US", "BR", "RU")):
        self.rules = tuple(rules)
        self.regions = tuple(regions)
        self.versions = detector_versions() + (f"; {len(self.rules)} rule(s) of the config" if self.rules else "")

    def spans(self, text: str, regions: Sequence[str]) -> list[Span]:
        """The identifiers of `text` (phones read as numbers of `regions`), apart, in text order."""
        taken: list[Span] = []
        found = [rule.find(text) for rule in self.rules]
        found += [detector.find(text) for detector in PATTERN_DETECTORS]
        found.append(sorted(find_phones(text, regions), key=lambda span: span.start - span.end))  # the longest reading
        found += [detector.find(text) for detector in AFTER_PHONES]
        for spans in found:
            for span in spans:
                if all(span.end <= other.start or span.start >= other.end for other in taken):
                    taken.append(span)
        return sorted(taken, key=lambda span: span.start)

    def redact_id(self, case: ConversationalEvalTestCase) -> str | None:
        """`case`'s id with each identifier found in it replaced by `<KIND_digest>`, the first 12
        hexadecimal digits of the SHA-256 of the text replaced: ids that differ stay apart (a
        phone's placeholder inside the conversation, `<PHONE_1>`, would make two customers one),
        and the same id is redacted the same way wherever it is read again (reports, review)."""
        if case.id is None:
            return None
        pieces, at = [], 0
        for span in self.spans(case.id, regions_of(case, self.regions)):
            digest = hashlib.sha256(f"flowrate-id 1:{case.id[span.start : span.end]}".encode()).hexdigest()[:12]
            pieces += [case.id[at : span.start], f"<{span.kind}_{digest}>"]
            at = span.end
        return "".join([*pieces, case.id[at:]])

    def redact(self, case: ConversationalEvalTestCase) -> ConversationalEvalTestCase:
        """`case` with its id (`redact_id`), system prompt, turns, tool activity and metadata text
        redacted; its `redactions` count the mentions replaced by type in its text (not its id),
        its `redacted_by` names the detectors."""
        text = _Placeholders(self, regions_of(case, self.regions))
        role = None if case.chatbot_role is None else text(case.chatbot_role)
        turns = [
            turn.model_copy(
                update={
                    "input": text(turn.input),
                    "tool_activity": [text(line) for line in turn.tool_activity],
                    "actual_output": None if turn.actual_output is None else text(turn.actual_output),
                }
            )
            for turn in case.turns
        ]
        return case.model_copy(
            update={
                "id": self.redact_id(case),
                "chatbot_role": role,
                "turns": turns,
                "metadata": text.value(case.metadata),
                "redactions": dict(sorted(text.counts.items())),
                "redacted_by": self.versions,
            }
        )


class _Placeholders:
    """One conversation's placeholders: each identifier's, by type and key, numbered by type in
    order of first mention; `counts` counts the mentions replaced."""

    def __init__(self, redactor: Redactor, regions: Sequence[str]):
        self.redactor = redactor
        self.regions = regions
        self.numbers: dict[tuple[str, str], str] = {}
        self.per_kind: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()

    def __call__(self, text: str) -> str:
        pieces, at = [], 0
        for span in self.redactor.spans(text, self.regions):
            placeholder = self.numbers.get((span.kind, span.key))
            if placeholder is None:
                self.per_kind[span.kind] += 1
                placeholder = self.numbers[span.kind, span.key] = f"<{span.kind}_{self.per_kind[span.kind]}>"
            self.counts[span.kind] += 1
            pieces += [text[at : span.start], placeholder]
            at = span.end
        return "".join([*pieces, text[at:]])

    def value(self, value: Any) -> Any:
        """`value` (a metadata value) with its text redacted, inside lists and mappings too."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        return value


def redactor_of(settings: RedactionOptions) -> Redactor | None:
    """The run's redactor from its `settings` (None: `--redact` is off)."""
    if not settings.redact:
        return None
    return Redactor(
        [Rule.of(rule.type, rule.pattern, rule.term) for rule in settings.redact_rules], settings.redact_regions
    )


def as_judged(
    transcripts: dict[str, ConversationalEvalTestCase],
    redacted: set[str],
    redactor: Redactor | None,
    originals: bool = False,
) -> dict[str, ConversationalEvalTestCase]:
    """`transcripts` read again from the input files for a page (a report, the review app), by
    the ids their rows hold: those whose redacted ids are in `redacted` (their rows were
    redacted) redacted by `redactor` as the judge saw them, or as read with `originals`
    (`--keep-originals`); None: every one as read, by its own id."""
    if redactor is None:
        return transcripts
    shown = {}
    for key, case in transcripts.items():
        judged_id = redactor.redact_id(case) or key
        if judged_id in redacted:
            shown[judged_id] = case if originals else redactor.redact(case)
        else:
            shown[key] = case
    return shown


def withheld_reason(
    recorded: dict[str, int], case: ConversationalEvalTestCase, redacted_by: str | None = None
) -> str | None:
    """Why `case`, redacted again for a page, may not be shown where its run recorded `recorded`
    (a row's `redactions`, by `redacted_by`): the types of which the run replaced more mentions
    than this redaction did (the case's); None when it replaced at least as many of each (a run's
    `redact_rules` not given again leave their names, order numbers or keys in the text)."""
    made = case.redactions or {}
    short = {kind: count for kind, count in recorded.items() if made.get(kind, 0) < count}
    if not short:
        return None
    judged = ", ".join(f"{kind} {count}" for kind, count in sorted(short.items()))
    here = ", ".join(f"{kind} {made.get(kind, 0)}" for kind in sorted(short))
    by = f" by {redacted_by}" if redacted_by else ""
    return (
        f"Transcript not shown: the run that judged it replaced {judged} mention(s) in it (redacted{by}), this"
        f" redaction only {here}, so it would show what the run kept from the judge. Give the run's --config (its"
        " redact_rules) to see the conversation as the judge saw it, or --keep-originals to see the original text."
    )


def shown_as_judged(
    transcripts: dict[str, ConversationalEvalTestCase],
    recorded: dict[str, tuple[dict[str, int], str | None]],
    redactor: Redactor | None,
    originals: bool = False,
) -> tuple[dict[str, ConversationalEvalTestCase], dict[str, str]]:
    """`transcripts` as a page shows them (`as_judged`, the redacted rows' ids and what each
    recorded in `recorded`: its `redactions` and `redacted_by`), and those it may not show with
    the reason (`withheld_reason`); none withheld as read (`originals`, or no `redactor`)."""
    cases = as_judged(transcripts, set(recorded), redactor, originals)
    withheld: dict[str, str] = {}
    if redactor is not None and not originals:
        for key, (made, by) in recorded.items():
            if key in cases and (reason := withheld_reason(made, cases[key], by)) is not None:
                withheld[key] = reason
    return {key: case for key, case in cases.items() if key not in withheld}, withheld


def detectors_ran(redactor: Redactor) -> str:
    """The run's notice of what `redactor` replaces, and what it cannot (no named-entity model)."""
    own = f", and {len(redactor.rules)} rule(s) of the config" if redactor.rules else ""
    return (
        f"--redact: emails, phones (read as {', '.join(redactor.regions)} numbers too), payment cards, IBANs, IP"
        f" addresses, URLs with secrets, API keys, tokens and labelled passwords, SSN, CPF, CNPJ, INN, SNILS and"
        f" labelled dates of birth{own}"
        f" ({redactor.versions}); names and street addresses are not redacted (no named-entity model)"
    )
