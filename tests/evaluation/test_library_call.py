"""`evaluate_files` is `flowrate eval` as one library call: the same rows, gates, resume, reports
and history, listeners told each row, and the same errors."""

import pytest

from flowrate import EvalSettings, Evaluation, RunListener, evaluate_files
from flowrate.errors import InputError, OutputError
from tests.helpers import distinct, read_rows, transport, write_jsonl


class Seen(RunListener):
    def __init__(self):
        self.events = []

    def started(self, total_rows):
        self.events.append(("started", total_rows))

    def row(self, row):
        self.events.append(("row", row.id))

    def resumed(self, row):
        self.events.append(("resumed", row.id))

    def finished(self, summary):
        self.events.append(("finished", summary.judged))


def settings(judge, tmp_path, **options):
    return EvalSettings(
        api_base=judge.base_url, output=str(tmp_path / "out.jsonl"), cache_dir=str(tmp_path / "cache"), backoff=0,
        backoff_max=0, transport=transport(), **options,
    )  # fmt: skip


def test_evaluate_files_writes_the_rows_applies_the_gates_and_tells_its_listeners(judge, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    judge.script("question c3", {"verdict": "none", "reason": "off", "key_issues": ["turn 1: ignored"]})
    seen = Seen()
    evaluation = evaluate_files(
        [str(path)], settings(judge, tmp_path, min_pass_rate=0.5, junit=str(tmp_path / "j.xml")), [seen]
    )
    assert isinstance(evaluation, Evaluation)
    assert sorted(row["id"] for row in read_rows(tmp_path / "out.jsonl")) == ["c0", "c1", "c2", "c3"]
    assert evaluation.summary.judged == 4 and evaluation.summary.failed == 1
    assert [gate.passed for gate in evaluation.summary.gates] == [True] and int(evaluation.exit_code) == 0
    assert (tmp_path / "j.xml").exists() and evaluation.reports == [f"JUnit report: {tmp_path / 'j.xml'}"]
    assert seen.events[0] == ("started", 4) and seen.events[-1] == ("finished", 4)
    assert sorted(name for kind, name in seen.events if kind == "row") == ["c0", "c1", "c2", "c3"]


def test_evaluate_files_resumes_as_eval_does_and_tells_the_rows_it_kept(judge, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    evaluate_files([str(path)], settings(judge, tmp_path, limit=2))
    judge.reset()
    seen = Seen()
    evaluation = evaluate_files([str(path)], settings(judge, tmp_path, resume=True), [seen])
    assert judge.requests == 1 and evaluation.summary.resumed == 2
    assert sorted(name for kind, name in seen.events if kind == "resumed") == ["c0", "c1"]
    assert len(read_rows(tmp_path / "out.jsonl")) == 3


def test_evaluate_files_raises_the_errors_eval_exits_with(judge, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    (tmp_path / "bad.jsonl").write_text('{"turns": []}\n')
    with pytest.raises(InputError) as raised:
        evaluate_files([str(tmp_path / "bad.jsonl")], settings(judge, tmp_path))
    assert int(raised.value.exit_code) == 2 and judge.requests == 0
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    with pytest.raises(OutputError, match="a report could not be written"):
        evaluate_files([str(path)], settings(judge, tmp_path, junit="/dev/full"))
    assert len(read_rows(tmp_path / "out.jsonl")) == 2  # the rows were written before the report failed
