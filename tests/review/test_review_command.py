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


def test_every_address_of_127_0_0_0_8_is_loopback_and_served_without_allow_remote(judged, start_review, tmp_path):
    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--host", "127.0.0.2")
    assert review.url.startswith("http://127.0.0.2:")
    assert not any("warning" in line for line in review.said)
    with httpx.Client() as client:
        assert client.get(review.url, follow_redirects=True).status_code == 200


def _through_host(review, host):
    """The app's start page asked for at 127.0.0.1 with `Host: host:PORT`, as a remote browser
    that reached the machine under that name sends it: the answers to the token and the page."""
    port = review.origin.rsplit(":", 1)[1]
    path = review.url.split(f":{port}", 1)[1]
    with httpx.Client(headers={"Host": f"{host}:{port}"}) as client:
        first = client.get(f"http://127.0.0.1:{port}{path}")
        page = client.get(f"http://127.0.0.1:{port}" + first.headers.get("location", "/"))
    return first.status_code, page.status_code


def test_allow_remote_accepts_the_allowed_host_names_says_which_and_refuses_others(judged, start_review, tmp_path):
    results, _ = judged
    review = start_review(
        results, "--history", tmp_path / "h.duckdb", "--host", "0.0.0.0", "--allow-remote",
        "--allowed-host", "review.example", "--allowed-host", "10.1.2.3",
    )  # fmt: skip
    assert any("warning: serving on 0.0.0.0" in line for line in review.said)
    opened = next(line for line in review.said if " open http://" in line)
    assert review.url.startswith("http://review.example:")
    assert "Host names accepted: 127.0.0.1, localhost, [::1], review.example, 10.1.2.3" in opened
    assert _through_host(review, "review.example") == (303, 200)
    assert _through_host(review, "10.1.2.3") == (303, 200)
    assert _through_host(review, "evil.example")[0] == 403


def test_allow_remote_accepts_this_machines_own_name_by_default(judged, start_review, tmp_path):
    import socket

    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--host", "0.0.0.0", "--allow-remote")
    assert _through_host(review, socket.gethostname()) == (303, 200)
    assert _through_host(review, "evil.example")[0] == 403


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
