"""The "Top issues" section of the HTML report, and `flowrate top-issues --html`, in headless
Chromium: the modes ranked, hostile key issues and ids drawn literally, each example a link
that opens its conversation."""

import json

import pytest

from tests.helpers import CHROMIUM, CHROMIUM_ARGS, turn_record, watched, write_jsonl

HOSTILE = [
    "</script><script>document.title='owned'</script>",
    "<img src=x onerror=\"document.title='owned'\">",
    "<!--<script>",
]


def _run(tmp_path, judge):
    """Six conversations left hanging at their last turn and three asked again for their order
    number at turn 1, every id and key issue carrying hostile text."""
    records = []
    for n in range(9):
        hostile = HOSTILE[n % 3]
        marker = f"MARK-TOP-{n}"
        if n < 6:
            step = {
                "verdict": "minor",
                "reason": "r",
                "key_issues": [f"turn 2: the user's last question gets no reply {hostile}"],
            }
        else:
            step = {
                "verdict": "mostly",
                "reason": "r",
                "key_issues": [f"turn 1: asks again for the order number {hostile}"],
            }
        judge.script(marker, step)
        records.append(turn_record(f"{hostile}-{n}", f"{marker} hi", "hello", "where is it?", "let me check"))
    return write_jsonl(tmp_path / "c.jsonl", records)


def _page(playwright, path, errors):
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    context = browser.new_context(offline=True)
    context.route("http*://**", lambda route: route.abort())
    page = watched(context.new_page(), errors)
    page.goto(path.as_uri())
    return browser, page


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_the_report_ranks_the_modes_draws_hostile_text_literally_and_links_examples(judge, run_flowrate, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright driver is not installed")
    path = _run(tmp_path, judge)
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--html", "report.html")
    assert result.returncode == 1, result.stderr
    page_file = tmp_path / "modes.html"
    listed = run_flowrate("top-issues", "out.jsonl", "--html", page_file, "--json")
    assert listed.returncode == 0, listed.stderr
    labels = [mode["label"] for mode in json.loads(listed.stdout)["modes"]]
    assert labels[0].startswith("the user's last question gets no reply")
    assert labels[1].startswith("asks again for the order number")
    errors = []
    with sync_api.sync_playwright() as playwright:
        browser, page = _page(playwright, tmp_path / "report.html", errors)
        modes = page.locator("#top-issues tr.mode")
        assert modes.count() == 2
        assert [modes.nth(n).locator("td.label").inner_text() for n in range(2)] == labels  # literally
        assert page.locator("#top-issues img, #top-issues script").count() == 0
        examples = modes.nth(0).locator("a.example")
        assert examples.count() == 3
        text = modes.nth(0).locator("li").first.inner_text()
        assert any(hostile in text for hostile in HOSTILE)  # drawn as text, never as markup
        first = examples.first.inner_text()
        examples.first.click()
        assert page.locator("#transcript h2").inner_text() == first
        assert page.locator("#transcript .turn").count() == 2
        assert page.title() == "flowrate report"
        browser.close()
        browser, page = _page(playwright, page_file, errors)
        assert page.locator("#top-issues tr.mode").count() == 2
        assert page.locator("#top-issues img, #top-issues script").count() == 0
        assert page.title() == "flowrate top issues"
        browser.close()
    assert errors == []
