"""One self-contained HTML page for a run: no network, no CDN, everything inline; and the
scaffolding every flowrate page shares (`page`, `data_script`), the trends page's too.

The run's page holds each metric's totals with its distribution drawn as an SVG bar chart, a
sortable, filterable table of rows in input order, and, for each conversation, its transcript
with every key issue shown at the turn it names. Texts are capped so a 10,000-conversation page stays a
few MB. The data sits in a JSON script element (`escape.json_for_script`), and the page's
script puts every text into the page with `textContent`, never as HTML.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.reports.escape import PAGE_ESCAPED, json_for_script, page_text
from flowrate.results.book import ReportBook
from flowrate.results.summary import RunSummary, format_score

TEXT_LIMIT = 600  # characters of one message shown; the rest is cut in the middle
BASE_STYLE = (
    "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}"
    ".card{border:1px solid #ccc;border-radius:6px;padding:.5em 1em}svg text{font-size:10px}"
)


def page(title: str, style: str, body: str) -> str:
    """A self-contained HTML page titled `title` (escaped here): flowrate's base style and then
    `style` (CSS), and `body`, HTML whose untrusted text the caller has escaped already. The
    parts are joined, never substituted into a template, so no text in `body` can stand in for
    a placeholder."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<style>\n{BASE_STYLE}\n{style}\n</style></head><body>\n{body}</body></html>\n"
    )


def data_script(value: Any) -> str:
    """`value` as a page's data: a JSON script element with id `data`, its text made safe by
    `escape.json_for_script`; the page's script reads it back with
    `JSON.parse(document.getElementById("data").textContent)`."""
    return f'<script type="application/json" id="data">{json_for_script(value)}</script>'


def render(book: ReportBook, summary: RunSummary, transcripts: dict[str, ConversationalEvalTestCase]) -> str:
    """The page for `book` and `summary`, as text, with the `transcripts` (by id) of its rows."""
    cases = sorted((case for metric in book.cases for case in book.listed(metric)), key=lambda case: case.place)
    rows = [
        case.model_dump()
        | {
            "score_shown": None if case.score is None else format_score(case.score, case.threshold),
            "cost_shown": None if case.cost_usd is None else format_cost_usd(case.cost_usd),
        }
        for case in cases
    ]
    shown_ids = {row["id"] for row in rows}
    conversations = {
        key: [
            [_cap(turn.input), None if turn.actual_output is None else _cap(turn.actual_output)] for turn in case.turns
        ]
        for key, case in transcripts.items()
        if key in shown_ids
    }
    data = data_script({"rows": rows, "transcripts": conversations, "escaped": PAGE_ESCAPED})
    cards = "\n".join(_card(name, stats, book) for name, stats in summary.metrics.items())
    issues = top_issues_of(cases, transcripts)
    body = (
        f'<h1>flowrate report</h1>\n<section class="cards" id="totals">{cards}</section>\n{issues}\n{TABLE}\n{data}\n'
    )
    return page("flowrate report", STYLE, body + SCRIPT)


def top_issues_of(cases: list, transcripts: dict[str, ConversationalEvalTestCase]) -> str:
    """The "Top issues" section for the rows listed (`flowrate.reports.top_issues`), each row's
    number of turns taken from its transcript when there is one."""
    from flowrate.analysis.top_issues import IssueRow, top_issues
    from flowrate.reports.top_issues import top_issues_section

    rows = [
        IssueRow(
            case.id,
            case.metric,
            case.score,
            case.key_issues,
            len(transcripts[case.id].turns) if case.id in transcripts else 0,
        )
        for case in cases
    ]
    return top_issues_section(top_issues(rows))


def write_top_issues_page(path: str | Path, modes: list, top: int) -> None:
    """A page with the "Top issues" section alone, its first `top` modes (`flowrate top-issues --html`)."""
    from flowrate.reports.top_issues import top_issues_section

    Path(path).write_text(page("flowrate top issues", STYLE, top_issues_section(modes, top)), encoding="utf-8")


def write_html(
    path: str | Path, book: ReportBook, summary: RunSummary, transcripts: dict[str, ConversationalEvalTestCase]
) -> None:
    """Write the page for `book`, `summary` and the `transcripts` to `path`."""
    Path(path).write_text(render(book, summary, transcripts), encoding="utf-8")


def format_cost_usd(cost_usd: float) -> str:
    """A row's cost for the page: dollars to six decimals (0.006542500000000001 is 0.006543),
    trailing zeros dropped; a cost too small for that shows as <0.000001, never as 0."""
    if 0 < cost_usd < 0.0000005:
        return "<0.000001"
    return f"{cost_usd:.6f}".rstrip("0").removesuffix(".")


def _cap(text: str) -> str:
    if len(text) <= TEXT_LIMIT:
        return text
    half = TEXT_LIMIT // 2
    return text[:half] + " […] " + text[-half:]


def _card(name: str, stats, book: ReportBook) -> str:
    values = sorted(stats.distribution, key=lambda value: stats.value_scores[value], reverse=True)
    peak = max(stats.distribution.values(), default=1)
    bars = []
    for index, value in enumerate(values):
        count = stats.distribution[value]
        height = round(80 * count / peak)
        x = 10 + index * 48
        bars.append(
            f'<rect x="{x}" y="{100 - height}" width="36" height="{height}" class="bar"><title>{html.escape(page_text(value))}: {count}</title></rect>'
            f'<text x="{x + 18}" y="114" text-anchor="middle">{html.escape(page_text(value))}</text>'
            f'<text x="{x + 18}" y="{96 - height}" text-anchor="middle">{count}</text>'
        )
    width = 20 + 48 * max(len(values), 1)
    rate = "n/a" if stats.pass_rate is None else f"{stats.pass_rate:.1%}"
    mean = "n/a" if stats.mean_score is None else f"{stats.mean_score:.3f}"
    note = (
        f" <em>(the {len(book.listed(name))} worst rows listed of {book.counts.get(name, 0)})</em>"
        if book.truncated(name)
        else ""
    )
    return (
        f'<div class="card"><h3>{html.escape(page_text(name))}</h3>'
        f"<p>{stats.rows} rows, pass rate {rate}, mean score {mean}, {stats.errors} errors{note}</p>"
        f'<svg class="chart" data-metric="{html.escape(name)}" width="{width}" height="120" role="img">{"".join(bars)}</svg></div>'
    )


STYLE = """.cards{display:flex;flex-wrap:wrap;gap:1em}
.bar{fill:#4a7bd0}
table{border-collapse:collapse;width:100%;margin-top:.5em}th,td{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left}
th{cursor:pointer;background:#f4f4f4}tr.fail td{background:#fff3f3}tr.error td{background:#fff8e0}tr.row{cursor:pointer}
#transcript{margin-top:1em;border-top:2px solid #888;padding-top:.5em}.turn{margin:.4em 0;padding:.3em;border-left:3px solid #ccc}
.user{color:#333}.assistant{color:#174}.issue{color:#b00;font-weight:600}"""
TABLE = """<section id="conversations"><h2>Rows</h2>
<label>filter <input id="filter" placeholder="id, metric, reason…"></label>
<label>show <select id="status"><option value="">all</option><option value="fail">failures</option><option value="error">errors</option><option value="pass">passes</option></select></label>
<span id="count"></span>
<table id="results"><thead><tr><th data-key="id">conversation</th><th data-key="metric">metric</th><th data-key="value">verdict / rating</th><th data-key="score">score</th><th data-key="status">result</th><th data-key="cost_usd">cost (USD)</th><th data-key="error">error</th></tr></thead><tbody></tbody></table>
</section>
<section id="transcript"><p>Click a row to see its conversation.</p></section>"""
SCRIPT = """<script>
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const rows = data.rows.map(r => Object.assign(r, {status: r.error ? "error" : (r.success ? "pass" : "fail")}));
const body = document.querySelector("#results tbody");
let sortKey = null, ascending = true;
const escaped = new RegExp(data.escaped, "g");
function text(value) { return value === null || value === undefined ? "" : String(value); }
function hex(code, width) { return code.toString(16).padStart(width, "0"); }
function shown(value) { return text(value).replace(escaped, c => { const code = c.charCodeAt(0);
  return code < 0x100 ? "\\\\x" + hex(code, 2) : "\\\\u" + hex(code, 4); }); }
function cell(tr, value) { const td = document.createElement("td"); td.textContent = shown(value); tr.appendChild(td); }
function draw() {
  const needle = document.getElementById("filter").value.toLowerCase();
  const status = document.getElementById("status").value;
  let listed = rows.filter(r => (!status || r.status === status) &&
    (!needle || [r.id, r.metric, r.reason, r.error, (r.key_issues || []).join(" ")].join(" ").toLowerCase().includes(needle)));
  if (sortKey) listed.sort((a, b) => { const x = a[sortKey], y = b[sortKey];
    const order = (typeof x === "number" && typeof y === "number") ? x - y : text(x).localeCompare(text(y));
    return ascending ? order : -order; });
  body.replaceChildren();
  for (const r of listed) {
    const tr = document.createElement("tr");
    tr.className = "row " + r.status;
    tr.dataset.id = r.id;
    [r.id, r.metric, r.value, r.score_shown, r.status, r.cost_shown, r.error].forEach(v => cell(tr, v));
    tr.addEventListener("click", () => show(r.id));
    body.appendChild(tr);
  }
  document.getElementById("count").textContent = listed.length + " of " + rows.length + " rows";
}
function turnsOf(issue) {
  const m = /^\\s*turns?\\s+((?:\\d+\\s*(?:,|and|to|-|&)?\\s*)+)/i.exec(issue);
  return m ? (m[1].match(/\\d+/g) || []).map(Number) : [];
}
function show(id) {
  const box = document.getElementById("transcript");
  box.replaceChildren();
  const title = document.createElement("h2"); title.textContent = shown(id); box.appendChild(title);
  const turns = Object.hasOwn(data.transcripts, id) ? data.transcripts[id] : null;
  const issues = {};
  for (const r of rows.filter(r => r.id === id)) for (const issue of r.key_issues || [])
    for (const n of turnsOf(issue)) (issues[n] = issues[n] || []).push(r.metric + ": " + issue);
  if (!turns) { const p = document.createElement("p"); p.textContent = "No transcript: give the input files with --inputs."; box.appendChild(p); return; }
  turns.forEach((turn, index) => {
    const n = index + 1, div = document.createElement("div");
    div.className = "turn"; div.dataset.turn = n;
    const head = document.createElement("strong"); head.textContent = "turn " + n; div.appendChild(head);
    const user = document.createElement("div"); user.className = "user"; user.textContent = "user: " + shown(turn[0]); div.appendChild(user);
    const bot = document.createElement("div"); bot.className = "assistant";
    bot.textContent = "assistant: " + (turn[1] === null ? "(no reply)" : shown(turn[1])); div.appendChild(bot);
    for (const issue of issues[n] || []) { const p = document.createElement("div"); p.className = "issue"; p.textContent = shown(issue); div.appendChild(p); }
    box.appendChild(div);
  });
}
document.querySelectorAll("#results th").forEach(th => th.addEventListener("click", () => {
  ascending = sortKey === th.dataset.key ? !ascending : true; sortKey = th.dataset.key; draw(); }));
document.querySelectorAll("#top-issues a.example").forEach(a => a.addEventListener("click", event => {
  event.preventDefault(); show(a.dataset.id); document.getElementById("transcript").scrollIntoView(); }));
document.getElementById("filter").addEventListener("input", draw);
document.getElementById("status").addEventListener("change", draw);
draw();
</script>
"""
