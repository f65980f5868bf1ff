"""`flowrate review`'s command line: another host than loopback only with --allow-remote, and
then with a warning; plain errors for bad arguments; the results given go into the history."""

import duckdb
import httpx

from tests.review.conftest import FAILING, PASSING


def test_a_host_other_than_loopback_is_refused_without_allow_remote(run_flowrate, tmp_path):
    result = run_flowrate("review", "--host", "0.0.0.0", "--history", tmp_path / "h.duckdb")
    assert result.returncode == 2
    assert "--host 0.0.0.0: not a loopback address" in result.stderr and "--allow-remote" in result.stderr
    assert not (tmp_path / "h.duckdb").exists()


def test_allow_remote_serves_another_host_with_a_warning(judged, start_review, tmp_path):
    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--host", "127.0.0.2", "--allow-remote")
    assert review.url.startswith("http://127.0.0.2:")
    assert any("warning: serving on 127.0.0.2" in line for line in review.said)
    with httpx.Client() as client:
        assert client.get(review.url, follow_redirects=True).status_code == 200


def test_bad_arguments_are_plain_errors(run_flowrate, tmp_path):
    missing = run_flowrate("review", tmp_path / "nope.jsonl", "--history", tmp_path / "h.duckdb")
    share = run_flowrate("review", "--sample-passing", "1.5", "--history", tmp_path / "h.duckdb")
    assert (missing.returncode, share.returncode) == (2, 2)
    assert "nope.jsonl: no such results file" in missing.stderr and "Traceback" not in missing.stderr
    assert "--sample-passing 1.5" in share.stderr


def test_the_results_given_are_imported_into_the_history_once(judged, start_review, tmp_path):
    results, _ = judged
    history = tmp_path / "h.duckdb"
    first = start_review(results, "--history", history)
    assert any(f"{FAILING + PASSING} new row(s)" in line for line in first.said)
    first.stop()
    second = start_review(results, "--history", history)
    assert any("0 new row(s)" in line for line in second.said)
    second.stop()
    with duckdb.connect(str(history), read_only=True) as connection:
        assert connection.execute("SELECT count(*) FROM rows").fetchone()[0] == FAILING + PASSING
