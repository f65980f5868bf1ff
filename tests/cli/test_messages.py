"""Messages in plain words: hints only where they apply, what is accepted, and the command to
continue with."""

import sys

from tests.helpers import distinct, write_jsonl


def test_messages_use_plain_words(run_flowrate, tmp_path, judge):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    nothing = run_flowrate("eval", path, "--limit", "1", "--only", "channel=none", "--api-base", judge.base_url)
    assert nothing.returncode == 2
    assert "flowrate: nothing to judge:" in nothing.stderr and "1 nothing" not in nothing.stderr
    shard = run_flowrate("eval", path, "--shard", "1-2", "--api-base", judge.base_url)
    assert "option shard: must look like I/N" in shard.stderr and "String should match" not in shard.stderr
    negative = run_flowrate("eval", path, "--concurrency", "0", "--api-base", judge.base_url)
    assert "option concurrency: must be at least 1" in negative.stderr and "Input should" not in negative.stderr
    (tmp_path / "bad.jsonl").write_text('{"turns": []}\n')
    validated = run_flowrate("validate", "bad.jsonl")
    assert validated.returncode == 2 and "was judged" not in validated.stderr, validated.stderr
    (tmp_path / "rows.jsonl").write_text('{"id": "x", "score": 1.0}\n')
    merged = run_flowrate("merge", "rows.jsonl", "-o", "m.jsonl")
    assert merged.returncode == 2 and "not a flowrate result row: field 'metric'" in merged.stderr, merged.stderr


def test_messages_say_what_is_accepted(tmp_path, run_flowrate, cli_env):
    (tmp_path / "c.jsonl").write_text('{"id": 7.0, "turns": [{"input": "a", "actual_output": "b"}]}\n')
    result = run_flowrate("validate", "c.jsonl")
    assert "id: must be a string or a whole number, got the decimal number 7.0" in result.stderr
    write_jsonl(tmp_path / "ok.jsonl", distinct(1))
    env = {k: v for k, v in cli_env.items() if k not in ("GOOGLE_API_KEY", "GEMINI_API_KEY")}
    gemini = run_flowrate("eval", "ok.jsonl", "-m", "google:gemini-2.0-flash", env=env)
    assert gemini.returncode == 2
    assert "set GOOGLE_API_KEY (LiteLLM also reads GEMINI_API_KEY)" in gemini.stderr


def test_each_hint_only_where_it_applies(run_flowrate, tmp_path, judge):
    (tmp_path / "bad.jsonl").write_text('{"turns": []}\n')
    validated = run_flowrate("validate", "bad.jsonl")
    assert validated.returncode == 2 and "--skip-invalid" not in validated.stderr
    missing = run_flowrate("eval", "nope.jsonl", "--api-base", judge.base_url)
    assert missing.returncode == 2 and "--skip-invalid" not in missing.stderr
    judged = run_flowrate("eval", "bad.jsonl", "--api-base", judge.base_url)
    assert judged.returncode == 2 and "--skip-invalid" in judged.stderr


def test_the_continue_command_is_the_command_as_invoked(monkeypatch):
    from flowrate.cli import common as cli

    monkeypatch.setattr(sys, "argv", ["/opt/venv/flowrate/__main__.py", "eval", "c.jsonl"])
    assert cli.continue_command("--resume") == f"{sys.executable} -m flowrate eval c.jsonl --resume"
    monkeypatch.setattr(sys, "argv", ["/somewhere/not/on/path/flowrate", "eval", "c.jsonl", "--resume"])
    assert cli.continue_command("--retry-errors") == "/somewhere/not/on/path/flowrate eval c.jsonl --retry-errors"
