"""Reading conversations: files, directories or stdin; turn and OpenAI chat formats.

Records are read as a stream. `scan` validates everything before any judge call;
`iter_cases` then yields the valid conversations one at a time.
"""

from __future__ import annotations

import copy
import hashlib
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError

from flowrate.exit_codes import ConfigError, InputError
from flowrate.models import ConversationalEvalTestCase, EvalTestCase, Source, chat_date

INPUT_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}
STDIN = "-"
MAX_PROBLEMS_SHOWN = 50
TOOL_TEXT_LIMIT = 300


# -- raw record shapes, validated by pydantic ------------------------------------
class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: StrictStr | StrictInt | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    labels: dict[str, StrictFloat | StrictInt | None] = Field(default_factory=dict)


class _Turn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    input: StrictStr
    actual_output: StrictStr


class _TurnRecord(_Record):
    turns: list[_Turn] = Field(min_length=1)
    chatbot_role: StrictStr | None = None
    trailing_user_utterance: StrictStr | None = None


class _TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: StrictStr
    text: StrictStr | None = None


class _ToolFunction(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: StrictStr
    arguments: StrictStr | dict[str, Any] = ""


class _ToolCall(BaseModel):
    model_config = ConfigDict(extra="ignore")

    function: _ToolFunction


Role = Literal["system", "developer", "user", "assistant", "tool"]


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Role
    content: StrictStr | list[_TextPart] | None = None
    tool_calls: list[_ToolCall] | None = None
    name: StrictStr | None = None


class _ChatRecord(_Record):
    messages: list[_Message] = Field(min_length=1)


# -- what the reader yields ------------------------------------------------------
@dataclass
class Record:
    """One input record: a valid conversation, or the problems that make it invalid."""

    source: Source
    format: str  # "turns", "messages" or "unknown"
    case: ConversationalEvalTestCase | None = None
    labels: dict[str, float | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    given_id: str | None = None  # the id an invalid record gives, for reports to name it by

    @property
    def name(self) -> str:
        """How reports name the record: its id (an invalid one's own, when it gives one), else its place."""
        return (self.case.id if self.case is not None else None) or self.given_id or str(self.source)


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

    @property
    def invalid(self) -> int:
        return len(self.invalid_sources)


BOM = b"\xef\xbb\xbf"  # editors on Windows start UTF-8 files with it


class InputSet:
    """The paths of one run, with stdin spooled to a temporary file so it can be read twice.

    A path given twice (compared resolved) is read once, and so is stdin. `output` is the
    run's results file: it may never be an input, and a directory scan passes over it.
    A flowrate results file found in a directory is passed over with a notice; one named
    directly is a problem.
    """

    def __init__(self, paths: list[str], output: str | None = None):
        self.files: list[tuple[Path, str, str]] = []  # (path to read, name shown, base of default ids)
        self.notices: list[str] = []
        self._spool: tempfile.TemporaryDirectory | None = None
        problems: list[str] = []
        target = _resolved(output) if output and output != STDIN else None
        seen: set[Path | str] = set()

        def add(path: Path, shown: str, id_base: str, named: bool) -> None:
            resolved = _resolved(str(path))
            if resolved in seen:
                return
            seen.add(resolved)
            is_results = looks_like_results(path)
            if resolved == target and (named or not (is_results or _is_empty(path))):
                problems.append(
                    f"{shown}: is both an input and the --output file; writing results there would destroy it"
                )
            elif resolved == target:
                return  # the run's own output, inside a directory it reads
            elif is_results and named:
                problems.append(
                    f"{shown}: this is a flowrate results file, not conversations; give the conversations it was made from"
                )
            elif is_results:
                self.notices.append(f"{shown}: passed over, it is a flowrate results file")
            else:
                self.files.append((path, shown, id_base))

        for given in paths:
            if given == STDIN:
                if STDIN not in seen:
                    seen.add(STDIN)
                    self.files.append((self._spool_stdin(), "<stdin>", "<stdin>"))
                continue
            path = Path(given)
            if path.is_dir():
                found = sorted(p for p in path.rglob("*") if p.suffix.lower() in INPUT_SUFFIXES and p.is_file())
                if not found:
                    problems.append(f"{given}: no .jsonl, .json, .yaml or .yml files in this directory")
                for item in found:
                    add(item, str(item), item.relative_to(path).as_posix(), named=False)
            elif not path.exists():
                problems.append(f"{given}: no such file or directory")
            elif path.suffix.lower() not in INPUT_SUFFIXES:
                problems.append(f"{given}: unknown file type (expected .jsonl, .json, .yaml or .yml)")
            else:
                add(path, given, path.name, named=True)
        if problems:
            self.close()
            raise InputError(problems, hint=None)

    def _spool_stdin(self) -> Path:
        if self._spool is None:
            self._spool = tempfile.TemporaryDirectory(prefix="flowrate-stdin-")
        target = Path(self._spool.name) / "stdin.jsonl"
        with target.open("wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out)
        return target

    def records(self) -> Iterator[Record]:
        """Every record of every file, in order, valid or not."""
        for path, shown, id_base in self.files:
            kind = "jsonl" if shown == "<stdin>" else INPUT_SUFFIXES[path.suffix.lower()]
            try:
                yield from _READERS[kind](path, shown, id_base)
            except OSError as error:
                yield Record(
                    source=Source(path=shown, index=0),
                    format="unknown",
                    problems=[f"{shown}: cannot read: {error.strerror}"],
                )
            except UnicodeDecodeError as error:
                yield Record(
                    source=Source(path=shown, index=0),
                    format="unknown",
                    problems=[f"{shown}: not UTF-8 text (byte {error.start})"],
                )

    def close(self) -> None:
        if self._spool is not None:
            self._spool.cleanup()
            self._spool = None


def _resolved(path: str) -> Path:
    return Path(path).expanduser().resolve()


def _is_empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def looks_like_results(path: Path) -> bool:
    """True when the first record of a JSONL file is a flowrate results row, not a conversation."""
    if INPUT_SUFFIXES.get(path.suffix.lower()) != "jsonl":
        return False
    try:
        with path.open("rb") as handle:
            for line in handle:
                if line.strip():
                    first = orjson.loads(line.removeprefix(BOM))
                    break
            else:
                return False
    except (OSError, orjson.JSONDecodeError):
        return False
    return (
        isinstance(first, dict)
        and {"metric", "rubric_version"} <= first.keys()
        and not {"turns", "messages"} & first.keys()
    )


class Selection:
    """Which valid conversations a run judges, the same on every run and every machine.

    In order: the shard (`I/N` by id hash), the sample (a `fraction` of ids by a seeded
    hash), `min_words` (words of both sides), `only` and `exclude` (`FIELD=VALUE` on the
    metadata; a value is compared as written in JSON, so `handoff=true` matches `true`),
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
    ):
        self.shard = shard
        self.sample = sample
        self.sample_seed = sample_seed
        self.min_words = min_words
        self.only = [item.split("=", 1) for item in only or []]
        self.exclude = [item.split("=", 1) for item in exclude or []]
        self.limit = limit
        self.left_out: Counter = Counter()
        self.last_reason: str | None = None  # why the last conversation was not chosen
        self._taken = 0

    def fresh(self) -> Selection:
        """The same selection, with its counts and its limit reset, for another pass."""
        again = copy.copy(self)
        again.left_out, again.last_reason, again._taken = Counter(), None, 0
        return again

    def choose(self, case: ConversationalEvalTestCase) -> bool:
        """True when the run judges `case`; else `last_reason` says why not."""
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
        if self.limit is not None and self._taken >= self.limit:
            return "limit"
        return None


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
    for record in _with_duplicates_marked(inputs.records(), seen):
        if record.problems:
            report.invalid_sources.add(str(record.source))
            report.invalid_records.append(record.source)
            report.invalid_names[str(record.source)] = record.name
            report.problems.extend(record.problems)
        else:
            report.valid += 1
            chosen = selection.choose(record.case)  # type: ignore[arg-type]
            report.selected += chosen
            report.formats[record.format] += 1
            unreadable: list[str] = []
            if chosen and chat_date(record.case, date_field, unreadable) is None and unreadable:  # type: ignore[arg-type]
                report.unreadable_dates += 1
                if not report.first_unreadable_date:
                    report.first_unreadable_date = f"{record.source} id {record.case.id!r}: {unreadable[0]}"  # type: ignore[union-attr]
    report.left_out = dict(selection.left_out)
    return report


def iter_cases(inputs: InputSet) -> Iterator[Record]:
    """The valid records, in input order, each with its conversation."""
    for record in _with_duplicates_marked(inputs.records(), {}):
        if not record.problems:
            yield record


def labels_named(paths: list[str], label: str) -> dict[str, float]:
    """Each conversation's human label `label`, by id; records without it are left out."""
    inputs = InputSet(paths)
    try:
        raise_for_problems(scan(inputs))
        labels: dict[str, float] = {}
        seen: set[str] = set()
        for record in iter_cases(inputs):
            seen.update(record.labels)
            value = record.labels.get(label)
            if value is not None:
                labels[record.case.id] = float(value)  # type: ignore[union-attr]
    finally:
        inputs.close()
    if not labels:
        known = ", ".join(sorted(seen)) or "none"
        raise ConfigError(f"no record carries the label {label!r} (labels found: {known})")
    return labels


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


def _with_duplicates_marked(records: Iterator[Record], seen: dict[str, str]) -> Iterator[Record]:
    for record in records:
        if record.case is not None:
            first = seen.setdefault(record.case.id, str(record.source))
            if first != str(record.source):
                record.problems.append(f"{record.source}: id: duplicate id {record.case.id!r} (first seen at {first})")
        yield record


# -- file readers ----------------------------------------------------------------
def _read_jsonl(path: Path, shown: str, id_base: str) -> Iterator[Record]:
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if number == 1:
                line = line.removeprefix(BOM)
            if not line.strip():
                continue
            source = Source(path=shown, line=number)
            try:
                raw = orjson.loads(line)
            except orjson.JSONDecodeError as error:
                yield Record(source=source, format="unknown", problems=[f"{source}: invalid JSON: {error}"])
                continue
            yield parse_record(raw, source, default_id=f"{id_base}:{number}")


def _read_json(path: Path, shown: str, id_base: str) -> Iterator[Record]:
    try:
        document = orjson.loads(path.read_bytes().removeprefix(BOM))
    except orjson.JSONDecodeError as error:
        yield Record(
            source=Source(path=shown, line=error.lineno), format="unknown", problems=[f"{shown}: invalid JSON: {error}"]
        )
        return
    items = _conversation_list(document, shown)
    if isinstance(items, str):
        yield Record(source=Source(path=shown, index=0), format="unknown", problems=[items])
        return
    for index, raw in enumerate(items):
        yield parse_record(raw, Source(path=shown, index=index), default_id=f"{id_base}#{index}")


def _read_yaml(path: Path, shown: str, id_base: str) -> Iterator[Record]:
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    text = path.read_text(encoding="utf-8-sig")
    loader = loader_class(text)
    try:
        root = loader.get_single_node()
        if root is None:
            items: list[tuple[Any, int]] = []
        else:
            items = _yaml_items(loader, root, shown)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark else None
        where = f"{shown}:{line}" if line else shown
        problem = getattr(error, "problem", None) or str(error)
        yield Record(
            source=Source(path=shown, line=line), format="unknown", problems=[f"{where}: invalid YAML: {problem}"]
        )
        return
    except _NotAList as error:
        yield Record(source=Source(path=shown, index=0), format="unknown", problems=[str(error)])
        return
    finally:
        loader.dispose()
    for index, (raw, line) in enumerate(items):
        source = Source(path=shown, index=index, line=line)
        if isinstance(raw, _Refused):
            yield Record(source=source, format="unknown", problems=[f"{shown}:{line}: {raw.problem}"])
            continue
        yield parse_record(raw, source, default_id=f"{id_base}#{index}")


class _NotAList(Exception):
    pass


# A record's YAML may expand to at most this many values once its aliases are followed: a real
# conversation of 500 turns with metadata has a few thousand. A 496-byte "billion laughs" file
# (aliases nested 9 deep) expands to 10^9 and took 4.9 GB before this check.
MAX_YAML_VALUES = 100_000


class _Refused:
    """A YAML record not constructed, and why."""

    def __init__(self, problem: str):
        self.problem = problem


def _expanded_size(root: Any, limit: int) -> int:
    """How many values `root` becomes with its aliases followed, counted on the composed nodes
    (each node once, with memory) without building anything; stops counting past `limit`.
    A recursive alias counts as past the limit."""
    import yaml

    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        children = (
            [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else list(node.value)
        )
        if children_done:
            on_path.discard(key)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(child)] for child in children))
            continue
        if key in on_path:
            return limit + 1
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                return limit + 1
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _yaml_items(loader: Any, root: Any, shown: str) -> list[tuple[Any, int]]:
    import yaml

    node = root
    if isinstance(node, yaml.MappingNode):
        node = next((value for key, value in node.value if key.value == "conversations"), None)
    if not isinstance(node, yaml.SequenceNode):
        raise _NotAList(f"{shown}: expected a list of conversations, or a mapping with a `conversations` list")
    items: list[tuple[Any, int]] = []
    for item in node.value:
        line = item.start_mark.line + 1
        if _expanded_size(item, MAX_YAML_VALUES) > MAX_YAML_VALUES:
            refused = _Refused(
                f"its aliases expand to more than {MAX_YAML_VALUES:,} values; refused (a YAML alias bomb?)"
            )
            items.append((refused, line))
        else:
            items.append((loader.construct_document(item), line))
    return items


def _conversation_list(document: Any, shown: str) -> list[Any] | str:
    if isinstance(document, dict) and isinstance(document.get("conversations"), list):
        return document["conversations"]
    if isinstance(document, list):
        return document
    return f"{shown}: expected an array of conversations, or an object with a `conversations` list"


_READERS = {"jsonl": _read_jsonl, "json": _read_json, "yaml": _read_yaml}


# -- one record ------------------------------------------------------------------
def parse_record(raw: Any, source: Source, default_id: str) -> Record:
    """Validate one decoded record and turn it into a conversation."""
    where = _where(source)
    if not isinstance(raw, dict):
        return Record(
            source=source,
            format="unknown",
            problems=[f"{where}: a conversation must be an object, got {_type_name(raw)}"],
        )
    if "turns" in raw:
        model, fmt = _TurnRecord, "turns"
    elif "messages" in raw:
        model, fmt = _ChatRecord, "messages"
    else:
        return Record(
            source=source,
            format="unknown",
            problems=[f"{where}: has neither `turns` nor `messages`"],
            given_id=_given_id(raw),
        )
    try:
        parsed = model.model_validate(raw)
    except ValidationError as error:
        return Record(
            source=source,
            format=fmt,
            problems=[f"{where}: {line}" for line in _explain_all(error.errors())],
            given_id=_given_id(raw),
        )
    identity = str(parsed.id) if parsed.id is not None and str(parsed.id) != "" else default_id
    if isinstance(parsed, _TurnRecord):
        turns = [EvalTestCase(input=t.input, actual_output=t.actual_output) for t in parsed.turns]
        if parsed.trailing_user_utterance is not None:
            turns.append(EvalTestCase(input=parsed.trailing_user_utterance, actual_output=None))
        system = parsed.chatbot_role
    else:
        turns, system = _chat_to_turns(parsed.messages)
        if not turns:
            return Record(
                source=source,
                format=fmt,
                problems=[f"{where}: messages: has no user or assistant message"],
                given_id=_given_id(raw),
            )
    case = ConversationalEvalTestCase(id=identity, turns=turns, chatbot_role=system, metadata=parsed.metadata)
    return Record(source=source, format=fmt, case=case, labels=dict(parsed.labels))


def _given_id(raw: dict) -> str | None:
    """The id an invalid record gives, when it is a non-empty string or a number."""
    value = raw.get("id")
    if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value) != "":
        return str(value)
    return None


def _chat_to_turns(messages: list[_Message]) -> tuple[list[EvalTestCase], str | None]:
    """Merge consecutive messages of one side into turns; tools stay in the assistant's turn."""
    system_parts: list[str] = []
    turns: list[EvalTestCase] = []
    user_parts: list[str] | None = None
    reply_parts: list[str] | None = None
    activity: list[str] = []

    def close_turn() -> None:
        nonlocal user_parts, reply_parts, activity
        if user_parts is None and reply_parts is None:
            return
        reply = "\n".join(reply_parts) if reply_parts is not None else None
        turns.append(EvalTestCase(input="\n".join(user_parts or [""]), actual_output=reply, tool_activity=activity))
        user_parts, reply_parts, activity = None, None, []

    for message in messages:
        text = _content_text(message.content)
        if message.role in ("system", "developer"):
            if text:
                system_parts.append(text)
        elif message.role == "user":
            if reply_parts is not None:
                close_turn()
            user_parts = (user_parts or []) + [text]
        else:
            reply_parts = reply_parts if reply_parts is not None else []
            if message.role == "tool":
                activity.append(_clip(f"result {message.name or 'tool'}: {text}"))
                continue
            for call in message.tool_calls or []:
                arguments = call.function.arguments
                if not isinstance(arguments, str):
                    arguments = orjson.dumps(arguments).decode()
                activity.append(_clip(f"call {call.function.name}({arguments})"))
            if message.content is not None:
                reply_parts.append(text)
    close_turn()
    return turns, ("\n\n".join(system_parts) or None)


def _content_text(content: str | list[_TextPart] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(
        part.text if part.type == "text" and part.text is not None else f"[{part.type}]" for part in content
    )


def _clip(text: str) -> str:
    return text if len(text) <= TOOL_TEXT_LIMIT else text[: TOOL_TEXT_LIMIT - 1] + "…"


def _where(source: Source) -> str:
    if source.line is not None and source.index is not None:
        return f"{source.path}#{source.index} (line {source.line})"
    return str(source)


def _explain_all(errors: list[dict[str, Any]]) -> list[str]:
    """Plain words for each field, one line a field.

    A union (`content` may be a string, a list of parts or null) reports one error
    per branch: keep the deepest, and merge the branches' expectations at one field.
    """
    by_field: dict[str, list[dict[str, Any]]] = {}
    for error in errors:
        by_field.setdefault(_field_path(error["loc"]), []).append(error)
    lines = []
    for location, group in by_field.items():
        if any(other.startswith((location + ".", location + "[")) for other in by_field):
            continue
        expected = [_EXPECTED[e["type"]] for e in group if e["type"] in _EXPECTED]
        if len(group) > 1 and len(expected) == len(group):
            options = " or ".join(dict.fromkeys(expected))
            lines.append(f"{location}: must be {options}, got {_type_name(group[0].get('input'))}")
        else:
            lines.append(_explain(group[0]))
    return lines


_EXPECTED = {
    "string_type": "a string",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
    "dict_type": "an object",
    "int_type": "a whole number",
    "float_type": "a number",
}


def _explain(error: dict[str, Any]) -> str:
    """A pydantic error in plain words, with the field path first."""
    location = _field_path(error["loc"])
    kind = error["type"]
    value = error.get("input")
    if kind == "missing":
        return f"{location}: is missing"
    if kind == "too_short":
        return f"{location}: must not be empty"
    if kind == "literal_error":
        return f"{location}: unknown role {value!r} (expected system, developer, user, assistant or tool)"
    if kind in _EXPECTED:
        return f"{location}: must be {_EXPECTED[kind]}, got {_type_name(value)}"
    return f"{location}: {error['msg']}"


def _field_path(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        elif item in ("str", "int", "float", "list[_TextPart]", "dict[str,any]", "function-after") or "[" in str(item):
            continue  # pydantic's union branch names, not fields
        else:
            parts.append(str(item))
    return ".".join(parts) or "record"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return f"the decimal number {value!r}"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def load_transcripts(paths: list[str], ids: set[str]) -> dict[str, ConversationalEvalTestCase]:
    """The conversations with these ids, read again from `paths` (for reports); invalid
    records and unreadable paths are passed over."""
    try:
        inputs = InputSet(paths)
    except InputError:
        return {}
    try:
        return {record.case.id: record.case for record in iter_cases(inputs) if record.case.id in ids}  # type: ignore[union-attr,misc]
    finally:
        inputs.close()
