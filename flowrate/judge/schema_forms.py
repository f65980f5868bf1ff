"""Structured output in the form the server takes: OpenAI's `json_schema` (vLLM, llama-server, OpenAI),
`{"type": "json_object", "schema": ...}` (llama-cpp-python's server), Ollama's `format`; learned from
the server's answer once per run, one call probing while the others wait.

`SchemaForms` is a part a `ServedJudge` holds; it reads the model's address (`api_base`, `provider`)
and whether it takes OpenAI's schema (`ServedModel.takes_schema`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from flowrate.judge.backend import (
    OLLAMA_FORM,
    SCHEMA_FORMS,
    Completion,
    PerLoop,
)
from flowrate.judge.errors import FormRefused, JudgeError
from flowrate.judge.served_model import ServedModel


@dataclass(eq=False)
class SchemaForms:
    """The structured-output forms of one served `model`; see the module. `index` (into
    `SCHEMA_FORMS`) is the form sent next and `taken` says a server took it: both learned from
    the server during the run, shared by every call of it."""

    model: ServedModel
    index: int = 0
    taken: bool = False
    #: held by the call that finds the form, per event loop
    _probing: PerLoop[asyncio.Lock] = field(default_factory=lambda: PerLoop(asyncio.Lock))

    @property
    def _learns_form(self) -> bool:
        """A server at --api-base serving a model LiteLLM does not know to take OpenAI's schema
        may take any of `SCHEMA_FORMS`: its answer tells which."""
        address = self.model.address
        return bool(address.api_base) and not address.provider.startswith("ollama") and not self.model.takes_schema

    @property
    def settled(self) -> bool:
        """Whether the form the schema goes in is known: a server at --api-base has taken one,
        or the judge's form was never in question."""
        return self.taken or not self._learns_form

    @property
    def form(self) -> str | None:
        """The form the schema goes in now (part of the cache key)."""
        if self.model.address.provider.startswith("ollama"):
            return OLLAMA_FORM
        if self._learns_form:
            return SCHEMA_FORMS[self.index]
        return "json_schema" if self.model.takes_schema else None

    def take(self, form: str | None) -> None:
        """Send the schema in `form` (one of `SCHEMA_FORMS`), as a server is known to take it:
        a Ray worker told what the driver learned."""
        if self._learns_form and form in SCHEMA_FORMS:
            self.index = SCHEMA_FORMS.index(form)
            self.taken = True

    def candidates(self) -> list[str | None]:
        """Every form a cached reply for this judge may have been asked in: the one in use once
        the server has taken one, before that each schema form (an earlier run learned it)."""
        if self.settled:
            return [self.form]
        return [form for form in SCHEMA_FORMS if form is not None]

    def structured_output(self, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        """The `response_format` asking for `schema` in OpenAI's form, where the model can take a
        schema in some form: LiteLLM says it supports structured output, it is an Ollama model
        (LiteLLM turns it into Ollama's `format`), or it is served at --api-base (the server's
        answer tells which form it takes; see `SCHEMA_FORMS`)."""
        address = self.model.address
        if not (self.model.takes_schema or address.api_base or address.provider.startswith("ollama")):
            return None
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}

    def request_format(
        self, response_format: dict[str, Any] | None, max_tokens: int | None
    ) -> tuple[str | None, dict[str, Any] | None]:
        """The form the schema goes in now, and `response_format` as that form sends it: OpenAI's
        as given, llama-cpp-python's with its bounds (`bounded_schema`), none without a form."""
        form = self.form if response_format else None
        if form == "json_object_schema" and response_format is not None:
            schema = bounded_schema(response_format["json_schema"]["schema"], max_tokens)
            return form, {"type": "json_object", "schema": schema}
        return form, response_format if form is not None else None

    async def send_in_form(
        self, send: Callable[[], Awaitable[Completion]], response_format: dict[str, Any] | None
    ) -> Completion:
        """`send`'s completion; until a server at --api-base has taken a schema form, one call at
        a time finds which (the others wait for its answer instead of all probing)."""
        if response_format is None or self.settled:
            return await send()
        async with self._probing.get():
            if not self.settled:
                return await self._probe_form(send)
        return await send()

    async def _probe_form(self, send: Callable[[], Awaitable[Completion]]) -> Completion:
        """Send, stepping down `SCHEMA_FORMS` while the server refuses the form; the form the
        server takes is kept for the run."""
        refused = 0
        while True:
            try:
                completion = await send()
            except JudgeError as error:
                if isinstance(error, FormRefused) and self.index + 1 < len(SCHEMA_FORMS):
                    self.index += 1
                    refused += 1
                    continue
                error.requests = refused + 1
                raise
            self.taken = True
            completion.requests += refused
            return completion


# A grammar-constrained server (llama-cpp-python's json_object form) can bound the reply itself:
# without bounds a small model's key-issue list ran past its max_tokens (en-tangent: 858 tokens,
# cut, re-asked, 105 s on 2 cores). The characters the limits allow add up to what `max_tokens`
# holds at CHARS_PER_TOKEN_FLOOR (SmolLM2 and Qwen2.5 measured 3.4-4.1 characters a token on the
# samples), less a JSON_SHARE of them for the keys, quotes and verdicts.
CHARS_PER_TOKEN_FLOOR = 3
JSON_SHARE = 0.4
KEY_ISSUES_MAX = 4
REASON_SHARE = 0.4  #: of a criterion's characters, for its reason; the rest for its key issues


def bounded_schema(schema: dict[str, Any], max_tokens: int | None) -> dict[str, Any]:
    """`schema` with a `maxLength` on each reason and key issue and a `maxItems` on each key-issue
    list, so that a reply that keeps to them fits `max_tokens` (unchanged when it is None). For
    servers that turn the schema into a grammar; OpenAI's strict mode is not sent these."""
    if not max_tokens:
        return schema
    criteria = schema["properties"]["criteria"]["properties"] if "criteria" in schema["properties"] else None
    parts = list(criteria.values()) if criteria is not None else [schema]
    share = int(max_tokens * CHARS_PER_TOKEN_FLOOR * (1 - JSON_SHARE) / len(parts))
    reason = max(40, int(share * REASON_SHARE))
    issue = max(20, int(share * (1 - REASON_SHARE) / KEY_ISSUES_MAX))

    def bound(part: dict[str, Any]) -> dict[str, Any]:
        properties = dict(part["properties"])
        if "reason" in properties:  # a verdict-only schema (`--score combined`'s first look) has none
            properties["reason"] = {**properties["reason"], "maxLength": reason}
        if "key_issues" in properties:
            items = {**properties["key_issues"]["items"], "maxLength": issue}
            properties["key_issues"] = {**properties["key_issues"], "items": items, "maxItems": KEY_ISSUES_MAX}
        return {**part, "properties": properties}

    if criteria is None:
        return bound(schema)
    bounded = {name: bound(part) for name, part in criteria.items()}
    inner = {**schema["properties"]["criteria"], "properties": bounded}
    return {**schema, "properties": {**schema["properties"], "criteria": inner}}
