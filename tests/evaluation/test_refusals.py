"""A judge that refuses every call the same way (an invalid request) stops the run early, and the
conversations it never sent are skipped as refused, each once, with a way to continue."""

from tests.helpers import PYDANTIC_500, distinct, read_rows, write_jsonl


def test_a_run_the_judge_refuses_every_time_names_the_refusal_and_skips_the_rest(judge, run_flowrate, tmp_path):
    judge.script("question", PYDANTIC_500)
    path = write_jsonl(tmp_path / "c.jsonl", distinct(30))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "1", "--junit", "j.xml", "-o", "out.jsonl")
    assert result.returncode == 3, result.stderr
    assert "stopped: the judge refused every call the same way" in result.stderr
    assert "--retry-errors" in result.stderr and "refused: " in result.stderr
    errors = {row["id"] for row in read_rows(tmp_path / "out.jsonl")}
    skipped = int(result.stderr.split("refused: ")[1].split(" ")[0])
    assert len(errors) + skipped == 30 and len(errors) < 30  # each conversation once: an error row or skipped
    import xml.etree.ElementTree as ElementTree

    suite = ElementTree.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert sum(1 for case in suite.iter("testcase") if case.find("skipped") is not None) == skipped
