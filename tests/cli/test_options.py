"""Options: their values checked and named, and their precedence (command line, environment, config)."""

from tests.helpers import turn_record


def test_threshold_option_moves_the_edge(judge, run_flowrate, conversations):
    judge.script("MARK-PARTIAL", {"verdict": "partial"})
    path = conversations(turn_record("p", "MARK-PARTIAL", "x"))
    assert run_flowrate("eval", path, "--api-base", judge.base_url, "--threshold", "0.7").returncode == 0
    assert run_flowrate("eval", path, "--api-base", judge.base_url, "--threshold", "0.71").returncode == 1


def test_bad_option_value_names_the_option(run_flowrate, conversations):
    result = run_flowrate("eval", conversations(turn_record("a", "b", "c")), "--threshold", "1.5")
    assert result.returncode == 2
    assert result.stderr.strip() == "flowrate: error: option threshold: must be at most 1.0 (got 1.5)"


def test_options_precedence_cli_env_config(judge, run_flowrate, conversations, tmp_path, cli_env):
    judge.script("MARK-PARTIAL", {"verdict": "partial"})
    path = conversations(turn_record("p", "MARK-PARTIAL", "x"))
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "flowrate.yaml").write_text(
        f"api_base: {judge.base_url}\nthreshold: 0.9\noutput: from-config.jsonl\n"
    )
    assert run_flowrate("eval", path).returncode == 1  # the config's threshold 0.9 fails a partial
    assert (tmp_path / "from-config.jsonl").exists()
    env = dict(cli_env, FLOWRATE_THRESHOLD="0.5")
    assert run_flowrate("eval", path, env=env).returncode == 0  # the environment beats the config
    assert run_flowrate("eval", path, "--threshold", "0.8", env=env).returncode == 1  # the command line beats both
    (tmp_path / "other.yaml").write_text("thresold: 0.5\n")
    result = run_flowrate("eval", path, "--config", "other.yaml")
    assert result.returncode == 2 and "other.yaml: unknown option 'thresold'" in result.stderr
