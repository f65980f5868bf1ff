def test_a_run_without_a_history_adds_no_rows_and_writes_no_file(tmp_path):
    from flowrate.api import append_history
    from flowrate.results.events import RunListener
    from flowrate.settings.options import EvalSettings

    settings = EvalSettings(output=str(tmp_path / "rows.jsonl"))
    assert append_history(settings, 0.0, RunListener()) is None
    assert list(tmp_path.iterdir()) == []
