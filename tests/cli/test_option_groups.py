"""An option is declared once, in its group: a field added to the judge group is an option of
every command that takes the group, in its help, from the environment and from the config file."""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.helpers import turn_record

# A flowrate process whose judge group has one field more than the shipped one, declared as
# every option is. Each command's body is stopped where it begins: its `Given` is resolved
# into settings (command line, then environment, then config file, then default) and the new
# option's value printed. The process runs the command lines given as JSON, one after another,
# each with its own environment overlay and config file (none: no file): a process for each
# took 30 starts of 0.5 s of CPU for the six commands.
WITH_A_NEW_JUDGE_OPTION = """
import json
import os
import sys
from pathlib import Path
from typing import Annotated

from pydantic import Field

from flowrate.settings import groups


class JudgeOptions(groups.JudgeOptions):
    judge_note: Annotated[str | None, groups.flag()] = Field(None, description="A note for the judge, for a test.")


groups.JudgeOptions = JudgeOptions
from flowrate.cli import options  # noqa: E402


class Resolved(options.Given):
    def __init__(self, *args):
        super().__init__(*args)
        print(f"judge_note={self.settings().judge_note}", file=sys.stderr)
        raise SystemExit(0)


options.Given = Resolved
from flowrate.cli import app  # noqa: E402

config, overlaid = Path("configs") / "flowrate.yaml", set()
for number, (args, env, config_text) in enumerate(json.loads(sys.argv[1])):
    print(f"--- {number}", flush=True)
    print(f"--- {number}", file=sys.stderr, flush=True)
    for name in overlaid - set(env):
        del os.environ[name]
    os.environ.update(env)
    overlaid |= set(env)
    if config_text is None:
        config.unlink(missing_ok=True)
    else:
        config.parent.mkdir(exist_ok=True)
        config.write_text(config_text)
    try:
        app(args, prog_name="flowrate")
    except SystemExit:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
"""

JUDGE_GROUP_COMMANDS = {  # each with what its command line needs besides options
    "eval": ["c.jsonl"],
    "align": ["c.jsonl"],
    "agreement": [],
    "judge-bench": ["-m", "gpt-4o"],
    "top-issues": [],
    "batch import-results": ["out.jsonl", "c.jsonl"],
}


@pytest.fixture
def flowrate_with_a_new_judge_option(cli_env, tmp_path):
    """Run (args, environment overlay, config file text or None) in one flowrate process with
    the new option; each run's stdout and stderr."""

    def run(*runs):
        done = subprocess.run(
            [sys.executable, "-c", WITH_A_NEW_JUDGE_OPTION, json.dumps(runs)],
            capture_output=True,
            text=True,
            env=dict(cli_env, COLUMNS="200"),
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        outs, errs = (re.split(r"^--- \d+\n", text, flags=re.M)[1:] for text in (done.stdout, done.stderr))
        assert len(outs) == len(errs) == len(runs), done.stderr
        return list(zip(outs, errs))

    return run


@pytest.mark.parametrize("name", JUDGE_GROUP_COMMANDS)
def test_a_field_added_to_the_judge_group_is_an_option_of_each_command_that_takes_it(
    name, flowrate_with_a_new_judge_option
):
    command = [*name.split(), *JUDGE_GROUP_COMMANDS[name]]
    from_env = {"FLOWRATE_JUDGE_NOTE": "from-env"}
    (help_text, _), default, configured, from_environment, given = flowrate_with_a_new_judge_option(
        ([*name.split(), "--help"], {}, None),
        (command, {}, None),
        (command, {}, "judge_note: from-config\n"),
        (command, from_env, "judge_note: from-config\n"),
        ([*command, "--judge-note", "from-flag"], from_env, "judge_note: from-config\n"),
    )
    assert "--judge-note" in help_text and "A note for the judge, for a test." in help_text
    assert "FLOWRATE_JUDGE_NOTE" in help_text

    assert "judge_note=None" in default[1]
    assert "judge_note=from-config" in configured[1]
    assert "judge_note=from-env" in from_environment[1]
    assert "judge_note=from-flag" in given[1], given[1]


def test_the_shipped_judge_group_has_no_such_option(run_flowrate):
    assert "--judge-note" not in run_flowrate("eval", "--help", env=dict(os.environ, COLUMNS="200")).stdout


def test_a_cache_dir_under_the_home_folder_is_the_same_folder_for_eval_and_cache_stats(
    judge, run_flowrate, conversations, cli_env, tmp_path
):
    from flowrate.judge.cache import CACHE_FILE

    path = conversations(turn_record("a", "hello", "hi there"))
    env = dict(cli_env, HOME=str(tmp_path / "home"))
    assert (
        run_flowrate("eval", path, "--api-base", judge.base_url, "--cache-dir", "~/judge-cache", env=env).returncode
        == 0
    )
    assert (tmp_path / "home" / "judge-cache" / CACHE_FILE).is_file()
    assert not (tmp_path / "~").exists()
    stats = run_flowrate("cache", "stats", "--cache-dir", "~/judge-cache", "--json", env=env)
    assert stats.returncode == 0 and '"entries":1' in stats.stdout.replace(" ", "")


def test_an_option_a_command_reads_by_itself_has_the_type_its_group_declares():
    """`Annotated[T, option_of(group, name)]`: T, written for the type checker, is what typer
    parses for the field (a command whose T said int for a float field would cut 0.5 to 0)."""
    import inspect
    import typing

    from flowrate.cli import app
    from flowrate.cli.options import cli_type_of

    def commands(typer_app):
        yield from (command.callback for command in typer_app.registered_commands)
        for group in typer_app.registered_groups:
            yield from commands(group.typer_instance)

    checked = []
    for callback in commands(app):
        for parameter in inspect.signature(callback, eval_str=True).parameters.values():
            if typing.get_origin(parameter.annotation) is not typing.Annotated:
                continue
            kind, *metadata = typing.get_args(parameter.annotation)
            for item in metadata:
                if hasattr(item, "declared_as"):
                    checked.append(parameter.name)
                    assert kind == cli_type_of(*item.declared_as), f"{callback.__name__}: {parameter.name}"
    assert {"history", "cache_dir", "rubric", "weight", "allow_empty", "cut_logs", "backoff"} <= set(checked)
