"""Calling the judge: model backends, retries and reading its verdict.

LiteLLM is imported here only, and only when a LiteLLM judge is first used:
its import costs seconds and `--help` or `validate` never need it.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from flowrate.errors import JudgeAccessError
from flowrate.judge.backend import Completion, JudgeBackend
from flowrate.judge.limits import CallGate, RunStopped
from flowrate.judge.server import SERVER_WINDOW_SHARE


# -- retries ---------------------------------------------------------------------
@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try one judge call.

    `backoff` is the first wait in seconds, doubled each retry with jitter; every wait,
    a Retry-After included, is capped at `backoff_max`. Zero both to never wait (tests).
    `timeout` is the seconds one attempt may take; None leaves it to the judge
    (`HOSTED_TIMEOUT_S`, or `SELF_HOSTED_TIMEOUT_S` for a self-hosted model).
    """

    max_retries: int = 5
    timeout: float | None = None
    backoff: float = 1.0
    backoff_max: float = 60.0

    def wait_seconds(self, attempt: int, error: BaseException | None, jitter: float) -> float:
        exponential = self.backoff * (2 ** (attempt - 1)) * (0.5 + jitter)
        return min(self.backoff_max, max(exponential, retry_after_seconds(error) or 0.0))


RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


INVALID_REQUEST_STATUS = {400, 413, 422}
INVALID_REQUEST_NAMES = {"BadRequestError", "ContextWindowExceededError", "UnprocessableEntityError"}
# What a server says when it refuses the request itself, whatever status it sends: llama-cpp-python
# turns pydantic's validation errors into 500s ("Input should be 'text' or 'json_object'").
INVALID_REQUEST_TEXT = re.compile(
    r"input should be|validation error|invalid request|invalid_request_error|extra inputs are not permitted"
    r"|field required|unsupported parameter|context length|context window|context size|maximum context"
    r"|only one completion choice",
    re.IGNORECASE,
)
# llama.cpp's llama-server refuses n != 1 with a 500 "Only one completion choice is allowed"
N_REFUSED = re.compile(
    r"only one completion choice|\bn\b\W{0,3}(must be 1|is not supported|unsupported)", re.IGNORECASE
)
FORM_NAMED = re.compile(r"response_format|json_schema|json_object", re.IGNORECASE)
FORM_REFUSED = re.compile(
    r"input should be|not supported|unsupported|invalid|unknown|not allowed|must be|extra inputs", re.IGNORECASE
)
CONTEXT_TEXT = re.compile(
    r"context length|context window|context size|maximum context|too many tokens|prompt is too long", re.IGNORECASE
)


def is_invalid_request(error: BaseException) -> bool:
    """The server refused the request as such: sent again, it fails again."""
    status = _status(error)
    if status in INVALID_REQUEST_STATUS or type(error).__name__ in INVALID_REQUEST_NAMES:
        return True
    return status is not None and status >= 500 and bool(INVALID_REQUEST_TEXT.search(str(error)))


def is_format_refusal(error: BaseException) -> bool:
    """The server refused the form the schema was sent in (llama-cpp-python: a 500 with pydantic's
    "Input should be 'text' or 'json_object'" at `response_format.type`)."""
    status = _status(error)
    text = str(error)
    return (
        status is not None
        and status >= 400
        and bool(FORM_NAMED.search(text) and FORM_REFUSED.search(text))
        and not is_context_overflow(error)
    )


def is_n_refusal(error: BaseException) -> bool:
    """The server refused to give several choices for one request (`n` > 1)."""
    status = _status(error)
    return status is not None and status >= 400 and bool(N_REFUSED.search(str(error)))


def is_context_overflow(error: BaseException) -> bool:
    """The prompt did not fit the model's context window."""
    if type(error).__name__ == "ContextWindowExceededError":
        return True
    status = _status(error)
    return status is not None and status >= 400 and bool(CONTEXT_TEXT.search(str(error)))


def is_timeout(error: BaseException) -> bool:
    return isinstance(error, (asyncio.TimeoutError, TimeoutError)) or type(error).__name__ == "Timeout"


def is_retryable(error: BaseException) -> bool:
    """Rate limits, 5xx, timeouts and dropped connections; never a request the server refused as invalid."""
    if is_invalid_request(error):
        return False
    if isinstance(error, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    status = _status(error)
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


CONTEXT_SIZE_IN_MESSAGE = re.compile(
    r"maximum context length is (\d+)|\"n_ctx\"\s*:\s*(\d+)|context window of (\d+)", re.IGNORECASE
)


# LiteLLM wraps a provider's message in its own class names, sometimes twice:
# "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error."
_WRAPPER = re.compile(r"^(?:litellm\.)?\w+(?:Error|Exception)(?::| -)\s*")


def without_wrappers(message: str) -> str:
    """A provider's message without LiteLLM's class-name prefixes ("Connection error.")."""
    previous = None
    while previous != message:
        previous, message = message, _WRAPPER.sub("", message, count=1)
    return message or previous


def told_window(error: BaseException) -> int | None:
    """The context window a prompt-too-long refusal names, in the server's tokens (OpenAI's and
    vLLM's "maximum context length is N", llama-cpp-python's "n_ctx": N); None if it names none."""
    if not is_context_overflow(error):
        return None
    found = CONTEXT_SIZE_IN_MESSAGE.search(str(error))
    return next((int(size) for size in found.groups() if size), None) if found else None


def error_message(error: BaseException, limit: int = 500) -> str:
    """An error as its row shows it: one line, no secret. A prompt too long for the model's
    context says which option makes long conversations fit, with the window where the server
    said it."""
    message = one_line(without_wrappers(redact_secrets(str(error))), limit)
    if is_connection_failure(error):
        return one_line(f"could not connect to the judge ({message})", limit)
    if not is_context_overflow(error):
        return message
    window = told_window(error)
    if window:
        advice = (
            f"the conversation does not fit the judge's context window ({window} tokens): pass --max-input-tokens"
            f" {int(window * SERVER_WINDOW_SHARE)} (max_input_tokens in Python) so long conversations are shortened"
            " to fit"
        )
    else:
        advice = (
            "the conversation does not fit the judge's context window: pass --max-input-tokens (max_input_tokens"
            " in Python) with the model's window so long conversations are shortened to fit"
        )
    return one_line(f"{advice}; the judge said: {message}", limit)


def raise_if_fatal(error: BaseException, backend: JudgeBackend) -> None:
    """A rejected key or an unknown model fails every call: stop the run."""
    status = _status(error)
    variable = getattr(backend, "key_variable", "the provider's API key variable")
    if status in (401, 403):
        raise JudgeAccessError(
            f"the judge rejected the API key for model {backend.model_name!r} ({status}): check {variable}"
        ) from None
    if status == 404:
        api_base = getattr(backend, "api_base", None)
        check = "check the model name and the path in --api-base" if api_base else "check the model name"
        raise JudgeAccessError(
            f"the judge at {endpoint_of(backend)} does not know model {backend.model_name!r} (404): {check}"
        ) from None


def retry_after_seconds(error: BaseException | None) -> float | None:
    headers = getattr(error, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(error, "response", None), "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):  # neither seconds nor an HTTP date: no hint
        return None


@dataclass
class CallStats:
    """What one judged request took: attempts, seconds in judge calls, seconds waiting on local ceilings."""

    attempts: int = 0
    latency_s: float = 0.0
    wait_s: float = 0.0


async def complete_with_retries(
    backend: JudgeBackend,
    messages: list[dict[str, str]],
    *,
    n: int,
    policy: RetryPolicy,
    rng: Any,
    gate: CallGate | None = None,
    estimated_tokens: int = 0,
    stats: CallStats | None = None,
    response_format: dict[str, Any] | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
) -> Completion:
    """One judged request, retried on rate limits, 5xx, timeouts and dropped connections, never
    when the server refused the request as invalid (400, 422, or a 5xx saying so), nor after a
    timeout on a self-hosted server that works on one request at a time (see `retries_timeouts`).

    Every attempt passes the `gate` (rate ceilings, adaptive concurrency) when there is one, then
    takes one of a self-hosted server's slots; its control ends backoff and rate waits at once
    when the run stops. Stopped by Ctrl-C, the request raises `RunStopped`; stopped because the
    judge is unreachable or refuses every call the same way, it raises the last error. `stats`
    collects attempts and timings, retries included. `timeout` comes from `policy`, else from
    the backend; `max_tokens` bounds each reply (None: unbounded).
    """
    stats = stats if stats is not None else CallStats()
    control = gate.control if gate is not None else None
    timeout = policy.timeout if policy.timeout is not None else backend.default_timeout_s()
    retries_timeouts = backend.retries_timeouts()
    sleep = control.sleep if control is not None else asyncio.sleep
    last_error: BaseException | None = None

    def worth_retrying(error: BaseException) -> bool:
        return is_retryable(error) and (retries_timeouts or not is_timeout(error))

    def call() -> Any:
        return backend.complete(
            messages,
            n=n,
            timeout=timeout,
            response_format=response_format,
            temperature=temperature,
            max_tokens=max_tokens,
        )

    async def attempt() -> Completion:
        nonlocal last_error
        stats.attempts += 1
        try:
            completion = await _attempt(call, gate, estimated_tokens, stats, backend)
        except RunStopped:
            stats.attempts -= 1  # the wait was cut: no request went out
            raise
        except Exception as error:
            last_error = error
            stats.attempts += getattr(error, "flowrate_requests", 1) - 1
            if control is not None and is_connection_failure(error):
                control.connection_failed(endpoint_of(backend))
            elif control is not None and is_invalid_request(error) and not is_n_refusal(error):
                control.call_refused(refusal_of(error))
            raise
        stats.attempts += completion.requests - 1
        if control is not None:
            control.connection_ok()
        return completion

    try:
        try:
            # Most calls succeed at once, so the first goes without tenacity, whose machinery cost
            # 0.27 ms a call (cProfile on bench/direct.py: inspecting its callbacks per attempt).
            return await attempt()
        except RunStopped:
            raise
        except Exception as error:
            if policy.max_retries == 0 or not worth_retrying(error):
                raise
            await sleep(policy.wait_seconds(1, error, rng.random()))
        retrying = AsyncRetrying(
            stop=stop_after_attempt(policy.max_retries),
            retry=retry_if_exception(worth_retrying),
            wait=lambda state: policy.wait_seconds(
                state.attempt_number + 1, state.outcome.exception() if state.outcome else None, rng.random()
            ),
            sleep=sleep,
            reraise=True,
        )
        async for retry in retrying:
            with retry:
                completion = await attempt()
    except RunStopped:
        if control is not None and not control.interrupted and last_error is not None:
            _raise_attempt_error(last_error, backend)
        raise
    except Exception as error:
        _raise_attempt_error(error, backend)
    return completion


async def _attempt(
    call, gate: CallGate | None, estimated_tokens: int, stats: CallStats, backend: JudgeBackend
) -> Completion:
    """One attempt through the gate and a server slot; its time in the call and its waits go to `stats`."""
    if gate is None:
        return await _in_slot(call, stats, backend)
    async with gate.attempt(estimated_tokens) as waited_s:
        stats.wait_s += waited_s
        return await _in_slot(call, stats, backend)


async def _in_slot(call, stats: CallStats, backend: JudgeBackend) -> Completion:
    started = time.monotonic()
    async with backend.server_slot():
        stats.wait_s += time.monotonic() - started
        return await _timed(call, stats)


async def _timed(call, stats: CallStats) -> Completion:
    started = time.monotonic()
    try:
        return await call()
    finally:
        stats.latency_s += time.monotonic() - started


def _raise_attempt_error(error: BaseException, backend: JudgeBackend):
    raise_if_fatal(error, backend)
    raise error


CONNECTION_ERROR_NAMES = {"APIConnectionError", "ConnectError", "ClientConnectorError", "ClientConnectionError"}


def is_connection_failure(error: BaseException) -> bool:
    """The endpoint could not be reached (refused, no route, DNS), as opposed to a slow or failing reply.
    LiteLLM wraps such errors differently per provider, so the whole cause chain is looked at."""
    seen = 0
    current: BaseException | None = error
    while current is not None and seen < 8:
        if isinstance(current, ConnectionError) or type(current).__name__ in CONNECTION_ERROR_NAMES:
            return True
        if "Connection error" in str(current):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def refusal_of(error: BaseException) -> str:
    """An invalid-request error as one line, its numbers blanked: the same refusal of two
    conversations differs only in token counts and request ids."""
    return re.sub(r"\d+", "#", f"{type(error).__name__}: {one_line(redact_secrets(str(error)))}")


def endpoint_of(backend: JudgeBackend) -> str:
    return getattr(backend, "api_base", None) or f"the {getattr(backend, 'provider', 'judge')} API"


def one_line(message: str, limit: int = 500) -> str:
    """An error message as one line: no traceback, no line breaks, at most `limit` characters."""
    message = message.split("Traceback (most recent call last)")[0]
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 1] + "…"


SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$")


def redact_secrets(text: str) -> str:
    """Blank out every secret-looking environment value that a provider's message may echo."""
    for name, value in os.environ.items():
        if len(value) >= 8 and SECRET_NAME.search(name.upper()) and value in text:
            text = text.replace(value, "***")
    return text
