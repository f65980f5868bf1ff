"""Each backend's failures become flowrate's judge errors, whatever its transport: what the
scripted server on 127.0.0.1 answers (a status, a body, no answer, no server) through the direct
transport and LiteLLM, the batch client's calls, a user's own client and a GGUF model's errors."""

import asyncio
import socket

import pytest

from flowrate import ConversationalFlowRateMetric, evaluate_conversations
from flowrate.judge.address import JudgeAddress
from flowrate.judge.backend import Completion, CustomClientBackend, JudgeBackend
from flowrate.judge.batch_api import OpenAIFiles
from flowrate.judge.direct import DirectBackend
from flowrate.judge.errors import (
    AuthRejected,
    BadReply,
    ChoicesRefused,
    ContextWindowExceeded,
    JudgeError,
    ModelUnknown,
    RateLimited,
    RequestRefused,
    ServerError,
    TimedOut,
    Unavailable,
    Unreachable,
)
from flowrate.judge.litellm_backend import LiteLLMBackend
from flowrate.judge.local_model import LocalModel
from flowrate.judge.retry import RetryPolicy
from flowrate.judge.transports import make_backend
from tests.helpers import PYDANTIC_500, conversation, verdict

CONTEXT_400 = {
    "status": 400,
    "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
}
ANSWERS = [
    pytest.param(
        {"status": 400, "message": "invalid request: temperature must be at most 2"}, RequestRefused, id="400"
    ),
    pytest.param(CONTEXT_400, ContextWindowExceeded, id="400-context"),
    pytest.param({"status": 401}, AuthRejected, id="401"),
    pytest.param({"status": 404}, ModelUnknown, id="404"),
    pytest.param({"status": 408}, TimedOut, id="408"),
    pytest.param({"status": 422}, RequestRefused, id="422"),
    pytest.param({"status": 429, "retry_after": 7}, RateLimited, id="429"),
    pytest.param({"status": 500}, ServerError, id="500"),
    pytest.param(PYDANTIC_500, RequestRefused, id="500-validation"),
    pytest.param({"status": 500, "message": "Only one completion choice is allowed"}, ChoicesRefused, id="500-n"),
    pytest.param({"status": 503}, Unavailable, id="503"),
    pytest.param({"status": 502, "raw_body": "<html>Bad Gateway</html>"}, ServerError, id="502-html"),
]
MESSAGES = [{"role": "user", "content": "MARK-ERR"}]


def http_backend(judge, transport):
    backend = make_backend("gpt-4o", judge.base_url, transport)
    assert isinstance(backend, DirectBackend if transport == "auto" else LiteLLMBackend)
    return backend


@pytest.mark.parametrize(("answer", "expected"), ANSWERS)
async def test_each_error_answer_becomes_its_judge_error_on_both_transports(
    judge, transport, api_key, answer, expected
):
    judge.script("MARK-ERR", answer)
    with pytest.raises(JudgeError) as raised:
        await http_backend(judge, transport).complete(MESSAGES, n=1, timeout=5)
    assert type(raised.value) is expected
    assert raised.value.status == answer["status"]
    retried = expected in (TimedOut, RateLimited, ServerError, Unavailable)
    assert raised.value.retryable is retried


async def test_a_refusal_keeps_the_window_and_a_rate_limit_its_wait(judge, transport, api_key):
    judge.script("MARK-ERR", CONTEXT_400, {"status": 429, "retry_after": 7})
    backend = http_backend(judge, transport)
    with pytest.raises(ContextWindowExceeded) as too_long:
        await backend.complete(MESSAGES, n=1, timeout=5)
    with pytest.raises(RateLimited) as limited:
        await backend.complete(MESSAGES, n=1, timeout=5)
    assert too_long.value.window_tokens == 4096 and limited.value.retry_after_s == 7


async def test_an_answer_that_is_no_completion_is_a_bad_reply_or_a_server_error(judge, transport, api_key):
    judge.script("MARK-ERR", {"raw_body": "<html>maintenance</html>"})
    with pytest.raises(JudgeError) as raised:
        await http_backend(judge, transport).complete(MESSAGES, n=1, timeout=5)
    # the direct transport reads the body itself; LiteLLM reports it as the provider's 500
    assert type(raised.value) is (BadReply if transport == "auto" else ServerError) and raised.value.retryable


async def test_a_call_that_outlasts_its_timeout_is_timed_out(judge, transport, api_key):
    judge.script("MARK-ERR", {"hang": True})
    with pytest.raises(TimedOut):
        await http_backend(judge, transport).complete(MESSAGES, n=1, timeout=0.3)


async def test_a_server_that_is_not_there_is_unreachable(transport, api_key):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = make_backend("gpt-4o", f"http://127.0.0.1:{port}/v1", transport)
    with pytest.raises(Unreachable):
        await backend.complete(MESSAGES, n=1, timeout=5)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [({"status": 400}, RequestRefused), ({"status": 500}, ServerError), ({"raw_body": "<html>"}, BadReply)],
)
async def test_the_batch_clients_failures_are_judge_errors_once_retries_are_spent(
    judge_server, api_key, answer, expected
):
    judge_server.reset()
    judge_server.script("MARK-ERR", answer)
    files = OpenAIFiles(judge_server.base_url, RetryPolicy(max_retries=2, backoff=0, backoff_max=0))
    with pytest.raises(JudgeError) as raised:
        await files.call("POST", "/chat/completions", json={"model": "gpt-4o", "messages": MESSAGES})
    assert type(raised.value) is expected
    assert judge_server.calls_for("MARK-ERR") == (1 if expected is RequestRefused else 3)  # 1 + max_retries


class Client:
    """A user's own client that fails as `failure` says."""

    def __init__(self, failure):
        self.failure = failure

    def get_model_name(self):
        return "mine"

    async def chat_complete(self, messages, temperature):
        if self.failure == "hang":
            await asyncio.sleep(60)
        raise ConnectionRefusedError("no route to my model")


async def test_a_custom_clients_timeout_and_lost_connection_are_judge_errors():
    with pytest.raises(TimedOut):
        await CustomClientBackend(Client("hang")).complete(MESSAGES, n=1, timeout=0.05)
    with pytest.raises(Unreachable, match="no route to my model"):
        await CustomClientBackend(Client("refused")).complete(MESSAGES, n=1, timeout=5)


class Llama:
    """Stands in for llama-cpp-python's `Llama` (not installed here): its overflow error, or a slow stream."""

    n_tokens = 0

    def __init__(self, slow=False):
        self.slow = slow

    def create_chat_completion(self, **options):
        if not self.slow:  # llama-cpp-python 0.3's words, from `Llama._create_completion`
            raise ValueError("Requested tokens (9000) exceed context window of 8192")
        return self._stream()

    def _stream(self):
        import time

        for _ in range(100):
            time.sleep(0.02)
            yield {"choices": [{"delta": {"content": "x"}, "finish_reason": None}]}


@pytest.mark.parametrize(("llama", "expected"), [(Llama(), ContextWindowExceeded), (Llama(slow=True), TimedOut)])
async def test_a_gguf_models_overflow_and_timeout_are_judge_errors(tmp_path, llama, expected):
    model = LocalModel(JudgeAddress.parse(f"gguf:{tmp_path / 'model.gguf'}"))
    model.__dict__["_llama"] = llama  # the loaded model, as `LocalModel._llama` caches it
    with pytest.raises(expected) as raised:
        await model.complete(MESSAGES, n=1, timeout=0.2)
    if expected is ContextWindowExceeded:
        assert raised.value.window_tokens == 8192


class Scripted(JudgeBackend):
    """A backend of a user's own that writes `complete` and nothing else."""

    model_name = "scripted-backend"

    def __init__(self, answers):
        self.answers = list(answers)

    async def complete(self, messages, *, n, timeout, response_format=None, temperature=0.0, max_tokens=None):
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Completion(texts=[answer])


async def test_a_backend_that_writes_only_complete_judges_and_its_errors_are_retried_or_kept():
    backend = Scripted([RateLimited("slow down", status=429), verdict("mostly"), RequestRefused("no", status=400)])
    metric = ConversationalFlowRateMetric(model=backend, retry=RetryPolicy(max_retries=2, backoff=0, backoff_max=0))
    [judged, refused] = await evaluate_conversations(
        [conversation("hi", "hello", id="a"), conversation("bye", "goodbye", id="b")], [metric], concurrency=1
    )
    assert judged.metrics_data[0].score == 0.9 and judged.metrics_data[0].evaluation_log["attempts"] == 2
    assert refused.metrics_data[0].error.type == "BadRequestError" and refused.metrics_data[0].error.message == "no"
    assert backend.cache_identity() == "scripted-backend" and backend.count_tokens("abcdef") == 3


def test_a_backend_must_write_complete():
    class Silent(JudgeBackend):
        model_name = "silent"

    with pytest.raises(TypeError, match="complete"):
        Silent()
