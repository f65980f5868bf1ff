import pytest

from tests.helpers import evaluation_row


def test_a_row_shows_its_verdict_its_rating_or_its_score():
    from flowrate.results.summary import shown_value

    assert shown_value(evaluation_row("c1", 1.0, verdict="FLOWING")) == "FLOWING"
    assert shown_value(evaluation_row("c1", 2 / 3, rating=2, scale=3)) == "2/3"
    assert shown_value(evaluation_row("c1", 2 / 3, threshold=0.7)) == "0.67"


def test_an_error_row_has_no_shown_value_and_the_error_names_the_row():
    from flowrate.results.rows import ErrorInfo
    from flowrate.results.summary import shown_value

    failed = evaluation_row("c1", 0.5).model_copy(
        update={"score": None, "success": None, "error": ErrorInfo(type="TimedOut", message="no answer")}
    )
    with pytest.raises(ValueError, match="c1 conversational_flow_rate has no judgement"):
        shown_value(failed)
