"""A rubric's worked examples are checked against its own scales when it is loaded."""

import pytest

from flowrate.errors import ConfigError
from flowrate.rubric.model import load_rubric
from tests.helpers import packaged_rubric_text


def test_an_example_reply_off_its_scale_is_refused_naming_the_example(tmp_path):
    text = packaged_rubric_text()
    assert "      verdict: fully" in text
    broken = text.replace("      verdict: fully", "      verdict: excellent", 1)
    (tmp_path / "r.yaml").write_text(broken)
    with pytest.raises(ConfigError, match=r"r.yaml: rubric field examples.\d+.reply: verdict 'excellent'"):
        load_rubric(tmp_path / "r.yaml")
