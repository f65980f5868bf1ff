"""Output that other programs read (issue 14): hostile text through the HTML report in Chromium,
stdout and stderr as GitHub's runner parses them, the step summary as Markdown renders it,
JUnit through two XML parsers, the labels template as a spreadsheet reads it; and true counts
past 10,000 rows."""

import csv
import re
import xml.dom.minidom
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest

from flowrate.inputs.conversation import Source
from flowrate.reports.escape import strip_control
from flowrate.results.book import ReportBook
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary
from tests.conftest import turn_record, write_jsonl
from tests.test_reports import CHROMIUM

HOSTILE = [
    "<!--<script>",
    "</script><script>document.title='owned'</script>",
    "<img src=x onerror=\"document.title='owned'\">",
    "javascript:alert(1)",
    "constructor",
    "__proto__",
]


def _hostile_run(tmp_path, judge):
    """Conversations whose ids, turns and metadata are hostile, judged with hostile reasons and
    key issues; the first conversation's verdict comes last, so completion order is not input order."""
    records = []
    for n, text in enumerate(HOSTILE):
        marker = f"MARK-HOSTILE-{n}"
        step = {
            "verdict": "minor" if n % 2 == 0 else "fully",
            "reason": f"reason {text}",
            "key_issues": [f"turn 1: {text}", f"turn 2: ![x](https://evil.example/x.png) {text}"],
        }
        judge.script(marker, {**step, "delay": 1.0} if n == 0 else step)
        records.append(
            turn_record(text, f"{marker} user says {text}", f"bot says {text}", f"more {text}", f"end {text}")
            | {"metadata": {"topic": text, "note": "<!--<script>"}}
        )
    return write_jsonl(tmp_path / "c.jsonl", records)


def _browser(playwright):
    return playwright.chromium.launch(
        executable_path=CHROMIUM,
        args=[
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
        ],
    )


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_hostile_text_in_every_field_is_drawn_literally_in_the_html_report(judge, run_flowrate, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright driver is not installed")
    path = _hostile_run(tmp_path, judge)
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--html", "report.html")
    assert result.returncode == 1, result.stderr
    errors = []
    with sync_api.sync_playwright() as playwright:
        browser = _browser(playwright)
        context = browser.new_context(offline=True)
        context.route("http*://**", lambda route: route.abort())
        page = context.new_page()
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("dialog", lambda dialog: (errors.append(f"dialog: {dialog.message}"), dialog.dismiss()))
        page.goto((tmp_path / "report.html").as_uri())
        rows = page.locator("#results tbody tr")
        assert rows.count() == len(HOSTILE)
        # input order (the first conversation was judged last), each id as its literal text
        assert [rows.nth(n).locator("td").first.inner_text() for n in range(len(HOSTILE))] == HOSTILE
        for n, text in enumerate(HOSTILE):
            rows.nth(n).click()
            assert page.locator("#transcript h2").inner_text() == text
            turns = page.locator("#transcript .turn")
            assert turns.count() == 2
            assert turns.first.locator(".user").inner_text() == f"user: MARK-HOSTILE-{n} user says {text}"
            assert turns.first.locator(".assistant").inner_text() == f"assistant: bot says {text}"
            if n % 2 == 0:  # the failing ones carry their key issues at turns 1 and 2
                issues = page.locator("#transcript .issue")
                assert issues.first.inner_text() == f"conversational_flow_rate: turn 1: {text}"
        cost = rows.first.locator("td").nth(5).inner_text()
        assert re.fullmatch(r"\d\.\d{1,6}", cost), cost  # money, not 0.006542500000000001
        assert page.locator("img").count() == 0 and page.locator("script").count() == 2
        assert page.title() == "flowrate report"
        browser.close()
    assert errors == []


def _commands(text: str) -> list[tuple[str, dict[str, str], str]]:
    """The workflow commands GitHub's runner finds in `text` (actions/runner ActionCommand.cs):
    lines split at CR, LF or CRLF; `::name k=v,…::data` after TrimStart, or the legacy
    `##[name k=v;…]data` anywhere in a line; names in the runner's registered set."""
    registered = {
        "set-env", "set-output", "save-state", "add-mask", "add-path", "add-matcher", "remove-matcher",
        "debug", "warning", "error", "notice", "group", "endgroup", "echo", "stop-commands",
    }  # fmt: skip
    found = []
    for line in re.split(r"\r\n|\r|\n", text):
        message = line.lstrip()
        end = message.find("::", 2)
        if message.startswith("::") and end >= 0:
            info = message[2:end]
            name, _, props = info.partition(" ")
            if name in registered:
                properties = dict(pair.split("=", 1) for pair in props.strip().split(",") if "=" in pair)
                unescaped = {key: _unescape(value, property=True) for key, value in properties.items()}
                found.append((name, unescaped, _unescape(message[end + 2 :])))
                continue
        start = line.find("##[")
        if start >= 0 and "]" in line[start:]:
            info = line[start + 3 : line.index("]", start)]
            if info.split(" ")[0] in registered:
                found.append((info.split(" ")[0], {}, line[line.index("]", start) + 1 :]))
    return found


def _unescape(text: str, property: bool = False) -> str:
    pairs = [("%0D", "\r"), ("%0A", "\n")] + ([("%3A", ":"), ("%2C", ",")] if property else []) + [("%25", "%")]
    for escaped, raw in pairs:
        text = text.replace(escaped, raw)
    return text


COMMAND_IDS = [
    "::error title=x::y",
    "  ::stop-commands::tok3n",
    "\u3000::warning::wide space",
    "##[error]legacy",
    "x\r::error::after a carriage return",
    "bell\x07 and \x1b[31mred\x1b[0m, 100%",
]


def test_ids_and_reasons_never_start_a_workflow_command_on_stdout_or_stderr(judge, run_flowrate, tmp_path, cli_env):
    judge.script(
        "MARK-CMD",
        {
            "verdict": "none",
            "reason": "::error::reason\n::warning::second line ##[stop-commands]x",
            "key_issues": ["turn 1: \n::error file=a,line=1::issue\r\n  ::add-mask::x"],
        },
    )
    write_jsonl(tmp_path / "c.jsonl", [turn_record(key, "MARK-CMD", "x") for key in COMMAND_IDS])
    summary_file = tmp_path / "summary.md"
    env = dict(cli_env, GITHUB_STEP_SUMMARY=str(summary_file))
    result = run_flowrate(
        "eval", "c.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl", "--github", "--verbose", env=env
    )
    assert result.returncode == 1, result.stderr
    assert "failed:" in result.stderr  # the summary named the failures, ids and all
    assert _commands(result.stderr) == []
    commands = _commands(result.stdout)
    assert [name for name, _, _ in commands] == ["error"] * len(COMMAND_IDS)
    for (_, properties, data), key in zip(commands, COMMAND_IDS, strict=True):
        assert properties == {
            "file": "c.jsonl",
            "line": str(COMMAND_IDS.index(key) + 1),
            "title": f"flowrate conversational_flow_rate: {strip_control(key)}",
        }
        assert data.startswith("none: turn 1: ")


def test_the_step_summary_shows_the_judges_html_and_markdown_as_text(judge, run_flowrate, tmp_path, cli_env):
    from markdown_it import MarkdownIt

    issue = "turn 1: <img src=https://evil.example/p.png> </td></tr></table><h1>x</h1> ![i](https://e.x/i.png) *em*"
    judge.script("MARK-MD", {"verdict": "none", "key_issues": [issue]})
    conversation_id = "a`\n# heading | <b>bold</b>"
    write_jsonl(tmp_path / "c.jsonl", [turn_record(conversation_id, "MARK-MD", "x")])
    summary_file = tmp_path / "summary.md"
    env = dict(cli_env, GITHUB_STEP_SUMMARY=str(summary_file))
    result = run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl", "--github", env=env)
    assert result.returncode == 1, result.stderr
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(summary_file.read_text())
    tags = _Tags()
    tags.feed(rendered)
    assert {"img", "b", "em", "h1", "a"}.isdisjoint(tags.opened), tags.opened
    assert tags.headings == ["flowrate", "Worst failures"]
    cells = tags.cells[-4:]  # the worst failure's row
    assert cells[0] == " ".join(conversation_id.split()) and cells[3] == issue


class _Tags(HTMLParser):
    """The tags of rendered HTML, its headings' text and its table cells' text."""

    def __init__(self):
        super().__init__()
        self.opened, self.headings, self.cells, self._text = set(), [], [], None

    def handle_starttag(self, tag, attrs):
        self.opened.add(tag)
        if tag in ("h2", "h3", "td"):
            self._text = []

    def handle_endtag(self, tag):
        if self._text is not None and tag in ("h2", "h3", "td"):
            (self.headings if tag != "td" else self.cells).append("".join(self._text))
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


CONTROL_IDS = ["\u0001start", "\x1b[31mred\x1b[0m", "form\x0cfeed", "nul\x00 and \ufffe", "ok"]


def test_an_id_with_control_characters_still_gives_well_formed_junit(judge, run_flowrate, tmp_path):
    judge.script("MARK-CTL", {"verdict": "minor", "reason": "bad\x08\x1b[1m", "key_issues": ["turn 1: \x01x\x7f"]})
    records = [turn_record(key, "MARK-CTL", "x") for key in CONTROL_IDS]
    path = write_jsonl(tmp_path / "c\x01.jsonl", records)
    with path.open("a") as handle:
        handle.write('{"id": "\\u0002broken", "turns": []}\n')
    result = run_flowrate(
        "eval", path.name, "--api-base", judge.base_url, "--skip-invalid", "-o", "out.jsonl", "--junit", "j.xml"
    )
    assert result.returncode == 1, result.stderr
    root = ET.parse(tmp_path / "j.xml").getroot()
    document = xml.dom.minidom.parse(str(tmp_path / "j.xml"))
    names = [case.getAttribute("name") for case in document.getElementsByTagName("testcase")]
    assert names == [case.get("name") for case in root.iter("testcase")]
    expected = ["start", "red", "formfeed", "nul and ", "ok", "broken"]
    assert names == expected
    assert {case.get("classname") for case in root.iter("testcase")} == {"c.jsonl"}
    failure = root.find("testsuite/testcase/failure")
    assert failure.get("message") == "minor: bad" and "- turn 1: x" in failure.text
    [skipped] = [case for case in root.iter("testcase") if case.find("skipped") is not None]
    assert skipped.get("line") == "6" and skipped.find("skipped").get("message") == "invalid input"


FORMULA_IDS = ['=HYPERLINK("http://evil/","x")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd", "'=quoted", "plain"]


def _row(conversation_id, score, threshold=0.7, metric="conversational_flow_rate", line=1, **extra):
    return EvaluationRow(
        id=conversation_id,
        source=Source(path=extra.pop("path", "c.jsonl"), line=line),
        metric=metric,
        score=score,
        threshold=threshold,
        success=score >= threshold,
        model="gpt-4o",
        rubric_version="sha256:x",
        evaluated_at=extra.pop("evaluated_at", datetime.now(UTC)),
        **extra,
    )


def test_the_labels_template_never_starts_a_formula_and_import_reads_the_ids_back(run_flowrate, tmp_path):
    rows = [
        _row(key, 0.3, verdict="minor", reason=f"=cmd|' /C calc'!A{n}", line=n + 1) for n, key in enumerate(FORMULA_IDS)
    ]
    (tmp_path / "rows.jsonl").write_text("".join(row.model_dump_json() + "\n" for row in rows))
    made = run_flowrate("labels", "template", "rows.jsonl", "rows.jsonl", "-o", "labels.csv")
    assert made.returncode == 0 and f"{len(FORMULA_IDS)} row(s) to label" in made.stderr, made.stderr
    with open(tmp_path / "labels.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    cells = [cell for line in table[1:] for cell in line]
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@", "\t", "\r"))]
    assert len(table) == 1 + len(FORMULA_IDS)  # each conversation and metric once, though given twice
    header = table[0]
    for line in table[1:]:
        line[header.index("score")] = "0.5"
        line[header.index("labeled_at")] = "2026-01-02"
        line[header.index("labeler")] = "=evil()"
    with open(tmp_path / "filled.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(table)
    imported = run_flowrate("labels", "import", "filled.csv", "--history", "h.duckdb")
    assert imported.returncode == 0 and f"{len(FORMULA_IDS)} new label(s)" in imported.stderr, imported.stderr
    import duckdb

    with duckdb.connect(str(tmp_path / "h.duckdb")) as connection:
        stored = connection.execute("SELECT conversation_id, labeler FROM labels").fetchall()
    assert sorted(key for key, _ in stored) == sorted(FORMULA_IDS)
    assert {labeler for _, labeler in stored} == {"=evil()"}


def test_past_10000_rows_the_reports_give_true_counts_and_say_what_they_leave_out(tmp_path):
    from flowrate.reports.github import annotations, step_summary
    from flowrate.reports.junit import write_junit
    from flowrate.results.gates import apply_gates
    from flowrate.settings.options import GateSettings

    book, summary = ReportBook(), RunSummary()
    for n in range(20_000):
        row = _row(f"c{n:05d}", score=1.0 if n % 5 < 3 else 0.3, line=n + 1)  # a 60 % pass rate
        book.add(row)
        summary.add(row, n)
    apply_gates(summary, GateSettings({"min_pass_rate": 0.9}, {}))
    write_junit(tmp_path / "j.xml", book, summary)
    root = ET.parse(tmp_path / "j.xml").getroot()
    suite = root.find("testsuite")
    counts = {key: suite.get(key) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": "20001", "failures": "8001", "errors": "0", "skipped": "0"}  # rows and the gate
    assert {key: root.get(key) for key in counts} == counts
    assert len(suite.findall("testcase")) == 1001
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["testcases_left_out"] == "19000"
    assert "19000 of 20000 rows are not listed" in suite.find("system-out").text
    lines = annotations(book, summary)
    assert len(lines) == 11 and lines[-1] == "::notice::7990 more failing rows; see the step summary"
    assert "### Worst failures (20 of 8000)" in step_summary(book, summary)


def test_a_failing_score_never_prints_as_its_threshold():
    from flowrate.reports.console import describe_row
    from flowrate.results.summary import format_score

    assert format_score(2 / 3, 0.7) == "0.67" and format_score(0.6999, 0.7) == "0.6999"
    assert format_score(0.7, 0.7) == "0.70" and format_score(0.69999999999, 0.7, digits=1) == "0.69999999999"
    assert format_score(0.705, 0.705) == "0.705"  # 0.705 is 0.70499… in binary: it passes, and must show so
    assert format_score(0.9, None, digits=1) == "0.9"
    rated = _row("r", 2 / 3, threshold=0.7, rating=2, scale=3, metric="slot_filling")
    assert describe_row(rated).startswith("[r] slot_filling 2/3 0.67 FAIL")
    mean = _row("u", 0.6999, threshold=0.7, metric="user_satisfaction")
    assert describe_row(mean).startswith("[u] user_satisfaction 0.6999 FAIL")


def test_failing_scores_show_below_the_threshold_in_junit_and_github(tmp_path):
    from flowrate.reports.github import step_summary
    from flowrate.reports.junit import write_junit

    book, summary = ReportBook(), RunSummary()
    row = _row("u", 0.6999, threshold=0.7, metric="user_satisfaction", reason="close")
    book.add(row)
    summary.add(row)
    write_junit(tmp_path / "j.xml", book, summary)
    failure = ET.parse(tmp_path / "j.xml").getroot().find("testsuite/testcase/failure")
    assert failure.get("message") == "0.6999: close" and "(score 0.6999)" in failure.text
    assert "| u | `user_satisfaction` | 0\\.6999 | close |" in step_summary(book, summary)


def test_the_html_report_lists_rows_in_input_order_with_money_for_costs():
    import orjson

    from flowrate.reports.html import render

    book, summary = ReportBook(), RunSummary()
    for line, path in [(3, "b.jsonl"), (2, "a.jsonl"), (1, "b.jsonl"), (1, "a.jsonl")]:
        row = _row(f"{path}:{line}", 0.9, line=line, path=path, cost_usd=0.006542500000000001)
        book.add(row)
        summary.add(row)
    page = render(book, summary, {})
    data = orjson.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    assert [row["id"] for row in data["rows"]] == ["a.jsonl:1", "a.jsonl:2", "b.jsonl:1", "b.jsonl:3"]
    assert {row["cost_shown"] for row in data["rows"]} == {"0.006543"}


def test_annotation_paths_are_relative_to_the_workspace_however_the_input_was_named(
    judge, run_flowrate, tmp_path, cli_env
):
    judge.script("MARK-NONE", {"verdict": "none", "key_issues": ["turn 1: ignores"]})
    (tmp_path / "sub").mkdir()
    write_jsonl(tmp_path / "sub" / "c.jsonl", [turn_record("bad", "MARK-NONE", "x")])
    env = dict(cli_env, GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    env.pop("GITHUB_WORKSPACE", None)
    named = ["sub/c.jsonl", "./sub/c.jsonl", "sub/../sub/c.jsonl", str(tmp_path / "sub" / "c.jsonl")]
    for name in named:
        result = run_flowrate("eval", name, "--api-base", judge.base_url, "-o", "out.jsonl", "--github", env=env)
        [(_, properties, _)] = _commands(result.stdout)
        assert properties["file"] == "sub/c.jsonl", name
    workspace = dict(env, GITHUB_WORKSPACE=str(tmp_path.parent))
    result = run_flowrate(
        "eval", "./sub/c.jsonl", "--api-base", judge.base_url, "-o", "o.jsonl", "--github", env=workspace
    )
    [(_, properties, _)] = _commands(result.stdout)
    assert properties["file"] == f"{tmp_path.name}/sub/c.jsonl"


def test_a_file_name_quoted_in_an_input_error_never_starts_a_workflow_command(run_flowrate, tmp_path):
    name = "::warning title=x::evil.jsonl"
    (tmp_path / name).write_text('{"id": "a", "turns": []}\n{"id": "b\\n::error::x", "turns": "no"}\n')
    result = run_flowrate("eval", name, "--api-base", "http://127.0.0.1:9/v1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "evil.jsonl:1" in result.stderr and "evil.jsonl:2" in result.stderr
    assert _commands(result.stderr) == [] and _commands(result.stdout) == []
