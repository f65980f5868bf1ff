"""`flowrate top-issues` as its readers read it: JSON parsed, CSV read by a spreadsheet's
rules, the terminal table; `--name-with-judge` through the scripted judge, its cost counted."""

import csv
import io
import json

import orjson

from flowrate.analysis.judged.mode_naming import MARKER
from tests.analysis.planted_issues import planted_mode, planted_rows
from tests.helpers import SUITE_MARK, distinct, suite_reply, write_jsonl


def _results(tmp_path, rows=None):
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(orjson.dumps(row.model_dump(mode="json")) + b"\n" for row in rows or planted_rows()))
    return path


def test_json_lists_every_mode_ranked_with_exactly_the_documented_keys(run_flowrate, tmp_path):
    result = run_flowrate("top-issues", _results(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    modes = json.loads(result.stdout)["modes"]
    assert modes
    for mode in modes:
        assert list(mode) == ["label", "conversations", "share", "severity", "metrics", "ids", "examples"]
        assert len(mode["ids"]) == mode["conversations"]
        assert all(list(example) == ["id", "turn", "text"] for example in mode["examples"])
    assert [mode["severity"] for mode in modes] == sorted((mode["severity"] for mode in modes), reverse=True)
    assert planted_mode(modes[0]["ids"][0]) == "hanging"
    assert "Top issues: " in result.stderr and modes[0]["label"] in result.stderr


def test_csv_neutralises_formula_cells(run_flowrate, tmp_path):
    rows = planted_rows()[:6]
    for row in rows:
        row.id = '=HYPERLINK("https://evil.example","x")' + row.id
        row.key_issues = ["turn 2: +cmd|' /C calc'!A0 @SUM(1+1) asks again", "-2+3 loops"]
    out = tmp_path / "modes.csv"
    result = run_flowrate("top-issues", _results(tmp_path, rows), "--csv", out)
    assert result.returncode == 0, result.stderr
    table = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert table
    cells = [value for line in table for value in line.values() if value]
    assert not [cell for cell in cells if cell[0] in "=+-@\t\r"], cells
    assert any(cell.startswith("'=HYPERLINK") for cell in cells)
    assert any(cell.startswith("'-2+3") or cell.startswith("'+cmd") for cell in cells)


def test_bad_input_is_a_plain_message_and_exit_2(run_flowrate, tmp_path):
    missing = run_flowrate("top-issues", tmp_path / "nope.jsonl")
    assert missing.returncode == 2 and "nope.jsonl" in missing.stderr and "Traceback" not in missing.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n')
    broken = run_flowrate("top-issues", bad)
    assert broken.returncode == 2 and "bad.jsonl:1" in broken.stderr
    nothing = run_flowrate("top-issues")
    assert nothing.returncode == 2 and "--history" in nothing.stderr
    assert run_flowrate("top-issues", bad, "--by", "year").returncode == 2


def _naming_reply(modes):
    """The judge's reply: the three hanging modes (one per language) merged under one name."""
    hanging = [number for number, mode in enumerate(modes, start=1) if planted_mode(mode["ids"][0]) == "hanging"]
    return {"modes": [{"merge": hanging, "label": "User left without a reply at the end"}]}


def test_name_with_judge_makes_one_call_that_names_and_merges_modes_with_its_cost_counted(
    judge, run_flowrate, tmp_path
):
    path = _results(tmp_path)
    offline = json.loads(run_flowrate("top-issues", path, "--json").stdout)["modes"]
    judge.script(MARKER, {"content": json.dumps(_naming_reply(offline))})
    result = run_flowrate("top-issues", path, "--name-with-judge", "--api-base", judge.base_url, "--json")
    assert result.returncode == 0, result.stderr
    assert judge.calls_for(MARKER) == 1 and judge.requests == 1
    named = json.loads(result.stdout)["modes"]
    assert named[0]["label"] == "User left without a reply at the end"
    assert named[0]["conversations"] == 42  # the three languages' modes are one now
    assert len(named) == len(offline) - 2
    assert "1 call to" in result.stderr and "cost $" in result.stderr
    request = judge.bodies[-1]["messages"][0]["content"]
    assert offline[0]["label"] in request


def test_name_with_judge_dry_run_shows_the_call_and_its_cost_and_calls_nothing(judge, run_flowrate, tmp_path):
    result = run_flowrate(
        "top-issues", _results(tmp_path), "--name-with-judge", "--dry-run", "--api-base", judge.base_url
    )
    assert result.returncode == 0, result.stderr
    assert judge.requests == 0
    assert "would make 1 call" in result.stderr and "estimated cost $" in result.stderr


def test_max_cost_below_the_naming_estimate_makes_no_call_and_keeps_the_offline_labels(judge, run_flowrate, tmp_path):
    path = _results(tmp_path)
    offline = json.loads(run_flowrate("top-issues", path, "--json").stdout)["modes"]
    result = run_flowrate(
        "top-issues", path, "--name-with-judge", "--max-cost", "0.0000001", "--api-base", judge.base_url, "--json"
    )
    assert result.returncode == 3
    assert judge.requests == 0
    assert "--max-cost" in result.stderr
    assert json.loads(result.stdout)["modes"] == offline


def test_an_unusable_naming_reply_exits_3_with_the_offline_modes(judge, run_flowrate, tmp_path):
    path = _results(tmp_path)
    judge.script(MARKER, {"content": "I cannot help with that."})
    result = run_flowrate("top-issues", path, "--name-with-judge", "--api-base", judge.base_url, "--json")
    assert result.returncode == 3
    assert 'no "modes" list' in result.stderr
    assert json.loads(result.stdout)["modes"][0]["label"] == "the user's last question gets no reply"


def test_the_suites_criteria_raise_modes_from_their_own_key_issues(judge, run_flowrate, tmp_path):
    """Each virtual-agent criterion's key issues name turns, as the flow metric's do, so the
    modes cover every criterion: here two failures, each raised by the criteria that saw it."""
    asked_again = {"reason": "r", "key_issues": ["turn 2: asks again for the order number 77812"], "rating": 1}
    hanging = {"reason": "r", "key_issues": ["turn 3: the user's last question gets no reply"], "rating": 2}
    judge.script(SUITE_MARK, {"content": suite_reply(slot_filling=asked_again, request_completion=hanging)})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    judged = run_flowrate("eval", path, "--metric", "virtual_agent", "--api-base", judge.base_url, "-o", "out.jsonl")
    assert judge.requests == 4, judged.stderr
    result = run_flowrate("top-issues", "out.jsonl", "--json", "--metric", "virtual_agent")
    modes = {mode["label"]: mode for mode in json.loads(result.stdout)["modes"]}
    assert modes["asks again for the order number"]["metrics"] == ["slot_filling"]
    assert modes["the user's last question gets no reply"]["metrics"] == ["request_completion"]
    assert modes["asks again for the order number"]["conversations"] == 4
    assert modes["asks again for the order number"]["examples"][0]["turn"] == 2
    # the other six criteria's scripted issues ("turn 1: coherence issue", …) are modes of their own
    assert len(modes) >= 3


def test_a_metric_no_row_has_is_refused_with_exit_2_naming_the_metrics_there(run_flowrate, tmp_path):
    result = run_flowrate("top-issues", _results(tmp_path), "--metric", "no_such_metric")
    assert result.returncode == 2, result.stderr
    assert "option metric: no row of metric 'no_such_metric'" in result.stderr
    assert "conversational_flow_rate" in result.stderr and "Traceback" not in result.stderr


def test_a_file_of_only_errors_says_why_nothing_was_grouped(run_flowrate, tmp_path):
    from flowrate.results.rows import ErrorInfo
    from tests.helpers import evaluation_row

    failed = [
        evaluation_row(f"e{n}", 0.0).model_copy(
            update={"score": None, "success": None, "error": ErrorInfo(type="T", message="m")}
        )
        for n in range(2)
    ]
    result = run_flowrate("top-issues", _results(tmp_path, failed))
    assert result.returncode == 0, result.stderr
    assert "Top issues: 0 modes over 2 conversations" in result.stderr
    assert "nothing to group: all 2 row(s) are errors, which carry no key issues" in result.stderr


def test_counts_read_in_the_singular_for_one(run_flowrate, tmp_path):
    from tests.analysis.planted_issues import issue_row

    result = run_flowrate(
        "top-issues", _results(tmp_path, [issue_row("only", 0.3, ["turn 2: asks again for the order"])])
    )
    assert result.returncode == 0, result.stderr
    assert "Top issues: 1 mode over 1 conversation" in result.stderr
    assert "nothing to group" not in result.stderr


def test_an_unusable_naming_reply_leaves_no_client_session_unclosed(judge, run_process, tmp_path):
    judge.script(MARKER, {"content": "I cannot help with that."})
    result = run_process("top-issues", _results(tmp_path), "--name-with-judge", "--api-base", judge.base_url)
    assert result.returncode == 3, result.stderr
    assert 'no "modes" list' in result.stderr
    assert "Unclosed" not in result.stderr and "Traceback" not in result.stderr, result.stderr
