"""A proxy from the environment (HTTP_PROXY) carries every judge call, on both transports, as it
does with the SDKs: through the real CLI, a real forward proxy on 127.0.0.1, and the scripted judge."""

import pytest

from tests.helpers import distinct, read_rows, write_jsonl
from tests.proxy import CountingProxy


@pytest.fixture
def forward_proxy():
    proxy = CountingProxy().start()
    yield proxy
    proxy.stop()


def test_every_judge_call_goes_through_the_proxy_the_environment_names(
    judge, run_flowrate, cli_env, forward_proxy, tmp_path
):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    env = {key: value for key, value in cli_env.items() if key.lower() not in ("no_proxy", "http_proxy", "all_proxy")}
    env["HTTP_PROXY"] = f"http://127.0.0.1:{forward_proxy.port}"
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", env=env)
    assert result.returncode == 0, result.stderr
    assert len(read_rows(tmp_path / "out.jsonl")) == 3
    calls = [exchange.path for exchange in forward_proxy.completions()]
    assert calls and all(url.startswith(judge.base_url) for url in calls)
    assert len(calls) == judge.requests == 3


async def test_the_direct_transport_reads_the_proxy_settings_once_a_run_not_in_a_thread_each_call(
    judge, tmp_path, monkeypatch
):
    # aiohttp's trust_env looked up the proxy and ~/.netrc in the loop's thread pool on every
    # request: a thread hop (and a GIL hand-over) a call that a plain aiohttp loop does not make
    import asyncio
    import threading

    from flowrate.api import evaluate_files_async
    from flowrate.settings.options import EvalSettings

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    settings = EvalSettings(
        api_base=judge.base_url, output=str(tmp_path / "out.jsonl"), no_cache=True, model="gpt-4o", max_retries=0
    )
    before = {thread.ident for thread in threading.enumerate()}
    evaluation = await evaluate_files_async([str(path)], settings)
    assert evaluation.summary.judged == 4 and judge.requests == 4
    pooled = [t.name for t in threading.enumerate() if t.ident not in before and t.name.startswith("asyncio_")]
    assert pooled == [], pooled
    assert asyncio.get_running_loop()._default_executor is None
