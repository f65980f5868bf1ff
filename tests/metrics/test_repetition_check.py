"""The offline repetition check: no key, no call, and the loops it flags."""

from flowrate import ConversationalEvalTestCase, EvalTestCase
from tests.helpers import ROOT, read_rows


def test_the_repetition_check_needs_no_key_and_flags_the_samples_that_loop(run_flowrate, cli_env, tmp_path):
    env = {key: value for key, value in cli_env.items() if key != "OPENAI_API_KEY"}
    result = run_flowrate(
        "eval", ROOT / "sample_conversations", "--metric", "repetition_check", "-o", "out.jsonl", env=env
    )
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    flagged = {key: row["key_issues"] for key, row in rows.items() if row["key_issues"]}
    assert flagged == {
        "en-repeated-question": ["turn 3: repeats the question of turn 1 after the user answered"],
        "en-ignored-answer": ["turn 2: repeats the question of turn 1 after the user answered"],
        "en-left-hanging": ["turn 3: the user's last message has no reply"],
        "ru-loop": [
            "turn 2: repeats the reply of turn 1 (100% alike)",
            "turn 3: repeats the question of turn 1 after the user answered",
        ],
        "pt-repeated-question": ["turn 3: repeats the question of turn 1 after the user answered"],
    }
    assert all(rows[key]["score"] == 1.0 and rows[key]["success"] for key in rows if key not in flagged)
    assert rows["ru-loop"]["score"] == 0.2 and rows["en-left-hanging"]["score"] == 0.6
    assert result.returncode == 1 and all(row["cost_usd"] == 0.0 for row in rows.values())
    assert "loading the judge" not in result.stderr


def test_the_repetition_check_flags_empty_replies_and_spares_a_polite_goodbye():
    from flowrate.metrics.repetition import findings

    case = ConversationalEvalTestCase(
        turns=[
            EvalTestCase(input="hi", actual_output=""),
            EvalTestCase(input="hello?", actual_output="Sorry, how can I help?"),
            EvalTestCase(input="Thanks, bye!", actual_output=None),
        ]
    )
    assert findings(case) == ["turn 1: empty reply"]
