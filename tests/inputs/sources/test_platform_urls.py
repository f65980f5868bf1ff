"""A platform URL (`phoenix+http://…?project=…`, `mlflow+http://…?experiment=…`) given to
`flowrate eval` where it cannot be read, and the options that go with one (`--write-back`,
`--since`, `--until`) where they cannot apply: a plain message naming the URL or the option, exit 2,
no traceback, no judge call and no output written. The real platforms' tests are in tests/platforms."""

import socket

import pytest

from tests.helpers import local_eval, turn_record, write_jsonl


def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def refused(outcome, judge, tmp_path, *said):
    assert outcome.returncode == 2, outcome.stderr
    assert "Traceback" not in outcome.stderr
    for text in said:
        assert text in outcome.stderr
    assert [body for body in judge.bodies if "messages" in body] == []
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("platform, place", [("phoenix", "project=bank"), ("mlflow", "experiment=1")])
def test_a_platform_that_does_not_answer_is_named_with_exit_2(platform, place, judge, run_flowrate, tmp_path):
    url = f"{platform}+http://127.0.0.1:{closed_port()}?{place}"
    outcome = run_flowrate(*local_eval(judge, url))
    refused(outcome, judge, tmp_path, url, "cannot read", "Connection refused")


@pytest.mark.parametrize(
    "url, said",
    [
        ("phoenix+http://127.0.0.1:6006", "names no project (add ?project=…)"),
        ("mlflow+https://mlflow.example.com/prefix?project=1", "names no experiment (add ?experiment=…)"),
    ],
)
def test_a_platform_url_that_names_no_place_is_a_usage_error(url, said, judge, run_flowrate, tmp_path):
    refused(run_flowrate(*local_eval(judge, url)), judge, tmp_path, url, said)


def test_a_platform_url_holding_credentials_is_refused_without_repeating_them(judge, run_flowrate, tmp_path):
    outcome = run_flowrate(*local_eval(judge, "mlflow+http://admin:pw-7f3e9a@127.0.0.1:5000?experiment=1"))
    refused(outcome, judge, tmp_path, "holds credentials", "MLFLOW_TRACKING_TOKEN")
    assert "pw-7f3e9a" not in outcome.stderr + outcome.stdout


@pytest.mark.parametrize(
    "options, said",
    [
        (("--write-back",), "--write-back writes each verdict where its conversation was read"),
        (("--since", "1d"), "--since and --until choose the traces read from a platform URL"),
        (("--until", "2026-03-01"), "--since and --until choose the traces read from a platform URL"),
    ],
)
def test_platform_options_with_only_files_are_a_usage_error(options, said, judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c1", "hi", "hello")])
    refused(run_flowrate(*local_eval(judge, path, *options)), judge, tmp_path, said)


def test_since_that_is_neither_a_time_nor_a_duration_is_named(judge, run_flowrate, tmp_path):
    url = f"phoenix+http://127.0.0.1:{closed_port()}?project=bank"
    outcome = run_flowrate(*local_eval(judge, url, "--since", "yesterday"))
    refused(outcome, judge, tmp_path, "since", "'yesterday' is neither an ISO date or time")
