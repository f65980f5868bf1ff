"""The rubric metric's parts, each used on its own with the inputs it declares: the context budget,
the planner with its cache, and the row maker."""

import pytest

from flowrate import ConversationalEvalTestCase, EvalTestCase
from flowrate.errors import ConfigError
from flowrate.judge.cache import ResponseCache
from flowrate.judge.server import SERVER_WINDOW_SHARE
from flowrate.judge.transports import make_backend
from flowrate.metrics.budget import Budget
from flowrate.metrics.planning import Planner
from flowrate.metrics.rows import RowMaker
from flowrate.rubric.model import USER_SATISFACTION, load_rubric
from flowrate.scores.reading import parse_reply
from tests.helpers import RATINGS, TEST_KEY, suite_reply

CASE = ConversationalEvalTestCase(id="c1", turns=[EvalTestCase(input="hello", actual_output="hi, how can I help?")])


@pytest.fixture
def backend(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    return make_backend("gpt-4o", "http://127.0.0.1:9/v1")


def test_a_window_a_server_names_is_kept_only_when_smaller_and_never_over_the_users_cap(backend):
    rubric = load_rubric(None)
    budget = Budget(rubric, backend, "English")
    budget.learn_window(10_000)
    assert budget.window == int(10_000 * SERVER_WINDOW_SHARE)
    budget.learn_window(50_000)  # a larger one later changes nothing
    assert budget.window == int(10_000 * SERVER_WINDOW_SHARE)
    capped = Budget(rubric, backend, "English", max_input_tokens=6_000)
    capped.learn_window(20_000)
    assert capped.window == 6_000


def test_a_budget_too_small_for_the_rubric_is_a_config_error_naming_the_option(backend):
    rubric = load_rubric(None)
    enough = Budget(rubric, backend, "English")
    too_small = Budget(rubric, backend, "English", max_input_tokens=enough.minimum_input_tokens - 1)
    with pytest.raises(ConfigError, match="option max_input_tokens: .* the minimum for this rubric and model is"):
        too_small.check()
    Budget(rubric, backend, "English", max_input_tokens=enough.minimum_input_tokens).check()


def test_a_reply_the_planner_remembers_is_found_by_the_next_plan_of_that_conversation(backend, tmp_path):
    rubric = load_rubric(None)
    budget = Budget(rubric, backend, "English")
    planner = Planner(rubric, budget, backend, ResponseCache(tmp_path), "English", False, 1, 0.0)
    first = planner.plan(CASE)
    assert first.cached_texts is None
    planner.replies.remember(first, ['{"verdict": "fully"}'], backend.response_format_ids()[0])
    again = planner.plan(CASE)
    assert again.cached_texts == ['{"verdict": "fully"}'] and planner.estimate(again).calls == 0
    other_temperature = Planner(rubric, budget, backend, planner.cache, "English", False, 1, 0.7)
    assert other_temperature.plan(CASE).cached_texts is None  # the temperature is part of what a reply answers


def test_the_estimate_of_a_combined_score_counts_the_looks_call_and_the_tokens_it_may_write(backend):
    for name, verdicts in ((None, 1), ("virtual_agent", 8)):
        rubric = load_rubric(name)
        budget = Budget(rubric, backend, "English")
        alone = Planner(rubric, budget, backend, None, "English", False, 1, 0.0)
        looking = Planner(rubric, budget, backend, None, "English", False, 1, 0.0, first_look=True)
        plain, both = alone.estimate(alone.plan(CASE)), looking.estimate(looking.plan(CASE))
        assert (plain.calls, both.calls) == (1, 2) and both.prompt_tokens == 2 * plain.prompt_tokens
        assert both.completion_tokens - plain.completion_tokens == looking.look_max_tokens == 16 * (verdicts + 1)
        assert both.cost_usd > plain.cost_usd


def test_the_row_maker_weighs_a_suites_criteria_with_the_weights_it_is_given():
    rubric = load_rubric("virtual_agent")
    weights = {c.name: (3.0 if c.name == "truthfulness" else 1.0) for c in rubric.criteria}
    thresholds = dict.fromkeys(rubric.row_names, 0.5)
    maker = RowMaker(rubric, thresholds, weights, "judge-model", 1)
    rows = maker.new_rows(CASE, None, truncated=False)
    maker.scoring.fill(rows, [parse_reply(suite_reply({"truthfulness": 1}), rubric)])
    by_name = {row.metric: row for row in rows}
    ratings = RATINGS | {"truthfulness": 1}
    scores = {c.name: ratings[c.name] / c.scale.points for c in rubric.criteria}
    expected = sum(scores[name] * weights[name] for name in scores) / sum(weights.values())
    assert by_name[USER_SATISFACTION].score == pytest.approx(expected)
    assert by_name[USER_SATISFACTION].weights == weights
    assert {row.model for row in rows} == {"judge-model"} and maker.judge_identity["model"] == "judge-model"
