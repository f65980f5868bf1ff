"""Helpers the tests of several stages share: plain functions, classes and constants (fixtures are
in `tests/conftest.py`). The scripted judge is `tests/judge_server.py`, the fake Files and Batches
endpoints `tests/batch_server.py`.

Where two stages' tests built rows or labels with different defaults under one short name, each
builder here is named for its defaults (`march_row`, `june_row`, `march_label`, `january_label`,
`evaluation_row`, `verdict_record`), and a test file imports the one it uses under that short name
(`from tests.helpers import june_row as row`)."""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from flowrate import ConversationalEvalTestCase, ConversationalFlowRateMetric, CustomLLMClient, EvalTestCase
from flowrate.inputs.conversation import Source
from flowrate.judge.retry import RetryPolicy
from flowrate.results.rows import EvaluationRow

ROOT = Path(__file__).resolve().parents[1]
PACKAGED_RUBRIC = ROOT / "flowrate" / "rubrics" / "conversational_flow.yaml"
TEST_KEY = "sk-test-0123456789abcdef"
FLOWRATE = shutil.which("flowrate", path=str(Path(sys.executable).parent)) or "flowrate"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# headless as root, and none of the background connections this machine's closed network refuses
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
# Two retries with no wait before them, each attempt within 5 s. Only a raised error is retried: a
# scripted client never raises, so the count matters only where the scripted judge fails a call.
NO_WAIT = RetryPolicy(max_retries=2, timeout=5, backoff=0, backoff_max=0)


# -- GitHub Actions' runner -------------------------------------------------------------------------
# The commands the runner registers (actions/runner, src/Runner.Worker/ActionCommandManager.cs: each
# IActionCommandExtension's `Command`, and `stop-commands`); it compares them ignoring case.
RUNNER_COMMANDS = {
    "set-env", "set-output", "save-state", "add-mask", "add-path", "add-matcher", "remove-matcher",
    "debug", "warning", "error", "notice", "group", "endgroup", "echo", "stop-commands",
}  # fmt: skip
# .NET's Char.IsWhiteSpace, which the runner's TrimStart() removes before looking for `::`
DOTNET_WHITESPACE = (
    "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)

# ids a runner would act on if printed raw: at a line's start, after a CR, after a no-break or wide
# space (TrimStart), and the legacy form anywhere in a line
HOSTILE_IDS = [
    "::stop-commands::abc",
    "ok\r::error::after a carriage return",
    "\u00a0::warning::no-break space",
    "::group::a group",
    "::endgroup::",
    "legacy ##[error]anywhere",
    "\u3000::notice::wide space",
    "::ERROR::upper case",
]


def workflow_commands(text):
    """The workflow commands GitHub's runner finds in `text`, printed by a step (actions/runner:
    src/Runner.Sdk/ProcessInvoker.cs reads each line with StreamReader.ReadLine, split at CR, LF or
    CRLF; src/Runner.Common/ActionCommand.cs TryParseV2 takes `::name k=v,…::data` after TrimStart,
    TryParse the legacy `##[name k=v;…]data` anywhere in a line), as (name, properties, data) with
    the escapes undone; a command is one whose name the runner registered, in any case."""
    found = []
    for line in re.split(r"\r\n|\r|\n", text):
        message = line.lstrip(DOTNET_WHITESPACE)
        end = message.find("::", 2)
        if message.startswith("::") and end >= 0:
            name, _, props = message[2:end].partition(" ")
            if name.lower() in RUNNER_COMMANDS:
                properties = dict(pair.split("=", 1) for pair in props.strip().split(",") if "=" in pair)
                unescaped = {key: _unescape(value, property=True) for key, value in properties.items()}
                found.append((name, unescaped, _unescape(message[end + 2 :])))
                continue
        start = line.find("##[")
        if start >= 0 and "]" in line[start:]:
            info = line[start + 3 : line.index("]", start)]
            if info.split(" ")[0].lower() in RUNNER_COMMANDS:
                found.append((info.split(" ")[0], {}, line[line.index("]", start) + 1 :]))
    return found


def _unescape(text, property=False):
    pairs = [("%0D", "\r"), ("%0A", "\n")] + ([("%3A", ":"), ("%2C", ",")] if property else []) + [("%25", "%")]
    for escaped, raw in pairs:
        text = text.replace(escaped, raw)
    return text


# -- conversations and results files ------------------------------------------------------------------
def watched(page, errors):
    """`page` with its console errors, page errors and dialogs (dismissed) put in `errors`, as
    every browser test watches the page it draws."""
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("dialog", lambda dialog: (errors.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    return page


def turn_record(conversation_id, *texts, **extra):
    """A turn-format record; texts alternate user, assistant."""
    pairs = [{"input": texts[i], "actual_output": texts[i + 1]} for i in range(0, len(texts), 2)]
    return {"id": conversation_id, "turns": pairs, **extra}


def distinct(count, prefix="c"):
    """`count` one-turn records, `{prefix}0`, `{prefix}1`, ..., each with its own text (no cache hits)."""
    return [turn_record(f"{prefix}{n}", f"question {prefix}{n}", f"answer {n}") for n in range(count)]


def long_conversation(turns=60):
    """The record `long`: `turns` long turns, each user message marked MARK-TURN-n."""
    texts = []
    for n in range(1, turns + 1):
        texts += [f"MARK-TURN-{n} user asks about the parcel " + "details " * 20, f"reply {n} " + "words " * 20]
    return turn_record("long", *texts)


def write_jsonl(path, records):
    """Write `records` as JSONL (UTF-8, non-ASCII kept) and return `path`."""
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8")
    return path


def read_rows(path):
    """The rows of a JSONL results file, blank lines skipped."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def ids(rows):
    """The rows' conversation ids, sorted."""
    return sorted(row["id"] for row in rows)


def packaged_rubric_text():
    """The packaged Conversational Flow Rate rubric, as its file holds it."""
    return PACKAGED_RUBRIC.read_text()


# -- the Python API with a client of its own ------------------------------------------------------------
class ScriptedClient(CustomLLMClient):
    """A custom client that answers with `replies` in turn (the last one again when they run out),
    at $0.001 a call, and keeps every call's messages and temperature in `calls`."""

    def __init__(self, *replies):
        self.replies = list(replies)
        self.calls = []

    async def chat_complete(self, messages, temperature):
        self.calls.append((messages, temperature))
        return self.replies[min(len(self.calls) - 1, len(self.replies) - 1)], 0.001

    def get_model_name(self):
        return "scripted-client"


def verdict(value, issues=()):
    """A flow-metric reply judging `value`, with `issues` as its key issues."""
    return json.dumps({"reason": "because", "key_issues": list(issues), "verdict": value})


def conversation(*texts, id=None):
    """A conversation for the Python API; texts alternate user, assistant."""
    return ConversationalEvalTestCase(
        id=id, turns=[EvalTestCase(input=texts[i], actual_output=texts[i + 1]) for i in range(0, len(texts), 2)]
    )


def transport():
    """The transport this test runs through (the `transport` fixture sets FLOWRATE_TRANSPORT)."""
    return os.environ.get("FLOWRATE_TRANSPORT", "auto")


def http_metric(judge, **kwargs):
    """The flow metric judged by gpt-4o at the scripted judge, retried as `NO_WAIT` unless `retry` is given."""
    return ConversationalFlowRateMetric(
        model="gpt-4o", api_base=judge.base_url, retry=kwargs.pop("retry", NO_WAIT), transport=transport(), **kwargs
    )


# -- the virtual-agent suite ----------------------------------------------------------------------------
SUITE_MARK = "on eight criteria"  # in the virtual-agent rubric's instructions only
RATINGS = {
    "request_completion": 4,
    "intent_accuracy": 5,
    "slot_filling": 2,
    "smoothness": 3,
    "context_retention": 4,
    "truthfulness": 3,
    "conciseness": 1,
    "coherence": 5,
}


def suite_reply(ratings=None, **override):
    """A virtual-agent suite reply rating each criterion as `RATINGS`, changed by `ratings`; each
    `override` replaces a criterion's whole entry."""
    ratings = {**RATINGS, **(ratings or {})}
    criteria = {
        name: {"reason": f"{name} reason", "key_issues": [f"turn 1: {name} issue"], "rating": rating}
        for name, rating in ratings.items()
    }
    criteria.update(override)
    return json.dumps({"criteria": criteria})


# -- the scripted judge ---------------------------------------------------------------------------------
# A server's refusal of the request as invalid, as llama-cpp-python words it: pydantic's message in a 500.
PYDANTIC_500 = {
    "status": 500,
    "message": "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'messages', 1, 'content'),"
    " 'msg': 'Field required', 'input': {'role': 'user'}}\n",
}


def wait_for_requests(judge, count, timeout_s=60):
    """Wait until the scripted judge has seen `count` requests."""
    deadline = time.monotonic() + timeout_s
    while judge.requests < count and time.monotonic() < deadline:
        time.sleep(0.05)


def local_eval(judge, path, *extra, model="smol"):
    """`flowrate eval` against the scripted judge as a self-hosted model LiteLLM does not know."""
    return ("eval", path, "--api-base", judge.base_url, "--model", model, "-o", "out.jsonl", *extra)


def chat_bodies(judge, kind=None):
    """The chat requests the judge saw, those sending the schema as `kind` when given."""
    bodies = [body for body in judge.bodies if "messages" in body]
    if kind is None:
        return bodies
    return [body for body in bodies if (body.get("response_format") or {}).get("type") == kind]


def reask_text(body):
    """The last message of a request: a re-ask's reason and instructions."""
    return body["messages"][-1]["content"]


# -- provider batches -----------------------------------------------------------------------------------
MARK_FAIL = "MARK-BATCH-FAIL"


def batch_conversations(count, fail_every=None):
    """`count` records c0, c1, ...; every `fail_every`-th (c0 first) carries `MARK_FAIL`."""
    records = []
    for n in range(count):
        text = f"question {n}" + (f" {MARK_FAIL}" if fail_every and n % fail_every == 0 else "")
        records.append(turn_record(f"c{n}", text, f"answer {n}"))
    return records


def batch_args(batch_server, *extra, output="out.jsonl"):
    """`flowrate eval c.jsonl --batch` against the fake, polling with no wait."""
    return (
        "eval",
        "c.jsonl",
        "--batch",
        "--api-base",
        batch_server.base_url,
        "--poll-interval",
        "0",
        "-o",
        output,
        *extra,
    )


# -- reports --------------------------------------------------------------------------------------------
def mixed(tmp_path, judge):
    """Four conversations: two pass, one fails, one is an error; one more is invalid and one excluded."""
    judge.script(
        "MARK-MINOR", {"verdict": "minor", "reason": "loops", "key_issues": ["turn 2: asks again for the order number"]}
    )
    judge.script("MARK-500", {"status": 500})
    records = [
        turn_record("ok1", "hi", "hello"),
        turn_record("ok2", "hi again", "hello again"),
        turn_record("bad", "MARK-MINOR", "x", "y", "z"),
        turn_record("err", "MARK-500", "x"),
        {**turn_record("hr", "q", "a"), "metadata": {"topic": "HR"}},
    ]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    with path.open("a") as handle:
        handle.write('{"id": "broken", "turns": []}\n')
    return path


def judge_mixed(run_flowrate, judge, path, *extra):
    """`flowrate eval` of the mixed conversations: no retries, invalid records skipped."""
    return run_flowrate(
        "eval", path, "--api-base", judge.base_url, "--max-retries", "0", "--skip-invalid", *extra, "-o", "out.jsonl"
    )


# -- result rows and labels -----------------------------------------------------------------------------
def evaluation_row(
    conversation_id, score, threshold=0.7, metric="conversational_flow_rate", path="c.jsonl", line=1, **extra
):
    """A result row of `metric` with `score` (evaluated now, by gpt-4o unless `model` is given),
    from `path` at `line`; `verdict`, `evaluated_at` and any other row field may be given."""
    return EvaluationRow(
        id=conversation_id,
        source=Source(path=path, line=line),
        metric=metric,
        verdict=extra.pop("verdict", None),
        score=score,
        threshold=threshold,
        success=score >= threshold,
        model=extra.pop("model", "gpt-4o"),
        rubric_version="sha256:x",
        evaluated_at=extra.pop("evaluated_at", datetime.now(UTC)),
        **extra,
    )


def verdict_record(conversation_id, value, score=None):
    """A flow-metric row, as a results file holds it, judged `value` (scored as the verdict, unless `score`)."""
    scores = {"fully": 1.0, "mostly": 0.9, "partial": 0.7, "minor": 0.3, "none": 0.0}
    return {
        "id": conversation_id,
        "metric": "conversational_flow_rate",
        "verdict": value,
        "score": scores[value] if score is None else score,
        "threshold": 0.7,
        "success": scores[value] >= 0.7,
        "model": "gpt-4o",
        "rubric_version": "sha256:x",
        "evaluated_at": "2026-11-30T00:00:00Z",
    }


MONDAY_2_MARCH = datetime(2026, 3, 2, 9, tzinfo=UTC)  # ISO week 10
FIRST_OF_JUNE = datetime(2026, 6, 1, tzinfo=UTC)


def dated_row(conversation_id, metric, score, evaluated_at=MONDAY_2_MARCH, **extra):
    """A row of `metric` passing at 0.7 (an error row's `score` is None), by gpt-4o unless `model`
    is given, evaluated at `evaluated_at` (Monday 2 March 2026, ISO week 10, unless given)."""
    return EvaluationRow(
        id=conversation_id,
        source=Source(path="c.jsonl", line=1),
        metric=metric,
        score=score,
        threshold=0.7,
        success=None if score is None else score >= 0.7,
        model=extra.pop("model", "gpt-4o"),
        rubric_version="sha256:x",
        evaluated_at=evaluated_at,
        **extra,
    )


def march_row(conversation_id, metric, score, **extra):
    """`dated_row`, evaluated on Monday 2 March 2026 unless `evaluated_at` is given."""
    return dated_row(conversation_id, metric, score, **extra)


def june_row(conversation_id, metric, score, **extra):
    """`dated_row`, evaluated on 1 June 2026 unless `evaluated_at` is given."""
    return dated_row(conversation_id, metric, score, **{"evaluated_at": FIRST_OF_JUNE, **extra})


def write_rows(path, rows):
    """Result rows as a results file holds them."""
    path.write_text("".join(item.model_dump_json() + "\n" for item in rows))
    return path


def two_metric_rows():
    """Metrics a and b over two ISO weeks (10 and 11)."""
    return [
        march_row("c1", "a", 0.5),
        march_row("c2", "a", 0.9),
        march_row("c1", "b", 0.3),
        march_row("c3", "a", 1.0, evaluated_at=datetime(2026, 3, 9, 9, tzinfo=UTC)),
        march_row("c3", "b", 0.7, evaluated_at=datetime(2026, 3, 9, 9, tzinfo=UTC)),
    ]


def dated_rows():
    """Four flow rows, each with an evaluation date and a chat date in other ISO weeks."""
    rows = []
    for n, (evaluated, chat, score) in enumerate(
        [
            ("2026-03-02T09:00:00", "2026-02-27", 1.0),  # evaluated Monday of ISO week 10; chatted in week 9
            ("2026-03-03T09:00:00", "2026-02-27", 0.3),
            ("2026-03-09T09:00:00", "2026-03-09", 0.7),  # week 11
            ("2026-04-01T09:00:00", "2026-03-31", 0.9),
        ]
    ):
        stamp = datetime.fromisoformat(evaluated).replace(tzinfo=UTC)
        rows.append(june_row(f"t{n}", "conversational_flow_rate", score, evaluated_at=stamp, chat_date=chat))
    return rows


def march_label(conversation_id, metric, score, day="2026-03-01"):
    """A person's label, as a labels file holds it, given on 1 March 2026 unless `day` says otherwise."""
    return {"conversation_id": conversation_id, "metric": metric, "score": score, "labeled_at": day}


def january_label(conversation_id, metric, score, day="2026-01-15"):
    """A person's label, as a labels file holds it, given on 15 January 2026 (inside the six months
    before 30 June 2026) unless `day` says otherwise."""
    return {"conversation_id": conversation_id, "metric": metric, "score": score, "labeled_at": day}


# -- a full disk --------------------------------------------------------------------------------------
@contextlib.contextmanager
def small_disk(where, size_kb=512):
    """A file system of `size_kb` KiB mounted at `where` (a tmpfs: it needs root, as the test
    machine and CI give; skipped where mounting is not allowed), unmounted after."""
    import pytest

    Path(where).mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(where)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"a small file system cannot be mounted here: {mounted.stderr.strip()}")
    try:
        yield Path(where)
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill_disk(where, leave_bytes=0):
    """Fill the file system `where` is on (a `small_disk`) with a file `filler` there, leaving
    about `leave_bytes` free (in whole 4 KiB pages); returns the filler."""
    filler = Path(where) / "filler"
    handle = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(handle, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(handle)
    if leave_bytes:
        os.truncate(filler, max(filler.stat().st_size - leave_bytes, 0))
    return filler


def lines_in(path):
    """Lines in the results file a running `flowrate` writes at `path`, so far: 0 before it is
    made, and while the run's check that it can be written has made it and removed it again
    (`check_output_path`), which an `exists()` before the read does not see coming."""
    try:
        return len(path.read_bytes().splitlines())
    except FileNotFoundError:
        return 0
