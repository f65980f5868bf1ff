"""Structured output in the form the server takes: OpenAI's `json_schema` (vLLM, llama-server, OpenAI),
`{"type": "json_object", "schema": ...}` (llama-cpp-python's server), Ollama's `format`; learned from
the server's answer once per run, one call probing while the others wait.

`SchemaForms` is a part of `ServedJudge`; it reads the judge's `api_base`, `provider` and `_structured`
(declared by `ServedFacts`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from flowrate.judge.backend import (
    OLLAMA_FORM,
    SCHEMA_FORMS,
    Completion,
)
from flowrate.judge.errors import FormRefused, JudgeError
from flowrate.judge.served_base import ServedFacts


class SchemaForms(ServedFacts):
    """A served judge's structured-output forms; see the module."""

    @property
    def _learns_form(self) -> bool:
        """A server at --api-base serving a model LiteLLM does not know to take OpenAI's schema
        may take any of `SCHEMA_FORMS`: its answer tells which."""
        return bool(self.api_base) and not self.provider.startswith("ollama") and not self._structured

    @property
    def _form_settled(self) -> bool:
        return self._form_taken or not self._learns_form

    @property
    def _form(self) -> str | None:
        """The form the schema goes in now."""
        if self.provider.startswith("ollama"):
            return OLLAMA_FORM
        if self._learns_form:
            return SCHEMA_FORMS[self._form_index]
        return "json_schema" if self._structured else None

    @property
    def form_settled(self) -> bool:
        """Whether the form the schema goes in is known: a server at --api-base has taken one,
        or the judge's form was never in question."""
        return self._form_settled

    def take_form(self, form: str | None) -> None:
        """Send the schema in `form` (one of `SCHEMA_FORMS`), as a server is known to take it:
        a Ray worker told what the driver learned."""
        if self._learns_form and form in SCHEMA_FORMS:
            self._form_index = SCHEMA_FORMS.index(form)
            self._form_taken = True

    def response_format_id(self) -> str | None:
        """The form the next request sends the schema in: part of the cache key."""
        return self._form

    def response_format_ids(self) -> list[str | None]:
        """Every form a cached reply for this judge may have been asked in: the one in use once
        the server has taken one, before that each schema form (an earlier run learned it)."""
        if self._form_settled:
            return [self._form]
        return [form for form in SCHEMA_FORMS if form is not None]

    def structured_output(self, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        """The `response_format` asking for `schema` in OpenAI's form, where the model can take a
        schema in some form: LiteLLM says it supports structured output, it is an Ollama model
        (LiteLLM turns it into Ollama's `format`), or it is served at --api-base (the server's
        answer tells which form it takes; see `SCHEMA_FORMS`)."""
        if not (self._structured or self.api_base or self.provider.startswith("ollama")):
            return None
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}

    def request_format(
        self, response_format: dict[str, Any] | None, max_tokens: int | None
    ) -> tuple[str | None, dict[str, Any] | None]:
        """The form the schema goes in now, and `response_format` as that form sends it: OpenAI's
        as given, llama-cpp-python's with its bounds (`bounded_schema`), none without a form."""
        form = self._form if response_format else None
        if form == "json_object_schema" and response_format is not None:
            schema = bounded_schema(response_format["json_schema"]["schema"], max_tokens)
            return form, {"type": "json_object", "schema": schema}
        return form, response_format if form is not None else None

    async def send_in_form(
        self, send: Callable[[], Awaitable[Completion]], response_format: dict[str, Any] | None
    ) -> Completion:
        """`send`'s completion; until a server at --api-base has taken a schema form, one call at
        a time finds which (the others wait for its answer instead of all probing)."""
        if response_format is None or self._form_settled:
            return await send()
        async with self._loop_locks.get()[0]:
            if not self._form_settled:
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
                if isinstance(error, FormRefused) and self._form_index + 1 < len(SCHEMA_FORMS):
                    self._form_index += 1
                    refused += 1
                    continue
                error.requests = refused + 1
                raise
            self._form_taken = True
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
