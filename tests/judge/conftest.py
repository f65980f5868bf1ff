"""The judge stage's tests are about the transport: each runs through both, "auto" (flowrate's
own aiohttp client for the OpenAI protocol) and "litellm" (LiteLLM's real code path)."""

import pytest


@pytest.fixture(params=["auto", "litellm"])
def transport(request, monkeypatch):
    """Overrides the suite's transport: this stage's tests run once per transport."""
    monkeypatch.setenv("FLOWRATE_TRANSPORT", request.param)
    return request.param
