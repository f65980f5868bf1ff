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
