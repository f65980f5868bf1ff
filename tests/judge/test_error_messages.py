"""An error row's message is the provider's own words on one line, without LiteLLM's class names
stacked in front of them."""

import socket

from flowrate.judge.retry import without_wrappers
from tests.helpers import distinct, read_rows, write_jsonl


def test_litellms_class_name_prefixes_are_taken_off_a_message():
    wrapped = "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error."
    assert without_wrappers(wrapped) == "Connection error."
    assert without_wrappers("litellm.BadRequestError: OpenAIException - Error code: 400") == "Error code: 400"
    assert without_wrappers("scripted 500") == "scripted 500"


def test_an_unreachable_judge_reads_as_one_plain_sentence(run_flowrate, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    result = run_flowrate("eval", path, "--api-base", f"http://127.0.0.1:{port}/v1", "-o", "out.jsonl")
    assert result.returncode == 3
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["error"]["message"] == "could not connect to the judge (Connection error.)"
    assert "litellm." not in result.stderr and "OpenAIException" not in result.stderr
