"""`flowrate judge-bench` through the real CLI against the scripted judge's HTTP: agreement with
a set's human labels and the published figures beside it, replies that misbehave, several judges,
the cache, the budget, verdict stability, bad options, and the HTML page in Chromium."""

import json
import math

import pytest
from scipy import stats

from tests.helpers import CHROMIUM, CHROMIUM_ARGS, chat_bodies, write_jsonl
from tests.judge_server import checklist_step

LEVELS = ["none", "minor", "partial", "mostly", "fully"]
SCORES = {"none": 0.0, "minor": 0.3, "partial": 0.7, "mostly": 0.9, "fully": 1.0}
# the judge's verdict and the human Coherent label (0-2) of each dialogue: agreeing, with two swaps
PLAN = [("none", 0.2), ("minor", 0.6), ("partial", 1.0), ("mostly", 1.6), ("fully", 1.8),
        ("fully", 0.4), ("none", 1.4), ("partial", 1.2), ("mostly", 2.0), ("minor", 0.0)]  # fmt: skip
TRAIL = "MARK-TRAILING never meant to be answered"


def _fed(tmp_path, judge, plan=PLAN, steps=None):
    """A FED-like set in the data directory: dialogue d{i} carries MARK-FED-{i}- and is judged as
    `plan` says, or answered with `steps[i]` in turn; each ends with a trailing user message, as
    FED's do."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    records = []
    for i, (verdict, coherent) in enumerate(plan):
        judge.script(f"MARK-FED-{i}-", *(steps or {}).get(i, [{"verdict": verdict, "reason": "r", "key_issues": []}]))
        records.append(
            {
                "id": f"d{i}",
                "turns": [{"input": f"MARK-FED-{i}- hi", "actual_output": "hello"}],
                "trailing_user_utterance": TRAIL,
                "labels": {"Coherent": coherent, "Overall": coherent * 2},
            }
        )
    write_jsonl(data / "fed_dialog_level.jsonl", records)
    return data


def _bench(run_flowrate, judge, *extra, model="smol"):
    return run_flowrate(
        "judge-bench", "--model", model, "--api-base", judge.base_url, "--data-dir", "data", "--json", "bench.json",
        *extra,
    )  # fmt: skip


def _scores(tmp_path):
    return json.loads((tmp_path / "bench.json").read_text())["scores"]


def test_a_judge_is_scored_on_fed_with_spearman_kendall_intervals_and_the_published_figures(
    judge, run_flowrate, tmp_path
):
    _fed(tmp_path, judge)
    result = _bench(run_flowrate, judge)
    assert result.returncode == 0, result.stderr
    [score] = _scores(tmp_path)
    judged = [SCORES[verdict] for verdict, _ in PLAN]
    humans = [coherent for _, coherent in PLAN]
    assert (score["set"], score["label"], score["n"], score["conversations"]) == ("fed", "Coherent", 10, 10)
    assert score["spearman"]["value"] == pytest.approx(stats.spearmanr(judged, humans).statistic, abs=1e-4)
    assert score["kendall"]["value"] == pytest.approx(stats.kendalltau(judged, humans).statistic, abs=1e-4)
    low, high = score["spearman"]["ci95"]
    assert low < score["spearman"]["value"] < high
    assert (score["parsed_first_call"], score["errors"], score["calls"]) == (10, 0, 10)
    assert {a["name"]: a["value"] for a in score["anchors"]} == {"FED metric": 0.251, "one human": 0.45, "GPT-4": 0.60}
    assert "FED metric 0.251 [1]" in result.stderr and "[1] FED metric: Mehri & Eskenazi 2020" in result.stderr
    assert len(chat_bodies(judge)) == 10


def test_fed_is_judged_without_its_trailing_user_message(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge)
    assert _bench(run_flowrate, judge).returncode == 0
    prompts = [body["messages"][-1]["content"] for body in chat_bodies(judge)]
    assert prompts and not any(TRAIL in prompt for prompt in prompts)
    assert _scores(tmp_path)[0]["cut_logs"] is True


def test_a_reply_read_only_after_a_re_ask_and_one_never_read_are_counted_and_the_run_is_incomplete(
    judge, run_flowrate, tmp_path
):
    mostly = {"verdict": "mostly", "reason": "r", "key_issues": []}
    _fed(tmp_path, judge, steps={3: [{"content": "{not json"}, mostly], 4: [{"content": "{no"}, {"content": "nope"}]})
    result = _bench(run_flowrate, judge)
    assert result.returncode == 3, result.stderr
    [score] = _scores(tmp_path)
    assert (score["parsed_first_call"], score["reasked"], score["errors"], score["n"]) == (8, 1, 1, 9)
    assert score["calls"] == 12


def test_each_judge_gets_its_own_score_and_rows(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge)
    result = run_flowrate(
        "judge-bench", "--model", "smol", "--model", "other", "--api-base", judge.base_url,
        "--data-dir", "data", "--json", "bench.json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    scores = _scores(tmp_path)
    assert [score["judge"] for score in scores] == ["smol", "other"]
    assert {body["model"] for body in chat_bodies(judge)} == {"smol", "other"}
    for score in scores:
        rows = (tmp_path / score["results_file"]).read_text().splitlines()
        assert sorted(json.loads(line)["id"] for line in rows) == [f"d{i}" for i in range(10)]


def test_a_second_benchmark_is_answered_by_the_cache_and_gives_the_same_figures(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge)
    assert _bench(run_flowrate, judge).returncode == 0
    first = _scores(tmp_path)[0]
    sent = len(chat_bodies(judge))
    again = _bench(run_flowrate, judge)
    assert again.returncode == 0, again.stderr
    second = _scores(tmp_path)[0]
    assert len(chat_bodies(judge)) == sent
    assert "10 cached, 0 call(s)" in again.stderr
    assert (second["spearman"], second["kendall"], second["cached"]) == (first["spearman"], first["kendall"], 10)


def test_a_set_sharing_another_sets_prompts_is_estimated_as_cached(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge)
    result = _bench(run_flowrate, judge, "--sets", "fed,fed-overall")
    assert result.returncode == 0, result.stderr
    assert "20 conversation(s), 10 cached, 10 call(s)" in result.stderr
    assert len(chat_bodies(judge)) == 10
    assert [score["label"] for score in _scores(tmp_path)] == ["Coherent", "Overall"]


def test_the_budget_holds_across_the_benchmark(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge)
    result = _bench(run_flowrate, judge, "--max-cost", "0.02", model="gpt-4o")
    assert result.returncode == 3, result.stderr
    [score] = _scores(tmp_path)
    assert 0 < len(chat_bodies(judge)) < 10
    assert score["cost_usd"] <= 0.02
    assert score["n"] == 10 - score["not_judged"] < 10


def test_a_run_that_judges_nothing_is_scored_on_nothing_not_on_an_earlier_benchmarks_rows(
    judge, run_flowrate, tmp_path
):
    _fed(tmp_path, judge)
    assert _bench(run_flowrate, judge, model="gpt-4o").returncode == 0
    spent = _bench(run_flowrate, judge, "--no-cache", "--max-cost", "0", model="gpt-4o")
    assert spent.returncode == 3, spent.stderr
    [score] = _scores(tmp_path)
    assert (score["n"], score["not_judged"], score["spearman"]["value"]) == (0, 10, None)
    assert len(chat_bodies(judge)) == 10  # the first benchmark's calls only


def test_a_budget_for_a_judge_without_a_price_is_refused_before_any_call(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge)
    result = _bench(run_flowrate, judge, "--max-cost", "1")
    assert result.returncode == 2
    assert "no price is known for model 'smol'" in result.stderr
    assert chat_bodies(judge) == []


def test_stability_is_the_share_of_conversations_given_the_same_verdict_on_reruns_without_the_cache(
    judge, run_flowrate, tmp_path
):
    step = {"verdict": "mostly", "reason": "r", "key_issues": []}
    _fed(tmp_path, judge, steps={1: [step, step, {**step, "verdict": "none"}]})  # changes on the second rerun
    result = _bench(run_flowrate, judge, "--stability", "3")
    assert result.returncode == 0, result.stderr
    [score] = _scores(tmp_path)
    assert score["stability"] == {
        "conversations": 3, "runs": 3, "same_verdict": 2, "share": pytest.approx(0.6667), "not_judged": 0
    }  # fmt: skip
    assert len(chat_bodies(judge)) == 10 + 2 * 3
    assert score["calls"] == 10 + 2 * 3
    assert "10 conversation(s), 0 cached, 16 call(s)" in result.stderr
    assert "same verdict on reruns without the cache: 2/3 (67%) over 3 runs" in result.stderr


def test_stability_reruns_after_a_cached_run_are_estimated_counted_and_priced(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge)
    assert _bench(run_flowrate, judge, model="gpt-4o").returncode == 0
    sent = len(chat_bodies(judge))
    result = _bench(run_flowrate, judge, "--stability", "3", model="gpt-4o")
    assert result.returncode == 0, result.stderr
    assert len(chat_bodies(judge)) - sent == 2 * 3
    assert "10 conversation(s), 10 cached, 6 call(s)" in result.stderr
    report = json.loads((tmp_path / "bench.json").read_text())
    [score] = report["scores"]
    assert (report["estimate"]["calls"], report["estimate"]["reruns"], score["calls"]) == (6, 6, 6)
    assert report["estimate"]["cost_usd"] > 0 and score["cost_usd"] > 0
    assert score["prompt_tokens"] > 0
    assert "6 call(s), 10 cached" in result.stderr


def test_stability_reruns_a_budget_cuts_are_said_and_exit_3(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge)
    assert _bench(run_flowrate, judge, "--no-cache", model="gpt-4o").returncode == 0
    estimated = json.loads((tmp_path / "bench.json").read_text())["estimate"]["uncached_cost_usd"]
    budget = (
        f"{estimated * 1.3:.6f}"  # the first run, and some of the reruns (60 % more), as --max-cost holds them back
    )
    result = _bench(run_flowrate, judge, "--no-cache", "--stability", "3", "--max-cost", budget, model="gpt-4o")
    assert result.returncode == 3, result.stderr
    [score] = _scores(tmp_path)
    assert score["n"] == 10 and score["stability"]["not_judged"] > 0
    assert score["stability"]["conversations"] == 3 - score["stability"]["not_judged"]
    assert score["cost_usd"] <= float(budget) + 1e-9
    assert f"{score['stability']['not_judged']} conversation(s) meant for the stability reruns" in result.stderr
    assert "(the --max-cost budget was spent)" in result.stderr


def test_your_own_labels_are_a_set_judged_with_the_metric_you_name(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge)
    own = [json.loads(line) for line in (tmp_path / "data" / "fed_dialog_level.jsonl").read_text().splitlines()]
    write_jsonl(tmp_path / "mine.jsonl", [record | {"labels": {"ok": i % 3}} for i, record in enumerate(own)])
    result = run_flowrate(
        "judge-bench", "--model", "smol", "--api-base", judge.base_url, "--labels", "mine.jsonl", "--label", "ok",
        "--json", "bench.json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [score] = _scores(tmp_path)
    assert (score["set"], score["label"], score["n"], score["cut_logs"]) == ("labels", "ok", 10, False)
    assert any(TRAIL in body["messages"][-1]["content"] for body in chat_bodies(judge))


def test_a_set_named_with_a_count_is_judged_on_its_first_conversations_only(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge)
    result = _bench(run_flowrate, judge, "--sets", "fed:4")
    assert result.returncode == 0, result.stderr
    [score] = _scores(tmp_path)
    assert (score["conversations"], score["n"], score["calls"]) == (4, 4, 4)
    assert len(chat_bodies(judge)) == 4


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--sets", "fed,nope"), "option sets: unknown set 'nope' (known: fed, fed-overall"),
        (("--sets", "ieval"), "ieval_dialog_level.jsonl: no such file (set 'ieval')"),
        (("--sets", "fed:0"), "option sets: 'fed:0': the part after ':' must be a number of conversations"),
        (("--sets", "fed,fed:3"), "option sets: 'fed' is named twice"),
        (("--html", "nowhere/x.html"), "--html nowhere/x.html: the directory nowhere does not exist"),
        (("--labels", "mine.jsonl"), "options labels and label go together"),
        (("--api-base", "http://127.0.0.1:9/v1"), "give one for all judges or one per --model (1), not 2"),
    ],
)
def test_bad_options_are_refused_plainly_before_any_call(judge, run_flowrate, tmp_path, extra, message):
    _fed(tmp_path, judge)
    result = _bench(run_flowrate, judge, *extra)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert chat_bodies(judge) == []


def test_a_label_no_record_carries_is_refused_naming_the_labels_found(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge)
    write_jsonl(tmp_path / "mine.jsonl", [{"id": "a", "turns": [{"input": "x", "actual_output": "y"}]}])
    result = _bench(run_flowrate, judge, "--labels", "mine.jsonl", "--label", "ok")
    assert result.returncode == 2
    assert "no record carries the label 'ok'" in result.stderr
    assert chat_bodies(judge) == []


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_the_html_page_in_chromium_draws_a_hostile_label_as_text(judge, run_flowrate, tmp_path):
    from playwright import sync_api

    hostile = "<img src=x onerror=\"document.title='owned'\"></td><script>document.title='owned'</script>"
    _fed(tmp_path, judge)
    own = [json.loads(line) for line in (tmp_path / "data" / "fed_dialog_level.jsonl").read_text().splitlines()]
    write_jsonl(tmp_path / "mine.jsonl", [record | {"labels": {hostile: i % 3}} for i, record in enumerate(own)])
    result = _bench(
        run_flowrate, judge, "--sets", "fed", "--labels", "mine.jsonl", "--label", hostile, "--html", "bench.html"
    )
    assert result.returncode == 0, result.stderr
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(offline=True).new_page()
        page.goto((tmp_path / "bench.html").as_uri())
        cells = page.locator("#scores tbody tr").all()
        texts = [row.locator("td").all_inner_texts() for row in cells]
        title = page.title()
        sources = page.locator("#sources li").all_inner_texts()
        browser.close()
    assert title == "flowrate judge-bench"
    assert [row[1] for row in texts] == ["fed (cut logs)", "labels"]
    assert texts[1][2] == hostile
    assert texts[0][6].startswith("FED metric 0.251 [1]")
    assert sources[0] == "FED metric: Mehri & Eskenazi 2020 (SIGDIAL), FED dialog level"


# -- the judge's distribution: each score, its ties, calibration and the largest gaps --------------
def _torn_steps(plan):
    """For each dialogue, a reasoned verdict that is sure and a verdict-first look that is torn
    between its verdict and the level people's label points to."""
    steps = {}
    for i, (verdict, coherent) in enumerate(plan):
        people = LEVELS[min(int(coherent / 2 * 5), 4)]
        sure = {"verdict": verdict, "reason": "r", "key_issues": [], "logprobs": {verdict: 0.0}}
        torn = {verdict: math.log(0.5), people: math.log(0.5)} if people != verdict else {verdict: 0.0}
        steps[i] = [sure, {"verdict": verdict, "logprobs": torn}]
    return steps


def test_each_score_the_rows_carry_is_scored_with_its_ties_and_the_largest_gaps_listed(judge, run_flowrate, tmp_path):
    _fed(tmp_path, judge, steps=_torn_steps(PLAN))
    result = _bench(run_flowrate, judge, "--score", "combined", "-j", "1")
    assert result.returncode == 0, result.stderr
    [score] = _scores(tmp_path)
    found = {entry["score"]: entry for entry in score["by_score"]}
    assert set(found) == {"verdict", "expected", "verdict_first", "combined"}
    humans = [coherent for _, coherent in PLAN]
    verdicts = [SCORES[verdict] for verdict, _ in PLAN]
    assert found["verdict"]["spearman"]["value"] == pytest.approx(stats.spearmanr(verdicts, humans).statistic, abs=1e-4)
    firsts = []
    for verdict, coherent in PLAN:
        people = LEVELS[min(int(coherent / 2 * 5), 4)]
        firsts.append(SCORES[verdict] if people == verdict else (SCORES[verdict] + SCORES[people]) / 2)
    assert found["verdict_first"]["spearman"]["value"] == pytest.approx(
        stats.spearmanr(firsts, humans).statistic, abs=1e-4
    )
    combined = [(v + f) / 2 for v, f in zip(verdicts, firsts)]
    assert found["combined"]["spearman"]["value"] == pytest.approx(
        stats.spearmanr(combined, humans).statistic, abs=1e-4
    )
    assert score["spearman"] == found["combined"]["spearman"]  # the score --score names is the headline
    # ten verdicts on five levels: each level twice, so 5 of the 45 pairs tie
    assert found["verdict"]["ties"] == pytest.approx(10 / 90, abs=1e-4)
    assert found["verdict_first"]["ties"] < found["verdict"]["ties"]
    worst = score["largest_gaps"][0]
    assert worst["id"] == "d5" and worst["gap"] == pytest.approx(1.0 - 0.4 / 2, abs=1e-4)  # "fully", people 0.4 of 2
    assert "by verdict_first: spearman" in result.stderr and "gap +0.80: d5" in result.stderr


def test_calibration_is_measured_where_people_rated_on_the_judges_own_scale(judge, run_flowrate, tmp_path):
    steps = {}
    for i, (verdict, _) in enumerate(PLAN):  # the judge is 0.8 sure each time
        other = "none" if verdict != "none" else "minor"
        steps[i] = [{"verdict": verdict, "logprobs": {verdict: math.log(0.8), other: math.log(0.2)}}]
    _fed(tmp_path, judge, steps=steps)
    own = [json.loads(line) for line in (tmp_path / "data" / "fed_dialog_level.jsonl").read_text().splitlines()]
    # people agree with the judge on every other dialogue, and call the rest "none"
    labelled = [record | {"labels": {"ok": SCORES[PLAN[i][0]] if i % 2 else 0.0}} for i, record in enumerate(own)]
    write_jsonl(tmp_path / "mine.jsonl", labelled)
    result = run_flowrate(
        "judge-bench", "--model", "smol", "--api-base", judge.base_url, "--labels", "mine.jsonl", "--label", "ok",
        "--json", "bench.json", "--logprobs",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [score] = _scores(tmp_path)
    right = sum(1 for i, (verdict, _) in enumerate(PLAN) if i % 2 or verdict == "none")
    assert score["calibration_error"] == pytest.approx(abs(0.8 - right / 10), abs=1e-4)


def _abc(tmp_path, judge, turns=None):
    """An ABC-Eval-like set: two dialogues of four turns, each turn's behaviours flagged by two
    people and by ChatGPT-3.5 (the shape of abc_eval_test_behaviors.jsonl); the judge names turns."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)

    def turn(redundant=(0, 0), ignore=(0, 0), gpt=()):
        labels = {"redundant": {"human": list(redundant), "gpt": int("redundant" in gpt)},
                  "ignore": {"human": list(ignore), "gpt": int("ignore" in gpt)},
                  "irrelevant": {"human": [0, 0], "gpt": 0}}  # fmt: skip
        return labels

    plans = {
        "a0": ([turn(), turn(redundant=(1, 1)), turn(ignore=(1, 0), gpt=("ignore",)), turn()], ["turn 2: asks again"]),
        "a1": (
            [turn(redundant=(1, 1), gpt=("redundant",)), turn(), turn(), turn()],
            ["turn 1: repeats", "turn 3: odd"],
        ),
    }
    records = []
    for conversation, (labels, issues) in plans.items():
        step = {"verdict": "minor", "key_issues": issues, "turns": (turns or {}).get(conversation)}
        judge.script(f"MARK-{conversation}-", {key: value for key, value in step.items() if value is not None})
        records.append(
            {
                "id": conversation,
                "turns": [{"input": f"MARK-{conversation}- {n}", "actual_output": "ok"} for n in range(4)],
                "labels": {"flow_violation_rate": 0.25 if conversation == "a0" else 0.5},
                "turn_behavior_labels": labels,
            }
        )
    write_jsonl(data / "abc_eval_test_behaviors.jsonl", records)


def test_the_turns_the_judge_names_are_scored_against_the_turns_people_flagged(judge, run_flowrate, tmp_path):
    _abc(tmp_path, judge)
    result = _bench(run_flowrate, judge, "--sets", "abc-eval")
    assert result.returncode == 0, result.stderr
    [score] = _scores(tmp_path)
    turns = score["turns"]
    judge_by = {entry["behaviour"]: entry for entry in turns["judge"]}
    # named: a0 {2}, a1 {1, 3}; redundant flagged by both people: a0 {2}, a1 {1}
    assert (judge_by["redundant"]["precision"], judge_by["redundant"]["recall"]) == (66.7, 100.0)
    assert judge_by["redundant"]["f1"] == 80.0
    # ignore: person 1 flagged a0 turn 3, person 2 nothing: recall is person 1's alone, F1 the mean of 0 and 0
    assert (judge_by["ignore"]["precision"], judge_by["ignore"]["recall"], judge_by["ignore"]["f1"]) == (0.0, 0.0, 0.0)
    people_by = {entry["behaviour"]: entry for entry in turns["people"]}
    assert people_by["redundant"]["f1"] == 100.0 and people_by["ignore"]["f1"] == 0.0
    chatgpt_by = {entry["behaviour"]: entry for entry in turns["chatgpt"]}
    assert chatgpt_by["redundant"]["f1"] == pytest.approx(66.7)  # a1's turn 1 of the two flagged
    every_by = {entry["behaviour"]: entry for entry in turns["every_turn"]}
    # every one of the 8 turns named: both of the 2 turns each person flagged found, 2 of 8 right
    assert (every_by["redundant"]["recall"], every_by["redundant"]["precision"]) == (100.0, 25.0)
    assert (
        "turns named against people's, 2 dialogues" in result.stderr and "every turn named: redundant" in result.stderr
    )


def test_the_card_has_every_look_of_every_dialogue_and_the_looks_combined_on_the_other_set(
    judge, run_flowrate, tmp_path
):
    """Two sets (FED and labels of one's own): each set's combination is fit on the other alone,
    the card's lines recompute its held-out Spearman with the public labels, and `--fit` writes
    the weights fit on both with their provenance (issue 46)."""
    steps = {}
    for i, (verdict, coherent) in enumerate(PLAN):
        p_good = 0.1 + 0.8 * coherent / 2  # the checklist follows people; the verdict has two swaps
        checklist = checklist_step(
            {"ends_well": "yes"}, {"ends_well": {"yes": math.log(p_good), "no": math.log(1 - p_good)}}
        )
        steps[i] = [{"verdict": verdict, "reason": "r", "key_issues": [], "checklist": checklist}]
    _fed(tmp_path, judge, steps=steps)
    own = [json.loads(line) for line in (tmp_path / "data" / "fed_dialog_level.jsonl").read_text().splitlines()]
    mine = [record | {"labels": {"ok": coherent}} for record, (_, coherent) in zip(own, PLAN)]
    write_jsonl(tmp_path / "mine.jsonl", mine)
    options = (
        "--sets",
        "fed",
        "--labels",
        "mine.jsonl",
        "--label",
        "ok",
        "--score",
        "checklist",
        "--card",
        "card.jsonl",
    )
    shipped = {"looks": ["verdict"], "weights": {"verdict": 1}, "means": {"verdict": 0.5}, "sds": {"verdict": 0.3},
               "fit_on": ["fed"], "sizes": {"fed": 125}, "turn_threshold": 0.42, "turn_fit_on": "abc-eval 61-108"}  # fmt: skip
    (tmp_path / "weights.json").write_text(json.dumps(shipped))  # a file with a per-turn threshold fit elsewhere
    result = _bench(run_flowrate, judge, *options, "--fit", "weights.json", "-j", "1")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in (tmp_path / "card.jsonl").read_text().splitlines()]
    assert sorted((line["set"], line["id"]) for line in lines) == sorted(
        (name, f"d{i}") for name in ("fed", "labels") for i in range(len(PLAN))
    )
    fed = sorted((line for line in lines if line["set"] == "fed"), key=lambda line: int(line["id"][1:]))
    assert all(line["fit_on"] == {"combined_fit": ["labels"]} for line in fed)
    assert {"verdict", "expected", "checklist", "looks_mean", "combined_fit"} <= set(fed[0])
    assert fed[0]["checklist_p_yes"] == {"ends_well": pytest.approx(0.18)}  # d0: 0.1 + 0.8 x people's 0.2 of 2
    humans = [coherent for _, coherent in PLAN]
    assert [line["verdict"] for line in fed] == [SCORES[verdict] for verdict, _ in PLAN]
    held = {entry["set"]: entry for entry in json.loads((tmp_path / "bench.json").read_text())["held_out"]}
    recomputed = stats.spearmanr([line["combined_fit"] for line in fed], humans).statistic
    assert held["fed"]["combined"]["value"] == pytest.approx(recomputed, abs=1e-4)
    assert held["fed"]["combination"]["fit_on"] == ["labels"]
    assert "on fed, the looks combined with weights fit on labels" in result.stderr
    weights = json.loads((tmp_path / "weights.json").read_text())
    assert weights["fit_on"] == ["fed", "labels"] and weights["sizes"] == {"fed": 10, "labels": 10}
    assert weights["labels"] == {"fed": "Coherent", "labels": "ok"} and "judge-bench" in weights["command"]
    # the new weights replace the old; the per-turn threshold, fit by bench/turn_look.py on other data, stays
    assert (weights["turn_threshold"], weights["turn_fit_on"]) == (0.42, "abc-eval 61-108")


def test_the_per_turn_look_is_scored_beside_the_key_issues_and_its_threshold_fit_on_other_dialogues(
    judge, run_flowrate, tmp_path
):
    import subprocess
    import sys
    from pathlib import Path

    def torn(p_problem):  # the reply follows on, P(no) = `p_problem`
        given = {"yes": math.log(1 - p_problem), "no": math.log(p_problem)}
        return {"answers": {"follows_on": "yes"}, "logprobs": {"follows_on": given}}

    breaks = {"answers": {"follows_on": "no"}}
    turns = {  # turn n's user message is "MARK-<id>- <n - 1>"
        "a0": {"by_input": {"MARK-a0- 1": breaks, "MARK-a0- 2": torn(0.2)}},
        "a1": {"by_input": {"MARK-a1- 0": breaks, "MARK-a1- 1": torn(0.3)}},
    }
    _abc(tmp_path, judge, turns)
    result = _bench(run_flowrate, judge, "--sets", "abc-eval", "--turn-look", "--card", "card.jsonl")
    assert result.returncode == 0, result.stderr
    [score] = _scores(tmp_path)
    looked = {entry["behaviour"]: entry for entry in score["turns"]["turn_look"]}
    # named at the shipped threshold (0.37): a0 {2}, a1 {1}, the turns both people flagged redundant; the key
    # issues named a1's 3 too
    assert (looked["redundant"]["precision"], looked["redundant"]["recall"], looked["redundant"]["f1"]) == (
        100,
        100,
        100,
    )
    assert score["turns"]["turn_look_dialogues"] == 2 and "per-turn look (2 dialogues): redundant" in result.stderr
    card = [json.loads(line) for line in (tmp_path / "card.jsonl").read_text().splitlines()]
    assert {line["id"]: line["turn_p_problem"]["3" if line["id"] == "a0" else "2"] for line in card} == {
        "a0": pytest.approx(0.2), "a1": pytest.approx(0.3),
    }  # fmt: skip
    script = Path(__file__).resolve().parents[2] / "bench" / "turn_look.py"
    shipped = tmp_path / "flow.combination.json"
    shipped.write_text(json.dumps({"looks": ["verdict"], "weights": {"verdict": 1}, "means": {"verdict": 0.5},
                                   "sds": {"verdict": 0.3}, "fit_on": ["fed"], "sizes": {"fed": 125}}))  # fmt: skip
    bench = [sys.executable, str(script), "--card", "card.jsonl", "--data-dir", "data", "--reported", "1"]
    printed = subprocess.run([*bench, "--ship", str(shipped)], cwd=tmp_path, capture_output=True, text=True)
    assert printed.returncode == 0, printed.stderr
    # fit on a1 alone (its turn 1 flagged by both, P 1.0; turn 2 at 0.3): 1.0 names just turn 1, the best
    # F1; reported on a0 alone, where it names turn 2, the one both people flagged redundant
    assert "| redundant | 1.000 | 100.0 / 100.0 / **100.0** |" in printed.stdout, printed.stdout
    assert "1 of the first 1 dialogues reported, 1 after them fit the thresholds" in printed.stdout
    assert json.loads(shipped.read_text())["turn_threshold"] == 1.0
