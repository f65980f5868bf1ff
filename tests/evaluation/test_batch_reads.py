"""The batch commands that only look create nothing: no cache directory, no state file."""


def test_batch_status_on_a_fresh_machine_creates_nothing(run_flowrate, tmp_path, cli_env):
    cache = tmp_path / "fresh-cache"
    env = {**cli_env, "FLOWRATE_CACHE_DIR": str(cache)}
    for args in (["batch", "status"], ["batch", "collect"], ["batch", "cancel", "--all"]):
        result = run_flowrate(*args, env=env)
        assert result.returncode == 0, (args, result.stderr)
    assert not cache.exists()
    named = run_flowrate("batch", "status", "--cache-dir", tmp_path / "nowhere")
    assert named.returncode == 0 and not (tmp_path / "nowhere").exists()
