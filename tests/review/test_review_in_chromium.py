"""The review app in headless Chromium (Debian's, through playwright), over rows a real `flowrate
eval` made against the scripted judge: labelling by keyboard in blind mode, answers in the
history the moment they are given, two reviewers blind to each other, a row's exact prompt and
reply, and hostile conversation text drawn as text."""

import json
import re

import pytest

from tests.helpers import CHROMIUM, CHROMIUM_ARGS, long_conversation, turn_record, watched, write_jsonl
from tests.review.conftest import FAILING, HOSTILE, history_reviews

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)"
)
FLOW = "conversational_flow_rate"
SAVED_GREEN, FAILED_RED = "rgb(26, 127, 55)", "rgb(207, 34, 46)"  # style.css's colours, as Chromium computes them


def colour(page, selector):
    """The text colour Chromium computes for the element at `selector`."""
    return page.locator(selector).evaluate("element => getComputedStyle(element).color")


def open_context(chromium, review, errors):
    """A browser context of its own (its own cookies), offline but for the review server."""
    context = chromium.new_context()
    context.route(
        "**/*", lambda route: route.continue_() if route.request.url.startswith(review.base) else route.abort()
    )
    page = watched(context.new_page(), errors)
    page.goto(review.url)  # the token once; a cookie from then on
    return context, page


def test_five_conversations_labelled_by_keyboard_in_blind_mode_are_in_the_history(
    judged, start_review, chromium, tmp_path
):
    results, _ = judged
    history = tmp_path / "h.duckdb"
    review = start_review(results, "--history", history, "--reviewer", "ann", "--sample-passing", "0")
    errors = []
    _, page = open_context(chromium, review, errors)
    page.goto(review.base + f"/label/{FLOW}")
    given = []
    for n in range(FAILING):
        assert page.locator("#position").inner_text().startswith(f"{n + 1} of {FAILING}")
        assert page.locator("#verdict").count() == 0  # blind: nothing of the judge on the page
        assert "reason" not in page.locator("main").inner_text() and page.locator(".issue").count() == 0
        assert page.get_by_role("button", name="fully", exact=True).count() == 1
        assert page.get_by_role("button", name="none", exact=True).count() == 1
        key = str(n % 5 + 1)  # 1 fully, 2 mostly, ... as each button's shortcut shows
        value = page.locator(f'#answers button[data-key="{key}"]').inner_text()
        page.keyboard.press(key)
        page.locator("#saved").filter(has_text=f"saved: {value}").wait_for()
        assert colour(page, "#saved") == SAVED_GREEN
        given.append((page.locator("#conversation").inner_text(), value))
        assert page.locator("#verdict").inner_text() == "minor"  # shown once answered
        assert page.locator(".turn[data-turn='2'] .issue").count() == 1
        if n < FAILING - 1:
            with page.expect_navigation():
                page.keyboard.press("j")
    stored = history_reviews(history)  # in the file already, while the server runs
    assert [(key, value) for key, _, _, value, _ in stored] == given
    assert {(metric, reviewer, shown) for _, metric, reviewer, _, shown in stored} == {(FLOW, "ann", False)}
    page.reload()
    assert page.locator("#yours").inner_text() == f"your answer: {given[-1][1]}"
    with page.expect_navigation():
        page.keyboard.press("k")
    assert page.locator("#position").inner_text().startswith(f"{FAILING - 1} of")
    assert page.locator("#yours").inner_text() == f"your answer: {given[-2][1]}"
    assert page.locator("#verdict").inner_text() == "minor"
    assert page.locator("#answers button[aria-pressed='true']").inner_text() == given[-2][1]
    page.keyboard.press("c")
    page.keyboard.type("changed my mind")
    page.keyboard.press("Escape")
    page.keyboard.press("5")
    page.locator("#saved").filter(has_text="saved: none").wait_for()
    review.process.kill()  # nothing is kept in memory only
    review.process.wait()
    trail = history_reviews(history)
    assert len(trail) == FAILING + 1 and trail[-1] == (given[-2][0], FLOW, "ann", "none", True)
    import duckdb

    with duckdb.connect(str(history), read_only=True) as connection:
        comments = connection.execute("SELECT comment FROM reviews ORDER BY answered_at").fetchall()
    assert comments == [(None,)] * FAILING + [("changed my mind",)]  # the earlier answer kept as it was
    assert errors == []


def test_two_reviewers_label_one_conversation_each_without_seeing_the_other(judged, start_review, chromium, tmp_path):
    results, _ = judged
    history = tmp_path / "h.duckdb"
    review = start_review(results, "--history", history, "--sample-passing", "0")
    errors = []
    pages = {}
    for name, key, comment in (("Annika Q", "3", "a private note of Annika"), ("Bob Z", "5", "")):
        _, page = open_context(chromium, review, errors)
        page.goto(review.base + f"/label/{FLOW}")
        page.locator("#name").fill(name)
        with page.expect_navigation():
            page.locator("#name-form button").click()
        assert page.locator("#reviewer").inner_text() == name
        conversation = page.locator("#conversation").inner_text()
        assert page.locator("#yours").inner_text() == ""  # the other's answer is nowhere
        assert page.locator("#answers button[aria-pressed='true']").count() == 0
        assert page.locator("#verdict").count() == 0  # nor the judge's, in blind mode
        pages[name] = [page.content()]
        page.locator("#comment").fill(comment)
        page.locator("#comment").press("Escape")
        page.keyboard.press(key)
        page.locator("#saved").filter(has_text="saved:").wait_for()
        page.reload()
        assert page.locator("#answers button[aria-pressed='true']").inner_text() == {"3": "partial", "5": "none"}[key]
        pages[name].append(page.content())
        page.goto(review.base + f"/row?id={conversation}&metric={FLOW}")
        pages[name].append(page.content())
        page.goto(review.base + "/queues")
        pages[name].append(page.content())
    for content in pages["Bob Z"]:
        assert "a private note of Annika" not in content and "Annika" not in content
        assert "your answer: partial" not in content
    assert "your answer: none" in pages["Bob Z"][1] and "your answer: partial" in pages["Annika Q"][1]
    stored = history_reviews(history)
    assert stored == [(conversation, FLOW, "Annika Q", "partial", False), (conversation, FLOW, "Bob Z", "none", False)]
    assert errors == []


@pytest.fixture
def long_judged(scripted, run_flowrate, tmp_path):
    """A long conversation whose middle is left out to fit --max-input-tokens, and a short one,
    judged by `flowrate eval`; the request bodies the scripted judge received, by conversation."""
    step = {"verdict": "partial", "reason": "loses the thread", "key_issues": ["turn 60: forgets the parcel"]}
    scripted.script("MARK-TURN-60 ", step)
    path = write_jsonl(tmp_path / "long.jsonl", [long_conversation(), turn_record("short", "hi", "hello")])
    result = run_flowrate("eval", path, "--api-base", scripted.base_url, "--max-input-tokens", "4500", "-o", "r.jsonl")
    assert result.returncode == 0, result.stderr  # partial (0.7) meets the threshold
    return {
        ("long" if "MARK-TURN-60 " in body["messages"][-1]["content"] else "short"): body for body in scripted.bodies
    }


def test_a_rows_detail_shows_the_exact_messages_sent_and_the_judges_raw_reply(
    long_judged, start_review, chromium, tmp_path
):
    """Each row's page shows the messages the scripted judge received, byte for byte (the long
    one's middle left out, as sent), and the reply it sent."""
    sent = long_judged
    review = start_review(tmp_path / "r.jsonl", "--history", tmp_path / "h.duckdb", "--reviewer", "ann")
    errors = []
    _, page = open_context(chromium, review, errors)
    for key in ("long", "short"):
        page.goto(review.base + f"/row?id={key}&metric={FLOW}")
        messages = page.locator("#request pre.message")
        expected = sent[key]["messages"]
        assert messages.count() == len(expected) > 1
        for n, message in enumerate(expected):
            assert messages.nth(n).evaluate("e => e.textContent") == message["content"]
        reply = json.loads(page.locator("#replies pre.reply").first.evaluate("e => e.textContent"))
        if key == "long":
            assert "MARK-TURN-30 " not in expected[-1]["content"]  # the middle as sent: left out
            assert reply["verdict"] == "partial" and reply["reason"] == "loses the thread"
            assert page.locator(".turn[data-turn='60'] .issue").inner_text() == "turn 60: forgets the parcel"
            assert page.locator(".turn").count() == 60  # the transcript is whole; the request shows what was sent
        else:
            assert reply["verdict"] == "fully"
        assert page.locator("#verdict").inner_text() == reply["verdict"]
        assert page.locator("#reason").inner_text() == reply["reason"]
    assert errors == []


def test_hostile_text_in_turns_reasons_and_issues_is_drawn_as_text(judged, start_review, chromium, tmp_path):
    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--reviewer", "ann", "--show-judge")
    errors = []
    _, page = open_context(chromium, review, errors)
    for address in (f"/row?id=c1&metric={FLOW}", f"/label/{FLOW}?at={_position_of(page, review, 'c1')}"):
        page.goto(review.base + address)
        assert page.title() in ("c1", f"label {FLOW}")
        turn = page.locator(".turn[data-turn='1']")
        assert turn.locator(".user").inner_text() == f"user: MARK-REVIEW-1 where is my parcel? {HOSTILE}"
        assert turn.locator(".assistant").inner_text() == f"assistant: It left today. {HOSTILE}"
        assert page.locator("#reason").inner_text() == f"reason 1: {HOSTILE}"
        assert page.locator(".turn[data-turn='2'] .issue").inner_text() == f"turn 2: asks again 1 {HOSTILE}"
        assert page.locator("main script").count() == 0 and page.locator("main a[href^='javascript']").count() == 0
        assert page.locator("body > script").count() <= 2  # the page's own state and code only
    assert errors == []


def _position_of(page, review, conversation_id):
    """Where a conversation sits in the flow metric's queue (the order is a seeded shuffle)."""
    for n in range(1, 9):
        page.goto(review.base + f"/label/{FLOW}?at={n}")
        if page.locator("#conversation").inner_text() == conversation_id:
            return n
    raise AssertionError(f"{conversation_id} is not in the queue")


def test_a_form_posted_from_another_origin_in_the_browser_stores_nothing(judged, start_review, chromium, tmp_path):
    """A page on another port of 127.0.0.1 (same site, so the browser sends the token's cookie)
    posts a form whose text/plain body reads as the app's JSON: the guard refuses it."""
    import http.server
    import threading

    results, _ = judged
    history = tmp_path / "h.duckdb"
    review = start_review(results, "--history", history, "--reviewer", "ann", "--sample-passing", "0")
    name = '{"metric": "conversational_flow_rate", "id": "c0", "value": "none", "x": "'
    attack = (
        f'<form id="f" method="post" enctype="text/plain" action="{review.base}/api/answer">'
        f"<input name='{name}' value='\"}}'></form><script>document.getElementById('f').submit()</script>"
    ).encode()

    class Hostile(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(attack)

        def log_message(self, *args):
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        context = chromium.new_context()
        page = context.new_page()
        page.goto(review.url)  # the victim holds the cookie
        with page.expect_response(f"{review.base}/api/answer") as posted:
            page.goto(f"http://127.0.0.1:{other.server_address[1]}/")
        assert posted.value.status == 403
        assert "cross-site" in posted.value.text()
    finally:
        other.shutdown()
    assert history_reviews(history) == []


def test_the_top_issues_page_lists_the_failure_modes_each_example_linking_to_its_row(
    judged, start_review, chromium, tmp_path
):
    pytest.importorskip("sklearn", reason="top issues cluster with scikit-learn")
    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--reviewer", "ann")
    errors = []
    _, page = open_context(chromium, review, errors)
    page.goto(review.base + "/top-issues")
    modes = page.locator("section.mode")
    assert modes.count() >= 2
    assert re.search(r"\d+ conversations \(\d+%\)", modes.first.inner_text())
    example = modes.first.locator("li").first
    conversation, issue = example.inner_text().split(" ", 1)
    with page.expect_navigation():
        example.locator("a").click()
    assert page.locator("h1").inner_text() == conversation
    assert page.locator(".turn[data-turn='2'] .issue").inner_text() == issue  # pinned to its turn in the row
    assert errors == []


@pytest.fixture
def two_runs(judged, scripted, run_flowrate, tmp_path):
    """The eight conversations judged again (no cache): c6 now fails, c2 now passes."""
    results, conversations = judged
    scripted.reset()
    for n in range(8):
        verdict = "minor" if (n < 5 and n != 2) or n == 6 else "mostly"
        scripted.script(f"MARK-REVIEW-{n}", {"verdict": verdict, "reason": f"again {n}", "key_issues": []})
    again = run_flowrate(
        "eval", conversations, "--api-base", scripted.base_url, "--no-cache", "-o", tmp_path / "again.jsonl"
    )
    assert again.returncode == 1, again.stderr
    return results, tmp_path / "again.jsonl"


def test_side_by_side_puts_two_runs_of_the_same_conversations_together_changed_verdicts_first(
    two_runs, start_review, chromium, tmp_path
):
    first, second = two_runs
    review = start_review(first, second, "--history", tmp_path / "h.duckdb", "--reviewer", "ann")
    errors = []
    _, page = open_context(chromium, review, errors)
    page.locator("select[name=a]").select_option(label=str(first))
    page.locator("select[name=b]").select_option(label=str(second))
    with page.expect_navigation():
        page.get_by_role("button", name="compare").click()
    rows = page.locator("#pairs tbody tr")
    cells = [rows.nth(n).locator("td").all_inner_texts() for n in range(rows.count())]
    # changed verdicts first, the largest score change first; then the rest by id
    assert [cell[0] for cell in cells] == ["c6", "c2", "c5", "c7", "c0", "c1", "c3", "c4"]
    assert [(cell[2], cell[4]) for cell in cells[:4]] == [
        ("fully", "minor"), ("minor", "mostly"), ("fully", "mostly"), ("fully", "mostly")
    ]  # fmt: skip
    assert [rows.nth(n).get_attribute("class") for n in range(8)] == ["changed"] * 4 + ["same"] * 4
    assert "8 rows in both, 4 changed" in page.locator("main").inner_text()
    assert errors == []


def test_in_the_browser_no_token_is_refused_and_a_rebound_name_is_refused(judged, start_review, chromium, tmp_path):
    """A browser without the token gets nothing; one sent to the server under another name (DNS
    rebinding: Chromium told that evil.example is 127.0.0.1) is refused even with the token."""
    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--reviewer", "ann")
    port = review.base.rsplit(":", 1)[1]
    rebinding = chromium.browser_type.launch(
        executable_path=CHROMIUM,
        args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP evil.example 127.0.0.1"],
    )
    try:
        page = rebinding.new_context().new_page()
        bare = page.goto(review.base + f"/row?id=c0&metric={FLOW}")
        assert bare.status == 403 and "token is needed" in page.locator("body").inner_text()
        rebound = page.goto(f"http://evil.example:{port}/?token={review.token}")
        assert rebound.status == 403 and "Host" in page.locator("body").inner_text()
        good = page.goto(review.url)
        assert good.status == 200 and page.locator("section.run").count() == 1
    finally:
        rebinding.close()


def test_the_agreement_page_reports_the_answers_given_against_the_judge_beside_the_base_rate(
    judged, start_review, chromium, tmp_path
):
    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--reviewer", "ann", "--sample-passing", "0")
    errors = []
    _, page = open_context(chromium, review, errors)
    page.goto(review.base + f"/label/{FLOW}")
    for n in range(FAILING):  # the judge failed all five; people fail c0..c2 ("none") and pass c3, c4 ("fully")
        key = "5" if page.locator("#conversation").inner_text() in {"c0", "c1", "c2"} else "1"
        page.keyboard.press(key)
        page.locator("#saved").filter(has_text="saved:").wait_for()
        if n < FAILING - 1:
            with page.expect_navigation():
                page.keyboard.press("j")
    page.goto(review.base + "/agreement")
    figures = {
        row.locator("th").inner_text(): row.locator("td").inner_text() for row in page.locator("table.figures tr").all()
    }
    assert figures["labelled conversations"] == "5"
    assert figures["pass/fail agreement"].startswith("60.0%")  # 3 of 5: the judge failed the two people passed
    assert figures["base rate (always fail)"].startswith("60.0%")  # people failed 3 of 5
    assert figures["failing conversations the judge failed"].startswith("100.0%")
    assert figures["passing conversations the judge passed"].startswith("0.0%")
    worst = page.locator("ol.worst a")
    # largest gap first: the two the judge failed and people passed (0.3 against 1.0), then minor against none
    assert sorted(worst.all_inner_texts()[:2]) == ["c3", "c4"] and sorted(worst.all_inner_texts()[2:]) == [
        "c0",
        "c1",
        "c2",
    ]
    with page.expect_navigation():
        worst.first.click()
    assert page.locator("#verdict").inner_text() == "minor"
    assert errors == []


class _Logger:
    """A server on another port of 127.0.0.1 that keeps every request's path and headers."""

    def __init__(self):
        import http.server
        import threading

        received = self.received = []

        class Logging(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                received.append((self.path, dict(self.headers.items())))
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.end_headers()
                self.wfile.write(b"<p>logged</p>")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Logging)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_no_other_local_server_receives_the_token_or_anything_it_could_replay(judged, start_review, chromium, tmp_path):
    """Cookies are scoped by host and path, not by port: the browser holding the app's cookie
    visits another server on 127.0.0.1 (and under localhost), which must get neither the token
    nor any header that opens the app when sent back to it."""
    import httpx

    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--reviewer", "ann")
    logger = _Logger()
    try:
        page = chromium.new_context().new_page()
        page.goto(review.url)
        assert page.locator("section.run").count() == 1  # the browser holds the app's credential
        for address in (f"http://127.0.0.1:{logger.port}/", f"http://127.0.0.1:{logger.port}/label/x?at=1"):
            page.goto(address)
            assert page.locator("p").inner_text() == "logged"
    finally:
        logger.server.shutdown()
    assert len(logger.received) >= 2
    for _, headers in logger.received:
        assert review.token not in json.dumps(headers)
        replayed = {name: value for name, value in headers.items() if name.lower() != "host"}
        for path in ("/", f"/row?id=c0&metric={FLOW}"):
            with httpx.Client() as client:
                assert client.get(review.base + path, headers=replayed).status_code == 403
                assert client.get(review.origin + path, headers=replayed).status_code == 403


def test_a_failed_save_says_so_and_keeps_the_reviewer_on_the_conversation(judged, start_review, chromium, tmp_path):
    """The history's disk refuses every write (a file size limit of 1 byte on the server: each
    write fails as on a full disk): the page says the answer was not saved, and the keys that
    move on stay on the conversation."""
    results, _ = judged
    history = tmp_path / "h.duckdb"
    start_review(results, "--history", history, "--reviewer", "ann").stop()  # the rows imported
    review = start_review("--history", history, "--reviewer", "ann", "--sample-passing", "0", file_size_limit_bytes=1)
    errors = []
    _, page = open_context(chromium, review, errors)
    page.goto(review.base + f"/label/{FLOW}")
    conversation = page.locator("#conversation").inner_text()
    page.keyboard.press("1")
    page.locator("#saved").filter(has_text="not saved").wait_for()
    said = page.locator("#saved").inner_text()
    assert said.startswith("not saved: the history file refused it (") and said.endswith("); answer again")
    assert "File too large" in said
    assert re.findall(r"\bnot (?:saved|stored)\b", said) == ["not saved"]  # said once: not "not saved: not stored"
    assert colour(page, "#saved") == FAILED_RED  # a failure, not in the green of "saved"
    page.keyboard.press("j")
    page.wait_for_timeout(500)
    assert page.locator("#conversation").inner_text() == conversation
    assert page.locator("#position").inner_text().startswith(f"1 of {FAILING}")
    assert page.locator("#saved").inner_text() == "not saved: fully; answer again before moving on"
    assert colour(page, "#saved") == FAILED_RED
    assert page.locator("#yours").inner_text() == ""
    assert history_reviews(history) == []
    assert [error for error in errors if "503" not in error] == []  # the browser's own line for the refused save


def test_a_reviewers_name_the_server_refuses_is_said_as_a_failure(judged, start_review, chromium, tmp_path):
    """A name of spaces only passes the form's `required` and the server refuses it: the page
    says why, in the colour of a failure, and names no reviewer."""
    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--sample-passing", "0")
    errors = []
    _, page = open_context(chromium, review, errors)
    page.goto(review.base + f"/label/{FLOW}")
    page.locator("#name").fill("   ")
    page.locator("#name-form button").click()
    page.locator("#saved").filter(has_text="a name of 1 to").wait_for()
    assert colour(page, "#saved") == FAILED_RED
    assert page.locator("#name-form").count() == 1
    assert [error for error in errors if "400" not in error] == []  # the browser's own line for the refused name


@pytest.fixture
def support_judged(scripted, run_flowrate, tmp_path):
    """Three conversations judged with the rubric of `configs/rubric.example.yaml` (named levels
    of its own), every resolution `unresolved`."""
    from tests.helpers import ROOT

    reply = {
        "criteria": {
            "resolution": {"reason": "no next step", "key_issues": ["turn 1: gives up"], "verdict": "unresolved"},
            "politeness": {"reason": "curt", "key_issues": [], "rating": 2},
        }
    }
    scripted.script("support conversation", {"content": json.dumps(reply)})
    rubric = ROOT / "configs" / "rubric.example.yaml"
    path = write_jsonl(tmp_path / "support.jsonl", [turn_record(f"s{n}", f"help {n}", "no") for n in range(3)])
    result = run_flowrate(
        "eval", path, "--rubric", rubric, "--api-base", scripted.base_url, "-o", tmp_path / "support-results.jsonl"
    )
    assert result.returncode == 1, result.stderr
    return tmp_path / "support-results.jsonl", rubric


def test_blind_labelling_on_a_rubric_of_ones_own_shows_its_whole_scale(
    support_judged, start_review, chromium, tmp_path
):
    results, rubric = support_judged
    history = tmp_path / "h.duckdb"
    unknown = start_review(results, "--history", history, "--reviewer", "ann")
    assert any("resolution: no queue" in line and "--rubric" in line for line in unknown.said)
    errors = []
    _, page = open_context(chromium, unknown, errors)
    page.goto(unknown.base + "/label/resolution")
    assert page.locator("#answers button").count() == 0  # no buttons made of the judge's verdict
    unknown.stop()
    review = start_review(results, "--history", history, "--reviewer", "ann", "--rubric", rubric)
    _, page = open_context(chromium, review, errors)
    page.goto(review.base + "/label/resolution")
    assert page.locator("#answers button").all_inner_texts() == ["resolved", "partly", "unresolved"]
    assert page.locator("#verdict").count() == 0
    page.keyboard.press("2")
    page.locator("#saved").filter(has_text="saved: partly").wait_for()
    assert page.locator("#verdict").inner_text() == "unresolved"
    page.goto(review.base + "/label/politeness")
    assert page.locator("#answers button").all_inner_texts() == ["1", "2", "3"]
    assert [value for _, metric, _, value, _ in history_reviews(history) if metric == "resolution"] == ["partly"]
    assert [error for error in errors if "404" not in error] == []  # the empty queue's page


def test_the_queue_is_one_click_away_side_by_side_takes_two_runs_and_a_row_names_its_run(
    two_runs, start_review, chromium, tmp_path
):
    first, second = two_runs
    review = start_review(first, second, "--history", tmp_path / "h.duckdb", "--reviewer", "ann")
    errors = []
    _, page = open_context(chromium, review, errors)
    chosen = [page.locator(f"select[name={name}]").input_value() for name in ("a", "b")]
    assert chosen[0] != chosen[1]  # two different runs, ready to compare
    shown = page.locator("select[name=b] option:checked").inner_text()
    with page.expect_navigation():
        page.get_by_role("navigation").get_by_role("link", name="label").click()
    assert page.locator("#position").inner_text().startswith("1 of ")  # one metric: its queue at once
    run = first if shown == str(first) else second
    page.goto(review.base + f"/row?id=c0&metric={FLOW}&run=" + chosen[1])
    named = page.locator("#run").inner_text()
    row = json.loads(run.read_text().splitlines()[0])
    assert str(run.resolve()) in named and row["model"] in named
    assert re.search(r"started \d{4}-\d\d-\d\d \d\d:\d\d UTC", named) and "8 rows" in named
    page.goto(review.base + "/queues")
    what = page.locator("main").inner_text()
    assert "whose samples disagree, and every one the judge was unsure of (--uncertain-below)" in what
    assert errors == []


def test_every_page_takes_its_style_and_script_from_static_files_allowed_by_its_nonce(
    judged, start_review, chromium, tmp_path
):
    import httpx

    results, _ = judged
    review = start_review(results, "--history", tmp_path / "h.duckdb", "--reviewer", "ann", "--sample-passing", "0")
    errors = []
    _, page = open_context(chromium, review, errors)
    for address in ("/", f"/label/{FLOW}", f"/row?id=c0&metric={FLOW}", "/queues", "/agreement", "/compare"):
        response = page.goto(review.base + address)
        policy = response.headers["content-security-policy"]
        nonce = re.search(r"script-src 'nonce-([^']+)';", policy).group(1)
        assert f"style-src 'nonce-{nonce}';" in policy and "unsafe-inline" not in policy
        assert page.locator("nav").evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(36, 41, 47)"
        assert page.locator("style, [style]").count() == 0  # no inline style
        for script in page.locator("script:not([type='application/json'])").all():
            assert script.evaluate("e => [e.src, e.nonce, e.textContent]") == [
                script.evaluate("e => e.src"), nonce, ""
            ] and script.evaluate("e => e.src").startswith(review.base + "/static/")  # fmt: skip
    assert page.locator("nav a").all_inner_texts() == ["runs", "label", "agreement", "top issues"]
    with httpx.Client() as client:  # the static files too only with the token, and only under the secret path
        assert client.get(review.base + "/static/label.js").status_code == 403
        assert client.get(review.origin + "/static/label.js").status_code == 403
    assert [error for error in errors if "404" not in error] == []  # /compare without two runs


SPOOF = "h5-\u202eevil\u202c \u2028 \u2066x\u2069"


@pytest.fixture
def bidi_judged(scripted, run_flowrate, tmp_path):
    """A run whose conversation, reason and key issue carry bidi controls and a line separator."""
    scripted.script("MARK-BIDI", {"verdict": "minor", "reason": f"reason {SPOOF}", "key_issues": [f"turn 1: {SPOOF}"]})
    conversations = write_jsonl(
        tmp_path / "bidi.jsonl", [turn_record("b1", f"MARK-BIDI where is it? {SPOOF}", f"Here. {SPOOF}")]
    )
    result = run_flowrate("eval", conversations, "--api-base", scripted.base_url, "-o", "results.jsonl")
    assert result.returncode == 1, result.stderr
    return tmp_path / "results.jsonl"


def test_bidi_controls_and_line_separators_are_drawn_escaped_on_the_review_pages(
    bidi_judged, start_review, chromium, tmp_path
):
    shown = "h5-\\u202eevil\\u202c \\u2028 \\u2066x\\u2069"
    review = start_review(bidi_judged, "--history", tmp_path / "h.duckdb", "--reviewer", "ann", "--show-judge")
    errors = []
    _, page = open_context(chromium, review, errors)
    for address in (f"/row?id=b1&metric={FLOW}", f"/label/{FLOW}?at=1"):
        page.goto(review.base + address)
        turn = page.locator(".turn[data-turn='1']")
        assert turn.locator(".user").inner_text() == f"user: MARK-BIDI where is it? {shown}"
        assert turn.locator(".assistant").inner_text() == f"assistant: Here. {shown}"
        assert page.locator("#reason").inner_text() == f"reason {shown}"
        assert shown in turn.locator(".issue").inner_text()
        assert "\u202e" not in page.locator("body").inner_text()
    assert errors == []
