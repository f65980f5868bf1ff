"""The CI page's recipes are the ones that work: the workflow uses the action's inputs and outputs,
and the Makefile's pre-merge target runs, failing on a regression against the baseline."""

import re
import subprocess

import yaml

from tests.helpers import ROOT, turn_record, write_jsonl

PAGE = (ROOT / "docs" / "ci.md").read_text()
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())


def block(language, containing):
    return next(text for text in re.findall(rf"```{language}\n(.*?)```", PAGE, re.S) if containing in text)


def test_the_workflow_on_the_ci_page_gives_the_action_only_its_inputs_and_reads_only_its_outputs():
    workflow = yaml.safe_load(block("yaml", "uses: YOUR-ORG/flowrate@main"))
    steps = workflow["jobs"]["judge"]["steps"]
    action = next(step for step in steps if step.get("uses") == "YOUR-ORG/flowrate@main")
    assert set(action["with"]) <= set(ACTION["inputs"])
    read = set(re.findall(r"steps\.flowrate\.outputs\.([a-z-]+)", block("yaml", "uses: YOUR-ORG/flowrate@main")))
    assert read and read <= set(ACTION["outputs"])


def test_the_makefile_premerge_target_fails_on_a_regression_against_the_baseline(tmp_path, judge, cli_env):
    judge.script("WORSE", {"verdict": "mostly", "reason": "slower", "key_issues": []})
    (tmp_path / "Makefile").write_text(block("make", "premerge:"))
    (tmp_path / "conversations").mkdir()
    records = [turn_record(f"c{n}", f"question {n}", f"answer {n}") for n in range(4)]
    write_jsonl(tmp_path / "conversations" / "chats.jsonl", records)
    env = {**cli_env, "FLOWRATE_API_BASE": judge.base_url}

    def run(*command):
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    for command in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "config", "user.email", "a@b.c"],
        ["git", "config", "user.name", "a"],
    ):
        run(*command)
    assert run("make", "rows.jsonl").returncode == 0
    (tmp_path / ".flowrate").mkdir()
    (tmp_path / "rows.jsonl").rename(tmp_path / ".flowrate" / "baseline.jsonl")
    run("git", "add", ".flowrate")
    run("git", "commit", "-q", "-m", "baseline")
    assert run("make", "premerge", "BASE=main").returncode == 0  # the same conversations: no regression

    worse = [turn_record(f"c{n}", f"question {n}", f"WORSE answer {n}") for n in range(4)]
    write_jsonl(tmp_path / "conversations" / "chats.jsonl", worse)  # every one still passes its gate
    regressed = run("make", "premerge", "BASE=main")
    assert regressed.returncode != 0
    assert regressed.stdout.rstrip().endswith(
        "flowrate compare baseline.jsonl rows.jsonl"
    )  # eval passed; compare failed
    assert "drop" in regressed.stderr.lower(), regressed.stderr
