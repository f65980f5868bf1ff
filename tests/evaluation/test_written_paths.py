"""Every file a command writes is apart from every input and from each other: compared as files
(device and inode), so a hard link, a symbolic link or another spelling of an input is refused
with exit 2 before any call, and the input is left as it was."""

import os

import pytest

from tests.helpers import january_label as label
from tests.helpers import turn_record, write_jsonl

CASES = {
    "--html names the input": ["--html", "conv.jsonl"],
    "--junit names the input": ["--junit", "conv.jsonl"],
    "--output-parquet names the input": ["--output-parquet", "conv.jsonl"],
    "--output-parquet is the results file": ["--output-parquet", "out.jsonl"],
    "--html is the --junit file": ["--junit", "report.xml", "--html", "report.xml"],
    "--history is the results file, spelt otherwise": ["--history", "./sub/../out.jsonl"],
    "--output is a hard link to the input": ["-o", "hard.jsonl"],
    "--output is a symbolic link to the input": ["-o", "soft.jsonl"],
    "--html is a hard link to the input": ["--html", "hard.jsonl"],
    "--junit is a hard link to the results file": ["--junit", "out-link.jsonl"],
}
MESSAGES = {
    "--html names the input": "conv.jsonl: is both an input and the --html file",
    "--junit names the input": "conv.jsonl: is both an input and the --junit file",
    "--output-parquet names the input": "conv.jsonl: is both an input and the --output-parquet file",
    "--output-parquet is the results file": "--output-parquet out.jsonl: is the same file as --output out.jsonl",
    "--html is the --junit file": "--html report.xml: is the same file as --junit report.xml",
    "--history is the results file, spelt otherwise": "--history ./sub/../out.jsonl: is the same file as --output",
    "--output is a hard link to the input": "conv.jsonl: is both an input and the --output file",
    "--output is a symbolic link to the input": "conv.jsonl: is both an input and the --output file",
    "--html is a hard link to the input": "conv.jsonl: is both an input and the --html file",
    "--junit is a hard link to the results file": "--junit out-link.jsonl: is the same file as --output out.jsonl",
}


@pytest.mark.parametrize("case", list(CASES))
def test_eval_refuses_a_written_path_that_is_an_input_or_another_written_path(case, judge, run_flowrate, tmp_path):
    conversations = write_jsonl(tmp_path / "conv.jsonl", [turn_record("c1", "hello", "hi")])
    (tmp_path / "out.jsonl").write_text("")  # a results file from an earlier run, to be resumed
    (tmp_path / "sub").mkdir()
    os.link(conversations, tmp_path / "hard.jsonl")
    os.symlink(conversations, tmp_path / "soft.jsonl")
    os.link(tmp_path / "out.jsonl", tmp_path / "out-link.jsonl")
    before = conversations.read_bytes()
    options = CASES[case] if "-o" in CASES[case] else ["-o", "out.jsonl", *CASES[case]]
    result = run_flowrate("eval", "conv.jsonl", "--api-base", judge.base_url, *options)
    assert result.returncode == 2, result.stderr
    assert MESSAGES[case] in result.stderr
    assert judge.requests == 0
    assert conversations.read_bytes() == before
    assert (tmp_path / "out.jsonl").read_bytes() == b""
    assert not (tmp_path / "report.xml").exists()


def test_calibrate_refuses_an_adjusted_output_that_is_a_hard_link_to_its_labels(run_flowrate, tmp_path):
    from tests.helpers import evaluation_row

    (tmp_path / "rows.jsonl").write_text(evaluation_row("c1", 0.5, metric="m").model_dump_json() + "\n")
    labels = write_jsonl(tmp_path / "labels.jsonl", [label("c1", "m", 0.6)])
    before = labels.read_bytes()
    os.link(labels, tmp_path / "adjusted.jsonl")
    result = run_flowrate("calibrate", "rows.jsonl", "--labels", "labels.jsonl", "--adjusted-output", "adjusted.jsonl")
    assert result.returncode == 2, result.stderr
    assert "--adjusted-output adjusted.jsonl: is also an input of calibrate" in result.stderr
    assert labels.read_bytes() == before


def test_merge_refuses_an_output_that_is_a_symbolic_link_to_a_shard(run_flowrate, tmp_path):
    from tests.helpers import evaluation_row

    shard = tmp_path / "shard.jsonl"
    shard.write_text(evaluation_row("c1", 0.5).model_dump_json() + "\n")
    before = shard.read_bytes()
    os.symlink(shard, tmp_path / "merged.jsonl")
    result = run_flowrate("merge", "shard.jsonl", "-o", "merged.jsonl")
    assert result.returncode == 2, result.stderr
    assert "--output merged.jsonl: is also an input of the merge" in result.stderr
    assert shard.read_bytes() == before


def test_report_refuses_an_html_page_that_is_a_hard_link_to_its_results(run_flowrate, tmp_path):
    from tests.helpers import evaluation_row

    results = tmp_path / "rows.jsonl"
    results.write_text(evaluation_row("c1", 0.5).model_dump_json() + "\n")
    before = results.read_bytes()
    os.link(results, tmp_path / "page.html")
    result = run_flowrate("report", "rows.jsonl", "--html", "page.html")
    assert result.returncode == 2, result.stderr
    assert "--html page.html: is also an input of report" in result.stderr
    assert results.read_bytes() == before


def test_bad_input_is_told_before_the_response_cache_is_opened(judge, run_flowrate, tmp_path):
    (tmp_path / "conv.jsonl").write_text('{"id": "a", "turns": []}\n')
    result = run_flowrate("eval", "conv.jsonl", "--api-base", judge.base_url, "--cache-dir", "cache")
    assert result.returncode == 2 and "turns: must not be empty" in result.stderr, result.stderr
    assert not (tmp_path / "cache").exists() and judge.requests == 0


@pytest.mark.parametrize("output", ["rows.jsonl", "rows-link.jsonl"])
def test_labels_template_refuses_to_overwrite_its_results_file(output, run_flowrate, tmp_path):
    from tests.helpers import evaluation_row

    results = tmp_path / "rows.jsonl"
    results.write_text(evaluation_row("c1", 0.5).model_dump_json() + "\n")
    before = results.read_bytes()
    os.link(results, tmp_path / "rows-link.jsonl")
    result = run_flowrate("labels", "template", "rows.jsonl", "-o", output)
    assert result.returncode == 2, result.stderr
    assert f"--output {output}: is also an input of labels template" in result.stderr
    assert "Traceback" not in result.stderr and results.read_bytes() == before


@pytest.mark.parametrize("output", ["out-file.jsonl", "out-link.jsonl"])
def test_batch_import_results_refuses_to_write_its_rows_over_the_batch_output(output, judge, run_flowrate, tmp_path):
    import json

    import orjson

    write_jsonl(tmp_path / "c.jsonl", [turn_record("c1", "hello", "hi")])
    exported = run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "--batch-export", "requests.jsonl")
    assert exported.returncode == 0, exported.stderr
    requests = [orjson.loads(line) for line in (tmp_path / "requests.jsonl").read_bytes().splitlines()]
    batch_output = tmp_path / "out-file.jsonl"
    reply = json.dumps({"reason": "r", "key_issues": [], "verdict": "mostly"})
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}], "usage": {}}
    answers = [{"custom_id": line["custom_id"], "response": {"status_code": 200, "body": body}} for line in requests]
    batch_output.write_text("".join(json.dumps({**answer, "error": None}) + "\n" for answer in answers))
    before = batch_output.read_bytes()
    os.link(batch_output, tmp_path / "out-link.jsonl")
    result = run_flowrate(
        "batch", "import-results", "out-file.jsonl", "c.jsonl", "--api-base", judge.base_url, "-o", output
    )
    assert result.returncode == 2, result.stderr
    assert f"--output {output}: is also an input of batch import-results" in result.stderr
    assert "Traceback" not in result.stderr and batch_output.read_bytes() == before
