"""The results file: never an input, its path checked before the first call, the previous results
kept until a row is written, and a full disk stopping the run."""

from tests.helpers import distinct, read_rows, turn_record, two_metric_rows, write_jsonl, write_rows
from tests.helpers import march_label as label


def test_an_output_that_is_an_input_is_refused_before_anything_is_opened(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "same.jsonl", distinct(3))
    before = path.read_bytes()
    result = run_flowrate("eval", path, "-o", path, "--api-base", judge.base_url)
    assert result.returncode == 2 and path.read_bytes() == before and judge.requests == 0
    assert "is both an input and the --output file" in result.stderr
    data = tmp_path / "data"
    data.mkdir()
    inside = write_jsonl(data / "chats.jsonl", distinct(2))
    result = run_flowrate("eval", data, "-o", inside, "--api-base", judge.base_url)
    assert result.returncode == 2 and inside.read_bytes() and judge.requests == 0
    merged = run_flowrate("merge", "same.jsonl", "-o", "same.jsonl")
    assert merged.returncode == 2 and "is also an input of the merge" in merged.stderr
    assert path.read_bytes() == before


def test_calibrate_refuses_an_adjusted_output_that_is_one_of_its_inputs(run_flowrate, tmp_path):
    rows = write_rows(tmp_path / "rows.jsonl", two_metric_rows())
    labels = write_jsonl(tmp_path / "labels.jsonl", [label("c1", "a", 0.2)])
    assert run_flowrate("history", "import", "rows.jsonl", "--history", "h.duckdb").returncode == 0
    before = {path: path.read_bytes() for path in (rows, labels, tmp_path / "h.duckdb")}
    for given, target in (
        (["rows.jsonl", "--labels", "labels.jsonl"], "./rows.jsonl"),
        (["rows.jsonl", "--labels", "labels.jsonl"], "labels.jsonl"),
        (["--history", "h.duckdb"], str(tmp_path / "h.duckdb")),
    ):
        result = run_flowrate("calibrate", *given, "--adjusted-output", target)
        assert result.returncode == 2, result.stderr
        assert f"--adjusted-output {target}: is also an input" in result.stderr
    assert {path: path.read_bytes() for path in before} == before


def test_output_path_problems_are_plain_exit_2_before_any_call(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    (tmp_path / "somedir").mkdir()
    for output, message in (("nodir/out.jsonl", "the directory nodir does not exist"), ("somedir", "is a directory")):
        result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", output)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    merged = run_flowrate("merge", "c.jsonl", "-o", "nodir/x")
    assert merged.returncode == 2 and "the directory nodir does not exist" in merged.stderr
    assert judge.requests == 0


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


def test_a_results_file_on_a_full_disk_stops_the_run_with_exit_4_and_a_resume_command(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(40))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "/dev/full", "-j", "1")
    assert result.returncode == 4, result.stderr
    assert "writing the results stopped: /dev/full: No space left on device" in result.stderr
    assert "--resume" in result.stderr and "Traceback" not in result.stderr
    assert judge.requests < 40  # it stopped scheduling


def test_after_a_full_disk_the_summary_counts_only_whole_rows_the_rest_as_skipped_and_names_the_report(
    judge, run_flowrate, tmp_path
):
    from tests.helpers import fill_disk, small_disk

    path = write_jsonl(tmp_path / "c.jsonl", [turn_record(f"c{n:02}", f"question {n}", "answer") for n in range(30)])
    with small_disk(tmp_path / "disk", 256) as disk:
        fill_disk(disk, leave_bytes=8192)
        result = run_flowrate(
            "eval",
            path,
            "--api-base",
            judge.base_url,
            "-j",
            "1",
            "-o",
            disk / "out.jsonl",
            "--junit",
            disk / "r.xml",
            "--output-parquet",
            tmp_path / "rows.parquet",
        )
        text = (disk / "out.jsonl").read_bytes()
        left = sorted(item.name for item in disk.iterdir())
    assert result.returncode == 4, result.stderr
    whole = text.count(b"\n")
    assert 0 < whole < 30 and not text.endswith(b"\n")  # the disk filled up inside a row
    assert f"passed {whole}  failed 0  errors 0  skipped {30 - whole}" in result.stderr
    assert f"a report could not be written (--junit {disk / 'r.xml'})" in result.stderr
    assert left == ["filler", "out.jsonl"]  # no JUnit file, whole or half, and no temporary one
    import duckdb

    parquet = str(tmp_path / "rows.parquet")
    assert duckdb.connect().execute("SELECT count(*) FROM read_parquet(?)", [parquet]).fetchone() == (whole,)


def test_on_a_full_disk_every_report_and_copy_not_written_is_named(judge, run_flowrate, tmp_path):
    from tests.helpers import fill_disk, small_disk

    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    with small_disk(tmp_path / "disk", 256) as disk:
        fill_disk(disk)
        reports = {"--junit": disk / "r.xml", "--html": disk / "r.html", "--output-parquet": disk / "rows.parquet"}
        given = [str(item) for option, target in reports.items() for item in (option, target)]
        result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", tmp_path / "out.jsonl", *given)
        left = sorted(item.name for item in disk.iterdir())
    assert result.returncode == 4, result.stderr
    assert len(read_rows(tmp_path / "out.jsonl")) == 3  # the results file was on another disk
    for option, target in reports.items():
        assert f"{option} {target}" in result.stderr, (option, result.stderr)
    assert result.stderr.count("No space left on device") == 3 and "Traceback" not in result.stderr
    assert f"--output-parquet {reports['--output-parquet']}: cannot be written (No space left on device)" in (
        result.stderr
    )
    assert left == ["filler"]


def test_a_report_written_beside_one_that_failed_is_still_named(judge, run_flowrate, tmp_path):
    from xml.etree import ElementTree

    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    result = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--html", "/dev/full", "--junit", "r.xml"
    )
    assert result.returncode == 4, result.stderr
    assert "a report could not be written (--html /dev/full): No space left on device" in result.stderr
    assert "JUnit report: r.xml" in result.stderr
    assert len(ElementTree.parse(tmp_path / "r.xml").getroot().findall(".//testcase")) == 3


def test_a_github_step_summary_the_disk_cannot_take_is_named_beside_the_reports_that_were_written(
    judge, run_flowrate, tmp_path, cli_env
):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    env = {**cli_env, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": "/dev/full"}
    result = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--junit", "r.xml", "--html", "r.html", env=env
    )
    assert result.returncode == 4, result.stderr
    assert "a report could not be written (the GitHub step summary /dev/full): No space left on device" in (
        result.stderr
    )
    assert "JUnit report: r.xml" in result.stderr and "HTML report: r.html" in result.stderr
    assert (tmp_path / "r.xml").stat().st_size and (tmp_path / "r.html").stat().st_size
