"""The rubric as data: its version, its worked examples, a rubric of your own and a broken one."""

import hashlib

import pytest

from flowrate import load_rubric
from flowrate.errors import ConfigError
from flowrate.results.rows import Verdict
from tests.helpers import PACKAGED_RUBRIC as PACKAGED
from tests.helpers import ROOT


def test_rubric_version_is_the_files_hash():
    assert load_rubric().version == "sha256:" + hashlib.sha256(PACKAGED.read_bytes()).hexdigest()[:16]


def test_examples_cover_every_level_and_the_hard_cases():
    rubric = load_rubric()
    assert {example.reply["verdict"] for example in rubric.examples} == {verdict.value for verdict in Verdict}
    assert any(example.turns[-1].actual_output is None for example in rubric.examples)  # a user left hanging
    assert all(issue.startswith("turn ") for example in rubric.examples for issue in example.reply["key_issues"])
    for phrase in ("Derailment", "End state", "redundant", "tangent", "coherent", '"reason"', "Unanswered ending"):
        assert phrase in rubric.instructions


def test_the_example_rubric_in_configs_loads_with_its_own_version():
    custom = load_rubric(ROOT / "configs" / "rubric.example.yaml")
    assert custom.version != load_rubric().version and custom.name == "support_quality"
    assert custom.row_names == ["resolution", "politeness", "user_satisfaction"]


def test_a_broken_rubric_names_the_file_and_field(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(
        "name: x\ninstructions: y\ncriteria:\n  - {name: x, scale: {levels: {fully: 1.0, none: 0.0}}}\n"
        "examples:\n  - turns: []\n    reply: {reason: r, key_issues: [], verdict: fully}\n"
    )
    with pytest.raises(ConfigError, match=r"r.yaml: rubric field examples.0.turns"):
        load_rubric(path)


def test_a_scale_on_points_has_a_top_rating_and_one_on_levels_has_none():
    from flowrate.rubric.model import Scale

    points = Scale(points=5)
    assert points.top_rating == 5 and points.values == [1, 2, 3, 4, 5] and points.score(4) == 0.8
    levels = Scale(levels={"fully": 1.0, "partly": 0.5, "not": 0.0})
    assert levels.values == ["not", "partly", "fully"]
    with pytest.raises(ValueError, match="no ratings"):
        _ = levels.top_rating
