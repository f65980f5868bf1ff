"""The direct transport: OpenAI's chat-completions protocol spoken over one pooled aiohttp client,
for every judge that speaks it (OpenAI, Azure OpenAI, and any `--api-base`: vLLM, llama.cpp,
Ollama's /v1, LM Studio, TGI, gateways). LiteLLM stays for every other provider.

Measured on 2 cores against the scripted judge (bench/client_cpu.py): a call costs LiteLLM 4.5 ms
of CPU and aiohttp 0.24 ms, and importing LiteLLM takes 3-4 s before the first request. Prices
and windows come from LiteLLM's model map read as data (`model_map`), so neither transport
prices or sizes a model differently. An error answer becomes one of flowrate's judge errors
(`judge.errors.error_for`), as LiteLLM's exceptions do in the LiteLLM backend."""

from __future__ import annotations

import asyncio
import json
import os
from functools import cached_property
from typing import Any

import orjson

from flowrate.judge.address import JudgeAddress
from flowrate.judge.backend import Completion, tokens_of, usage_of
from flowrate.judge.errors import ERROR_BODY_LIMIT, BadReply, TimedOut, Unreachable, error_for
from flowrate.judge.model_map import count_tokens, model_facts
from flowrate.judge.served import ChatRequest, ServedJudge
from flowrate.judge.served_model import ServedModel

OPENAI_BASE = "https://api.openai.com/v1"
AZURE_API_VERSION = "2024-10-21"  # when AZURE_API_VERSION is not set: the GA version with json_schema


def openai_endpoint(api_base: str | None) -> tuple[str, dict[str, str]]:
    """The OpenAI API's base URL (`api_base`, else OPENAI_BASE_URL, else OpenAI's) and the headers
    every request sends: the key in OPENAI_API_KEY, the organization in OPENAI_ORGANIZATION."""
    base = (api_base or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE).rstrip("/")
    key = os.environ.get("OPENAI_API_KEY", "").strip()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if os.environ.get("OPENAI_ORGANIZATION"):
        headers["OpenAI-Organization"] = os.environ["OPENAI_ORGANIZATION"]
    return base, headers


# -- the pooled client --------------------------------------------------------------------------
_SESSIONS: dict[int, Any] = {}  # event loop id -> its aiohttp session
_PROXIES: dict[int, dict[str, tuple[Any, Any]]] = {}  # event loop id -> URL -> (proxy, its credentials)


def session() -> Any:
    """The running event loop's HTTP client: one connection pool for every call of the run.
    Proxies (HTTPS_PROXY, NO_PROXY) come from the environment (`proxy_for`), and certificates
    from the system's store or SSL_CERT_FILE, as with the SDKs."""
    import aiohttp

    loop = id(asyncio.get_running_loop())
    client = _SESSIONS.get(loop)
    if client is None or client.closed:
        connector = aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True)  # the call gate bounds concurrency
        client = aiohttp.ClientSession(connector=connector, json_serialize=_dumps)
        _SESSIONS[loop] = client
    return client


async def close_sessions() -> None:
    """Close the running loop's client, once its run is over."""
    client = _SESSIONS.pop(id(asyncio.get_running_loop()), None)
    _PROXIES.pop(id(asyncio.get_running_loop()), None)
    if client is not None and not client.closed:
        await client.close()


def proxy_for(url: str) -> tuple[Any, Any]:
    """The proxy HTTPS_PROXY or HTTP_PROXY name for `url` (unless NO_PROXY covers its host) and
    the credentials in its address; (None, None) for none. Read once per URL and run: aiohttp's
    `trust_env` reads them, and ~/.netrc, in a thread on every request (two thread hops a call,
    a GIL hand-over each, that the raw loop of bench/direct.py does not pay)."""
    known = _PROXIES.setdefault(id(asyncio.get_running_loop()), {})
    if url not in known:
        from aiohttp.helpers import get_env_proxy_for_url
        from yarl import URL

        try:
            known[url] = get_env_proxy_for_url(URL(url))
        except LookupError:
            known[url] = (None, None)
    return known[url]


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


class MappedModel(ServedModel):
    """A model as LiteLLM's model map knows it, read as data (`model_map`): LiteLLM is never imported."""

    @cached_property
    def info(self) -> dict[str, Any] | None:
        return model_facts(self.address.litellm_model)

    @property
    def takes_n(self) -> bool:
        return True  # OpenAI's protocol takes n; a server that ignores or refuses it is learned

    @cached_property
    def takes_schema(self) -> bool:
        return bool((self.info or {}).get("supports_response_schema"))

    @property
    def takes_logprobs(self) -> bool:
        return True  # OpenAI's protocol has them; a server that refuses them is learned

    @property
    def reasons(self) -> bool:
        return bool((self.info or {}).get("supports_reasoning"))

    def estimated_tokens(self, text: str) -> int:
        return count_tokens(text)

    @property
    def supported_params(self) -> frozenset[str] | None:
        return None


class DirectBackend(ServedJudge):
    """A judge that speaks OpenAI's protocol (`JudgeAddress.direct`), with the same key checks,
    schema forms and self-hosted defaults as the LiteLLM backend, its calls made over aiohttp and
    its facts read from LiteLLM's model map (`MappedModel`): LiteLLM is never imported."""

    def __init__(self, address: JudgeAddress):
        """`address`: the model and where it is served (`JudgeAddress.parse`)."""
        super().__init__(MappedModel(address))

    @cached_property
    def _endpoint(self) -> tuple[str, dict[str, str]]:
        """The chat-completions URL and the headers every call sends (the key among them)."""
        name = self.batch_model
        if self.provider == "azure":
            base = (self.api_base or os.environ.get("AZURE_API_BASE", "")).rstrip("/")
            version = os.environ.get("AZURE_API_VERSION", AZURE_API_VERSION)
            url = f"{base}/openai/deployments/{name}/chat/completions?api-version={version}"
            return url, {"api-key": os.environ.get("AZURE_API_KEY", "")}
        base, headers = openai_endpoint(self.api_base)
        return f"{base}/chat/completions", headers

    async def _send(self, request: ChatRequest, timeout: float) -> Completion:
        import aiohttp

        url, headers = self._endpoint
        proxy, proxy_auth = proxy_for(url)
        try:
            async with session().post(
                url, data=orjson.dumps(request.body), headers={**headers, "Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=timeout), proxy=proxy, proxy_auth=proxy_auth,
            ) as answer:  # fmt: skip
                payload = await answer.read()
                if answer.status >= 400:
                    raise error_for(answer.status, payload[:ERROR_BODY_LIMIT], answer.headers)
        except TimeoutError:
            raise TimedOut(f"Request timed out after {timeout:g} seconds.") from None
        except aiohttp.ClientConnectionError as error:  # the words the rows have always used, the cause kept
            raise Unreachable("Connection error.") from error
        completion = _completion(payload, request.form)
        completion.cost_usd = self.price(completion.usage)
        return completion


def _completion(payload: bytes, form: str | None) -> Completion:
    """A chat-completions answer as a `Completion`, not yet priced."""
    try:
        answer = json_loads(payload)
    except orjson.JSONDecodeError:
        answer = None
    return completion_of(answer, form, payload)


def json_loads(payload: bytes) -> Any:
    """`payload` decoded as JSON: by orjson, or, where orjson refuses the NaN and Infinity that
    Python's json.dumps writes for a number that is none (a server's broken log-probability), by
    the standard library, which reads them (as LiteLLM's transport does). Raises orjson's
    `JSONDecodeError` for anything else."""
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as refused:
        try:
            return json.loads(payload)
        except ValueError:
            raise refused from None


def completion_of(answer: Any, form: str | None, payload: Any = None) -> Completion:
    """A decoded chat-completions answer as a `Completion` (its cost left for the caller to set:
    `JudgeBackend.price` of its usage); raises `BadReply` for anything else (`payload`: what to
    quote, default the answer)."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list):
        quoted = payload[:200] if payload is not None else str(answer)[:200]
        raise BadReply(f"the judge's answer is not a chat completion: {quoted!r}")
    return Completion(
        texts=[((choice.get("message") or {}).get("content") or "") for choice in choices],
        usage=usage_of(answer.get("usage")),
        finish_reasons=[choice.get("finish_reason") for choice in choices],
        response_format=form,
        logprobs=[tokens_of(choice.get("logprobs")) for choice in choices],
    )
