"""Judging on Ray Data (`flowrate eval --engine ray`): the requests go through a `ray.data.llm`
processor, flowrate's request builder (`metrics.step.build_request`) as its preprocess and its
reply parser (`metrics.step.rows_from_reply`) as its postprocess, so the rows are the ones
`flowrate eval` writes.

The driver (this process) does what needs one place: the selection, the rows a resumed output
holds, the response cache (asked before anything is sent; the replies put in it as they come),
the `--max-cost` budget (each conversation's estimate reserved before it is sent) and the rows
written as they arrive. The processor sends; what it cannot do is done in further rounds, each a
dataset of its own: the re-asks `flowrate eval` would make, and the requests whose answer was an
error the processor does not retry (its HTTP stage retries 429, 408, 502, 503 and 504 itself;
a 500 comes back as the answer), each request up to `--max-retries` times, as `flowrate eval` retries it.
A stop keeps every call answered: the HTTP stage tells each answer to the run's desk as it comes
back (`ray_desk`, `ray_http`), where the driver reads those Ray Data has not handed over.

Ray is imported here, in `ray_desk` and in `ray_http` only, and only on this path
(`pip install 'flowrate[ray]'`)."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from flowrate.errors import ConfigError
from flowrate.evaluation.engine import INTERRUPT_GRACE_S, CostBudget, Tally, close_judges
from flowrate.evaluation.file_run import FileRun, begin, finish, tell_lost_cache_writes
from flowrate.evaluation.ray_cluster import before_import
from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.backend import LOGPROBS_KEYS, Usage
from flowrate.judge.errors import JudgeError, LogprobsRefused
from flowrate.judge.retry import error_message
from flowrate.metrics.planning import ERROR_MESSAGE_LIMIT, JudgePlan
from flowrate.metrics.rubric_metric import RubricMetric
from flowrate.metrics.step import (
    JudgeRequest,
    Reply,
    StepResult,
    build_look,
    build_request,
    cached_look,
    reply_from_answer,
    rows_from_reply,
    spend_of,
)
from flowrate.results.events import RunListener
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary
from flowrate.settings.options import JudgeSettings

RAY_EXTRA = "pip install 'flowrate[ray]'"
BATCH_SIZE = 16  # rows a vLLM actor takes at a time
# The HTTP stage sends a batch's requests one after another (aiohttp starts a request when it is
# awaited), so the calls in flight are the blocks its actors work on at once: `--concurrency`
# blocks, each actor taking its share of them concurrently (Ray Core's `max_concurrency`).
# Measured on 2 cores, 200 requests at 0.2 s, 2 actors: one call in flight with Ray's defaults
# (42.9 s); 8 blocks at once: 8 in flight (13.1 s); 13: 13 (7.1 s). More blocks than calls in
# flight cost more than they give: bench/ray.py, 1,000 at 0.2 s, -j 50: 4 blocks per call in
# flight 58.2 s, 1 block per call 25.5 s (each block is a task of Ray's, tens of ms on 2 cores).
HTTP_BATCH = 4  # rows of an HTTP stage's batch
FEED_ROWS = 1024  # processed rows read ahead of the driver (`RowFeed`)
FEED_POLL_S = 0.1  # how often a full feed looks whether it was closed
BLOCKS_PER_CALL_IN_FLIGHT = 1


def require_ray() -> Any:
    """`ray` with Ray Data and `ray.data.llm`, or a `ConfigError` saying how to install them."""
    try:
        import ray
        import ray.data.llm  # noqa: F401
    except ImportError as error:
        raise ConfigError(f"--engine ray needs Ray Data ({error}); install it with: {RAY_EXTRA}") from None
    return ray


def connect(address: str | None, join_timeout_s: float) -> tuple[Any, Any]:
    """Join the Ray cluster at `address` within `join_timeout_s` (see `ray_cluster.connect`):
    `ray`, and the connection to close at the run's end; Ray Data's progress output kept off the
    terminal."""
    import logging

    from flowrate.evaluation.ray_cluster import connect as join_cluster

    ray = require_ray()
    connection = join_cluster(ray, address, join_timeout_s)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.CRITICAL)  # a failed dataset is told by flowrate, once
    return ray, connection


class Stopped(Exception):
    """Ctrl-C or SIGTERM while the driver waited for Ray Data's next row."""


class StopSignals:
    """Ctrl-C and SIGTERM during a Ray run, heard in this (the main) thread: the run is marked
    interrupted and takes no more rows. `Stopped` is raised only while the driver waits for a row
    (`waiting`), so a row being written is written whole. Ray's handler for SIGTERM (exit 15)
    and asyncio's for Ctrl-C (which cancels the run only once Ray returns) are put aside meanwhile."""

    def __init__(self, summary: RunSummary):
        self.summary = summary
        self.requested = False
        self.heard_times = 0
        self.waiting = False
        self.replaced: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                self.replaced[number] = signal.signal(number, self.heard)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        for number, previous in self.replaced.items():
            signal.signal(number, previous)

    def heard(self, number: int, frame: Any) -> None:
        import signal

        self.requested = self.summary.interrupted = True
        self.heard_times += 1
        if number == signal.SIGTERM:
            self.summary.terminated = True
        if self.waiting:
            raise Stopped()

    def wait(self, step: Any, *args: Any) -> Any:
        """`step(*args)` with `Stopped` let through it (Ray Data's next row, a sleep)."""
        self.waiting = True
        try:
            return step(*args)
        finally:
            self.waiting = False

    def pause(self, seconds: float) -> bool:
        """Sleep `seconds` of a stop's grace: False once a second Ctrl-C or SIGTERM ended it."""
        try:
            if self.heard_times < 2:
                self.wait(time.sleep, seconds)
        except Stopped:
            pass
        return self.heard_times < 2


# -- what runs on the workers ------------------------------------------------------------------
_WORKER_METRICS: dict[str, dict[str, Any]] = {}  # a worker's metrics, by the judge settings they were built from


def worker_metric(judge: JudgeSettings, name: str) -> Any:
    """The metric `name` of `judge`, built once per worker process (no cache: the driver has it)."""
    from flowrate.metrics.catalog import build_metrics

    key = repr(judge)
    if key not in _WORKER_METRICS:
        _WORKER_METRICS[key] = {metric.name: metric for metric in build_metrics(judge, None)}
    return _WORKER_METRICS[key][name]


def preprocess(judge: JudgeSettings, row: dict[str, Any]) -> dict[str, Any]:
    """The processor's preprocess: flowrate's request builder, for the conversation in `row`
    (a re-ask or a retry carries its request made already)."""
    request = row["request"]
    if not request:
        metric = worker_metric(judge, row["metric"])
        if row["form"] and hasattr(metric.backend, "take_form"):  # the form the driver found the server takes
            metric.backend.take_form(None if row["form"] == NO_FORM else row["form"])
        case = ConversationalEvalTestCase.model_validate_json(row["case"])
        request = orjson.dumps(build_request(metric, case, lookup=False).to_dict()).decode()
    return {**row, "request": request, "payload": orjson.loads(request)["body"]}


def postprocess(judge: JudgeSettings, row: dict[str, Any]) -> dict[str, Any]:
    """The processor's postprocess: flowrate's reply parser, turning the answer into the rows
    `flowrate eval` writes (a re-ask's answer, once read as a completion, goes back as it came, for the driver to finish)."""
    answer = plain(row.get("http_response"))
    out = {name: row[name] for name in ROW_COLUMNS}
    out.update(rows="", reasks="", cache_texts="", cache_logprobs="", answer=orjson.dumps(answer).decode(), failure="")
    failure = answer_error(answer)
    if failure is not None:
        out["failure"] = orjson.dumps(failure).decode()
        return out
    metric = worker_metric(judge, row["metric"])
    request = JudgeRequest.from_dict(orjson.loads(row["request"]))
    try:
        reply = reply_from_answer(metric, request, answer)
    except Exception as error:  # not a chat completion: as flowrate eval, an error row after retries
        out["failure"] = orjson.dumps({"status": 500, "message": str(error)}).decode()
        return out
    if row["kind"] != "judge":  # a re-ask's or a look's answer: the driver finishes the conversation
        return out
    case = ConversationalEvalTestCase.model_validate_json(row["case"])
    source = Source.model_validate_json(row["source"]) if row["source"] else None
    step = rows_from_reply(metric, case, request, reply, source=source)
    out["rows"] = orjson.dumps([r.model_dump(mode="json") for r in step.rows]).decode()
    out["reasks"] = orjson.dumps([reask.to_dict() for reask in step.reasks]).decode()
    out["cache_texts"] = orjson.dumps(step.cache_texts).decode()
    out["cache_logprobs"] = orjson.dumps(step.cache_logprobs).decode()
    return out


# a dataset row: the conversation (`order` in the input, `id`, the case and its source as JSON), the
# metric, the request when made already (a re-ask, a look, a retry), its `kind` ("judge", "reask"
# or "look": the verdict-first look of --score combined, sent beside the first request), the
# re-ask's `sample`, the rounds it has been `tries`ed in, the schema `form` the server takes, and
# `ask`, the row's number in the run (its call's, for the desk: `ray_desk`)
NO_FORM = "none"  # a row's `form` when the server takes no schema form ("": not told)
ROW_COLUMNS = ("order", "id", "metric", "case", "source", "request", "kind", "sample", "tries", "form", "ask")


def answer_error(answer: Any) -> dict[str, Any] | None:
    """The error an answer carries instead of a completion (OpenAI's `{"error": {...}}`), with the
    status its `code` gives (500 when it gives none), or None for a completion. A key one answer of
    a block lacks is None in it (Ray Data gives a block's rows one schema): an error answer holds
    `"choices": None` when a completion shares its block, a completion `"error": None`."""
    if not isinstance(answer, dict) or answer.get("error") is None or answer.get("choices") is not None:
        return None
    error = answer["error"]
    code = error.get("code") if isinstance(error, dict) else None
    status = int(code) if isinstance(code, int) or (isinstance(code, str) and code.isdigit()) else 500
    return {"status": status, "body": orjson.dumps(answer).decode()}


def failure_error(failure: dict[str, Any]) -> JudgeError:
    """The error `flowrate eval`'s direct transport raises for the same answer (`judge.errors.error_for`)."""
    from flowrate.judge.errors import ServerError, error_for

    if failure.get("body"):
        return error_for(failure["status"], failure["body"].encode(), {})
    return ServerError(failure["message"], status=failure["status"])


def planned(request: JudgeRequest) -> JudgePlan:
    """The plan of a request `build_request` made (one read back by `JudgeRequest.from_dict` has none)."""
    if request.plan is None:
        raise ValueError(f"{request.conversation_id}: a request read back without its plan")
    return request.plan


def reserved(budget: CostBudget | None, metric: RubricMetric, request: JudgeRequest) -> bool:
    """Whether `budget` (None: no bound) takes `request`'s estimated cost, which it then holds."""
    return budget is None or budget.reserve(metric.estimate(planned(request)).cost_usd or 0.0)


def plain(value: Any) -> Any:
    """`value` with the numpy arrays Ray Data may hand over turned back into lists."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        return plain(value.tolist())
    return value


# -- the processor --------------------------------------------------------------------------------
def endpoint(judge: JudgeSettings) -> tuple[str, dict[str, str]]:
    """The chat-completions URL and headers of the judge (`ConfigError` for one that does not speak
    OpenAI's protocol: the processor sends that protocol only)."""
    from flowrate.judge.address import JudgeAddress
    from flowrate.judge.direct import openai_endpoint

    address = JudgeAddress.parse(judge.model, judge.api_base)
    if not address.direct or (judge.api_base is None and address.provider == "azure"):
        raise ConfigError(
            f"--engine ray sends OpenAI chat-completions requests; model {judge.model!r} is not served that way"
            " (give an OpenAI model, or --api-base of an OpenAI-compatible server such as vLLM)"
        )
    base, headers = openai_endpoint(judge.api_base)
    return f"{base}/chat/completions", headers


def http_processor(judge: JudgeSettings, actors: int, rpm: float | None, concurrency: int, desk: Any = None) -> Any:
    """A `ray.data.llm` processor sending to the judge's OpenAI-compatible endpoint
    (`HttpRequestProcessorConfig`): `actors` senders with `concurrency` calls in flight between
    them, at most `rpm` a minute, flowrate's builder and parser around it; each call asked of
    `desk` before it is sent and its answer told to it (`ray_desk`; None: no desk)."""
    from functools import partial

    from ray.data.llm import HttpRequestProcessorConfig, build_processor

    url, headers = endpoint(judge)
    config = HttpRequestProcessorConfig(
        url=url,
        headers=headers,
        batch_size=HTTP_BATCH,
        concurrency=actors,
        qps=max(1, int(rpm / 60 / actors)) if rpm else None,
        max_retries=judge.max_retries,
        base_retry_wait_time_in_s=judge.backoff,
    )
    processor = build_processor(config, preprocess=partial(preprocess, judge), postprocess=partial(postprocess, judge))
    stage = processor.get_stage_by_name("HttpRequestStage")
    stage.map_batches_kwargs["max_concurrency"] = max(1, -(-concurrency // actors))  # see HTTP_BATCH
    if desk is not None:
        from flowrate.evaluation.ray_http import tell_desk

        tell_desk(processor, desk, ROW_COLUMNS)
    return processor


def vllm_processor(judge: JudgeSettings, model_source: str, actors: int, **engine_kwargs: Any) -> Any:
    """A `ray.data.llm` processor running vLLM on the workers' GPUs (`vLLMEngineProcessorConfig`;
    `model_source` a Hugging Face id or a path), with flowrate's builder and parser around it: the
    same messages, the reply schema as vLLM's structured output, the temperature and `max_tokens`,
    and the same rows. vLLM's stage returns one choice and no finish reason, so `--samples` must
    be 1 and a reply cut at its limit is read as unusable, not as cut. It needs vLLM and GPUs on the
    workers; flowrate's tests cannot run it (no GPU), so it is built and documented, not tested."""
    from functools import partial

    from ray.data.llm import build_processor, vLLMEngineProcessorConfig

    if judge.samples != 1:
        raise ConfigError("--samples must be 1 with vLLM on the workers (its Ray stage returns one choice)")
    config = vLLMEngineProcessorConfig(
        model_source=model_source, concurrency=actors, batch_size=BATCH_SIZE, engine_kwargs=engine_kwargs
    )
    return build_processor(config, preprocess=partial(to_vllm, judge), postprocess=partial(from_vllm, judge))


def to_vllm(judge: JudgeSettings, row: dict[str, Any]) -> dict[str, Any]:
    """flowrate's request as vLLM's stage takes it: the messages and the sampling parameters."""
    built = preprocess(judge, row)
    body = built.pop("payload")
    sampling: dict[str, Any] = {"temperature": body["temperature"], "max_tokens": body.get("max_tokens")}
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
    if schema is not None:
        sampling["structured_outputs"] = {"json": schema}
    return {**built, "messages": body["messages"], "sampling_params": sampling}


def from_vllm(judge: JudgeSettings, row: dict[str, Any]) -> dict[str, Any]:
    """vLLM's output as a chat completion, then flowrate's parser (`postprocess`)."""
    completion = {
        "choices": [{"message": {"content": row.get("generated_text") or ""}, "finish_reason": None}],
        "usage": {
            "prompt_tokens": int(row.get("num_input_tokens") or 0),
            "completion_tokens": int(row.get("num_generated_tokens") or 0),
        },
    }
    return postprocess(judge, {**row, "http_response": completion})


def stage_dataset(dataset: Any, path: Path) -> Path:
    """Stream the rows of a `ray.data.Dataset` of conversations into the JSONL file `path` on the
    driver, in the dataset's order (numpy arrays Ray Data hands over turned back into lists)."""
    with path.open("wb") as handle:
        for row in dataset.iter_rows():
            handle.write(orjson.dumps(plain(dict(row))) + b"\n")
    return path


def ray_failure(error: BaseException) -> str:
    """Why a dataset failed, in one line: the HTTP stage's retries spent and their last cause,
    else the error's last line (Ray's stack and colours left out)."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    spent = re.search(r"Reached maximum retries of (\d+)", text)
    if spent:
        cause = re.search(r"Previous Exception: ([^\n]*?)\. Full Traceback", text)
        why = f" (the last: {cause.group(1)})" if cause else ""
        return f"its HTTP stage gave up on a request after {spent.group(1)} retries{why}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return error_message(Exception(lines[-1] if lines else type(error).__name__), ERROR_MESSAGE_LIMIT)


# -- the driver ----------------------------------------------------------------------------------
@dataclass
class _Pending:
    """A conversation's metric sent and not finished: its first request's answer, and the
    answers to its re-asks as they come."""

    request: JudgeRequest
    first: dict[str, Any]
    reasks: list[JudgeRequest]
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)


def known_form(metric: Any) -> str:
    """The schema form the judge's server takes, for a row to tell its worker: a server at
    --api-base whose form is not known (llama-cpp-python refuses OpenAI's) has its first
    conversation judged on the driver, as eval judges it, which finds the form."""
    return getattr(metric.backend, "response_format_id", lambda: None)() or NO_FORM


def dataset_row(order: int, case: Any, source: Source | None, metric: str, **extra: Any) -> dict[str, Any]:
    """A row of a round's dataset (see `ROW_COLUMNS`): a conversation's metric to judge."""
    row = {"order": order, "id": case.id or "", "metric": metric, "case": case.model_dump_json()}
    row.update(source=source.model_dump_json() if source else "", request="", kind="judge", sample=-1, tries=1)
    row.update(form="", ask=0)
    row.update(extra)
    return row


class RowFeed:
    """The rows of a dataset, read from Ray Data in a thread of their own, so that a stop heard
    while the driver waits for one raises in that wait, not in Ray Data's iterator: an iterator
    that ends (an exception raised in it included) shuts its dataset's actors down at once, which
    cut the calls a stop gives their grace to (16 of 573 lost at -j 8). At most `FEED_ROWS` wait
    for the driver (Ray Data's backpressure holds the rest); `close` ends the reading."""

    END = object()

    def __init__(self, rows: Any):
        self.box: queue.Queue[Any] = queue.Queue(maxsize=FEED_ROWS)
        self.closing = threading.Event()
        threading.Thread(target=self._read, args=(rows,), name="flowrate-ray-rows", daemon=True).start()

    def _read(self, rows: Any) -> None:
        try:
            for row in rows:
                if not self._put(row):
                    break
        except BaseException as error:  # raised again on the driver's thread (`next`)
            self._put(error)
        finally:
            self._put(self.END)

    def _put(self, item: Any) -> bool:
        """Put `item` in the box once it has room; False once closed (nobody reads it)."""
        while not self.closing.is_set():
            try:
                self.box.put(item, timeout=FEED_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def next(self) -> Any:
        """The next row (None after the last), or Ray Data's error."""
        item = self.box.get()
        if isinstance(item, BaseException):
            raise item
        return None if item is self.END else item

    def close(self) -> None:
        """Read no row more (Ray Data's iterator ends at its next row, or at once if it waits for room)."""
        self.closing.set()


class RayRun:
    """One `--engine ray` run of a `FileRun` (see the module): the first round's dataset made on
    the driver, then the rounds sent through `processor` with `concurrency` calls in flight, each
    processed row taken by `answers`; `tally` counts and tells the rows. `clerk` keeps the desk
    the processor tells each answer to (`ray_desk`; None: a processor with no desk)."""

    def __init__(self, run: FileRun, tally: Tally, processor: Any, concurrency: int, clerk: Any = None):
        self.run = run
        self.tally = tally
        self.processor = processor
        self.concurrency = concurrency
        self.clerk = clerk
        self.asks = itertools.count(1)
        self.feed: RowFeed | None = None  # the dataset being read
        max_cost = run.settings.limit_settings.max_cost
        self.budget = CostBudget(max_cost) if max_cost is not None else None
        self.cases: dict[int, tuple[ConversationalEvalTestCase, Source | None]] = {}
        self.answers = RayAnswers(tally, self.cases)
        self.rounds = 0

    async def first_round(self, stop: StopSignals) -> list[dict[str, Any]]:
        """The rows of the first dataset: every selected conversation's metric not in the output,
        not cached and within the budget; the others are answered here (until a stop)."""
        rows: list[dict[str, Any]] = []
        emit_all = self.answers.rows.emit_all
        for order, (case, source) in enumerate(self.run.items(self.tally.listener), start=1):
            if stop.requested:
                break
            wanted = self.tally.wanted(case, order)
            self.cases[order] = (case, source)
            for index, metric in enumerate(wanted):
                if not isinstance(metric, RubricMetric) or not metric.calls_per_conversation:
                    emit_all(await metric.evaluate(case, source), order, metric.name)  # offline: no judge
                    continue
                request = build_request(metric, case)
                look = build_look(metric, request)
                seen = cached_look(look) if look is not None else None
                if request.cached_replies is not None and (look is None or seen is not None):
                    step = rows_from_reply(metric, case, request, None, source=source, look_reply=seen)
                    emit_all(step.rows, order, metric.name)
                    continue
                if not reserved(self.budget, metric, request):
                    self.tally.skip_for_budget(case, source, wanted[index:])
                    break
                # judged here: a server's form to find, or a cached reply whose look needs a call
                if not getattr(metric.backend, "form_settled", True) or request.cached_replies is not None:
                    emit_all(await metric.evaluate(case, source), order, metric.name)
                    continue
                rows.append(dataset_row(order, case, source, metric.name, form=known_form(metric)))
                if seen is not None:
                    self.answers.rows.wait.looked((order, metric.name), seen)
                elif look is not None:
                    rows.append(
                        dataset_row(
                            order, case, source, metric.name, request=orjson.dumps(look.to_dict()).decode(), kind="look"
                        )
                    )
        return rows

    def send(self, rows: list[dict[str, Any]], stop: StopSignals) -> None:
        """Send rounds until nothing is left: the re-asks, and the retries of errors the processor
        does not retry itself (each request at most `--max-retries` times). Each round sends the
        looks of `--score combined` after the other requests, as a dataset of their own: Ray Data
        gives the rows of a block one Arrow schema, so a look's reply schema sent beside a reasoned
        one came to the server with the reasoned one's properties added as nulls (the scripted
        judge saw `"reason": null` in every look). A stop ends it at once: the rows out are
        kept, the answers not out are the caller's to keep (`keep_answered`), the rest is left
        for --resume (the caller leaves Ray, which ends the run's workers)."""
        import ray

        retries = self.run.settings.judge_settings.max_retries
        backoff = self.run.settings.judge_settings.backoff
        try:
            while rows and not stop.requested:
                self.rounds += 1
                again: list[dict[str, Any]] = []
                for looks in (False, True):  # the looks apart (see above)
                    alike = [row for row in rows if (row["kind"] == "look") == looks]
                    if alike and not stop.requested:
                        again.extend(self._dataset(ray, alike, stop, retries))
                rows = again
                if rows and backoff and not stop.requested:
                    stop.wait(time.sleep, min(backoff * 2 ** (self.rounds - 1), 60.0))
        except Stopped:
            pass

    def _dataset(self, ray: Any, rows: list[dict[str, Any]], stop: StopSignals, retries: int) -> list[dict[str, Any]]:
        """Send `rows` as one dataset until it is done or a stop: what the next round must send."""
        again: list[dict[str, Any]] = []
        rows = [{**row, "ask": next(self.asks)} for row in rows]
        blocks = max(1, min(len(rows), self.concurrency * BLOCKS_PER_CALL_IN_FLIGHT))  # see HTTP_BATCH
        self.feed = RowFeed(self.processor(ray.data.from_items(rows, override_num_blocks=blocks)).iter_rows())
        while not stop.requested and (out := stop.wait(self.feed.next)) is not None:
            again.extend(self.answers.take(dict(out), retry=int(out["tries"]) <= retries))  # each request's own
            if self.clerk is not None:
                self.clerk.took(int(out["ask"]))
        return again


Key = tuple[int, str]  # a conversation's place in the selection, and a metric's name


@dataclass(eq=False)
class LookWait:
    """With `--score combined`, each conversation's rows are made from its answer and its
    verdict-first look, which come back in either order: each look answered (a reply with no
    text: it failed) kept until its rows are made, or those rows held until it comes."""

    looks: dict[Key, Reply] = field(default_factory=dict)
    held: dict[Key, Callable[[Reply | None], None]] = field(default_factory=dict)

    def looked(self, key: Key, look: Reply) -> None:
        """The look at `key` answered `look`: its rows are made now if they were held for it."""
        make = self.held.pop(key, None)
        if make is None:
            self.looks[key] = look
        else:
            make(look)

    def when_looked(self, metric: Any, key: Key, make: Callable[[Reply | None], None]) -> None:
        """Make the rows of `key` by `make`, given its look's reply: at once when `metric` asks no
        look (None) or the reply is in, else once it comes (`looked`)."""
        if metric.judging.first_look is None:
            make(None)
        elif key in self.looks:
            make(self.looks.pop(key))
        else:
            self.held[key] = make


@dataclass(eq=False)
class RayRows:
    """The rows of each conversation answered on Ray, as `flowrate eval` makes them, told to
    `tally` once (`finished`) and their replies put in the metric's cache; `cases` holds each
    conversation by its place in the selection, `wait` pairs the rows with their looks."""

    tally: Tally
    cases: dict[int, tuple[ConversationalEvalTestCase, Source | None]]
    wait: LookWait = field(default_factory=LookWait)
    finished: set[Key] = field(default_factory=set)  #: (order, metric) whose rows are out
    writing: bool = True  #: False once a stopped run only caches what its rows were held for

    def emit_all(self, rows: list[EvaluationRow], order: int, metric: str) -> None:
        """Tell the rows of `metric` for conversation `order` (those the output lacks)."""
        self.finished.add((order, metric))
        if not self.writing:
            return
        for row in rows:
            if (row.id, row.metric) not in self.tally.done:
                self.tally.emit(row, order)

    def settle(self, metric: Any, order: int, out: dict[str, Any]) -> None:
        """A conversation answered with no re-ask: the worker's rows, or with a look, its rows made
        again here from the answer and the look's reply."""
        request = JudgeRequest.from_dict(orjson.loads(out["request"]))
        tries = int(out["tries"])  # the HTTP stage's own retries are not told; flowrate's rounds are

        def make(look: Reply | None) -> None:
            if look is None:
                rows = [EvaluationRow.model_validate(row) for row in orjson.loads(out["rows"])]
                step = StepResult(rows, [], orjson.loads(out["cache_texts"]), orjson.loads(out["cache_logprobs"]))
            else:
                case, source = self.cases[order]
                reply = reply_from_answer(metric, request, orjson.loads(out["answer"]))
                step = rows_from_reply(metric, case, request, reply, source=source, look_reply=look)
            step.rows[0].attempts = tries + (look.attempts if look is not None else 0)
            self._emit(metric, order, request, step)

        self.wait.when_looked(metric, (order, metric.name), make)

    def finish(self, metric: Any, order: int, pending: _Pending) -> None:
        """A conversation whose re-asks are all answered: its rows, once its look is too."""
        case, source = self.cases[order]
        reply = reply_from_answer(metric, pending.request, pending.first)
        again = {
            sample: reply_from_answer(metric, pending.request, answer) for sample, answer in pending.answers.items()
        }

        def make(look: Reply | None) -> None:
            step = rows_from_reply(
                metric, case, pending.request, reply, reask_replies=again, source=source, look_reply=look
            )
            self._emit(metric, order, pending.request, step)

        self.wait.when_looked(metric, (order, metric.name), make)

    def fail(self, metric: Any, order: int, out: dict, failure: dict, pending: _Pending | None) -> None:
        """Error rows, as `flowrate eval` writes them for a call that failed after its retries: what
        its calls answered before (`pending`'s) and a look sent beside it are counted in."""
        case, source = self.cases[order]
        request = JudgeRequest.from_dict(orjson.loads(out["request"]))
        earlier = answered(metric, pending) if pending is not None else []
        form = pending.request.response_format if pending is not None else None

        def make(look: Reply | None) -> None:
            rows = metric.row_maker.new_rows(case, source, bool(request.truncated))
            paid = spend_of(*earlier, *([look] if look is not None else []))
            metric.row_maker.settle(
                rows, failure_error(failure), cached=False, response_format=form, usage=paid.usage,
                cost_usd=paid.cost_usd if pending is not None else None,  # the failed call's own price is not known
                attempts=int(out["tries"]) + (look.attempts if look is not None else 0),
            )  # fmt: skip
            self.emit_all(rows, order, metric.name)

        self.wait.when_looked(metric, (order, metric.name), make)

    def keep_held(self) -> None:
        """At a stop, the rows held for a look that will not be sent are not written (a row with
        no look is not the row `flowrate eval` writes), but the replies they come from are cached."""
        self.writing = False
        held, self.wait.held = self.wait.held, {}
        for make in held.values():
            make(None)

    def _emit(self, metric: Any, order: int, request: JudgeRequest, step: StepResult) -> None:
        """Tell `step`'s rows, and put what it says to keep in the cache: the replies to `request`
        under its key, the look's under the look's."""
        case_id = self.cases[order][0].id
        if step.cache_texts is not None and metric.cache is not None:
            metric.cache.put(
                request.cache_key, metric.model, metric.rubric.version, step.cache_texts,
                messages=request.messages, conversation_id=case_id, logprobs=step.cache_logprobs,
            )  # fmt: skip
        look, kept = metric.judging.first_look, step.look_kept
        if look is not None and kept is not None and kept.attempts:  # a look from the cache is there already
            look.replies.keep(request.messages, kept.texts, kept.response_format, kept.logprobs, case_id)
        self.emit_all(step.rows, order, metric.name)


class RayAnswers:
    """What each processed row of a Ray run comes to, as `flowrate eval` would make it: the rows
    (`rows`, once a conversation is answered), the re-asks to send and awaited, a retry for the
    next round, a request sent again without log-probabilities, or a look answered. `tally`
    counts and tells the rows; `cases` holds each conversation by its place in the selection
    (filled by the first round)."""

    def __init__(self, tally: Tally, cases: dict[int, tuple[ConversationalEvalTestCase, Source | None]]):
        self.cases = cases
        self.metric_by_name = {metric.name: metric for metric in tally.metrics}
        self.waiting: dict[Key, _Pending] = {}
        self.rows = RayRows(tally, cases)

    def take(self, out: dict[str, Any], retry: bool) -> list[dict[str, Any]]:
        """One processed row: its rows emitted and cached, or what the next round must send."""
        order, name, kind = int(out["order"]), out["metric"], out["kind"]
        case, source = self.cases[order]
        metric: Any = self.metric_by_name[name]
        if (order, name) in self.rows.finished:  # a re-ask of another sample failed it already
            return []
        if out["failure"]:
            failure = orjson.loads(out["failure"])
            error = failure_error(failure)
            if isinstance(error, LogprobsRefused) and orjson.loads(out["request"])["body"].get("logprobs"):
                return [without_logprobs(metric, case, out, str(error))]
            if retry and error.retryable:  # as flowrate's own retry policy decides
                return [{**{key: out[key] for key in ROW_COLUMNS}, "tries": int(out["tries"]) + 1}]
            if kind == "look":  # a failed look leaves the rows to their verdicts, its tries counted, as in eval
                self.rows.wait.looked((order, name), Reply([], usage=Usage(), cost_usd=0.0, attempts=int(out["tries"])))
            else:
                self.rows.fail(metric, order, out, failure, self.waiting.pop((order, name), None))
            return []
        if kind == "look":
            request = JudgeRequest.from_dict(orjson.loads(out["request"]))
            look = reply_from_answer(metric, request, orjson.loads(out["answer"]))
            look.attempts = int(out["tries"])
            self.rows.wait.looked((order, name), look)
            return []
        if kind == "reask":
            pending = self.waiting[(order, name)]
            pending.answers[int(out["sample"])] = orjson.loads(out["answer"])
            if len(pending.answers) == len(pending.reasks):
                self.rows.finish(metric, order, self.waiting.pop((order, name)))
            return []
        reasks = [JudgeRequest.from_dict(item) for item in orjson.loads(out["reasks"])]
        if not reasks:
            self.rows.settle(metric, order, out)
            return []
        request = JudgeRequest.from_dict(orjson.loads(out["request"]))
        self.waiting[(order, name)] = _Pending(request, orjson.loads(out["answer"]), reasks)
        return [
            dataset_row(
                order, case, source, name, request=orjson.dumps(r.to_dict()).decode(), sample=r.sample, kind="reask"
            )
            for r in reasks
        ]


def without_logprobs(metric: Any, case: Any, out: dict[str, Any], said: str) -> dict[str, Any]:
    """A processed row whose request the server refused for its log-probabilities, to send again
    without them, as `flowrate eval` does (`LogprobsLearned`): the run's judge asks none from now
    on, and its end says why its rows have none. A row sent before the driver learned it is
    refused once too; the refusal costs no try."""
    metric.backend.refuses_logprobs(said)
    request = JudgeRequest.from_dict(orjson.loads(out["request"]))
    if out["kind"] == "judge":
        request = build_request(metric, case, lookup=False)
    else:  # a re-ask or a look: the same messages, its body without them
        request.body = {key: value for key, value in request.body.items() if key not in LOGPROBS_KEYS}
    return {**{key: out[key] for key in ROW_COLUMNS}, "request": orjson.dumps(request.to_dict()).decode()}


def answered(metric: Any, pending: _Pending) -> list[Reply]:
    """The replies a conversation whose re-ask failed had before it (its first call, its other
    re-asks): paid, as `flowrate eval` counts them."""
    return [reply_from_answer(metric, pending.request, a) for a in (pending.first, *pending.answers.values())]


def stop_unreachable(ray_run: RayRun, url: str) -> None:
    """The processor gave up (its retries spent, the judge unreachable): what was not finished
    is left out, as `flowrate eval` leaves it when the judge cannot be reached."""
    tally, finished = ray_run.tally, ray_run.answers.rows.finished
    tally.summary.unreachable = url
    for order, (case, source) in ray_run.cases.items():
        missing = [m for m in tally.metrics if tally.missing(case, m) and (order, m.name) not in finished]
        for metric in missing:
            tally.summary.skip_unreachable(case.id, tally.missing(case, metric))
        if missing:
            tally.listener.skipped(case.id or "", source, "unreachable")


def keep_answered(ray_run: RayRun, stop: StopSignals) -> None:
    """After a stop: no call is sent more, those in flight get `flowrate eval`'s grace, and every
    answer Ray Data has not handed over (a block's rows come out once the whole block is answered)
    is read from the desk and taken as its row would have been: its rows written and its reply
    cached; a reply whose rows wait for a look not sent is cached. An error answer is left for
    --resume, as a stopped `flowrate eval` leaves it."""
    if ray_run.clerk is None:
        return
    judge = ray_run.run.settings.judge_settings
    left = ray_run.clerk.stop(INTERRUPT_GRACE_S, stop.pause)
    if ray_run.feed is not None:
        ray_run.feed.close()
    for row in left:
        out = postprocess(judge, row)
        if not out["failure"]:
            ray_run.answers.take(out, retry=False)
    ray_run.answers.rows.keep_held()


async def judge_on_ray(run: FileRun, listener: RunListener, processor: Any = None) -> RunSummary:
    """Judge every selected conversation of `run` on Ray Data, telling `listener` each row as it
    comes (the results file is the listener's first part), through `processor` (default: the
    HTTP processor for the judge's endpoint). Returns the summary, gates applied; Ctrl-C and
    SIGTERM stop it as they stop `flowrate eval` (`StopSignals`)."""
    started = time.monotonic()
    try:
        judge = run.settings.judge_settings
        if processor is None:
            endpoint(judge)  # a judge the processor cannot reach is a ConfigError before Ray starts
        before_import(run.settings.engine_settings.ray_address)
        require_ray()
    except BaseException:
        run.close()
        raise
    done, summary = begin(run, listener)
    connection = None
    try:
        listener.stage("starting Ray")
        engine = run.settings.engine_settings
        ray, connection = connect(engine.ray_address, engine.ray_join_timeout)
        actors = max(1, min(run.concurrency, int(ray.cluster_resources().get("CPU", 1))))
        clerk = None
        if processor is None:
            from flowrate.evaluation.ray_desk import DeskClerk, open_desk

            clerk = DeskClerk(open_desk())
            processor = http_processor(judge, actors, run.settings.rpm, run.concurrency, clerk.desk)
        tally = Tally(run.metrics, listener, summary, done)
        ray_run = RayRun(run, tally, processor, run.concurrency, clerk)
        listener.stage("judging on Ray")
        with StopSignals(summary) as stop:
            await _judge(ray_run, stop, judge)
    finally:
        run.close()
        await close_judges(run.metrics)  # the client of a conversation judged here (`first_round`) too
        tell_lost_cache_writes(run.cache, listener)
        if connection is not None:
            connection.close()
    summary.resumed_elsewhere = len(done) - summary.resumed
    return finish(run, listener, summary, started)


async def _judge(ray_run: RayRun, stop: StopSignals, judge: JudgeSettings) -> None:
    """The first round, then the rounds on Ray; a processor that gave up (its retries spent on
    an unreachable judge) leaves what was not finished, as `flowrate eval` leaves it."""
    try:
        rows = await ray_run.first_round(stop)
        ray_run.send(rows, stop)
    except Exception as error:
        if not from_ray(error):
            raise
        if not stop.requested:  # else the stop broke the dataset: nothing to tell
            stop_unreachable(ray_run, judge.api_base or judge.model)
            ray_run.tally.listener.notice(f"Ray Data stopped: {ray_failure(error)}")
            return
    if stop.requested:
        try:
            keep_answered(ray_run, stop)
        except Exception as error:
            if not from_ray(error):
                raise
            ray_run.tally.listener.notice(f"the answers not yet written at the stop are lost: {ray_failure(error)}")


def from_ray(error: Exception) -> bool:
    """Whether `error` is Ray's (a dataset or an actor that failed), not flowrate's."""
    return type(error).__module__.split(".")[0] == "ray" or "RayTaskError" in type(error).__name__
