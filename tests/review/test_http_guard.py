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
            headers={"Sec-Fetch-Site": "same-origin", "Origin": review.origin, "X-Flowrate-CSRF": csrf},
        )
    assert same.status_code == 200, same.text
    assert history_reviews(history) == [("c0", "conversational_flow_rate", "ann", "none", False)]


def _raw_get(review, path):
    """`GET path` sent as written (no client tidies it), and the answer's status and Location."""
    import http.client

    port = int(review.origin.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("location")
    finally:
        connection.close()


def test_the_token_redirect_goes_only_to_an_address_of_this_server(judged, start_review, tmp_path):
    from urllib.parse import urljoin, urlsplit

    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--reviewer", "ann")
    prefix = review.base[len(review.origin) :]
    for path in ("//evil.example/x", f"{prefix}//evil.example/x", f"{prefix}/\\evil.example/x", "/\\evil.example"):
        status, location = _raw_get(review, f"{path}?token={review.token}")
        if location is not None:  # where a browser goes: this server, whatever the path was
            assert urlsplit(urljoin(review.origin + "/", location)).netloc == review.origin.split("//")[1], location
            assert location.startswith(prefix + "/") and not location.startswith("//"), location
    assert _raw_get(review, f"{prefix}//evil.example/x?token={review.token}")[0] == 303


def test_bodies_and_fields_beyond_their_bounds_are_refused_and_store_nothing(judged, start_review, tmp_path):
    history = tmp_path / "h.duckdb"
    results, _ = judged
    review = start_review(results, "--history", history, "--reviewer", "ann", "--sample-passing", "0")
    answer = {"metric": "conversational_flow_rate", "id": "c0", "value": "none"}
    with httpx.Client() as client:
        client.get(review.url)
        page = client.get(review.base + "/label/conversational_flow_rate?at=1")
        csrf = page.text.split('"csrf":"')[1].split('"')[0]
        headers = {"X-Flowrate-CSRF": csrf}
        target = review.base + "/api/answer"
        huge = client.post(target, json={**answer, "comment": "x" * 2_000_000}, headers=headers)
        long_comment = client.post(target, json={**answer, "comment": "x" * 4001}, headers=headers)
        long_id = client.post(target, json={**answer, "id": "c" * 5000}, headers=headers)

        def chunks():  # no Content-Length: the bound holds while reading
            yield b'{"metric": "conversational_flow_rate", "id": "c0", "value": "none", "comment": "'
            for _ in range(100):
                yield b"y" * 10_000
            yield b'"}'

        streamed = client.post(target, content=chunks(), headers={**headers, "content-type": "application/json"})
        assert (huge.status_code, long_comment.status_code, long_id.status_code) == (413, 400, 400)
        assert streamed.status_code == 413
        assert "4000 characters" in long_comment.json()["error"]
        assert history_reviews(history) == []
        kept = client.post(target, json={**answer, "comment": "z" * 4000}, headers=headers)
    assert kept.status_code == 200, kept.text
    assert [value for _, _, _, value, _ in history_reviews(history)] == ["none"]
