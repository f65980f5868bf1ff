"""Options grouped by concern: each layer is given only its group, built from the same options."""

import inspect

import pytest
import yaml

from flowrate.settings.options import EvalSettings
from tests.helpers import ROOT


def test_each_group_holds_its_options_as_given():
    settings = EvalSettings(
        model="m", api_base="http://127.0.0.1:9/v1", shard="2/4", only=["a=1"], rpm=60, max_cost=5, output="o.jsonl",
        resume=True, min_pass_rate=0.9, gates={"coherence": {"max_failures": 2}}, junit="j.xml", batch=True,
        poll_interval=5, metric=["virtual_agent"],
    )  # fmt: skip
    assert (settings.judge_settings.model, settings.judge_settings.metric_named) == ("m", True)
    assert settings.selection_settings.shard_slice == (2, 4) and settings.selection_settings.only == ["a=1"]
    assert (settings.limit_settings.rpm, settings.limit_settings.max_cost) == (60, 5)
    assert settings.output_settings.resume and settings.output_settings.output == "o.jsonl"
    assert settings.gate_settings.default_gates == {"min_pass_rate": 0.9}
    assert settings.gate_settings.gates == {"coherence": {"max_failures": 2}}
    assert settings.report_settings.junit == "j.xml" and settings.report_settings.wanted
    assert settings.batch_settings.batch and settings.batch_settings.poll_interval == 5
    assert not EvalSettings().judge_settings.metric_named


def test_a_group_holds_exactly_its_own_options():
    settings = EvalSettings(model="m", shard="1/2", html="r.html")
    selection = settings.selection_settings
    assert set(type(selection).model_fields) == set(selection.model_dump())
    assert not hasattr(selection, "model") and not hasattr(selection, "html")
    assert settings.report_settings.html == "r.html" and settings.report_settings.wanted


def test_the_github_reports_are_on_with_the_flag_or_inside_github_actions(monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert not EvalSettings().report_settings.for_github
    assert EvalSettings(github=True).report_settings.for_github
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert EvalSettings().report_settings.for_github and EvalSettings().report_settings.wanted
    assert not EvalSettings(github=False).report_settings.for_github  # FLOWRATE_GITHUB=false, a plugin's batch


@pytest.mark.parametrize(
    ("rule", "told"),
    [
        (
            {"type": "ORDER"},
            "redact_rules (from rules.yaml): {'type': 'ORDER'}: a redact rule has either a pattern or a term",
        ),
        ({"pattern": "x", "term": "y", "type": "ORDER"}, "a redact rule has either a pattern or a term, and a type"),
        ({"pattern": "(", "type": "ORDER"}, "the pattern '(' is not a regular expression"),
        ({"pattern": "", "type": "ORDER"}, "redact_rules (from rules.yaml): {'type': 'ORDER'}: the pattern is empty"),
        ({"pattern": "ORD-|", "type": "ORDER"}, "the pattern 'ORD-|' matches an empty text"),
        ({"pattern": r"\d*", "type": "ORDER"}, "the pattern '\\\\d*' matches an empty text"),
        (
            {"term": "Falcon", "type": "project"},
            "'type': 'project'}: the type must be a name in capitals, digits and _",
        ),
        ({"term": "Falcon"}, "redact_rules (from rules.yaml): {'term': 'Falcon'}: the type must be a name"),
        ({"term": "Falcon", "type": "X", "kind": "Y"}, "redact_rules (from rules.yaml): 'kind' is not a known key"),
    ],
)
def test_a_bad_redact_rule_is_a_usage_error_naming_the_option(rule, told, run_flowrate, tmp_path):
    (tmp_path / "c.jsonl").write_text('{"id": "a", "turns": [{"input": "hi", "actual_output": "ok"}]}\n')
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"redact_rules": [rule]}), encoding="utf-8")
    result = run_flowrate("redact", "c.jsonl", "-o", "r.jsonl", "--config", "rules.yaml")
    assert result.returncode == 2
    assert told in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "r.jsonl").exists()


def _retyped_defaults():
    """Each place in flowrate's code that writes the default language ("English") or a literal
    default for a parameter or field named `concurrency`: (file, line)."""
    import ast

    found = []
    for path in sorted((ROOT / "flowrate").rglob("*.py")):
        shown = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value == "English":
                found.append((shown, node.lineno))
            if isinstance(node, ast.arguments):
                positional = [*node.posonlyargs, *node.args]
                pairs = [*zip(positional[len(positional) - len(node.defaults) :], node.defaults)]
                pairs += [(arg, default) for arg, default in zip(node.kwonlyargs, node.kw_defaults) if default]
                found += [
                    (shown, arg.lineno)
                    for arg, value in pairs
                    if arg.arg == "concurrency" and isinstance(value, ast.Constant)
                ]
            if isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Constant):
                if isinstance(node.target, ast.Name) and node.target.id == "concurrency":
                    found.append((shown, node.lineno))
    return found


def test_the_default_language_and_concurrency_are_written_once_in_their_declarations():
    written = _retyped_defaults()
    # the declaration, and the worked examples' own language (rubric.model.EXAMPLES_LANGUAGE)
    assert [path for path, _ in written] == ["flowrate/rubric/model.py", "flowrate/settings/groups.py"], written
    from flowrate.metrics.rubric_metric import RubricMetric
    from flowrate.settings.groups import DEFAULT_CONCURRENCY, DEFAULT_LANGUAGE, LimitOptions, PromptOptions

    assert (DEFAULT_LANGUAGE, DEFAULT_CONCURRENCY) == (
        PromptOptions.model_fields["language"].default,
        LimitOptions.model_fields["concurrency"].default,
    )
    assert inspect.signature(RubricMetric).parameters["language"].default == DEFAULT_LANGUAGE
