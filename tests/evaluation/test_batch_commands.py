"""`flowrate batch status`, `collect` and `cancel`: what they say of each batch, unknown ids, the
provider's errors as one plain line, and no LiteLLM warning on the terminal."""

import re

from tests.helpers import batch_args, read_rows, write_jsonl
from tests.helpers import batch_conversations as conversations


def submitted_id(result) -> str:
    """The batch id a `--batch-submit-only` run printed."""
    found = re.search(r"submitted 1 batch\(es\): (\S+)", result.stderr)
    assert found, result.stderr
    return found.group(1)


def submit_only(batch_server, run_flowrate, tmp_path, count=2) -> str:
    write_jsonl(tmp_path / "c.jsonl", conversations(count))
    return submitted_id(run_flowrate(*batch_args(batch_server, "--batch-submit-only")))


def test_status_and_cancel(batch_server, judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(2))
    batch_server.polls_to_finish = 10_000
    assert run_flowrate(*batch_args(batch_server, "--batch-submit-only")).returncode == 0
    status = run_flowrate("batch", "status")
    assert status.returncode == 0 and "2 requests" in status.stderr and "in_progress, 0 done" in status.stderr
    cancelled = run_flowrate("batch", "cancel", "--all")
    assert cancelled.returncode == 0 and batch_server.cancelled == 1
    batch_server.polls_to_finish = 1
    collected = run_flowrate("batch", "collect")
    assert collected.returncode == 0 and len(read_rows(tmp_path / "out.jsonl")) == 2, collected.stderr  # online


def test_cancel_all_with_nothing_to_cancel_says_so_and_exits_0(batch_server, judge, run_flowrate, tmp_path):
    fresh = run_flowrate("batch", "cancel", "--all")
    assert fresh.returncode == 0 and fresh.stderr.strip() == "flowrate: no batches to cancel", fresh.stderr
    write_jsonl(tmp_path / "c.jsonl", conversations(2))
    assert run_flowrate(*batch_args(batch_server)).returncode == 0  # submitted and collected
    collected = run_flowrate("batch", "cancel", "--all")
    assert collected.returncode == 0 and collected.stderr.strip() == "flowrate: no batches to cancel"
    assert batch_server.cancelled == 0
    unnamed = run_flowrate("batch", "cancel")
    assert unnamed.returncode == 2 and "name the batches to cancel, or --all" in unnamed.stderr


def test_cancelling_a_finished_batch_reports_it_finished_and_cancels_nothing(
    batch_server, judge, run_flowrate, tmp_path
):
    batch_id = submit_only(batch_server, run_flowrate, tmp_path)
    assert "completed, 2 done" in run_flowrate("batch", "status").stderr  # the fake finishes it when asked
    result = run_flowrate("batch", "cancel", "--all")
    assert result.returncode == 0, result.stderr
    assert (
        f"{batch_id}: already completed, nothing to cancel" in result.stderr
        and "cancelled " + batch_id not in result.stderr
    )
    assert batch_server.cancelled == 0
    collected = run_flowrate("batch", "collect")
    rows = read_rows(tmp_path / "out.jsonl")
    assert collected.returncode == 0 and len(rows) == 2 and all(row["batch"] for row in rows) and judge.requests == 0


def test_cancelling_a_running_batch_reports_the_state_the_provider_gives(batch_server, judge, run_flowrate, tmp_path):
    batch_server.polls_to_finish = 10_000
    batch_id = submit_only(batch_server, run_flowrate, tmp_path)
    result = run_flowrate("batch", "cancel", batch_id)
    assert result.returncode == 0 and f"{batch_id}: cancelling" in result.stderr, result.stderr
    assert batch_server.cancelled == 1
    assert f"{batch_id}: 2 requests" in (status := run_flowrate("batch", "status").stderr) and "cancelled" in status


def test_an_unknown_batch_id_is_an_error_naming_it_and_the_known_ones(batch_server, judge, run_flowrate, tmp_path):
    batch_server.polls_to_finish = 10_000
    batch_id = submit_only(batch_server, run_flowrate, tmp_path)
    for command in ("collect", "status", "cancel"):
        result = run_flowrate("batch", command, "bogus-id")
        assert result.returncode == 2, (command, result.stderr)
        assert "unknown batch id bogus-id" in result.stderr and batch_id in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    out = tmp_path / "out.jsonl"
    assert batch_server.cancelled == 0 and not (out.exists() and out.read_text().strip())
    assert "in_progress" in run_flowrate("batch", "status", batch_id).stderr  # still recorded, still running


def test_a_fresh_state_names_no_known_batch(batch_server, judge, run_flowrate):
    result = run_flowrate("batch", "collect", "bogus-id")
    assert result.returncode == 2 and "unknown batch id bogus-id; no batch is recorded" in result.stderr


def test_a_provider_error_in_a_batch_command_is_one_plain_line(batch_server, judge, run_flowrate, tmp_path):
    batch_id = submit_only(batch_server, run_flowrate, tmp_path)
    batch_server.batches.clear()  # the provider no longer knows it
    result = run_flowrate("batch", "status")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert re.fullmatch(
        rf"flowrate: error: the batch API at {re.escape(batch_server.base_url)} refused to retrieve batch {batch_id}"
        r" \(404\): .*No batch found.*",
        result.stderr.strip(),
    ), result.stderr


def test_no_litellm_coroutine_warning_reaches_the_terminal(batch_server, judge, run_process, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", conversations(3))
    runs = [run_process(*batch_args(batch_server))]
    runs.append(run_process(*batch_args(batch_server, "--batch-submit-only", "--no-cache", output="later.jsonl")))
    runs.append(run_process("batch", "status"))  # retrieves a finished batch, as collect does
    runs.append(run_process("batch", "collect"))
    assert [run.returncode for run in runs] == [0, 0, 0, 0], [run.stderr for run in runs]
    for run in runs:
        assert "never awaited" not in run.stderr and "Warning" not in run.stderr, run.stderr
    assert len(read_rows(tmp_path / "later.jsonl")) == 3


def test_a_restarted_server_numbering_its_batches_again_gives_two_batches_status_and_collect_see(
    batch_server, judge, run_flowrate, tmp_path
):
    import itertools

    write_jsonl(tmp_path / "c.jsonl", conversations(2))
    batch_server.polls_to_finish = 10_000
    batch_server._ids = itertools.count(1)
    first = run_flowrate(*batch_args(batch_server, "--batch-submit-only"))
    batch_server._ids = itertools.count(1)  # the server restarted: its ids begin at 1 again
    second = run_flowrate(*batch_args(batch_server, "--batch-submit-only", "--no-cache", output="later.jsonl"))
    assert submitted_id(first) == submitted_id(second), second.stderr
    status = run_flowrate("batch", "status", "--all")
    assert status.returncode == 0, status.stderr
    lines = [line for line in status.stderr.splitlines() if line.startswith(submitted_id(first))]
    assert (
        len(lines) == 2 and any("out.jsonl" in line for line in lines) and any("later.jsonl" in line for line in lines)
    )
    assert all(f" at {batch_server.base_url}" in line for line in lines)
    batch_server.polls_to_finish = 1
    collected = run_flowrate("batch", "collect")
    assert collected.returncode == 0, collected.stderr
    assert len(read_rows(tmp_path / "out.jsonl")) == 2 and len(read_rows(tmp_path / "later.jsonl")) == 2
