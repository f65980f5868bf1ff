"""The history kept safe: a file that is not one refused before any call, a history another
process holds waited for (and a late failure keeping the rows, with the command that adds them),
a full disk told as exit 4, and a results file with a cut last line read as `--resume` reads it."""

import json
import subprocess
import sys
import threading
import time

import duckdb
import pytest

from tests.helpers import fill_disk, read_rows, small_disk, turn_record, write_jsonl

HOLD = """import duckdb, sys, time
connection = duckdb.connect(sys.argv[1])
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold(path, seconds):
    """Another process holding the history `path` for `seconds` (as the review app does while it
    writes an answer); returns once it holds it."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "holding"
    return holder


def _history_rows(path):
    with duckdb.connect(str(path), read_only=True) as connection:
        return connection.execute("SELECT count(*) FROM rows").fetchone()[0]


def _conversations(tmp_path, count=3, marker="q"):
    return write_jsonl(tmp_path / "c.jsonl", [turn_record(f"c{n}", f"{marker}{n}", "a") for n in range(count)])


def test_a_history_that_is_not_a_duckdb_file_is_refused_by_every_command_before_any_call(judge, run_flowrate, tmp_path):
    path = _conversations(tmp_path)
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    before = (tmp_path / "out.jsonl").read_bytes()
    judge.reset()
    commands = [
        ["eval", path, "--api-base", judge.base_url, "-o", "again.jsonl", "--history", "out.jsonl"],
        ["history", "import", "out.jsonl", "--history", "out.jsonl"],
        ["trends", "--history", "out.jsonl"],
        ["calibrate", "--history", "out.jsonl"],
        ["review", "out.jsonl", "--history", "out.jsonl"],
        ["labels", "import", "out.jsonl", "--history", "out.jsonl"],
    ]
    for command in commands:
        result = run_flowrate(*command)
        assert result.returncode == 2, (command, result.stderr)
        assert "out.jsonl: not a DuckDB database" in result.stderr, command
        assert "Traceback" not in result.stderr
    assert judge.requests == 0
    assert not (tmp_path / "again.jsonl").exists()
    assert (tmp_path / "out.jsonl").read_bytes() == before


def test_eval_waits_for_a_history_another_process_holds_for_a_moment(judge, run_flowrate, tmp_path):
    path = _conversations(tmp_path)
    duckdb.connect(str(tmp_path / "h.duckdb")).close()
    holder = _hold(tmp_path / "h.duckdb", 1.0)
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--history", "h.duckdb")
    holder.wait()
    assert result.returncode == 0, result.stderr
    assert "history h.duckdb: 3 new row(s)" in result.stderr
    assert _history_rows(tmp_path / "h.duckdb") == 3


def test_eval_on_a_history_held_past_the_wait_is_exit_2_before_any_call(judge, run_flowrate, tmp_path, monkeypatch):
    from flowrate.analysis import history

    monkeypatch.setattr(history, "WAIT_FOR_HISTORY_S", 0.3)
    path = _conversations(tmp_path)
    duckdb.connect(str(tmp_path / "h.duckdb")).close()
    holder = _hold(tmp_path / "h.duckdb", 60)
    try:
        result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--history", "h.duckdb")
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2, result.stderr
    assert "--history h.duckdb: in use by another process" in result.stderr
    assert judge.requests == 0 and not (tmp_path / "out.jsonl").exists()


def test_a_history_taken_during_the_run_keeps_the_rows_exits_4_and_prints_the_import_command(
    judge, run_flowrate, tmp_path, monkeypatch
):
    from flowrate.analysis import history

    monkeypatch.setattr(history, "WAIT_FOR_HISTORY_S", 0.3)
    judge.script("SLOW", {"verdict": "fully", "delay": 3.0})
    path = _conversations(tmp_path, 2, marker="SLOW")
    duckdb.connect(str(tmp_path / "h.duckdb")).close()
    holders = []

    def take_the_history_once_judging_began():
        while judge.requests == 0:
            time.sleep(0.05)
        holders.append(_hold(tmp_path / "h.duckdb", 60))

    taker = threading.Thread(target=take_the_history_once_judging_began)
    taker.start()
    try:
        result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--history", "h.duckdb")
    finally:
        taker.join()
        for holder in holders:
            holder.kill()
            holder.wait()
    assert result.returncode == 4, result.stderr
    assert "the history h.duckdb was not updated" in result.stderr and "in use by another process" in result.stderr
    assert "new row(s)" not in result.stderr
    assert len(read_rows(tmp_path / "out.jsonl")) == 2
    told = result.stderr.split("add them to the history later with: ")[1].splitlines()[0]
    assert told.endswith(" history import out.jsonl --history h.duckdb")
    imported = run_flowrate(*told.split()[-5:])
    assert imported.returncode == 0 and "2 new row(s) in h.duckdb" in imported.stderr
    assert _history_rows(tmp_path / "h.duckdb") == 2


def test_eval_history_on_a_full_disk_is_exit_4_naming_the_history_and_stores_nothing_it_reports(
    judge, run_flowrate, tmp_path
):
    path = _conversations(tmp_path, 200)
    with small_disk(tmp_path / "disk", 4096) as disk:
        history_file = disk / "h.duckdb"
        first = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "first.jsonl", "--history", history_file)
        assert first.returncode == 0, first.stderr
        assert _history_rows(history_file) == 200
        filler = fill_disk(disk)
        path = _conversations(tmp_path, 200, marker="grown")  # every conversation changed: judged again
        result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--history", history_file)
        assert result.returncode == 4, result.stderr
        assert f"the history {history_file} was not updated" in result.stderr
        assert "Traceback" not in result.stderr and "new row(s)" not in result.stderr
        assert len(read_rows(tmp_path / "out.jsonl")) == 200
        assert f"history import out.jsonl --history {history_file}" in result.stderr
        filler.unlink()
        assert _history_rows(history_file) == 200
        assert run_flowrate("history", "import", "out.jsonl", "--history", history_file).returncode == 0
        assert _history_rows(history_file) == 400


@pytest.mark.parametrize("command", ["history import", "trends", "review"])
def test_a_results_file_with_a_cut_last_line_is_read_as_resume_reads_it(command, judge, run_flowrate, tmp_path):
    path = _conversations(tmp_path)
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    whole = (tmp_path / "out.jsonl").read_bytes()
    (tmp_path / "out.jsonl").write_bytes(whole[: whole.rfind(b"\n", 0, len(whole) - 1) + 40])  # as kill -9 leaves it
    if command == "history import":
        result = run_flowrate("history", "import", "out.jsonl", "--history", "h.duckdb")
        assert result.returncode == 0, result.stderr
        assert "2 new row(s) in h.duckdb" in result.stderr
    elif command == "trends":
        result = run_flowrate("trends", "out.jsonl", "--json")
        assert result.returncode == 0, result.stderr
        assert [point["conversations"] for point in json.loads(result.stdout)] == [2]
    else:
        from flowrate.review.server import ReviewOptions, prepare

        state, told = prepare(ReviewOptions(results=[tmp_path / "out.jsonl"], history=tmp_path / "h.duckdb"))
        assert told == [f"{tmp_path / 'out.jsonl'}: 2 new row(s) added to the history {tmp_path / 'h.duckdb'}"]
        return
    assert "Traceback" not in result.stderr


def test_the_review_app_waits_for_a_history_an_eval_holds_for_a_moment(judge, run_flowrate, tmp_path):
    from flowrate.review.server import ReviewOptions, prepare

    path = _conversations(tmp_path)
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--history", "h.duckdb")
    holder = _hold(tmp_path / "h.duckdb", 1.0)  # as an eval adding its rows
    state, told = prepare(ReviewOptions(results=[tmp_path / "out.jsonl"], history=tmp_path / "h.duckdb"))
    holder.wait()
    assert told == [f"{tmp_path / 'out.jsonl'}: 0 new row(s) added to the history {tmp_path / 'h.duckdb'}"]
    holder = _hold(tmp_path / "h.duckdb", 1.0)
    assert state.own_answers("conversational_flow_rate", "ana") == {}  # an answer's read, once the eval is done
    holder.wait()
