"""Only closed conversations: `--closed-after DURATION` skips and counts a conversation whose last
message is newer than that, judging nothing of it; a duration that is not one is a plain error."""

import json
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

import pytest

from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.inputs.selection import Selection, last_message_s
from tests.helpers import read_rows, turn_record, write_jsonl


def ago(**delta):
    """An ISO 8601 UTC time `delta` before now."""
    return (datetime.now(UTC) - timedelta(**delta)).isoformat().replace("+00:00", "Z")


def test_a_conversation_whose_last_message_is_a_minute_old_is_open_and_nothing_is_judged(judge, run_flowrate, tmp_path):
    path = write_jsonl(
        tmp_path / "live.jsonl",
        [turn_record("live", "where is my parcel", "on its way", metadata={"ended_at": ago(minutes=1)})],
    )
    (tmp_path / "out.jsonl").write_text("kept\n")
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--closed-after", "30m")
    assert result.returncode == 2, result.stderr
    assert "nothing to judge" in result.stderr and "skipped 1 open conversation(s) (--closed-after)" in result.stderr
    assert judge.requests == 0 and (tmp_path / "out.jsonl").read_text() == "kept\n"
    allowed = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--closed-after", "30m", "--allow-empty"
    )
    assert allowed.returncode == 0, allowed.stderr
    assert "skipped 1 open conversation(s) (--closed-after)" in allowed.stderr and judge.requests == 0


def test_closed_conversations_are_judged_and_open_ones_counted(judge, run_flowrate, tmp_path):
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            turn_record("done", "hi", "hello", metadata={"ended_at": ago(hours=3)}),
            turn_record("live", "hi again", "hello again", metadata={"ended_at": ago(minutes=5)}),
            turn_record("old-start", "a question", "an answer", metadata={"started_at": ago(days=2)}),
        ],
    )
    result = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--closed-after", "2h", "--junit", "j.xml"
    )
    assert result.returncode == 0, result.stderr
    assert sorted(row["id"] for row in read_rows(tmp_path / "out.jsonl")) == ["done", "old-start"]
    assert judge.requests == 2 and "skipped 1 open conversation(s) (--closed-after)" in result.stderr
    skipped = [
        (case.get("name"), case.find("skipped").get("message"))
        for case in ElementTree.parse(tmp_path / "j.xml").iter("testcase")
        if case.find("skipped") is not None
    ]
    assert skipped == [("live", "left out by --closed-after: still open")]


def test_a_conversation_with_no_time_counts_as_closed_and_is_told_once(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("a", "x", "y"), turn_record("b", "p", "q")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--closed-after", "30m")
    assert result.returncode == 0, result.stderr
    assert len(read_rows(tmp_path / "out.jsonl")) == 2
    assert result.stderr.count("2 conversation(s) have no time") == 1


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_an_unreadable_ended_at_is_named_with_its_file_line_and_value_not_counted_as_no_time(
    dry_run, judge, run_flowrate, tmp_path
):
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            turn_record("done", "hi", "hello", metadata={"ended_at": ago(hours=3)}),
            turn_record("vague", "hi again", "hello again", metadata={"ended_at": "yesterday"}),
            turn_record("untimed", "a question", "an answer"),
        ],
    )
    result = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--closed-after", "2h", *dry_run
    )
    assert result.returncode == 0, result.stderr
    assert (
        "--closed-after: 1 conversation(s) have a time that cannot be read"
        f" (first: {path}:2 id 'vague': metadata.ended_at: 'yesterday' is not a time)"
    ) in result.stderr
    assert result.stderr.count("1 conversation(s) have no time") == 1  # 'untimed' alone
    if dry_run:
        assert judge.requests == 0
    else:
        assert sorted(row["id"] for row in read_rows(tmp_path / "out.jsonl")) == ["done", "untimed", "vague"]


@pytest.mark.parametrize("duration", ["30", "3x", "m", "-5m", "1w"])
def test_a_duration_that_is_not_one_is_a_plain_error_naming_the_option(duration, judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("a", "x", "y")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--closed-after", duration)
    assert result.returncode == 2 and "closed_after" in result.stderr and repr(duration) in result.stderr
    assert "Traceback" not in result.stderr and judge.requests == 0


def test_the_environment_and_the_config_file_give_closed_after_too(judge, run_flowrate, cli_env, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("live", "x", "y", metadata={"ended_at": ago(minutes=1)})])
    by_env = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "--allow-empty", env={**cli_env, "FLOWRATE_CLOSED_AFTER": "1h"}
    )
    (tmp_path / "flowrate.yaml").write_text(json.dumps({"closed_after": "1d"}))
    by_config = run_flowrate("eval", path, "--api-base", judge.base_url, "--allow-empty", "--config", "flowrate.yaml")
    for result in (by_env, by_config):
        assert result.returncode == 0 and "skipped 1 open" in result.stderr, result.stderr
    assert judge.requests == 0


def case_with(metadata):
    return ConversationalEvalTestCase(id="c", turns=[{"input": "a", "actual_output": "b"}], metadata=metadata)


@pytest.mark.parametrize(
    ("metadata", "expected_s"),
    [
        ({"ended_at": "2026-03-02T10:00:00Z", "started_at": "2026-03-02T11:00:00Z"}, 1772445600.0),
        ({"started_at": 1772445600000, "timestamp": "2026-03-02T09:00:00+00:00"}, 1772445600.0),
        ({"chat_date": "2026-03-02"}, 1772409600.0),
        ({"ended_at": 1772445600000000000}, 1772445600.0),
        ({"started_at": "yesterday"}, None),
        ({"ended_at": "yesterday", "started_at": "2026-03-02T10:00:00Z"}, 1772445600.0),
        ({}, None),
    ],
)
def test_the_last_message_is_ended_at_else_the_latest_time_of_the_record(metadata, expected_s):
    assert last_message_s(case_with(metadata)) == expected_s


def test_open_is_decided_against_one_now_for_every_pass():
    selection = Selection(closed_after_s=1800, now_s=1772445600.0 + 1799)
    again = selection.fresh()
    assert not selection.choose(case_with({"ended_at": 1772445600})) and selection.last_reason == "open"
    assert again.now_s == selection.now_s
    assert Selection(closed_after_s=1800, now_s=1772445600.0 + 1800).choose(case_with({"ended_at": 1772445600}))
