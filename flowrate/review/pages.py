"""The HTML of `flowrate review`. Every text from a conversation, a results file or the judge is
escaped here (`text`, `attribute`; data for the page's script through
`escape.json_for_script`) and only ever set as text by the script, so `</script>`,
`<!--<script>` or a `javascript:` "link" in a conversation shows as those characters. The
style and script are inline, allowed by a per-page nonce in the Content-Security-Policy;
nothing is loaded from the network."""

from __future__ import annotations

import html
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from flowrate.reports.escape import json_for_script, strip_control

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1d2125; background: #fafbfc; }
nav { background: #24292f; padding: .5em 1em; } nav a { color: #fff; margin-right: 1.2em; }
main { padding: 1em 1.5em; max-width: 70em; }
table { border-collapse: collapse; margin: .5em 0 1em; } th, td { border: 1px solid #d0d7de; padding: .25em .6em; text-align: left; vertical-align: top; }
.turn { border-left: 3px solid #d0d7de; margin: .6em 0; padding: .2em .8em; background: #fff; }
.user { white-space: pre-wrap; } .assistant { white-space: pre-wrap; color: #0a3069; }
.issue { color: #9a3412; background: #fff4e5; margin-top: .3em; padding: .1em .4em; white-space: pre-wrap; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; padding: .6em; white-space: pre-wrap; word-break: break-word; }
.answer { display: inline-block; margin: .2em .6em .2em 0; } .answer button { font-size: 1em; padding: .3em .9em; }
.answer button[aria-pressed="true"] { background: #0969da; color: #fff; border-color: #0969da; }
kbd { border: 1px solid #8c959f; border-radius: 3px; padding: 0 .3em; font-size: .85em; }
.changed { background: #fff8c5; } .failed { color: #cf222e; } .passed { color: #1a7f37; }
#saved { color: #1a7f37; min-height: 1.4em; } textarea { width: 100%; max-width: 40em; }
"""


# the secret path the request came under (`Guard`): every link within the app starts with it
BASE: ContextVar[str] = ContextVar("BASE", default="")


def text(value: Any) -> str:
    """Untrusted text as HTML text: escaped, control characters (but line breaks) gone."""
    return html.escape(strip_control(str(value), keep_newlines=True), quote=True)


def attribute(value: Any) -> str:
    """Untrusted text inside a double-quoted attribute."""
    return html.escape(strip_control(str(value)), quote=True)


def link(path: str, label: str, **query: Any) -> str:
    """A link within the app: `path` with `query` encoded, `label` escaped."""
    target = BASE.get() + path + (f"?{urlencode(query)}" if query else "")
    return f'<a href="{attribute(target)}">{text(label)}</a>'


def page(title: str, body: str, nonce: str, nav: list[tuple[str, str]], script: str = "", data: Any = None) -> str:
    """A whole page: `nav` (path, label) links, `body` (already escaped HTML), an optional inline
    `script` run with `data` (read by `JSON.parse` from `#state`)."""
    links = "".join(link(path, label) for path, label in nav)
    state = f'<script type="application/json" id="state">{json_for_script(data)}</script>' if data is not None else ""
    code = f'<script nonce="{nonce}">{script}</script>' if script else ""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{text(title)}</title>'
        f'<style nonce="{nonce}">{STYLE}</style></head><body><nav aria-label="pages">{links}</nav>'
        f"<main><h1>{text(title)}</h1>{body}</main>{state}{code}</body></html>"
    )


def policy(nonce: str) -> str:
    """The Content-Security-Policy of a page with that nonce: its own inline style and script,
    requests to this server only, nothing else from anywhere."""
    return (
        f"default-src 'none'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; connect-src 'self';"
        " form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )


def when(value: datetime | float | None) -> str:
    if value is None:
        return ""
    if isinstance(value, float | int):
        value = datetime.fromtimestamp(value, UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def verdict_of(row: Any) -> str:
    """A row's verdict as shown: the level, or rating/scale, or its error's type."""
    if row.error is not None:
        return f"error: {row.error.type}"
    if row.verdict is not None:
        return row.verdict
    if row.rating is not None:
        return f"{row.rating}/{row.scale}"
    return "" if row.score is None else f"{row.score:.3f}"


def run_line(run: Any) -> str:
    """A run named in full: its results file's whole path, its models, when it started, its
    rows and its id in the history."""
    models = ", ".join(dict.fromkeys(row.model for row in run.rows))
    in_history = f" · history run {text(run.history_id)}" if run.history_id else ""
    return (
        f'<p id="run">run {link("/run/" + run.key, str(run.path.resolve()))} · judged by {text(models)} ·'
        f" started {text(when(run.started_at))} · {len(run.rows)} rows{in_history}</p>"
    )


def score_cell(row: Any) -> str:
    if row.score is None:
        return "<td></td>"
    kind = "passed" if row.success else "failed"
    return f'<td class="{kind}">{row.score:.3f} {"pass" if row.success else "fail"}</td>'


def transcript(case: Any, by_turn: dict[int, list[str]]) -> str:
    """The conversation's turns, each key issue under the turn it names."""
    if case is None:
        return "<p>No transcript: the conversations file the rows name is not here; give it with --inputs.</p>"
    parts = ['<section id="transcript" aria-label="transcript">']
    for number, turn in enumerate(case.turns, start=1):
        reply = "(no reply)" if turn.actual_output is None else turn.actual_output
        issues = "".join(f'<div class="issue">{text(issue)}</div>' for issue in by_turn.get(number, []))
        parts.append(
            f'<div class="turn" data-turn="{number}"><strong>turn {number}</strong>'
            f'<div class="user">user: {text(turn.input)}</div>'
            f'<div class="assistant">assistant: {text(reply)}</div>{issues}</div>'
        )
    return "".join(parts) + "</section>"


def judge_section(row: Any, loose: list[str]) -> str:
    """The judge's verdict, reason and the key issues that name no turn."""
    issues = "".join(f"<li>{text(issue)}</li>" for issue in loose)
    return (
        f'<section id="judge" aria-label="the judge"><h2>The judge</h2>'
        f'<p>verdict: <strong id="verdict">{text(verdict_of(row))}</strong>'
        f"{f' (score {row.score:.3f}, threshold {row.threshold})' if row.score is not None else ''}</p>"
        f'<p id="reason">{text(row.reason or "")}</p>'
        + (f"<p>key issues that name no turn:</p><ul>{issues}</ul>" if issues else "")
        + "</section>"
    )


def request_section(record: Any, row: Any) -> str:
    """The exact messages sent to the judge and its raw replies, from the response cache."""
    if record is None:
        raw = f"<p>The row's unusable reply:</p><pre>{text(row.raw_reply)}</pre>" if row.raw_reply else ""
        return (
            '<section id="request"><h2>Sent to the judge</h2><p>The response cache holds no record of this'
            " row's request (a cut or unusable reply is never cached; --no-cache keeps nothing; give the"
            f" cache with --cache-dir).</p>{raw}</section>"
        )
    if record.messages is None:
        messages = "<p>Cached before flowrate kept requests: only the reply is known.</p>"
    else:
        messages = "".join(
            f'<h3>message {n}: {text(m.get("role", ""))}</h3><pre class="message">{text(m.get("content", ""))}</pre>'
            for n, m in enumerate(record.messages, start=1)
        )
    replies = "".join(
        f'<h3>reply {n}</h3><pre class="reply">{text(reply)}</pre>' for n, reply in enumerate(record.texts, start=1)
    )
    return (
        f'<section id="request"><h2>Sent to the judge</h2><p>model {text(record.model)}, rubric'
        f" {text(record.rubric_version)}, cached {text(when(record.created_at))}</p>{messages}"
        f'<h2>The judge\'s raw reply</h2><div id="replies">{replies}</div></section>'
    )


def totals_table(totals: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{text(metric)}</td><td>{t.rows}</td><td>{t.passed}</td><td>{t.failed}</td><td>{t.errors}</td>"
        f"<td>{'' if t.mean_score is None else f'{t.mean_score:.3f}'}</td></tr>"
        for metric, t in totals.items()
    )
    return (
        "<table><thead><tr><th>metric</th><th>rows</th><th>passed</th><th>failed</th><th>errors</th>"
        f"<th>mean score</th></tr></thead><tbody>{rows}</tbody></table>"
    )
