"""Fixes from verification (issue 14) in the evaluation stage: the results file, signals, resume,
the metric protocol, inputs and settings. Each test names the behaviour it holds."""

import signal
import time

import pytest

from tests.conftest import read_rows, turn_record, wait_for_requests, write_jsonl


def distinct(count, prefix="c"):
    return [turn_record(f"{prefix}{n}", f"question {prefix}{n}", f"answer {n}") for n in range(count)]


# -- 1: a run that writes no row leaves the previous results as they were --------------------------
def test_a_rejected_key_leaves_the_previous_results_file_untouched(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    previous = tmp_path / "prev.jsonl"
    previous.write_text('{"kept": "from yesterday"}\n')
    judge.script("question", {"status": 401})
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", previous)
    assert result.returncode == 2, result.stderr
    assert "rejected the API key" in result.stderr
    assert previous.read_text() == '{"kept": "from yesterday"}\n'


def test_a_run_that_writes_rows_replaces_the_previous_results(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    previous = tmp_path / "prev.jsonl"
    previous.write_text('{"kept": "from yesterday"}\n')
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", previous)
    assert result.returncode == 0, result.stderr
    assert sorted(row["id"] for row in read_rows(previous)) == ["c0", "c1"]


# -- 3: one declared metric protocol -----------------------------------------------------------------
def test_every_metric_in_the_catalog_implements_the_whole_declared_protocol():
    from flowrate.metrics.catalog import NAMES, build_metrics
    from flowrate.metrics.protocol import Metric
    from flowrate.settings.options import EvalSettings

    settings = EvalSettings(metric=NAMES, api_base="http://127.0.0.1:9/v1")
    metrics = build_metrics(settings.judge_settings, None)
    assert [metric.name for metric in metrics] == NAMES
    methods = [name for name, value in vars(Metric).items() if callable(value) and not name.startswith("_")]
    members = [*Metric.__annotations__, *methods]  # every member the engine may use
    assert len(members) >= 18
    for metric in metrics:
        missing = [name for name in members if not hasattr(metric, name)]
        assert not missing, f"{metric.name} lacks {missing}"
        assert isinstance(metric, Metric)


def test_resume_with_the_offline_repetition_check_judges_only_what_is_missing(run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    first = run_flowrate("eval", path, "--metric", "repetition_check", "--limit", "2", "-o", "out.jsonl")
    assert first.returncode == 0, first.stderr
    again = run_flowrate(
        "eval", path, "--metric", "repetition_check", "--resume", "--threshold", "0.5", "-o", "out.jsonl"
    )
    assert again.returncode == 0, again.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert sorted(row["id"] for row in rows) == ["c0", "c1", "c2", "c3"]
    assert {row["threshold"] for row in rows} == {0.5}


# -- 4: every output path is checked before the first call; a late write failure is exit 4 -------------
@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--html", "nodir/r.html", "--html nodir/r.html: the directory nodir does not exist"),
        ("--junit", "somedir", "--junit somedir: is a directory"),
        ("--history", "nodir/h.duckdb", "--history nodir/h.duckdb: the directory nodir does not exist"),
    ],
)
def test_an_unwritable_report_or_history_path_is_exit_2_before_any_call(
    judge, run_flowrate, tmp_path, option, value, message
):
    (tmp_path / "somedir").mkdir()
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, option, value, "-o", "out.jsonl")
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert judge.requests == 0 and not (tmp_path / "out.jsonl").exists()
    assert "Traceback" not in result.stderr


def test_an_unwritable_github_step_summary_is_exit_2_before_any_call(judge, run_flowrate, tmp_path, cli_env):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    env = {**cli_env, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "gone" / "summary.md")}
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", env=env)
    assert result.returncode == 2 and "GITHUB_STEP_SUMMARY" in result.stderr, result.stderr
    assert judge.requests == 0


def test_a_report_that_fails_late_is_a_plain_exit_4_and_the_rows_are_kept(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--junit", "/dev/full", "-o", "out.jsonl")
    assert result.returncode == 4, result.stderr
    assert "a report could not be written" in result.stderr and "No space left on device" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(read_rows(tmp_path / "out.jsonl")) == 3


def test_a_results_file_on_a_full_disk_stops_the_run_with_exit_4_and_a_resume_command(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(40))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "/dev/full", "-j", "1")
    assert result.returncode == 4, result.stderr
    assert "writing the results stopped: /dev/full: No space left on device" in result.stderr
    assert "--resume" in result.stderr and "Traceback" not in result.stderr
    assert judge.requests < 40  # it stopped scheduling


# -- 5: SIGTERM is handled as Ctrl-C is ------------------------------------------------------------------
def test_sigterm_stops_the_run_with_a_summary_a_resume_command_and_the_reports(judge, tmp_path, start_process):
    judge.latency_s = 0.2
    path = write_jsonl(tmp_path / "c.jsonl", distinct(60))
    process = start_process(
        "eval", path, "--api-base", judge.base_url, "-j", "2", "--junit", "j.xml", "-o", "out.jsonl"
    )
    wait_for_requests(judge, 4)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert "interrupted" in stderr and "resume with: flowrate eval" in stderr and "--resume" in stderr
    assert "Traceback" not in stderr
    assert (tmp_path / "j.xml").exists()
    rows = read_rows(tmp_path / "out.jsonl")
    assert 0 < len(rows) < 60 and len({row["id"] for row in rows}) == len(rows)


def test_sigterm_while_the_judge_is_loading_exits_143_without_a_traceback(tmp_path, start_process, judge):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    process = start_process("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    time.sleep(0.5)  # importing flowrate and LiteLLM takes seconds
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode in (143, 0), stderr  # 0 only if the run was already over
    assert "Traceback" not in stderr


# -- 30: an interrupted resume counts every resumed row ----------------------------------------------------
def test_an_interrupted_resume_counts_every_row_the_file_held(judge, tmp_path, start_process, run_flowrate):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(100))
    first = run_flowrate("eval", path, "--api-base", judge.base_url, "--limit", "60", "-o", "out.jsonl")
    assert first.returncode == 0, first.stderr
    judge.reset()
    judge.latency_s = 0.3
    process = start_process("eval", path, "--api-base", judge.base_url, "--resume", "-j", "2", "-o", "out.jsonl")
    wait_for_requests(judge, 2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    rows = read_rows(tmp_path / "out.jsonl")
    new = len(rows) - 60
    assert "resumed from the output file 60" in stderr, stderr
    assert f"interrupted: {100 - 60 - new} conversation(s) not judged yet" in stderr, stderr


# -- 10: a YAML alias bomb is refused before selection ------------------------------------------------------
BOMB = """conversations:
  - id: bomb
    metadata:
      bomb: "1"
      a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
      b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
      c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
      d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
      e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
      f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
      g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
      h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
      i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
    turns:
      - {input: hi, actual_output: hello}
  - id: fine
    metadata: {bomb: "1", shared: &s {channel: chat}, again: *s}
    turns:
      - {input: hi, actual_output: hello}
"""


def test_a_yaml_alias_bomb_is_refused_by_file_and_line_before_selection(judge, run_flowrate, tmp_path):
    (tmp_path / "bomb.yaml").write_text(BOMB)
    started = time.monotonic()
    result = run_flowrate("eval", "bomb.yaml", "--only", "bomb=1", "--api-base", judge.base_url)
    assert time.monotonic() - started < 20
    assert result.returncode == 2, result.stderr
    assert "bomb.yaml:2: its aliases expand to more than 100,000 values" in result.stderr
    assert judge.requests == 0
    skipped = run_flowrate("eval", "bomb.yaml", "--only", "bomb=1", "--skip-invalid", "--api-base", judge.base_url)
    assert skipped.returncode == 0, skipped.stderr
    assert [row["id"] for row in read_rows(tmp_path / "flowrate-results.jsonl")] == ["fine"]


def test_aliases_are_counted_as_the_values_they_expand_to_without_building_them():
    import yaml

    from flowrate.inputs.formats import MAX_YAML_VALUES, _expanded_size

    composed = yaml.compose("- &a [1, 2]\n- [*a, *a, *a]\n")
    assert _expanded_size(composed, MAX_YAML_VALUES) == 1 + (1 + 2) + (1 + 3 * 3)
    assert _expanded_size(composed, 5) == 6  # counting stops past the limit


# -- 11: credentials in --api-base ---------------------------------------------------------------------
def test_credentials_in_the_api_base_are_refused_without_echoing_them(run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    result = run_flowrate("eval", path, "--api-base", "http://user:hunter22secret@127.0.0.1:9/v1")
    assert result.returncode == 2
    assert "holds credentials" in result.stderr and "OPENAI_API_KEY" in result.stderr
    assert "hunter22secret" not in result.stderr + result.stdout


# -- 12: weights, thresholds and gates name what exists ---------------------------------------------------
@pytest.mark.parametrize(
    "args, message",
    [
        (["--weight", "bogus=2"], "option weights: unknown criterion 'bogus' (known: "),
        (["--weight", "request_completion=-1"], "the weight of request_completion must not be negative"),
    ],
)
def test_a_weight_on_no_criterion_or_below_zero_is_refused(run_flowrate, tmp_path, judge, args, message):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    result = run_flowrate("eval", path, "--metric", "virtual_agent", "--api-base", judge.base_url, *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert judge.requests == 0
    listed = run_flowrate("metrics", *args)
    assert listed.returncode == 2 and message in listed.stderr, listed.stderr


def test_weights_that_sum_to_zero_are_refused(run_flowrate, tmp_path, judge):
    from flowrate.rubric.model import load_rubric

    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    zeros = [arg for c in load_rubric("virtual_agent").criteria for arg in ("--weight", f"{c.name}=0")]
    result = run_flowrate("eval", path, "--metric", "virtual_agent", "--api-base", judge.base_url, *zeros)
    assert result.returncode == 2 and "criteria sum to 0" in result.stderr, result.stderr
    assert judge.requests == 0


@pytest.mark.parametrize("key", ["thresholds", "gates"])
def test_an_unknown_name_under_thresholds_or_gates_in_the_config_is_refused(run_flowrate, tmp_path, judge, key):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    value = "{cohernce: 0.6}" if key == "thresholds" else "{cohernce: {min_pass_rate: 0.9}}"
    (tmp_path / "f.yaml").write_text(f"{key}: {value}\n")
    result = run_flowrate("eval", path, "--config", "f.yaml", "--api-base", judge.base_url)
    assert result.returncode == 2, result.stderr
    assert f"option {key}: unknown metric 'cohernce' (known: conversational_flow_rate" in result.stderr
    assert judge.requests == 0


# -- 15: spend after --resume is this run's ------------------------------------------------------------------
def test_after_resume_the_cost_line_shows_this_runs_spend_and_the_files_total(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(5))
    first = run_flowrate("eval", path, "--api-base", judge.base_url, "-m", "gpt-4o", "--limit", "4", "-o", "o.jsonl")
    assert first.returncode == 0, first.stderr
    rows = read_rows(tmp_path / "o.jsonl")
    earlier_prompt = sum(row["usage"]["prompt_tokens"] for row in rows)
    again = run_flowrate("eval", path, "--api-base", judge.base_url, "-m", "gpt-4o", "--resume", "-o", "o.jsonl")
    assert again.returncode == 0, again.stderr
    rows = read_rows(tmp_path / "o.jsonl")
    new = [row for row in rows if row["id"] == "c4"]
    this_run = new[0]["usage"]["prompt_tokens"]
    assert f"this run: tokens {this_run} prompt" in again.stderr, again.stderr
    assert f"the file in all: tokens {earlier_prompt + this_run} prompt" in again.stderr, again.stderr


# -- 19: messages ----------------------------------------------------------------------------------------
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


def test_one_failure_is_a_failure_not_failures():
    from flowrate.results.summary import GateResult

    gate = GateResult(metric="m", gate="max_failures", limit=0, actual=1, passed=False)
    assert "1 failure, at most 0 allowed" in gate.describe()
