"""Judging on Ray Data (`flowrate eval --engine ray`): Ray is a transport of the judging step.
Each conversation's step (`metrics.step.Judging`) lives on the driver; its requests go through a
`ray.data.llm` processor, a dataset per round, and each answer comes back to the step, so the rows
are the ones `flowrate eval` writes, from the same code.

The driver (this process) does what needs one place: the selection, the rows a resumed output
holds, the response cache (asked before anything is sent; the replies put in it as they come),
the `--max-cost` budget (each conversation's estimate reserved before it is sent), the steps, and
the rows written as they arrive. The processor sends; what the steps ask next is sent in further
rounds, each a dataset of its own: the re-asks, the samples a server did not return, and the
requests whose answer was an error the processor does not retry (its HTTP stage retries 429, 408, 502, 503 and 504 itself;
a 500 comes back as the answer), each request up to `--max-retries` times, as `flowrate eval` retries it.
A stop keeps every call answered: the HTTP stage tells each answer to the run's desk as it comes
back (`ray_desk`, `ray_http`), where the driver reads those Ray Data has not handed over.

Ray is imported here, in `ray_desk` and in `ray_http` only, and only on this path
(`pip install 'flowrate[ray]'`)."""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

import orjson

from flowrate.errors import ConfigError
from flowrate.evaluation.engine import INTERRUPT_GRACE_S, CostBudget, Tally
from flowrate.evaluation.file_run import FileRun
from flowrate.evaluation.ray_cluster import before_import
from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.backend import LOGPROBS_KEYS
from flowrate.judge.errors import JudgeError, LogprobsRefused
from flowrate.judge.retry import error_message
from flowrate.metrics.planning import ERROR_MESSAGE_LIMIT, JudgePlan
from flowrate.metrics.rubric_metric import RubricMetric
from flowrate.metrics.step import ADDITIONS, CallFailed, JudgeRequest, Judging, Reply, keep_in_cache, reply_from_answer
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
FEED_JOIN_S = 10.0  # how long a run waits, before it leaves Ray, for its feed's thread to end
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
def preprocess(row: dict[str, Any]) -> dict[str, Any]:
    """The processor's preprocess: the body of the request the driver's judging step made."""
    return {**row, "payload": orjson.loads(row["request"])["body"]}


def postprocess(row: dict[str, Any]) -> dict[str, Any]:
    """The processor's postprocess: the answer as plain JSON, and the error it carries instead of
    a completion (`answer_error`), for the driver's judging step to take."""
    answer = plain(row.get("http_response"))
    out = {name: row[name] for name in ROW_COLUMNS}
    out.update(answer=orjson.dumps(answer).decode(), failure="")
    failure = answer_error(answer)
    if failure is not None:
        out["failure"] = orjson.dumps(failure).decode()
    return out


# a dataset row: the conversation's place in the input (`order`) and `id`, the metric, the request
# the driver's judging step made (`metrics.step.JudgeRequest` as JSON) and its `kind`, the rounds
# it has been `tries`ed in, and `ask`, the row's number in the run (its call's: the driver finds
# the request by it, and the desk, `ray_desk`, tells it)
ROW_COLUMNS = ("order", "id", "metric", "request", "kind", "tries", "ask")


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
    them, at most `rpm` a minute, the judging step's requests sent and their answers handed back; each call asked of
    `desk` before it is sent and its answer told to it (`ray_desk`; None: no desk)."""
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
    processor = build_processor(config, preprocess=preprocess, postprocess=postprocess)
    stage = processor.get_stage_by_name("HttpRequestStage")
    stage.map_batches_kwargs["max_concurrency"] = max(1, -(-concurrency // actors))  # see HTTP_BATCH
    if desk is not None:
        from flowrate.evaluation.ray_http import tell_desk

        tell_desk(processor, desk, ROW_COLUMNS)
    return processor


def vllm_processor(judge: JudgeSettings, model_source: str, actors: int, **engine_kwargs: Any) -> Any:
    """A `ray.data.llm` processor running vLLM on the workers' GPUs (`vLLMEngineProcessorConfig`;
    `model_source` a Hugging Face id or a path), sending the judging step's requests: the same
    messages, the reply schema as vLLM's structured output, the temperature and `max_tokens`. vLLM's
    stage returns one choice and no finish reason, so `--samples` asks the other samples in later
    rounds (the step's rule for a server that does not serve `n`), and a reply cut at its limit is
    read as unusable, not as cut. It needs vLLM and GPUs on the workers; flowrate's tests cannot run
    it (no GPU), so it is built and documented, and its pre- and postprocess are tested."""
    from ray.data.llm import build_processor, vLLMEngineProcessorConfig

    config = vLLMEngineProcessorConfig(
        model_source=model_source, concurrency=actors, batch_size=BATCH_SIZE, engine_kwargs=engine_kwargs
    )
    return build_processor(config, preprocess=to_vllm, postprocess=from_vllm)


def to_vllm(row: dict[str, Any]) -> dict[str, Any]:
    """The judging step's request as vLLM's stage takes it: the messages and the sampling parameters."""
    built = preprocess(row)
    body = built.pop("payload")
    sampling: dict[str, Any] = {"temperature": body["temperature"], "max_tokens": body.get("max_tokens")}
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
    if schema is not None:
        sampling["structured_outputs"] = {"json": schema}
    return {**built, "messages": body["messages"], "sampling_params": sampling}


def from_vllm(row: dict[str, Any]) -> dict[str, Any]:
    """vLLM's output as a chat completion, handed back as `postprocess` hands an answer."""
    completion = {
        "choices": [{"message": {"content": row.get("generated_text") or ""}, "finish_reason": None}],
        "usage": {
            "prompt_tokens": int(row.get("num_input_tokens") or 0),
            "completion_tokens": int(row.get("num_generated_tokens") or 0),
        },
    }
    return postprocess({**row, "http_response": completion})


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
Key = tuple[int, str]  # a conversation's place in the selection, and a metric's name


def dataset_row(key: Key, request: JudgeRequest, tries: int, ask: int) -> dict[str, Any]:
    """A row of a round's dataset (see `ROW_COLUMNS`): `request` of the conversation and metric `key`."""
    order, metric = key
    request_json = orjson.dumps(request.to_dict()).decode()
    return {"order": order, "id": request.conversation_id, "metric": metric, "request": request_json,
            "kind": request.kind, "tries": tries, "ask": ask}  # fmt: skip


SENT_IN_ORDER = (
    "judge",
    "look",
    "checklist",
    "turns",
)  #: a round's datasets: each kind's requests (a re-ask's: judge's)


def alike_rows(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """`rows` cut into datasets whose reply schemas are alike, in `SENT_IN_ORDER`: the judge
    requests and re-asks, the looks, the checklists, and the per-turn looks by their turns (each
    conversation's schema has its own turn numbers, which one Arrow schema would merge)."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for row in rows:
        kind = "judge" if row["kind"] == "reask" else row["kind"]
        shape = orjson.dumps(orjson.loads(row["request"]).get("schema")).decode() if kind == "turns" else ""
        groups.setdefault((SENT_IN_ORDER.index(kind), shape), []).append(row)
    return [groups[key] for key in sorted(groups)]


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
        self.reader = threading.Thread(target=self._read, args=(rows,), name="flowrate-ray-rows", daemon=True)
        self.reader.start()

    def _read(self, rows: Any) -> None:
        iterator = iter(rows)
        try:
            for row in iterator:
                if not self._put(row):
                    break
        except BaseException as error:  # raised again on the driver's thread (`next`)
            self._put(error)
        finally:
            # Ray Data's iterator ends here, in this thread, while Ray is up: left to the garbage
            # collector, it ended after the run had left Ray, and Ray's core worker then ended
            # the process with exit 1 ("The core worker has already been shutdown"), once in a
            # CI run of the suite's Ctrl-C test (a stop's exit is 130).
            with contextlib.suppress(Exception):
                getattr(iterator, "close", lambda: None)()
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

    def close(self, wait_s: float = 0.0) -> None:
        """Read no row more (Ray Data's iterator ends at its next row, or at once if it waits for
        room); with `wait_s`, wait that long for the reading thread to end."""
        self.closing.set()
        if wait_s:
            self.reader.join(wait_s)


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
        self.feed: RowFeed | None = None  # the dataset being read
        max_cost = run.settings.limit_settings.max_cost
        self.budget = CostBudget(max_cost) if max_cost is not None else None
        self.cases: dict[int, tuple[ConversationalEvalTestCase, Source | None]] = {}
        self.answers = RayJudgings(tally, self.cases)
        self.rounds = 0

    async def first_round(self, stop: StopSignals) -> list[dict[str, Any]]:
        """The rows of the first dataset: every selected conversation's metric not in the output,
        not cached and within the budget; the others are answered here (until a stop)."""
        rows: list[dict[str, Any]] = []
        emit_all = self.answers.emit_all
        for order, (case, source) in enumerate(self.run.items(self.tally.listener), start=1):
            if stop.requested:
                break
            wanted = self.tally.wanted(case, order)
            self.cases[order] = (case, source)
            for index, metric in enumerate(wanted):
                if not isinstance(metric, RubricMetric) or not metric.calls_per_conversation:
                    emit_all(await metric.evaluate(case, source), order, metric.name)  # offline: no judge
                    continue
                judging = Judging(metric, case, source)
                if judging.done:  # from the cache
                    self.answers.settle((order, metric.name), judging)
                    continue
                if not reserved(self.budget, metric, judging.request):
                    self.tally.skip_for_budget(case, source, wanted[index:])
                    break
                if not getattr(metric.backend, "form_settled", True):  # a server's form to find: judged here
                    emit_all(await metric.evaluate(case, source), order, metric.name)
                    continue
                rows.extend(self.answers.start((order, metric.name), judging))
        return rows

    def send(self, rows: list[dict[str, Any]], stop: StopSignals) -> None:
        """Send rounds until nothing is left: the re-asks, and the retries of errors the processor
        does not retry itself (each request at most `--max-retries` times). Each round sends the
        looks of `--score combined` after the other requests, as a dataset of their own, and the
        checklists and the per-turn looks in more (`alike_rows`): Ray Data
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
                for alike in alike_rows(rows):  # each schema apart (see above)
                    if not stop.requested:
                        again.extend(self._dataset(ray, alike, stop, retries))
                rows = again
                if rows and backoff and not stop.requested:
                    stop.wait(time.sleep, min(backoff * 2 ** (self.rounds - 1), 60.0))
        except Stopped:
            pass

    def _dataset(self, ray: Any, rows: list[dict[str, Any]], stop: StopSignals, retries: int) -> list[dict[str, Any]]:
        """Send `rows` as one dataset until it is done or a stop: what the next round must send."""
        again: list[dict[str, Any]] = []
        blocks = max(1, min(len(rows), self.concurrency * BLOCKS_PER_CALL_IN_FLIGHT))  # see HTTP_BATCH
        self.feed = RowFeed(self.processor(ray.data.from_items(rows, override_num_blocks=blocks)).iter_rows())
        while not stop.requested and (out := stop.wait(self.feed.next)) is not None:
            again.extend(self.answers.take(dict(out), retry=int(out["tries"]) <= retries))  # each request's own
            if self.clerk is not None:
                self.clerk.took(int(out["ask"]))
        return again


class RayJudgings:
    """Each conversation's judging step (`metrics.step.Judging`) on the driver, its requests sent
    in Ray's rounds: the requests of each dataset row by its `ask`, each processed row taken back
    by the step (a failure its transport retries first: the errors the HTTP stage does not retry
    itself, up to `--max-retries` rounds; a refusal of log-probabilities sent again without them),
    what the step asks next sent in the next round, and a conversation's rows told to `tally`
    once (`finished`), what the step says to keep put in the cache. `cases` holds each
    conversation by its place in the selection."""

    def __init__(self, tally: Tally, cases: dict[int, tuple[ConversationalEvalTestCase, Source | None]]):
        self.tally = tally
        self.cases = cases
        self.judgings: dict[Key, Judging] = {}
        self.sent: dict[int, tuple[Key, JudgeRequest]] = {}  # by ask
        self.asks = itertools.count(1)
        self.finished: set[Key] = set()  #: (order, metric) whose rows are out
        self.writing = True  #: False once a stopped run only caches what it has

    def start(self, key: Key, judging: Judging) -> list[dict[str, Any]]:
        """The dataset rows of `judging`'s first requests, for the conversation and metric `key`."""
        self.judgings[key] = judging
        return self.rows_for(key, judging.requests())

    def rows_for(self, key: Key, requests: list[JudgeRequest], tries: int = 1) -> list[dict[str, Any]]:
        rows = []
        for request in requests:
            ask = next(self.asks)
            self.sent[ask] = (key, request)
            rows.append(dataset_row(key, request, tries, ask))
        return rows

    def take(self, out: dict[str, Any], retry: bool) -> list[dict[str, Any]]:
        """One processed row, taken by its conversation's step: what the next round must send."""
        entry = self.sent.pop(int(out["ask"]), None)
        judging = self.judgings.get(entry[0]) if entry is not None else None
        if entry is None or judging is None:  # taken already (from the desk), or its conversation is settled
            return []
        key, request = entry
        tries = int(out["tries"])
        outcome = self.outcome(judging, request, out)
        if isinstance(outcome, CallFailed):
            error = outcome.error
            if isinstance(error, LogprobsRefused) and request.body.get("logprobs"):
                judging.metric.backend.refuses_logprobs(str(error))  # said once, at the run's end; costs no try
                request.body = {name: value for name, value in request.body.items() if name not in LOGPROBS_KEYS}
                return self.rows_for(key, [request], tries)
            if retry and getattr(error, "retryable", False):  # as flowrate's own retry policy decides
                return self.rows_for(key, [request], tries + 1)
            outcome.spent.attempts = tries
        else:
            outcome.attempts = tries  # the HTTP stage's own retries are not told; flowrate's rounds are
        flying = {id(pending) for pending in judging.requests()}
        judging.take(request, outcome)
        if judging.done:
            self.settle(key, judging)
            return []
        return self.rows_for(key, [pending for pending in judging.requests() if id(pending) not in flying])

    @staticmethod
    def outcome(judging: Judging, request: JudgeRequest, out: dict[str, Any]) -> Reply | CallFailed:
        """A processed row's answer as the step takes it: a reply, or the error `flowrate eval`'s
        transport raises for the same answer (one that is not a chat completion: a 500)."""
        if out["failure"]:
            return CallFailed(failure_error(orjson.loads(out["failure"])))
        try:
            return reply_from_answer(judging.metric, request, orjson.loads(out["answer"]))
        except Exception as error:
            return CallFailed(failure_error({"status": 500, "message": str(error)}))

    def settle(self, key: Key, judging: Judging) -> None:
        """`judging`'s rows told (those the output lacks), and what it says to keep cached."""
        self.judgings.pop(key, None)
        result = judging.result()
        keep_in_cache(judging.metric, judging, result)
        self.emit_all(result.rows, key[0], key[1])

    def emit_all(self, rows: list[EvaluationRow], order: int, metric: str) -> None:
        """Tell the rows of `metric` for conversation `order` (those the output lacks)."""
        self.finished.add((order, metric))
        if not self.writing:
            return
        for row in rows:
            if (row.id, row.metric) not in self.tally.done:
                self.tally.emit(row, order)

    def keep_held(self) -> None:
        """At a stop, the conversations not settled are not written (their rows would not be the
        ones `flowrate eval` writes), but the replies they have are cached, where nothing but a
        verdict-first look or a checklist was still to come."""
        self.writing = False
        for key, judging in list(self.judgings.items()):
            if judging.outcome_error is None and all(pending.kind in ADDITIONS for pending in judging.requests()):
                judging.outstanding = []
                self.settle(key, judging)


def stop_unreachable(ray_run: RayRun, url: str) -> None:
    """The processor gave up (its retries spent, the judge unreachable): what was not finished
    is left out, as `flowrate eval` leaves it when the judge cannot be reached."""
    tally, finished = ray_run.tally, ray_run.answers.finished
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
    left = ray_run.clerk.stop(INTERRUPT_GRACE_S, stop.pause)
    if ray_run.feed is not None:
        ray_run.feed.close()
    for row in left:
        out = postprocess(row)
        if not out["failure"]:
            ray_run.answers.take(out, retry=False)
    ray_run.answers.keep_held()


@dataclass(eq=False)
class OnRay:
    """Ray Data as a run's transport (`engines.Transport`), through `processor` (default: the
    HTTP processor for the judge's endpoint). Ctrl-C and SIGTERM stop it as they stop `flowrate
    eval` (`StopSignals`)."""

    processor: Any = None
    connection: Any = None

    def check(self, run: FileRun) -> None:
        judge = run.settings.judge_settings
        if self.processor is None:
            endpoint(judge)  # a judge the processor cannot reach is a ConfigError before Ray starts
        before_import(run.settings.engine_settings.ray_address)
        require_ray()

    async def send(self, run: FileRun, listener: RunListener, summary: RunSummary, done: dict) -> None:
        judge, engine = run.settings.judge_settings, run.settings.engine_settings
        listener.stage("starting Ray")
        ray, self.connection = connect(engine.ray_address, engine.ray_join_timeout)
        actors = max(1, min(run.concurrency, int(ray.cluster_resources().get("CPU", 1))))
        clerk, processor = None, self.processor
        if processor is None:
            from flowrate.evaluation.ray_desk import DeskClerk, open_desk

            clerk = DeskClerk(open_desk())
            processor = http_processor(judge, actors, run.settings.rpm, run.concurrency, clerk.desk)
        ray_run = RayRun(run, Tally(run.metrics, listener, summary, done), processor, run.concurrency, clerk)
        listener.stage("judging on Ray")
        with StopSignals(summary) as stop:
            await _judge(ray_run, stop, judge)

    def closed(self, run: FileRun, listener: RunListener, summary: RunSummary) -> bool:
        if self.connection is not None:
            self.connection.close()
        return True


async def _judge(ray_run: RayRun, stop: StopSignals, judge: JudgeSettings) -> None:
    """The first round, then the rounds on Ray; a processor that gave up (its retries spent on
    an unreachable judge) leaves what was not finished, as `flowrate eval` leaves it. The feed's
    thread is done with Ray before this returns (`RowFeed._read`), a second Ctrl-C meanwhile
    counted by `stop`, not raised."""
    try:
        await _rounds(ray_run, stop, judge)
    finally:
        if ray_run.feed is not None:
            ray_run.feed.close(FEED_JOIN_S)


async def _rounds(ray_run: RayRun, stop: StopSignals, judge: JudgeSettings) -> None:
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
