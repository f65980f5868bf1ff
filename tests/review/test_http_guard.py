"""The review server's guard over plain HTTP, as a client that is not a browser sends it: no
token, a forged Host header and cross-site posts are refused, and the refused post stores nothing."""

import httpx

from tests.review.conftest import history_reviews


def test_the_server_listens_on_loopback_and_prints_its_address_with_a_token(judged, start_review, tmp_path):
    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--reviewer", "ann")
    assert review.url.startswith("http://127.0.0.1:")
    assert len(review.token) >= 24
    with httpx.Client() as client:
        page = client.get(review.url, follow_redirects=True)
    assert page.status_code == 200 and "results.jsonl" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]


def test_a_request_without_the_token_or_with_a_wrong_one_is_refused(judged, start_review, tmp_path):
    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--reviewer", "ann")
    with httpx.Client() as client:
        bare = client.get(review.base + "/")
        wrong = client.get(review.base + "/?token=" + "x" * len(review.token))
        row = client.get(review.base + "/row?id=c0&metric=conversational_flow_rate")
    assert [bare.status_code, wrong.status_code, row.status_code] == [403, 403, 403]
    assert "c0" not in row.text and "token" in bare.text


def test_a_forged_host_header_is_refused_even_with_the_token(judged, start_review, tmp_path):
    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--reviewer", "ann")
    with httpx.Client() as client:
        forged = client.get(review.url, headers={"Host": "evil.example"})
        rebound = client.get(review.url, headers={"Host": f"evil.example:{review.base.rsplit(':', 1)[1]}"})
        good = client.get(review.url)
    assert forged.status_code == 403 and rebound.status_code == 403
    assert "Host" in forged.text
    assert good.status_code == 303 and "set-cookie" in good.headers


def test_a_cross_site_post_is_refused_and_stores_nothing(judged, start_review, tmp_path):
    results, _ = judged
    history = tmp_path / "h.duckdb"
    review = start_review(results, "--history", history, "--reviewer", "ann", "--sample-passing", "0")
    answer = {"metric": "conversational_flow_rate", "id": "c0", "value": "none"}
    with httpx.Client() as client:
        client.get(review.url)  # the cookie, as a browser holding it would send it
        page = client.get(review.base + "/label/conversational_flow_rate?at=1")
        csrf = page.text.split('"csrf":"')[1].split('"')[0]
        target = review.base + "/api/answer"
        refused = [
            client.post(target, json=answer, headers={"Sec-Fetch-Site": "cross-site", "X-Flowrate-CSRF": csrf}),
            client.post(target, json=answer, headers={"Origin": "http://evil.example", "X-Flowrate-CSRF": csrf}),
            client.post(target, data={"value": "none", "metric": "conversational_flow_rate", "id": "c0"}),
            client.post(target, json=answer),  # no CSRF token
            client.post(target, content=str(answer), headers={"Content-Type": "text/plain", "X-Flowrate-CSRF": csrf}),
        ]
        assert [response.status_code for response in refused] == [403] * 5
        assert history_reviews(history) == []
        same = client.post(
            target,
            json=answer,
            headers={"Sec-Fetch-Site": "same-origin", "Origin": review.base, "X-Flowrate-CSRF": csrf},
        )
    assert same.status_code == 200, same.text
    assert history_reviews(history) == [("c0", "conversational_flow_rate", "ann", "none", False)]
