"""`flowrate formats` lists the platform readers, and a file that is almost one of them is refused
by `flowrate validate` with the formats tried and the closest one's first complaint."""

PLATFORMS = {
    "sharegpt": "ShareGPT (also LLaMA-Factory's sharegpt datasets)",
    "rasa": "Rasa tracker store (trackers: HTTP API, Mongo and Redis stores; broker events; SQL events table)",
    "dialogflow-cx": "Dialogflow CX interaction logs exported to BigQuery",
    "servicenow": "ServiceNow Virtual Agent (Table API: sys_cs_message, sys_cs_conversation)",
    "zendesk": "Zendesk ticket conversation log (Support API)",
    "intercom": "Intercom conversations (REST API)",
}


def test_formats_lists_each_platform_reader_with_its_title(run_flowrate):
    result = run_flowrate("formats")
    assert result.returncode == 0, result.stderr
    for name, title in PLATFORMS.items():
        assert f"{name}: {title}\n" in result.stdout


def test_a_row_missing_a_column_of_the_closest_format_is_refused_naming_it(run_flowrate, tmp_path):
    (tmp_path / "turns.jsonl").write_text(
        '{"conversation_name": "projects/p/sessions/s", "turn_position": 1, "request": "{}"}\n'
    )
    result = run_flowrate("validate", "turns.jsonl")
    assert result.returncode == 2
    from flowrate.inputs.sources.registry import readers

    tried = ", ".join(reader.name for reader in readers())
    assert f"turns.jsonl:1: no format reads this (tried {tried}); closest," in result.stderr
    assert "closest, dialogflow-cx: response: is missing" in result.stderr
    assert "Traceback" not in result.stderr
