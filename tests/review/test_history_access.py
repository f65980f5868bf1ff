"""The app opens the history only for the moment of each read or answer: another command can
read the file while the app runs, and an answer given while another process holds the file
waits for it and is then stored."""

import threading
import time

import duckdb
import httpx

from tests.review.conftest import history_reviews


def _client_with_csrf(review):
    client = httpx.Client()
    client.get(review.url)
    page = client.get(review.base + "/label/conversational_flow_rate?at=1")
    return client, page.text.split('"csrf":"')[1].split('"')[0]


def test_another_process_reads_the_history_while_the_app_runs(judged, start_review, run_process, tmp_path):
    results, _ = judged
    history = tmp_path / "h.duckdb"
    review = start_review(results, "--history", history, "--reviewer", "ann", "--sample-passing", "0")
    client, csrf = _client_with_csrf(review)
    answer = {"metric": "conversational_flow_rate", "id": "c0", "value": "partial"}
    assert client.post(review.base + "/api/answer", json=answer, headers={"X-Flowrate-CSRF": csrf}).status_code == 200
    client.close()
    calibrate = run_process("calibrate", "--history", history, "--json")
    assert calibrate.returncode == 0, calibrate.stderr
    assert '"conversational_flow_rate"' in calibrate.stdout and '"labels":1' in calibrate.stdout.replace(" ", "")


def test_an_answer_given_while_another_process_holds_the_history_waits_and_is_stored(judged, start_review, tmp_path):
    results, _ = judged
    history = tmp_path / "h.duckdb"
    review = start_review(results, "--history", history, "--reviewer", "ann", "--sample-passing", "0")
    client, csrf = _client_with_csrf(review)
    held = duckdb.connect(str(history), read_only=True)  # this process holds the file: the app cannot open it
    threading.Timer(1.5, held.close).start()
    began = time.monotonic()
    answer = {"metric": "conversational_flow_rate", "id": "c0", "value": "none"}
    response = client.post(review.base + "/api/answer", json=answer, headers={"X-Flowrate-CSRF": csrf}, timeout=30)
    client.close()
    assert response.status_code == 200, response.text
    assert time.monotonic() - began >= 1.0
    assert [(key, value) for key, _, _, value, _ in history_reviews(history)] == [("c0", "none")]
