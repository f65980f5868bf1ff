"""The first moments: `--help`, `--version`, `python -m flowrate`, and what is not loaded before
it is needed."""

import os
import subprocess
import sys

import pytest

from tests.helpers import FLOWRATE, distinct, write_jsonl


def test_python_m_flowrate_and_fast_help_without_litellm(cli_env):
    code = "import sys, runpy; sys.argv=['flowrate','--help']\ntry:\n runpy.run_module('flowrate', run_name='__main__')\nexcept SystemExit: pass\nprint('litellm' in sys.modules)"
    result = subprocess.run(
        [os.path.join(os.path.dirname(FLOWRATE), "python"), "-c", code], capture_output=True, text=True, env=cli_env
    )
    assert result.stdout.strip().endswith("False") and "eval" in result.stdout


def test_help_shows_defaults_and_plain_flags_and_version(run_flowrate):
    help_text = run_flowrate("eval", "--help", env=dict(os.environ, COLUMNS="200")).stdout
    assert "[default: 0.7]" in help_text and "[default: gpt-4o]" in help_text
    assert "<bool>" not in help_text and "--skip-invalid " in help_text
    version = run_flowrate("--version")
    assert version.returncode == 0 and version.stdout.startswith("flowrate ")


@pytest.mark.parametrize("args", [["--help"], ["validate", "c.jsonl"]])
def test_help_and_validate_do_not_load_the_judging_engine(args, cli_env, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(1))
    code = (
        f"import sys, runpy; sys.argv=['flowrate', *{args!r}]\n"
        "try:\n runpy.run_module('flowrate', run_name='__main__')\nexcept SystemExit: pass\n"
        "print(sorted(m for m in ('litellm', 'flowrate.metrics.rubric_metric', 'flowrate.judge.litellm_backend', 'rich.progress', 'jinja2') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env, cwd=tmp_path)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout + result.stderr


def test_a_missing_key_is_told_before_litellm_is_imported(cli_env, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(1))
    env = {k: v for k, v in cli_env.items() if k != "OPENAI_API_KEY"}
    code = (
        "import sys, runpy; sys.argv=['flowrate','eval','c.jsonl','-m','gpt-4o']\n"
        "try:\n runpy.run_module('flowrate', run_name='__main__')\nexcept SystemExit as e: print('exit', e.code)\n"
        "print('litellm' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.stdout.split() == ["exit", "2", "False"], result.stderr
    assert "no API key for model 'gpt-4o': set OPENAI_API_KEY" in result.stderr
