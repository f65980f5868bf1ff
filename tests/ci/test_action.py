"""The GitHub Action: `action.yml`'s own steps run by a test as a runner runs them (GITHUB_* set,
a step summary and an output file, the inputs as the step's env), against the scripted judge. The
`uses:` steps are GitHub's (setup-python, the cache, the upload): the cache's are played by the
test as actions/cache does them (`Runner.play_cache`), the artifact is the results folder."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from flowrate.ci.action import write_outputs
from flowrate.errors import ExitCode
from tests.helpers import HOSTILE_IDS, ROOT, read_rows, turn_record, workflow_commands, write_jsonl

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
CI_PAGE = (ROOT / "docs" / "ci.md").read_text()
OWN_INPUTS = {
    "files",
    "config",
    "baseline",
    "baseline-file",
    "tolerance",
    "fail-on-any-regression",
    "results-dir",
    "artifact-name",
    "python-version",
    "flowrate-spec",
}


def runner_outputs(path):
    """GITHUB_OUTPUT read as the runner reads it (actions/runner's file commands): `name=value`
    when `=` comes before any `<<`, else `name<<DELIMITER`, the lines up to DELIMITER alone."""
    lines = re.split(r"\r\n|\r|\n", Path(path).read_text(encoding="utf-8"))  # as .NET's ReadLine
    if lines and lines[-1] == "":
        lines.pop()
    values, index = {}, 0
    while index < len(lines):
        line = lines[index]
        equals, heredoc = line.find("="), line.find("<<")
        if equals >= 0 and (heredoc < 0 or equals < heredoc):
            name, value = line[:equals], line[equals + 1 :]
        elif heredoc >= 0:
            name, delimiter = line[:heredoc], line[heredoc + 2 :]
            end = lines.index(delimiter, index + 1)  # a ValueError here is the runner's "matching delimiter not found"
            value = "\n".join(lines[index + 1 : end])
            index = end
        else:
            raise ValueError(f"invalid output line {line!r}")
        assert name, f"an output line without a name: {line!r}"
        values[name] = value
        index += 1
    return values


def evaluate(expression, contexts):
    """A GitHub Actions expression, of the forms action.yml uses, as the runner evaluates it:
    context paths (`inputs.x`, `runner.temp`, `steps.run.outputs.x`; a missing one is ''),
    '...' strings, `==`, `!=`, `&&` and `||` (which give an operand, not a boolean),
    parentheses, `always()` and `toJSON(...)` (JSON indented by 2, as the runner writes it). Strings are compared as written (GitHub ignores case; the values
    compared here are lower case)."""
    tokens = re.findall(r"&&|\|\||==|!=|\(|\)|'(?:[^']|'')*'|[A-Za-z_][\w.-]*(?:\(\))?", expression)
    assert "".join(tokens) == re.sub(r"\s", "", expression), f"an expression this test cannot read: {expression}"
    python = []
    for token in tokens:
        if token in ("&&", "||"):
            python.append({"&&": " and ", "||": " or "}[token])
        elif token in ("==", "!=", "(", ")"):
            python.append(token)
        elif token.startswith("'"):
            python.append(repr(token[1:-1].replace("''", "'")))
        elif token == "always()":
            python.append("True")
        elif token == "toJSON":
            python.append("toJSON")
        else:
            value = contexts
            for part in token.split("."):
                value = value.get(part, "") if isinstance(value, dict) else ""
            python.append(repr(value))
    return eval("".join(python), {"__builtins__": {}, "toJSON": lambda value: json.dumps(value, indent=2)})


def expand(text, contexts):
    """`text` with each `${{ expression }}` replaced by its value, as the runner expands them."""
    return re.sub(r"\$\{\{(.*?)\}\}", lambda match: str(evaluate(match.group(1), contexts)), text)


class Runner:
    """A job's runner for the action's steps, in `workspace` with `env` (the test's key and no
    FLOWRATE_*), GITHUB_* of an event, a fresh step summary and output file per step. Each run is
    a new job on a fresh machine (its own runner.temp); the cache steps are played as
    actions/cache does over `caches` (the repository's, kept between runs): restore the exact
    key (`cache-hit` 'true'), else the newest cache whose key starts with a restore key, in their
    order ('false'), else nothing (''); save a key only once. `saved` lists the keys saved."""

    def __init__(self, workspace, env, temp):
        self.workspace, self.env, self.temp = workspace, env, temp
        self.step = self.job = 0
        self.caches, self.saved = {}, []

    def run(self, inputs, event="push", base_ref=""):
        """Run the action's steps that call flowrate.ci.action and its cache steps, in order; the
        outputs, summary, stdout and status of each script step and the outputs of the restore
        step, by step id."""
        self.job += 1
        runner_temp = self.temp / f"job-{self.job}"
        runner_temp.mkdir(parents=True)
        defaults = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
        contexts = {"inputs": {**defaults, **inputs}, "runner": {"temp": str(runner_temp)}, "steps": {}}
        for step in ACTION["runs"]["steps"]:
            if step.get("uses", "").startswith("actions/cache/"):
                self.play_cache(step, contexts)
            elif "flowrate.ci.action" in step.get("run", ""):
                contexts["steps"][step.get("id")] = self.script(step, contexts, event, base_ref)
        return contexts["steps"]

    def play_cache(self, step, contexts):
        if "if" in step and not evaluate(step["if"], contexts):
            return
        given = {name: expand(str(value), contexts) for name, value in step["with"].items()}
        path, key = Path(given["path"]), given["key"]
        if step["uses"] == "actions/cache/save@v4":
            if key not in self.caches and path.is_dir():
                self.caches[key] = self.temp / f"cache-{len(self.caches)}"
                shutil.copytree(path, self.caches[key])
                self.saved.append(key)
            return
        prefixes = [line.strip() for line in given.get("restore-keys", "").splitlines() if line.strip()]
        found, hit = (key, "true") if key in self.caches else (None, "")
        for prefix in prefixes if found is None else []:
            newest = [name for name in self.caches if name.startswith(prefix)][-1:]
            if newest:
                found, hit = newest[0], "false"
                break
        if found is not None:
            shutil.copytree(self.caches[found], path)
        contexts["steps"][step["id"]] = {"outputs": {"cache-hit": hit}}

    def script(self, step, contexts, event, base_ref):
        self.step += 1
        output = self.workspace.parent / f"output-{self.step}"
        summary = self.workspace.parent / f"summary-{self.step}.md"
        output.write_text("")
        env = dict(self.env)
        env.update({name: expand(str(value), contexts) for name, value in step["env"].items()})
        env.update(
            GITHUB_ACTIONS="true",
            GITHUB_EVENT_NAME=event,
            GITHUB_BASE_REF=base_ref,
            GITHUB_WORKSPACE=str(self.workspace),
            GITHUB_OUTPUT=str(output),
            GITHUB_STEP_SUMMARY=str(summary),
            GITHUB_RUN_ID=str(self.job),
            GITHUB_RUN_ATTEMPT="1",
        )
        command = step["run"].replace("python ", f"{sys.executable} ", 1)
        done = subprocess.run(
            ["bash", "-e", "-c", command],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return {
            "status": done.returncode,
            "stdout": done.stdout,
            "stderr": done.stderr,
            "outputs": runner_outputs(output),
            "summary": summary.read_text() if summary.exists() else "",
        }


@pytest.fixture
def runner(tmp_path, cli_env):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {key: value for key, value in cli_env.items() if key != "FLOWRATE_CACHE_DIR"}
    return Runner(workspace, env, tmp_path / "runner")


def git(workspace, *args):
    subprocess.run(["git", *args], cwd=workspace, check=True, capture_output=True)


def chats(workspace, broken=()):
    """The workspace's conversations: c0..c3, those in `broken` with a reply the judge fails."""
    records = [
        turn_record(f"c{n}", f"question {n}", "BROKEN reply" if n in broken else f"answer {n}") for n in range(4)
    ]
    return write_jsonl(workspace / "chats.jsonl", records)


# The options of `flowrate eval` that no input of the action gives, and why: the action's steps
# write the rows, the reports and GitHub's summary themselves, the response cache's folder is the
# one its cache steps restore and save, and a dry run judges nothing to gate on.
OWNED_OPTIONS = {
    "--output",
    "--junit",
    "--html",
    "--github",
    "--history",
    "--output-parquet",
    "--batch-export",
    "--cache-dir",
    "--dry-run",
    "--config",  # the action's own input `config`
}


def eval_command():
    import typer.main

    from flowrate.cli import app

    return typer.main.get_command(app).commands["eval"]


def test_every_option_of_flowrate_eval_is_an_input_of_the_action_but_those_its_steps_give():
    offered = {parameter.opts[0] for parameter in eval_command().params if parameter.opts[0].startswith("--")}
    assert OWNED_OPTIONS <= offered  # none of them gone stale
    inputs = set(ACTION["inputs"])
    missing = sorted(option for option in offered - OWNED_OPTIONS if option.removeprefix("--") not in inputs)
    assert missing == [], (
        "options of flowrate eval the action cannot pass (python -m flowrate.ci.action inputs action.yml)"
    )
    assert not inputs - OWN_INPUTS - {option.removeprefix("--") for option in offered}, "inputs that are no eval option"


def test_the_action_s_eval_inputs_are_generated_from_the_declarations(tmp_path):
    from flowrate.ci.action import write_eval_inputs

    copy = tmp_path / "action.yml"
    copy.write_text((ROOT / "action.yml").read_text())
    write_eval_inputs(copy)
    assert copy.read_text() == (ROOT / "action.yml").read_text(), "run python -m flowrate.ci.action inputs action.yml"
    assert ACTION["inputs"]["redact"]["description"].startswith("true: Replace emails")
    assert ACTION["inputs"]["max-cost"]["default"] == ""  # not given: the config file or flowrate's default


def test_every_input_reaches_flowrate_eval_as_its_option_with_its_value():
    from flowrate.ci.action import INPUTS_VARIABLE, eval_options

    values = {}
    for name, spec in ACTION["inputs"].items():
        if name in OWN_INPUTS:
            continue
        words = spec["description"]
        values[name] = "true" if words.startswith("true: ") else "a=1 b=2" if "Several:" in words else "7"
    arguments = eval_options({INPUTS_VARIABLE: json.dumps({**values, "config": "flowrate.yaml"})})
    command = eval_command()
    parsed = command.make_context("eval", ["chats.jsonl", *arguments]).params
    for name, value in values.items():
        parameter = next(parameter for parameter in command.params if parameter.opts[0] == f"--{name}")
        got = parsed[parameter.name]
        if value == "true":
            assert got is True, name
        elif "=" in value:
            assert got == ["a=1", "b=2"], name
        else:  # 7 as the option's type reads it: a number, or the text
            assert str(got).removesuffix(".0") == "7", name
    assert parsed["config"].name == "flowrate.yaml"


def test_every_eval_input_given_changes_the_cache_key(tmp_path, monkeypatch):
    from flowrate.ci.action import INPUTS_VARIABLE, cache_keys

    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "chats.jsonl", [turn_record("c0", "question", "answer")])
    keys = {}
    for name, spec in [("", {"description": ""}), *ACTION["inputs"].items()]:
        if name in OWN_INPUTS:
            continue
        value = "true" if spec["description"].startswith("true: ") else "7"
        inputs = {"files": "chats.jsonl", **({name: value} if name else {})}
        keys.setdefault(cache_keys({INPUTS_VARIABLE: json.dumps(inputs)})[0], []).append(name)
    assert [names for names in keys.values() if len(names) > 1] == []  # redact, language, samples, ... each its own


def test_each_step_that_runs_the_script_is_given_every_input():
    for step in ACTION["runs"]["steps"]:
        if "flowrate.ci.action" in step.get("run", ""):
            assert step["env"]["INPUTS_JSON"] == "${{ toJSON(inputs) }}"
            assert not [name for name in step["env"] if name.startswith("INPUT_")]  # each input written once
    assert set(ACTION["outputs"]) == {
        "pass-rate",
        "failures",
        "failed-ids",
        "failures-text",
        "cost-usd",
        "regressed",
        "exit-code",
    }


def test_redact_reaches_flowrate_eval_and_the_judge_sees_only_placeholders(runner, judge):
    records = [turn_record("c0", "my email is ana.silva@example.com", "thanks, noted")]
    write_jsonl(runner.workspace / "chats.jsonl", records)
    run = runner.run({"files": "chats.jsonl", "api-base": judge.base_url, "redact": "true"})["run"]
    assert run["status"] == 0, run["stderr"]
    rows = read_rows(runner.workspace / "flowrate-results" / "rows.jsonl")
    assert rows[0]["redactions"] == {"EMAIL": 1}
    assert judge.bodies and "ana.silva@example.com" not in json.dumps(judge.bodies)


def test_a_push_run_writes_the_summary_annotations_artifacts_and_outputs(runner, judge):
    judge.script("BROKEN", {"verdict": "none", "reason": "The reply is broken.", "key_issues": ["Turn 1: broken"]})
    chats(runner.workspace, broken={2})
    inputs = {"files": "chats.jsonl", "api-base": judge.base_url, "min-pass-rate": "0.9"}
    steps = runner.run(inputs)
    run = steps["run"]
    assert run["status"] == 1, run["stderr"]  # the gate: 3 of 4 pass
    assert "## " in run["summary"] and "c2" in run["summary"]
    assert re.search(r"^::error file=chats\.jsonl,line=3", run["stdout"], re.M), run["stdout"]
    results = runner.workspace / "flowrate-results"
    assert {path.name for path in results.iterdir()} == {"rows.jsonl", "report.html", "junit.xml"}
    assert len(read_rows(results / "rows.jsonl")) == 4
    assert run["outputs"] == {
        "pass-rate": "0.7500",
        "failures": "1",
        "failed-ids": '["c2"]',
        "failures-text": "c2 (conversational_flow_rate, none): The reply is broken.",
        "cost-usd": run["outputs"]["cost-usd"],
        "regressed": "false",
        "exit-code": "1",
        "cache-save-key": steps["key"]["outputs"]["cache-key"],  # a failed gate judged everything
    }
    assert float(run["outputs"]["cost-usd"]) >= 0


def test_a_pull_request_that_regresses_against_the_target_branch_baseline_fails(runner, judge, tmp_path):
    judge.script("BROKEN", {"verdict": "none", "reason": "The reply is broken.", "key_issues": []})
    workspace = runner.workspace
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "config", "user.email", "ci@example.com")
    git(workspace, "config", "user.name", "ci")
    chats(workspace)
    inputs = {"files": "chats.jsonl", "api-base": judge.base_url}
    assert runner.run(inputs)["run"]["status"] == 0
    (workspace / ".flowrate").mkdir()
    (workspace / "flowrate-results" / "rows.jsonl").rename(workspace / ".flowrate" / "baseline.jsonl")
    git(workspace, "add", "chats.jsonl", ".flowrate/baseline.jsonl")
    git(workspace, "commit", "-q", "-m", "baseline")
    git(tmp_path, "clone", "-q", "--bare", str(workspace), "origin.git")
    git(workspace, "remote", "add", "origin", str(tmp_path / "origin.git"))
    git(workspace, "checkout", "-q", "-b", "pr")
    chats(workspace, broken={0, 1, 2, 3})
    (workspace / ".flowrate" / "baseline.jsonl").write_text("")  # the pull request's copy is not the baseline

    run = runner.run(inputs, event="pull_request", base_ref="main")["run"]
    assert run["status"] == 1, run["stderr"]
    assert run["outputs"]["regressed"] == "true"
    assert run["outputs"]["exit-code"] == "1"
    assert "### flowrate: compared with the baseline" in run["summary"]
    assert "**significant drop**" in run["summary"]
    assert "- c0 (conversational\\_flow\\_rate): fully → none" in run["summary"]

    chats(workspace)  # fixed: the same verdicts as the baseline, from the cache
    before = judge.requests
    fixed = runner.run(inputs, event="pull_request", base_ref="main")["run"]
    assert fixed["status"] == 0, fixed["stderr"]
    assert fixed["outputs"]["regressed"] == "false"
    assert "### flowrate: compared with the baseline" in fixed["summary"]
    assert "**Regressions**" not in fixed["summary"]
    assert judge.requests == before


def test_a_pull_request_without_a_baseline_on_its_target_branch_is_told_and_not_compared(runner, judge):
    chats(runner.workspace)
    run = runner.run({"files": "chats.jsonl", "api-base": judge.base_url}, event="pull_request", base_ref="main")["run"]
    assert run["status"] == 0
    assert "::warning title=flowrate::no baseline rows of the target branch; nothing was compared" in run["stdout"]
    assert "compared with the baseline" not in run["summary"]


def test_a_rerun_after_only_the_ci_job_changed_has_the_same_cache_key_and_sends_no_request(runner, judge):
    chats(runner.workspace)
    inputs = {"files": "chats.jsonl", "api-base": judge.base_url}
    first = runner.run(inputs)
    assert first["run"]["status"] == 0 and judge.requests == 4
    workflows = runner.workspace / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "flowrate.yml").write_text("on: pull_request\njobs: {judge: {runs-on: ubuntu-latest}}\n")
    runner.env.update(GITHUB_JOB="judge-again", GITHUB_WORKFLOW="renamed", GITHUB_RUN_ATTEMPT="2")
    second = runner.run(inputs)
    assert second["key"]["outputs"] == first["key"]["outputs"]
    assert second["run"]["status"] == 0
    assert judge.requests == 4  # every verdict from the restored cache
    assert second["run"]["outputs"]["cost-usd"] == "0.000000"


def test_a_directory_s_key_is_its_conversations_not_the_results_written_inside_it(runner, judge):
    (runner.workspace / "conversations").mkdir()
    chats(runner.workspace).rename(runner.workspace / "conversations" / "chats.jsonl")
    inputs = {"files": "conversations/", "api-base": judge.base_url, "results-dir": "conversations/results"}
    first = runner.run(inputs)
    assert first["run"]["status"] == 0, first["run"]["stderr"]
    assert (runner.workspace / "conversations" / "results" / "rows.jsonl").is_file()
    second = runner.run(inputs)
    assert second["key"]["outputs"] == first["key"]["outputs"]
    assert second["run"]["status"] == 0 and judge.requests == 4
    write_jsonl(runner.workspace / "conversations" / "more.jsonl", [turn_record("c9", "question 9", "answer")])
    assert runner.run(inputs)["key"]["outputs"]["cache-key"] != first["key"]["outputs"]["cache-key"]


def test_the_cache_key_names_the_model_and_the_rubric(runner, judge, tmp_path):
    chats(runner.workspace)
    rubric = runner.workspace / "rubric.yaml"
    rubric.write_text((ROOT / "flowrate" / "rubrics" / "conversational_flow.yaml").read_text())
    base = {"files": "chats.jsonl", "api-base": judge.base_url, "rubric": "rubric.yaml"}
    keys = [runner.run(base)["key"]["outputs"]["cache-key"]]
    keys.append(runner.run({**base, "model": "gpt-4o-mini"})["key"]["outputs"]["cache-key"])
    rubric.write_text(rubric.read_text() + "\n# edited\n")
    keys.append(runner.run(base)["key"]["outputs"]["cache-key"])
    assert len(set(keys)) == 3


def test_max_cost_is_passed_to_flowrate_eval(runner, judge):
    chats(runner.workspace)
    run = runner.run({"files": "chats.jsonl", "api-base": judge.base_url, "max-cost": "0"})["run"]
    assert judge.requests == 0
    assert "budget: 4 conversation(s) not judged, the --max-cost budget was spent" in run["stderr"]
    assert run["status"] == ExitCode.INCOMPLETE  # a run that judged nothing does not pass
    assert run["outputs"]["exit-code"] == "3" and run["outputs"]["pass-rate"] == ""


@pytest.mark.parametrize(
    "value",
    ["plain", "two\nlines", "name=value\nx<<EOF\nEOF", "ghadelimiter_x\r\nend", "", "trailing\n"],
)
def test_outputs_are_read_back_by_the_runner_as_written_whatever_the_text(tmp_path, value):
    path = tmp_path / "output"
    write_outputs(str(path), {"failed-ids": value, "after": "still=here"})
    read = runner_outputs(path)
    assert read == {"failed-ids": "\n".join(re.split(r"\r\n|\r|\n", value)), "after": "still=here"}


def test_hostile_ids_and_reasons_reach_the_outputs_whole(runner, judge):
    reason = "ghadelimiter_1\nexit-code=0\n::error::pwned"
    judge.script("BROKEN", {"verdict": "none", "reason": reason, "key_issues": []})
    hostile = ["evil\nexit-code=0", "x<<EOF", "::error::pwned"]
    records = [turn_record(name, f"question {n}", "BROKEN reply") for n, name in enumerate(hostile)]
    write_jsonl(runner.workspace / "chats.jsonl", records)
    run = runner.run({"files": "chats.jsonl", "api-base": judge.base_url})["run"]
    outputs = run["outputs"]
    assert outputs["exit-code"] == str(run["status"])
    assert json.loads(outputs["failed-ids"]) == hostile
    assert outputs["failures"] == "3"
    assert outputs["failures-text"].count("exit-code=0") == 4  # 3 reasons, 1 id: all inside the value
    assert set(outputs) == {
        "pass-rate",
        "failures",
        "failed-ids",
        "failures-text",
        "cost-usd",
        "regressed",
        "exit-code",
        "cache-save-key",
    }


def test_the_cache_is_restored_before_the_run_and_saved_after_it_whatever_the_verdicts():
    steps = ACTION["runs"]["steps"]
    names = [step.get("uses", step.get("id", "")) for step in steps]
    restore, run, save = (names.index(name) for name in ("actions/cache/restore@v4", "run", "actions/cache/save@v4"))
    assert restore < run < save
    assert steps[save]["if"].startswith("always()")  # a failed gate still keeps what was paid for
    assert steps[restore]["with"]["key"] == "${{ steps.key.outputs.cache-key }}"
    for index in (restore, save):
        assert steps[index]["with"]["path"] == steps[run]["env"]["FLOWRATE_CACHE_DIR"]
    upload = steps[names.index("actions/upload-artifact@v4")]
    assert upload["if"] == "always()" and upload["with"]["path"] == "${{ inputs.results-dir }}"


def test_a_rerun_after_a_run_the_judge_failed_pays_once_for_what_is_missing_then_nothing(runner, judge):
    judge.script("question 2", {"status": 503})
    judge.script("question 3", {"status": 503})
    chats(runner.workspace)
    inputs = {"files": "chats.jsonl", "api-base": judge.base_url, "max-retries": "0"}
    first = runner.run(inputs)
    assert first["run"]["status"] == ExitCode.INCOMPLETE, first["run"]["stderr"]
    assert judge.requests == 4

    judge.rules.clear()  # the judge is back
    second = runner.run(inputs)
    assert second["run"]["status"] == 0, second["run"]["stderr"]
    assert judge.requests == 6  # c2 and c3, once

    third = runner.run(inputs)
    assert third["run"]["status"] == 0 and judge.requests == 6
    assert third["run"]["outputs"]["cost-usd"] == "0.000000"
    # the stopped run saved under a key of its own run, which the rerun restored through
    # restore-keys and did not take for a full hit; the rerun saved the key, the third run had it
    key = first["key"]["outputs"]["cache-key"]
    assert runner.saved == [f"{key}-partial-1-1", key]
    hits = [run["restore"]["outputs"]["cache-hit"] for run in (first, second, third)]
    assert hits == ["", "false", "true"]


def test_a_budget_that_stopped_a_run_is_not_the_cache_of_its_key(runner, judge):
    chats(runner.workspace)
    inputs = {"files": "chats.jsonl", "api-base": judge.base_url, "max-cost": "0"}
    run = runner.run(inputs)["run"]
    assert run["status"] == ExitCode.INCOMPLETE and judge.requests == 0
    assert run["outputs"]["cache-save-key"].endswith("-partial-1-1")


def test_an_option_that_changes_the_requests_changes_the_key_so_its_answers_are_saved(runner, judge):
    chats(runner.workspace)
    inputs = {"files": "chats.jsonl", "api-base": judge.base_url}
    assert runner.run(inputs)["run"]["status"] == 0 and judge.requests == 4
    french = {**inputs, "language": "French"}
    assert runner.run(french)["run"]["status"] == 0 and judge.requests == 8
    assert runner.run(french)["run"]["status"] == 0 and judge.requests == 8  # the French answers were kept


def ci_page_step(name):
    """The step called `name` of the CI page's workflow."""
    workflow = yaml.safe_load(re.search(r"```yaml\n(name: flowrate\n.*?)```", CI_PAGE, re.S).group(1))
    return next(step for step in workflow["jobs"]["judge"]["steps"] if step.get("name") == name)


def test_no_output_nor_the_ci_page_s_printing_of_them_is_a_workflow_command_whatever_the_ids(runner, judge):
    reason = "first line\n::error::second ##[warning]legacy\r::add-mask::third"
    judge.script("BROKEN", {"verdict": "none", "reason": reason, "key_issues": []})
    records = [turn_record(name, f"question {n}", "BROKEN reply") for n, name in enumerate(HOSTILE_IDS)]
    write_jsonl(runner.workspace / "chats.jsonl", records)
    run = runner.run({"files": "chats.jsonl", "api-base": judge.base_url})["run"]
    assert run["status"] == 1, run["stderr"]
    annotations = workflow_commands(run["stdout"])
    assert [name for name, _, _ in annotations] == ["error"] * len(HOSTILE_IDS)  # flowrate's own, one per row
    assert {properties["file"] for _, properties, _ in annotations} == {"chats.jsonl"}
    assert workflow_commands(run["stderr"]) == []
    outputs = run["outputs"]
    for name, value in outputs.items():
        assert workflow_commands(value) == [], name
    assert json.loads(outputs["failed-ids"]) == HOSTILE_IDS  # fromJSON reads the ids exactly
    rows = re.split(r"\r\n|\r|\n", outputs["failures-text"])  # a failing row a line
    assert len(rows) == int(outputs["failures"]) == len(HOSTILE_IDS)
    assert all(" (conversational_flow_rate, none): first line" in row for row in rows)

    step = ci_page_step("Tell the outcome")
    given = {
        "pass-rate": outputs["pass-rate"],
        "cost-usd": outputs["cost-usd"],
        "failures-text": outputs["failures-text"],
    }
    env = {
        name: re.sub(r"\$\{\{ steps\.flowrate\.outputs\.([a-z-]+) \}\}", lambda found: given[found.group(1)], value)
        for name, value in step["env"].items()
    }
    printed = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, check=True)
    log = printed.stdout.decode()
    assert workflow_commands(log) == []
    assert len(re.split(r"\r\n|\r|\n", log.rstrip("\n"))) == 1 + len(HOSTILE_IDS)
