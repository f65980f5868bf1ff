"""`flowrate align` against the scripted judge: the new rubric holds people's corrections as worked
examples, the held-out split is disjoint and the same on every run, held-out labels are never
learnt from, both held-out runs go through the cache and the budget, and too few labels are refused."""

import json
import re
from datetime import datetime

import pytest
import yaml

from flowrate.analysis.alignment import MIN_LABELS, held_out, split
from flowrate.analysis.history import connect, import_results
from flowrate.analysis.reviews import Review, record_review
from flowrate.rubric.model import load_rubric
from tests.helpers import PACKAGED_RUBRIC, turn_record, write_jsonl

FLOW = "conversational_flow_rate"
NOTE = "HUMAN-NOTE: the assistant loops"  # a reviewer's comment; the judge answers "minor" once it sees it


def people_say_minor(n):
    return n % 3 == 0


def setup(tmp_path, run_flowrate, judge, count=30):
    """`count` conversations judged "fully" by the scripted judge, in a history where a reviewer
    says "minor" (with a comment) for every third one and "fully" for the rest."""
    records = [
        {**turn_record(f"c{n:02d}", f"question {n}: where is parcel {n}?", f"answer {n}"), "metadata": {"lang": "en"}}
        for n in range(count)
    ]
    write_jsonl(tmp_path / "c.jsonl", records)
    judged = run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "-o", "rows.jsonl")
    assert judged.returncode == 0, judged.stderr
    connection = connect(tmp_path / "h.duckdb")
    import_results(connection, tmp_path / "rows.jsonl")
    for n in range(count):
        minor = people_say_minor(n)
        record_review(
            connection,
            Review(
                f"c{n:02d}",
                FLOW,
                "ana",
                "minor" if minor else "fully",
                0.3 if minor else 1.0,
                comment=NOTE if minor else None,
                answered_at=datetime(2026, 11, 2),
            ),
        )
    connection.close()
    judge.script(NOTE, {"verdict": "minor", "reason": "loops", "key_issues": ["turn 1: loops"]})


def align(run_flowrate, judge, *extra):
    return run_flowrate(
        "align", "c.jsonl", "--results", "rows.jsonl", "--history", "h.duckdb", "--api-base", judge.base_url,
        "-o", "new.yaml", "--json", *extra,
    )  # fmt: skip


def test_the_new_rubric_holds_peoples_corrections_as_worked_examples(tmp_path, run_flowrate, judge):
    setup(tmp_path, run_flowrate, judge)
    requests = judge.requests
    result = align(run_flowrate, judge)
    assert result.returncode == 0, result.stderr
    assert judge.requests == requests  # no holdout: nothing is judged
    report = json.loads(result.stdout)
    rubric = load_rubric(tmp_path / "new.yaml")
    base = load_rubric(PACKAGED_RUBRIC)
    assert rubric.name == base.name and rubric.version != base.version
    assert rubric.examples[: len(base.examples)] == base.examples
    added = rubric.examples[len(base.examples) :]
    assert len(added) == len(report["examples"]) > 0 and report["corrections"] == 10
    for example, conversation_id in zip(added, report["examples"]):
        assert people_say_minor(int(conversation_id[1:]))
        assert example.reply == {"reason": NOTE, "key_issues": [], "verdict": "minor"}
        assert (
            example.turns[0].input
            == f"question {int(conversation_id[1:])}: where is parcel {int(conversation_id[1:])}?"
        )
    assert "flowrate align" in (tmp_path / "new.yaml").read_text().splitlines()[0]


def test_the_example_budget_bounds_the_corrected_examples(tmp_path, run_flowrate, judge):
    setup(tmp_path, run_flowrate, judge)
    many = json.loads(align(run_flowrate, judge, "--max-examples", "5").stdout)["examples"]
    few = json.loads(align(run_flowrate, judge, "--example-tokens", "150").stdout)["examples"]
    assert len(many) == 5 and 0 < len(few) < 5
    refused = align(run_flowrate, judge, "--example-tokens", "5")
    assert refused.returncode == 2 and "example budget of 5 tokens" in refused.stderr


def test_held_out_labels_are_disjoint_stable_and_never_examples(tmp_path, run_flowrate, judge):
    setup(tmp_path, run_flowrate, judge)
    first = align(run_flowrate, judge, "--holdout", "0.3", "--work-dir", "w1")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    ids = [f"c{n:02d}" for n in range(30)]
    training, held = split(ids, 0.3)
    assert report["held_out"] == held == [key for key in ids if held_out(key, 0.3)] and held
    assert report["training"] == len(training) and not set(training) & set(held)
    assert not set(report["examples"]) & set(held)
    again = json.loads(align(run_flowrate, judge, "--holdout", "0.3", "--work-dir", "w2").stdout)
    assert again["held_out"] == held and again["examples"] == report["examples"]
    assert split(ids, 0.3, seed=1) != (training, held)
    held_file = [json.loads(line)["id"] for line in (tmp_path / "w1" / "held_out.jsonl").read_text().splitlines()]
    assert held_file == held


def test_both_held_out_runs_go_through_the_cache_and_side_by_side(tmp_path, run_flowrate, judge):
    setup(tmp_path, run_flowrate, judge)
    before = judge.requests
    first = align(run_flowrate, judge, "--holdout", "0.3")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    held = report["held_out"]
    # the old rubric's prompts are the eval's, answered by the cache; only the new rubric's are sent
    assert judge.requests - before == len(held)
    minor = [key for key in held if people_say_minor(int(key[1:]))]
    old, new = report["before"], report["after"]
    assert old["n"] == new["n"] == len(held)
    assert old["pass_fail"]["true_positive_rate"]["value"] == (0.0 if minor else None)  # the old judge passes all
    assert new["pass_fail"]["agreement"]["value"] == round((len(minor)) / len(held), 4)  # the new says minor to all
    # side by side, with nothing cut: a table where it fits, else a row at a time (`console.print_table`)
    flat = " ".join(first.stderr.split())
    assert "on the held-out conversations" in flat
    as_table = re.search(r"┃\s*old\s*┃\s*new\s*┃.*┃\s*rubric\s*┃\s*rubric\s*┃", flat)
    assert as_table or ("old rubric: 87.5% [62.5%, 100.0%]" in flat and "new rubric: 12.5%" in flat)
    requests = judge.requests
    second = align(run_flowrate, judge, "--holdout", "0.3")
    assert second.returncode == 0 and judge.requests == requests  # both runs answered by the cache
    assert json.loads(second.stdout)["after"] == new


def test_both_held_out_runs_share_the_budget(tmp_path, run_flowrate, judge, cli_env):
    setup(tmp_path, run_flowrate, judge)
    before = judge.requests
    result = align(run_flowrate, judge, "--holdout", "0.3", "--max-cost", "0.00000001", "--no-cache")
    assert result.returncode == 3, result.stderr
    assert judge.requests == before  # the budget allows no call in either run
    assert "the old rubric's run left conversations unjudged" in result.stderr
    assert "the new rubric's run left conversations unjudged" in result.stderr
    assert json.loads(result.stdout)["cost_usd"] == 0


@pytest.mark.parametrize("count", [MIN_LABELS - 1])
def test_too_few_labels_are_refused_naming_the_minimum(tmp_path, run_flowrate, judge, count):
    setup(tmp_path, run_flowrate, judge, count=count)
    result = align(run_flowrate, judge)
    assert result.returncode == 2
    assert f"align needs at least {MIN_LABELS} labelled conversations of {FLOW}" in result.stderr
    assert f"found {count}" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "new.yaml").exists()


def test_the_new_rubric_is_a_rubric_file_flowrate_eval_takes(tmp_path, run_flowrate, judge):
    setup(tmp_path, run_flowrate, judge)
    assert align(run_flowrate, judge).returncode == 0
    data = yaml.safe_load((tmp_path / "new.yaml").read_text())
    assert data["name"] == FLOW and data["criteria"][0]["scale"]["levels"]["minor"] == 0.3
    rejudged = run_flowrate(
        "eval", "c.jsonl", "--api-base", judge.base_url, "--rubric", "new.yaml", "-o", "again.jsonl"
    )
    assert rejudged.returncode in (0, 1), rejudged.stderr
    rows = [json.loads(line) for line in (tmp_path / "again.jsonl").read_text().splitlines()]
    assert {row["verdict"] for row in rows} == {"minor"} and rows[0]["rubric_version"] != "sha256:x"


def test_corrected_cases_cover_the_levels_before_a_second_of_any_level():
    from flowrate.analysis.alignment import Correction, choose, example_of
    from flowrate.inputs.conversation import ConversationalEvalTestCase, EvalTestCase
    from flowrate.judge.model_map import count_tokens

    rubric = load_rubric(FLOW)
    criterion = rubric.criteria[0]
    scores = {"none": 0.0, "minor": 0.3, "partial": 0.7}
    candidates = []
    for value in ("none", "minor", "partial"):
        for n in range(4):
            key = f"{value}{n}"
            correction = Correction(key, FLOW, value, scores[value], "fully", 1.0, language="pt" if n % 2 else "en")
            case = ConversationalEvalTestCase(id=key, turns=[EvalTestCase(input=f"q {key}", actual_output="a")])
            candidates.append((correction, example_of(correction, case, rubric, {})))
    chosen = choose(candidates, rubric, criterion, 10_000, 3, count_tokens)
    assert sorted(str(item[0].human_value) for item in chosen) == ["minor", "none", "partial"]
    six = choose(candidates, rubric, criterion, 10_000, 6, count_tokens)
    assert sorted(str(item[0].human_value) for item in six) == ["minor", "minor", "none", "none", "partial", "partial"]
    # the second case of a level is in another language than the first
    for value in ("none", "minor", "partial"):
        assert len({item[0].language for item in six if item[0].human_value == value}) == 2
    # without a reviewer's comment, the reason says what people answered
    assert chosen[0][1].reply["reason"].startswith("People who reviewed this conversation rated it")


def test_a_suites_criterion_is_corrected_and_the_other_criteria_keep_the_judges_answers(tmp_path, run_flowrate, judge):
    from tests.helpers import RATINGS, SUITE_MARK, suite_reply

    judge.script(SUITE_MARK, {"content": suite_reply()})  # coherence 5 for every conversation
    write_jsonl(tmp_path / "c.jsonl", [turn_record(f"c{n:02d}", f"question {n}", f"answer {n}") for n in range(24)])
    judged = run_flowrate(
        "eval", "c.jsonl", "--api-base", judge.base_url, "--metric", "virtual_agent", "-o", "rows.jsonl"
    )
    assert judged.returncode in (0, 1), judged.stderr
    labels = [
        {
            "conversation_id": f"c{n:02d}",
            "metric": "coherence",
            "rating": 2 if n % 4 == 0 else 5,
            "labeled_at": "2026-11-01",
        }
        for n in range(24)
    ]
    write_jsonl(tmp_path / "labels.jsonl", labels)
    result = run_flowrate(
        "align", "c.jsonl", "--results", "rows.jsonl", "--labels", "labels.jsonl", "--metric", "coherence",
        "-o", "suite.yaml", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["corrections"] == 6 and set(report["examples"]) <= {f"c{n:02d}" for n in range(0, 24, 4)}
    rubric = load_rubric(tmp_path / "suite.yaml")
    added = rubric.examples[len(load_rubric("virtual_agent").examples) :]
    assert added
    for example in added:
        criteria = example.reply["criteria"]
        assert criteria["coherence"]["rating"] == 2
        assert {name: part["rating"] for name, part in criteria.items() if name != "coherence"} == {
            name: rating for name, rating in RATINGS.items() if name != "coherence"
        }


def test_the_new_rubrics_run_gets_what_the_old_ones_left_of_the_budget(
    tmp_path, run_flowrate, judge, api_key, monkeypatch
):
    from pathlib import Path

    from flowrate.analysis.history import stored_labels
    from flowrate.api import align_rubric, evaluate_files
    from flowrate.results.files import read_rows
    from flowrate.settings.options import EvalSettings
    from tests.helpers import transport

    setup(tmp_path, run_flowrate, judge)
    monkeypatch.chdir(tmp_path)
    connection = connect(tmp_path / "h.duckdb", read_only=True)
    labels = stored_labels(connection)
    connection.close()
    budgets, spent = [], []

    def evaluate(paths, settings):
        budgets.append(settings.max_cost)
        run = evaluate_files(paths, settings)
        spent.append(run.summary.run_cost_usd)
        return run

    settings = EvalSettings(
        api_base=judge.base_url, transport=transport(), max_cost=1.0, no_cache=True, backoff=0, backoff_max=0
    )
    rows = list(read_rows(Path("rows.jsonl")))
    result = align_rubric(["c.jsonl"], rows, labels, FLOW, "new.yaml", settings, holdout=0.3, evaluate=evaluate)
    assert len(result.runs) == 2 and spent[0] > 0
    assert budgets == [1.0, pytest.approx(1.0 - spent[0])]
    assert result.before.n == result.after.n == len(result.held_out)


OUTPUT_IS_AN_INPUT = {
    "a hard link to the results": ["-o", "rows-link.jsonl"],
    "the conversations": ["-o", "c.jsonl"],
    "the history": ["-o", "h.duckdb"],
    "a hard link to the rubric to start from": ["--rubric", "base.yaml", "-o", "base-link.yaml"],
}


@pytest.mark.parametrize("case", list(OUTPUT_IS_AN_INPUT))
def test_align_refuses_to_write_the_new_rubric_over_one_of_its_inputs(case, tmp_path, run_flowrate, judge):
    import os
    import shutil

    setup(tmp_path, run_flowrate, judge)
    shutil.copy(PACKAGED_RUBRIC, tmp_path / "base.yaml")
    os.link(tmp_path / "rows.jsonl", tmp_path / "rows-link.jsonl")
    os.link(tmp_path / "base.yaml", tmp_path / "base-link.yaml")
    inputs = ("rows.jsonl", "c.jsonl", "h.duckdb", "base.yaml")
    before = {name: (tmp_path / name).read_bytes() for name in inputs}
    given = OUTPUT_IS_AN_INPUT[case]
    result = run_flowrate(
        "align", "c.jsonl", "--results", "rows.jsonl", "--history", "h.duckdb", "--api-base", judge.base_url, *given
    )
    assert result.returncode == 2, result.stderr
    assert f"--output {given[-1]}: is also an input of align" in result.stderr
    assert {name: (tmp_path / name).read_bytes() for name in inputs} == before


def test_align_reads_the_history_from_flowrate_history_as_eval_does(tmp_path, run_flowrate, judge, cli_env):
    setup(tmp_path, run_flowrate, judge)
    named = align(run_flowrate, judge)
    assert named.returncode == 0, named.stderr
    env = dict(cli_env, FLOWRATE_HISTORY=str(tmp_path / "h.duckdb"))
    from_env = run_flowrate(
        "align", "c.jsonl", "--api-base", judge.base_url, "-o", "env.yaml", "--json", env=env
    )  # the history's rows, labels and comments
    assert from_env.returncode == 0, from_env.stderr
    assert json.loads(from_env.stdout)["examples"] == json.loads(named.stdout)["examples"]
    assert (tmp_path / "env.yaml").read_text().split("\n", 1)[1] == (tmp_path / "new.yaml").read_text().split("\n", 1)[
        1
    ]
