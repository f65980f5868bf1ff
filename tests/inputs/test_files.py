"""The input paths: each file read once however it is named, stdin, the automatic ids, and results
files passed over."""

import json

from tests.helpers import distinct, read_rows, turn_record, write_jsonl


def test_stdin_named_twice_is_read_once(judge, run_process):
    text = "".join(json.dumps(record) + "\n" for record in distinct(2))
    result = run_process("eval", "-", "-", "--api-base", judge.base_url, "-o", "-", input=text)
    assert result.returncode == 0, result.stderr
    assert sorted(json.loads(line)["id"] for line in result.stdout.splitlines()) == ["c0", "c1"]


def test_a_path_given_twice_is_read_once(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(5))
    result = run_flowrate("eval", "c.jsonl", tmp_path / "c.jsonl", ".", "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert len(read_rows(tmp_path / "out.jsonl")) == 5 and judge.requests == 5


def test_automatic_ids_use_the_path_inside_the_given_directory(judge, run_flowrate, tmp_path):
    for name in ("sub1", "sub2"):
        (tmp_path / "logs" / name).mkdir(parents=True)
        write_jsonl(tmp_path / "logs" / name / "t.jsonl", [turn_record(None, f"hi from {name}", "hello")])
    result = run_flowrate("eval", "logs", "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert sorted(row["id"] for row in read_rows(tmp_path / "out.jsonl")) == ["sub1/t.jsonl:1", "sub2/t.jsonl:1"]


def test_the_default_output_and_other_results_files_are_not_read_as_input(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(2))
    assert run_flowrate("eval", ".", "--api-base", judge.base_url).returncode == 0
    again = run_flowrate("eval", ".", "--api-base", judge.base_url)
    assert again.returncode == 0, again.stderr
    (tmp_path / "flowrate-results.jsonl").rename(tmp_path / "old.jsonl")
    third = run_flowrate("eval", ".", "--api-base", judge.base_url)
    assert third.returncode == 0 and "old.jsonl: passed over, it is a flowrate results file" in third.stderr
    named = run_flowrate("eval", "old.jsonl", "--api-base", judge.base_url)
    assert named.returncode == 2 and "this is a flowrate results file, not conversations" in named.stderr
