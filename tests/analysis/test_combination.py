"""Looks combined with weights fit on other sets (issue 46), on synthetic sets whose answer is
known: a look that carries people's order gets the weight, one that is noise gets little, a
weight never sees the set it is reported on, and the card has a line per dialogue with the sets
its fitted score was fit on."""

import orjson
import pytest

from flowrate.analysis.combination import (
    FITTED,
    DialogueLooks,
    card_lines,
    fit_combination,
    leave_one_set_out,
    write_card,
)
from flowrate.errors import ConfigError
from flowrate.rubric.combination import read_combination, write_combination

SETS = {"fed": 125, "ieval": 60, "abc": 60}


def synthetic(seed: int = 7, informative: float = 1.0, noise_weight: float = 0.0) -> list[DialogueLooks]:
    """Three sets on their own scales: `good` is people's quality plus a little noise, `noise`
    knows nothing of it (unless `noise_weight`), `half` is halfway; each set's scores sit at
    their own offset, as different sets' looks do."""
    import numpy as np

    rng = np.random.default_rng(seed)
    dialogues = []
    for number, (name, size) in enumerate(SETS.items()):
        quality = rng.normal(size=size)
        offset = 0.2 * number
        good = informative * quality + 0.3 * rng.normal(size=size)
        noise = rng.normal(size=size) + noise_weight * quality
        half = quality + 1.0 * rng.normal(size=size)
        label_scale = (2, 5, 1)[number]
        for i in range(size):
            dialogues.append(
                DialogueLooks(
                    set=name,
                    id=f"{name}-{i:03d}",
                    scores={
                        "good": float(offset + 0.1 * good[i]),
                        "noise": float(offset + 0.1 * noise[i]),
                        "half": float(0.5 + 0.1 * half[i]),
                    },
                    label=float(round(label_scale * quality[i], 1)),
                )
            )
    return dialogues


def test_the_look_that_carries_peoples_order_gets_the_weight_and_noise_gets_little():
    combination = fit_combination(synthetic(), ["good", "noise", "half"])
    weights = combination.weights
    assert weights["good"] > 0.5 and abs(weights["noise"]) < 0.15 and weights["good"] > weights["half"]
    assert sum(weights.values()) == pytest.approx(1.0, abs=1e-5)
    assert combination.fit_on == ["abc", "fed", "ieval"] and combination.sizes == {"abc": 60, "fed": 125, "ieval": 60}


def test_equally_informative_looks_get_equal_weights():
    import numpy as np

    rng = np.random.default_rng(3)
    dialogues = []
    for name in ("a", "b", "c"):
        quality = rng.normal(size=400)
        for i in range(400):
            scores = {look: float(quality[i] + rng.normal()) for look in ("x", "y")}
            dialogues.append(DialogueLooks(set=name, id=str(i), scores=scores, label=float(quality[i])))
    weights = fit_combination(dialogues, ["x", "y"]).weights
    assert weights["x"] == pytest.approx(0.5, abs=0.05) and weights["y"] == pytest.approx(0.5, abs=0.05)


def test_the_weights_are_shrunk_towards_the_average_so_one_set_cannot_swing_them():
    # a look that is noise on two sets and informative on a third: least squares on the pooled
    # sets would give it a real weight; the penalty keeps it near the average's share or below
    dialogues = [d for d in synthetic() if d.set != "abc"] + [
        d for d in synthetic(seed=11, noise_weight=3.0) if d.set == "abc"
    ]
    weights = fit_combination(dialogues, ["good", "noise"]).weights
    assert 0 < weights["noise"] < 0.5 < weights["good"]


def test_each_set_is_reported_with_weights_fit_on_the_others_only():
    dialogues = synthetic()
    held = {h.set: h for h in leave_one_set_out(dialogues, ["good", "noise", "half"])}
    assert held["fed"].combination.fit_on == ["abc", "ieval"] and held["fed"].n == 125
    assert held["abc"].combination.fit_on == ["fed", "ieval"]
    # the held-out set's own labels never reach its weights: scrambling them changes nothing
    scrambled = [d.model_copy(update={"label": -d.label}) if d.set == "fed" else d for d in dialogues]
    again = {h.set: h for h in leave_one_set_out(scrambled, ["good", "noise", "half"])}
    assert again["fed"].combination.weights == held["fed"].combination.weights
    assert again["fed"].combined.value == pytest.approx(-held["fed"].combined.value)
    # the combination ranks the held-out set about as well as its best look, far above the noise
    fed = held["fed"]
    assert fed.combined.value > 0.9 and fed.looks["noise"].value < 0.3
    assert fed.combined.value >= fed.looks["half"].value
    assert fed.combined.ci95[0] < fed.combined.value < fed.combined.ci95[1]


def test_a_conversation_is_scored_alone_on_the_looks_scale_ranking_as_the_standardised_sum():
    import numpy as np

    combination = fit_combination(synthetic(), ["good", "noise"])
    looks = ("good", "noise")
    rng = np.random.default_rng(3)
    conversations = [{"good": float(g), "noise": float(n)} for g, n in rng.uniform(0, 1, size=(40, 2))]
    standardised = [
        sum(combination.weights[k] * (c[k] - combination.means[k]) / combination.sds[k] for k in looks)
        for c in conversations
    ]
    given = [combination.score(c) for c in conversations]
    assert all(value is not None and 0 <= value <= 1 for value in given)  # it can meet a threshold
    assert np.argsort(given).tolist() == np.argsort(standardised).tolist()  # and ranks as the fit did
    assert combination.score({"good": 1.0, "noise": 1.0}) == pytest.approx(1.0)
    assert combination.score({"good": 0.3}) is None  # a missing look: no combined score, never a guess


def test_the_card_has_a_line_per_dialogue_with_each_look_the_fitted_score_and_its_fit_sets(tmp_path):
    dialogues = synthetic()
    held = leave_one_set_out(dialogues, ["good", "noise"])
    lines = card_lines(dialogues, held)
    assert len(lines) == sum(SETS.values()) and len({(line["set"], line["id"]) for line in lines}) == len(lines)
    first = next(line for line in lines if line["set"] == "ieval")
    assert set(first) == {"set", "id", "good", "noise", "half", FITTED, "fit_on"}
    assert first["fit_on"] == {FITTED: ["abc", "fed"]}
    path = tmp_path / "card.jsonl"
    write_card(path, lines)
    assert [orjson.loads(line) for line in path.read_bytes().splitlines()] == lines
    assert not (tmp_path / "card.jsonl.partial").exists()


def test_the_weights_file_keeps_its_provenance_and_reads_back(tmp_path):
    combination = fit_combination(synthetic(), ["good", "noise"], date="2026-12-05", command="flowrate judge-bench ...")
    path = tmp_path / "weights.json"
    write_combination(path, combination)
    back = read_combination(path)
    assert back == combination and back.date == "2026-12-05" and back.command.startswith("flowrate judge-bench")
    assert back.method.startswith("ridge towards the average")
    (tmp_path / "bad.json").write_text('{"looks": ["good"]}')
    with pytest.raises(ConfigError, match=r"bad.json: not a combination of looks"):
        read_combination(tmp_path / "bad.json")


def test_a_look_without_spread_or_too_few_dialogues_is_a_plain_error():
    flat = [d.model_copy(update={"scores": {**d.scores, "noise": 0.5}}) for d in synthetic()]
    with pytest.raises(ConfigError, match="same score on every fit dialogue cannot be weighted: noise"):
        fit_combination(flat, ["good", "noise"])
    with pytest.raises(ConfigError, match="too few dialogues"):
        fit_combination(synthetic()[:3], ["good", "noise"])


def test_two_looks_that_agree_at_098_keep_weights_of_the_same_sign_where_least_squares_swings():
    import numpy as np

    from flowrate.analysis import combination

    rng = np.random.default_rng(0)
    dialogues = []
    for name, size in SETS.items():
        quality = rng.normal(size=size)
        shared = quality + 1.2 * rng.normal(size=size)  # one judge's looks: the same view, a little apart
        x, y = shared + 0.2 * rng.normal(size=size), shared + 0.2 * rng.normal(size=size)
        for i in range(size):
            scores = {"x": float(x[i]), "y": float(y[i])}
            dialogues.append(DialogueLooks(set=name, id=str(i), scores=scores, label=float(quality[i])))
    assert np.corrcoef([d.scores["x"] for d in dialogues], [d.scores["y"] for d in dialogues])[0, 1] > 0.98
    weights = fit_combination(dialogues, ["x", "y"]).weights
    assert 0.3 < weights["x"] < 0.7 and 0.3 < weights["y"] < 0.7
    raw = np.array([[d.scores["x"], d.scores["y"]] for d in dialogues])
    features, target = combination.design(dialogues, (raw - raw.mean(axis=0)) / raw.std(axis=0))
    unshrunk = combination.ridge_weights(features, target, 0.0)  # ordinary least squares
    assert min(unshrunk) < 0 < max(unshrunk)


def test_a_look_that_would_weigh_against_the_others_is_left_out_and_the_score_keeps_its_scale():
    import numpy as np

    rng = np.random.default_rng(5)
    dialogues = []
    for name, size in SETS.items():
        quality = rng.normal(size=size)
        good = quality + 0.3 * rng.normal(size=size)
        against = 0.5 + 0.01 * (good - 2 * quality + 0.1 * rng.normal(size=size))  # little spread, signed against
        for i in range(size):
            scores = {"good": float(good[i]), "against": float(against[i])}
            dialogues.append(DialogueLooks(set=name, id=str(i), scores=scores, label=float(quality[i])))
    combination = fit_combination(dialogues, ["good", "against"])
    assert combination.weights == {"good": 1.0, "against": 0.0}
    assert combination.score({"good": 0.8, "against": 0.2}) == pytest.approx(0.8)  # the looks' own scale
