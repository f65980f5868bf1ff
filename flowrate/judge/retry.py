"""Calling the judge: model backends, retries and reading its verdict.

LiteLLM is imported here only, and only when a LiteLLM judge is first used:
its import costs seconds and `--help` or `validate` never need it.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from flowrate.errors import JudgeAccessError
from flowrate.judge.backend import Completion, JudgeBackend
from flowrate.judge.errors import (
    AuthRejected,
    ChoicesRefused,
    ContextWindowExceeded,
    JudgeError,
    ModelUnknown,
    RequestRefused,
    TimedOut,
    Unreachable,
)
from flowrate.judge.limits import CallGate, RunStopped
from flowrate.judge.server import SERVER_WINDOW_SHARE
from flowrate.settings.groups import RetryOptions


# -- retries ---------------------------------------------------------------------
class RetryPolicy(RetryOptions):
    """How hard to try one judge call: the retry group's options (`settings.groups.RetryOptions`,
    declared there once, with their defaults), and the waits between tries.

    `backoff` is the first wait in seconds, doubled each retry with jitter; every wait,
    a Retry-After included, is capped at `backoff_max`. Zero both to never wait (tests).
    `timeout` is the seconds one attempt may take; None leaves it to the judge
    (`HOSTED_TIMEOUT_S`, or `SELF_HOSTED_TIMEOUT_S` for a self-hosted model).
    """

    model_config = ConfigDict(frozen=True)

    def wait_seconds(self, attempt: int, error: BaseException | None, jitter: float) -> float:
        exponential = self.backoff * (2 ** (attempt - 1)) * (0.5 + jitter)
        told_s = error.retry_after_s if isinstance(error, JudgeError) else None
        return min(self.backoff_max, max(exponential, told_s or 0.0))


def worth_retrying(error: BaseException, retries_timeouts: bool = True) -> bool:
    """Rate limits, server errors, timeouts and dropped connections; never a request the server
    refused as invalid, nor a timeout when `retries_timeouts` is False."""
    if isinstance(error, TimedOut):
        return retries_timeouts
    return isinstance(error, JudgeError) and error.retryable


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
    """The context window a prompt-too-long refusal names, in the server's tokens; None if it names none."""
    return error.window_tokens if isinstance(error, ContextWindowExceeded) else None


def error_message(error: BaseException, limit: int = 500) -> str:
    """An error as its row shows it: one line, no secret. A prompt too long for the model's
    context says which option makes long conversations fit, with the window where the server
    said it."""
    message = one_line(without_wrappers(redact_secrets(str(error))), limit)
    if isinstance(error, Unreachable):
        return one_line(f"could not connect to the judge ({message})", limit)
    if not isinstance(error, ContextWindowExceeded):
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
    status = f" ({error.status})" if isinstance(error, JudgeError) and error.status else ""
    if isinstance(error, AuthRejected):
        variable = getattr(backend, "key_variable", "the provider's API key variable")
        raise JudgeAccessError(
            f"the judge rejected the API key for model {backend.model_name!r}{status}: check {variable}"
        ) from None
    if isinstance(error, ModelUnknown):
        api_base = getattr(backend, "api_base", None)
        check = "check the model name and the path in --api-base" if api_base else "check the model name"
        raise JudgeAccessError(
            f"the judge at {endpoint_of(backend)} does not know model {backend.model_name!r}{status}: {check}"
        ) from None


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

    def retried(error: BaseException) -> bool:
        return worth_retrying(error, retries_timeouts)

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
            stats.attempts += (error.requests if isinstance(error, JudgeError) else 1) - 1
            if control is not None and isinstance(error, Unreachable):
                control.connection_failed(endpoint_of(backend))
            elif control is not None and isinstance(error, RequestRefused) and not isinstance(error, ChoicesRefused):
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
            if policy.max_retries == 0 or not retried(error):
                raise
            await sleep(policy.wait_seconds(1, error, rng.random()))
        retrying = AsyncRetrying(
            stop=stop_after_attempt(policy.max_retries),
            retry=retry_if_exception(retried),
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


def error_kind(error: BaseException) -> str:
    """An error's name in its row (`error.type`): a judge error's `kind`, else its class's name."""
    return error.kind if isinstance(error, JudgeError) else type(error).__name__


def refusal_of(error: BaseException) -> str:
    """An invalid-request error as one line, its numbers blanked: the same refusal of two
    conversations differs only in token counts and request ids."""
    return re.sub(r"\d+", "#", f"{error_kind(error)}: {one_line(redact_secrets(str(error)))}")


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
