"""flowrate's judge errors: what every backend raises when a call fails, translated at its edge
from what it got (LiteLLM's exceptions, an HTTP status and body, llama-cpp-python's errors).
Retries, the call gate and the rows decide on these types alone.

`kind` is the name an error row gives the error (its `error.type`), as rows have named it
since before these types existed."""

from __future__ import annotations

import email.utils
import re
import time
from typing import Any

import orjson

ERROR_BODY_LIMIT = 100_000  # bytes of an error answer read for its message


class JudgeError(Exception):
    """A judge call failed. `status` is the HTTP status where there was one; `retry_after_s`
    the wait the server asked for; `requests` the HTTP requests the call took."""

    kind = "APIError"
    retryable = False  #: sent again, the call may succeed

    def __init__(
        self, message: str, *, status: int | None = None, retry_after_s: float | None = None, param: str | None = None
    ):
        """`message` is what the judge said, without any wrapper's class names; `param` the
        request parameter its answer named as refused (OpenAI's `error.param`), if any."""
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s
        self.param = param
        self.requests = 1


class RequestRefused(JudgeError):
    """The server refused the request as such (400, 413, 422, or a 5xx saying so): sent again, it fails again."""

    @property
    def kind(self) -> str:  # type: ignore[override]  # read-only where the others' is a class attribute: only read
        """A refusal sent with a 5xx or a 422 has been named by its status in rows."""
        if (self.status or 0) >= 500:
            return "InternalServerError"
        return "UnprocessableEntityError" if self.status == 422 else "BadRequestError"


class ContextWindowExceeded(RequestRefused):
    """The prompt did not fit the model's context window; `window_tokens` is the window the server named."""

    kind = "ContextWindowExceededError"

    def __init__(self, message: str, *, window_tokens: int | None = None, **details: Any):
        """`window_tokens`: the context window the refusal names, in the server's tokens (None: it names none)."""
        super().__init__(message, **details)
        self.window_tokens = window_tokens


class FormRefused(RequestRefused):
    """The server refused the form the reply schema was sent in (`response_format`)."""


class ChoicesRefused(RequestRefused):
    """The server refused to give several choices for one request (`n` > 1)."""


class LogprobsRefused(RequestRefused):
    """The server refused to give token log-probabilities (`logprobs`): llama-cpp-python's server
    started with `--logits_all false` answers a 500 saying so, a reasoning model a 400."""


class AuthRejected(JudgeError):
    """The judge rejected the API key (401, 403)."""

    kind = "AuthenticationError"


class ModelUnknown(JudgeError):
    """The judge does not know the model (404)."""

    kind = "NotFoundError"


class RateLimited(JudgeError):
    """Too many requests (429)."""

    kind = "RateLimitError"
    retryable = True


class ServerError(JudgeError):
    """The server failed on a request it took (5xx, 409, 425)."""

    kind = "InternalServerError"
    retryable = True


class Unavailable(ServerError):
    """The server is down or overloaded (503)."""

    kind = "ServiceUnavailableError"


class BadReply(JudgeError):
    """The server answered with something that is not a chat completion."""

    kind = "InternalServerError"
    retryable = True


class Unreachable(JudgeError):
    """The endpoint could not be reached, or dropped the connection (refused, no route, DNS)."""

    kind = "APIConnectionError"
    retryable = True


class TimedOut(JudgeError):
    """An attempt took longer than its timeout, or the server said it did (408)."""

    kind = "Timeout"
    retryable = True


# -- translating an HTTP answer ----------------------------------------------------------------
# Servers that say what they refused only in words: llama-cpp-python turns pydantic's validation
# errors into 500s ("Input should be 'text' or 'json_object'" at response_format.type), llama.cpp's
# llama-server refuses n != 1 with a 500 "Only one completion choice is allowed", and vLLM words a
# prompt too long only in its message.
REFUSAL_WORDS = re.compile(
    r"input should be|validation error|invalid request|invalid_request_error|extra inputs are not permitted"
    r"|field required|unsupported parameter|only one completion choice",
    re.IGNORECASE,
)
# Groq: "'n' : number must be at most 1"
CHOICES_WORDS = re.compile(
    r"only one completion choice|\bn\b\W{0,4}(must be 1|is not supported|unsupported|number must be at most 1)", re.I
)
# llama-cpp-python: "logprobs is not supported for models created with logits_all=False"; OpenAI's
# reasoning models: "logprobs is not supported with this model"; Mistral's API, whose request model
# has no logprobs: pydantic's 422 "loc": ["body", "logprobs"], "msg": "Extra inputs are not permitted";
# Together's, which takes an integer: "True is not of type 'integer' - 'logprobs'" (jsonschema's words)
LOGPROBS_WORDS = re.compile(
    r"\b(top_)?logprobs\b.{0,40}(not supported|unsupported|not allowed|not permitted|invalid)|logits_all"
    r"|is not of type '\w+' - '(top_)?logprobs'",
    re.I,
)
FORM_NAMED = re.compile(r"response_format|json_schema|json_object", re.IGNORECASE)
FORM_WORDS = re.compile(
    r"input should be|not supported|unsupported|invalid|unknown|not allowed|must be|extra inputs", re.IGNORECASE
)
CONTEXT_WORDS = re.compile(
    r"context length|context window|context size|maximum context|too many tokens|prompt is too long", re.IGNORECASE
)
WINDOW_WORDS = re.compile(r"maximum context length is (\d+)|\"n_ctx\"\s*:\s*(\d+)|context window of (\d+)", re.I)
CONTEXT_CODES = {"context_length_exceeded", "exceed_context_size_error"}
REFUSED_STATUSES = {400, 413, 422}
SERVER_STATUSES = {409, 425}


def server_message(body: bytes) -> str:
    """What an error answer says: OpenAI's `error.message`, FastAPI's `detail`, else its text."""
    error = _error_object(body)
    if isinstance(error, dict):
        return str(error.get("message", error))
    if error is not None:
        return str(error)
    return body[:ERROR_BODY_LIMIT].decode("utf-8", "replace").strip()


def _error_object(body: bytes) -> Any:
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return decoded.get("error", decoded.get("detail", decoded)) if isinstance(decoded, dict) else None


def error_for(status: int, body: bytes, headers: Any = None) -> JudgeError:
    """The error for an HTTP answer with `status`, `body` and `headers` (where Retry-After is read)."""
    error = _error_object(body)
    code = {str(error.get(key)) for key in ("code", "type")} if isinstance(error, dict) else set()
    window = error.get("n_ctx") if isinstance(error, dict) and isinstance(error.get("n_ctx"), int) else None
    message = server_message(body) or f"HTTP {status}"
    param = error.get("param") if isinstance(error, dict) and isinstance(error.get("param"), str) else None
    return error_of(
        status, message, retry_after_s=retry_after_seconds(headers), codes=code, window_tokens=window, param=param
    )


def error_of(
    status: int,
    message: str,
    *,
    retry_after_s: float | None = None,
    codes: set[str] | None = None,
    window_tokens: int | None = None,
    param: str | None = None,
) -> JudgeError:
    """The error for a `status` whose answer said `message` (`codes`: its error's `code` and
    `type`, `window_tokens`: the context window it named as a number), classed by status and by
    what the server says it refused, `param`: the parameter it named as refused)."""
    details: dict[str, Any] = {"status": status, "retry_after_s": retry_after_s, "param": param}
    if status >= 400 and (CONTEXT_WORDS.search(message) or CONTEXT_CODES & (codes or set())):
        return ContextWindowExceeded(message, window_tokens=window_tokens or window_named(message), **details)
    if status >= 400 and FORM_NAMED.search(message) and FORM_WORDS.search(message):
        return FormRefused(message, **details)
    if status >= 400 and LOGPROBS_WORDS.search(message):
        return LogprobsRefused(message, **details)
    if status >= 400 and CHOICES_WORDS.search(message):
        return ChoicesRefused(message, **details)
    if status in REFUSED_STATUSES or (status >= 500 and REFUSAL_WORDS.search(message)):
        return RequestRefused(message, **details)
    kind = {
        401: AuthRejected,
        403: AuthRejected,
        404: ModelUnknown,
        408: TimedOut,
        429: RateLimited,
        503: Unavailable,
    }.get(status)
    if kind is None:
        kind = ServerError if status >= 500 or status in SERVER_STATUSES else JudgeError
    return kind(message, **details)


def window_named(message: str) -> int | None:
    """The context window a too-long refusal's words name (OpenAI's and vLLM's "maximum context
    length is N", llama-cpp-python's "context window of N"); None if they name none."""
    found = WINDOW_WORDS.search(message)
    return next((int(size) for size in found.groups() if size), None) if found else None


def retry_after_seconds(headers: Any) -> float | None:
    """The wait a Retry-After header asks for, in seconds or as an HTTP date; None without one."""
    value = (headers.get("retry-after") or headers.get("Retry-After")) if headers else None
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
