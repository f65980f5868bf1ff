"""`flowrate compare`: a regression told from noise, a changed judge, and nothing to compare."""

import json

from tests.helpers import evaluation_row as _row
from tests.helpers import march_row as row
from tests.helpers import two_metric_rows, write_rows


def _results(path, scores, **extra):
    path.write_text(
        "".join(_row(f"c{n:02d}", score=score, **extra).model_dump_json() + "\n" for n, score in enumerate(scores))
    )
    return path


def test_compare_exits_1_on_a_crafted_regression_and_0_on_noise(run_flowrate, tmp_path):
    import random

    rng = random.Random(7)
    levels = [1.0, 0.9, 0.7, 0.3, 0.0]
    baseline = [rng.choice(levels) for _ in range(60)]
    noisy = [score if rng.random() < 0.9 else rng.choice(levels) for score in baseline]
    worse = [max(0.0, round(score - 0.3, 1)) if n % 2 == 0 else score for n, score in enumerate(baseline)]
    _results(tmp_path / "base.jsonl", baseline)
    _results(tmp_path / "noise.jsonl", noisy)
    _results(tmp_path / "worse.jsonl", worse)
    noise = run_flowrate("compare", "base.jsonl", "noise.jsonl", "--json")
    assert noise.returncode == 0, noise.stderr
    report = json.loads(noise.stdout)
    [metric] = report["metrics"]
    assert metric["paired"] == 60 and metric["ci95"][0] < 0 < metric["ci95"][1] and not metric["significant_drop"]
    regression = run_flowrate("compare", "base.jsonl", "worse.jsonl", "--markdown")
    assert regression.returncode == 1 and "SIGNIFICANT DROP" in regression.stderr
    assert "**significant drop**" in regression.stdout and "**Regressions**" in regression.stdout
    changes = json.loads(run_flowrate("compare", "base.jsonl", "worse.jsonl", "--json").stdout)["changes"]
    assert changes[0]["delta"] < 0 and all(change["delta"] < 0 for change in changes)
    assert run_flowrate("compare", "base.jsonl", "noise.jsonl", "--fail-on-any-regression").returncode == 1
    assert run_flowrate("compare", "base.jsonl", "worse.jsonl", "--tolerance", "0.5").returncode == 0


def test_compare_warns_when_the_judge_changed_and_counts_one_sided_rows(run_flowrate, tmp_path):
    _results(tmp_path / "a.jsonl", [1.0, 0.7, 0.3])
    _results(tmp_path / "b.jsonl", [1.0, 0.7], model="gpt-4o-mini")
    result = run_flowrate("compare", "a.jsonl", "b.jsonl", "--json")
    report = json.loads(result.stdout)
    assert report["metrics"][0]["only_baseline"] == 1 and report["metrics"][0]["only_current"] == 0
    assert "different models (gpt-4o vs gpt-4o-mini)" in result.stderr


def test_compare_with_an_empty_baseline_is_exit_2_not_a_pass(run_flowrate, tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    write_rows(tmp_path / "current.jsonl", two_metric_rows())
    result = run_flowrate("compare", "empty.jsonl", "current.jsonl")
    assert result.returncode == 2, result.stderr
    assert "empty.jsonl: no result rows; nothing to compare" in result.stderr
    assert "different models" not in result.stderr and "Traceback" not in result.stderr
    write_rows(tmp_path / "other.jsonl", [row("z1", "a", 0.5)])
    disjoint = run_flowrate("compare", "other.jsonl", "current.jsonl", "--json")
    assert disjoint.returncode == 2 and disjoint.stdout == ""
    assert "no conversation was judged in both" in disjoint.stderr


def test_a_shard_compared_with_its_whole_run_has_the_same_mean_and_pass_rate_over_the_paired_rows(
    run_flowrate, tmp_path
):
    _results(tmp_path / "whole.jsonl", [1.0, 1.0, 1.0, 0.3, 0.3, 0.3])  # the shard: the first three
    _results(tmp_path / "shard.jsonl", [1.0, 1.0, 1.0])
    result = run_flowrate("compare", "whole.jsonl", "shard.jsonl", "--json")
    assert result.returncode == 0, result.stderr
    [metric] = json.loads(result.stdout)["metrics"]
    assert (metric["paired"], metric["mean_before"], metric["mean_after"]) == (3, 1.0, 1.0)
    assert (metric["pass_rate_before"], metric["pass_rate_after"]) == (1.0, 1.0)
    assert (metric["only_baseline"], metric["only_current"]) == (3, 0)
    printed = run_flowrate("compare", "whole.jsonl", "shard.jsonl").stderr
    assert "over 3 paired: mean 1.0000 -> 1.0000, delta +0.0000" in printed
    assert "pass rate 100.0% -> 100.0%; not paired: only in baseline 3, only in current 0" in printed
