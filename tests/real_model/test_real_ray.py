"""`--engine ray` against the real model (issue 20): a local Ray cluster started by the real
`flowrate` process, Ray Data's HTTP processor sending flowrate's requests to llama-cpp-python's
server through the counting proxy. The pipeline is asserted, never the 135M model's verdicts."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.real_model.conftest import run_flowrate
from tests.real_model.test_real_judge import (
    FLOW,
    assert_ran,
    assert_schema_sent_as_the_server_takes_it,
    exit_codes_for,
    form_refusals,
    short_conversations,
)

pytestmark = [pytest.mark.real_model, pytest.mark.filterwarnings("ignore")]


def test_ray_judges_each_conversation_once_in_the_schema_form_the_real_server_takes(real_judge, proxy, tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed (.ci/run installs .[test,ray])")
    ids = short_conversations(tmp_path / "c.jsonl", 3, "ray")
    run = run_flowrate(proxy, tmp_path, tmp_path / "cache", "eval", tmp_path / "c.jsonl", "-m", real_judge.model,
                       "--api-base", proxy.url, "--engine", "ray")  # fmt: skip
    assert_ran(run)
    assert run.returncode in exit_codes_for(run.rows), run.stderr
    assert Counter((row["id"], row["metric"]) for row in run.rows) == Counter({(cid, FLOW): 1 for cid in ids})
    # llama-cpp-python refuses OpenAI's json_schema (a 500): one refusal on the driver's first call,
    # then every request in the form it takes, the workers' included
    assert len(form_refusals(run.completions)) == 1 and run.completions[0] in form_refusals(run.completions)
    taken = run.completions[1:]
    assert len(taken) >= len(ids) and all(exchange.status == 200 for exchange in taken)
    for exchange in taken:
        assert_schema_sent_as_the_server_takes_it(exchange, {"reason", "key_issues", "verdict"})
    assert {row["response_format"] for row in run.rows if row["error"] is None} == {"json_object_schema"}
