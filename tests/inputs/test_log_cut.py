"""A final user message nobody answered: judged as a user left hanging, or left out when the log
was cut there (`--cut-logs` for a run, `"log_cut"` for one record), through the real CLI and the
scripted judge's HTTP."""

import json

from tests.helpers import chat_bodies, local_eval, turn_record, write_jsonl

LAST = "MARK-LAST-UNANSWERED nothing much except the weather"


def _records():
    return [
        turn_record("plain", "Hi!", "Hi! What's up?", trailing_user_utterance=LAST),
        turn_record("kept", "Hey", "Hello there", trailing_user_utterance=LAST, log_cut=False),
        turn_record("cut", "Yo", "Hi, how can I help?", trailing_user_utterance=LAST, log_cut=True),
    ]


def _shown(judge):
    """Conversation id (by its first user message) -> whether the judge was shown the last message."""
    firsts = {"Hi!": "plain", "Hey": "kept", "Yo": "cut"}
    shown = {}
    for body in chat_bodies(judge):
        prompt = body["messages"][-1]["content"]
        name = next(name for first, name in firsts.items() if first in prompt)
        shown[name] = LAST in prompt
    return shown


def test_by_default_a_trailing_user_message_is_judged_unless_its_record_says_the_log_was_cut(
    judge, run_flowrate, tmp_path
):
    write_jsonl(tmp_path / "c.jsonl", _records())
    result = run_flowrate(*local_eval(judge, "c.jsonl", "--no-cache"))
    assert result.returncode in (0, 1), result.stderr
    assert _shown(judge) == {"plain": True, "kept": True, "cut": False}


def test_cut_logs_leaves_the_final_message_out_unless_a_record_says_its_log_was_not_cut(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", _records())
    result = run_flowrate(*local_eval(judge, "c.jsonl", "--no-cache", "--cut-logs"))
    assert result.returncode in (0, 1), result.stderr
    assert _shown(judge) == {"plain": False, "kept": True, "cut": False}
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted(row["id"] for row in rows) == ["cut", "kept", "plain"]


def test_a_log_cut_that_is_not_true_or_false_is_refused_by_file_line_and_field(run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", [turn_record("a", "x", "y"), turn_record("b", "x", "y", log_cut="yes")])
    result = run_flowrate("validate", "c.jsonl")
    assert result.returncode == 2
    assert "c.jsonl:2" in result.stderr and "log_cut" in result.stderr
    assert "Traceback" not in result.stderr
