"""The review app's routes, on Starlette. `ROUTES` lists the app's own pages and actions and
`NAVIGATION` the bar on every page; a page of another module (an agreement page, say) is
either a line in each, or given to `add_page` before `build_app` makes the app. Every page is
drawn on the server, each untrusted text escaped by `pages`; `row_address` links to a row."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlencode

from flowrate.errors import FlowrateError
from flowrate.review import pages
from flowrate.review.guard import Guard
from flowrate.review.labelling import SCRIPT, judge_data, label_body
from flowrate.review.pages import link, text
from flowrate.review.state import ReviewState

REVIEWER_LIMIT = 80  # characters of a reviewer's name
COMMENT_LIMIT = 4000  # characters of a comment
FIELD_LIMIT = 1000  # characters of an answer's metric, id or value (none is longer in a results file read here)


@dataclass(frozen=True)
class Page:
    """A page of another module: its `path`, its `title` in the navigation, and `render(state,
    query)`, which returns the page's body as HTML, every untrusted text through `pages.text`."""

    path: str
    title: str
    render: Callable[[ReviewState, dict[str, str]], str]


EXTRA_PAGES: list[Page] = []


def add_page(path: str, title: str, render: Callable[[ReviewState, dict[str, str]], str]) -> None:
    """Add a page at `path`, titled `title` in the navigation, drawn by `render(state, query)`
    (escaped HTML; `row_address` links to a row). Call before `build_app`."""
    EXTRA_PAGES.append(Page(path, title, render))


def row_address(conversation_id: str, metric: str, run: str | None = None) -> str:
    """The address of a row's page: in run `run` (a `Run.key`), else the newest run holding it."""
    return "/row?" + urlencode({"id": conversation_id, "metric": metric} | ({"run": run} if run else {}))


# (path, title): the navigation bar of every page, before the added pages
NAVIGATION: list[tuple[str, str]] = [
    ("/", "runs"),
    ("/queues", "label"),
    ("/agreement", "agreement"),
    ("/top-issues", "top issues"),
]


def _navigation(state: ReviewState) -> list[tuple[str, str]]:
    """`NAVIGATION`, its label link going straight to the queue when there is only one."""
    metrics = state.metrics()
    label = "/label/" + quote(metrics[0], safe="") if len(metrics) == 1 else "/queues"
    own = [(label if path == "/queues" else path, title) for path, title in NAVIGATION]
    return own + [(page.path, page.title) for page in EXTRA_PAGES]


def _reviewer(state: ReviewState, request: Any) -> str | None:
    if state.reviewer:
        return state.reviewer
    named = request.cookies.get(f"flowrate_reviewer_{state.keys.port}")
    return unquote(named) if named else None


def _page(state: ReviewState, title: str, body: str, script: str = "", data: Any = None, status: int = 200) -> Any:
    from starlette.responses import HTMLResponse

    nonce = secrets.token_urlsafe(16)
    document = pages.page(title, body, nonce, _navigation(state), script, data)
    return HTMLResponse(document, status, headers={"content-security-policy": pages.policy(nonce)})


# -- browsing ----------------------------------------------------------------------------------------
def home(state: ReviewState, request: Any) -> Any:
    """The runs, newest first, with their totals per metric; two runs side by side."""
    parts = [f"<p>{text(note)}</p>" for note in state.notes]
    if not state.runs:
        parts.append("<p>No runs: give results files, or a history with runs.</p>")
    for run in state.runs:
        parts.append(
            f'<section class="run"><h2>{link("/run/" + run.key, str(run.path))}</h2>'
            f"<p>started {text(pages.when(run.started_at))} · {len(run.rows)} rows</p>{pages.totals_table(run.totals)}</section>"
        )
    if len(state.runs) > 1:

        def options(chosen: int) -> str:
            return "".join(
                f'<option value="{run.key}"{" selected" if n == chosen else ""}>{text(run.path)}</option>'
                for n, run in enumerate(state.runs)
            )

        parts.append(
            f'<h2>Side by side</h2><form action="{pages.BASE.get()}/compare" method="get">'
            f'<label>first <select name="a">{options(0)}</select></label> '
            f'<label>second <select name="b">{options(1)}</select></label> <button>compare</button></form>'
        )
    return _page(state, "flowrate review", "".join(parts))


def run_page(state: ReviewState, request: Any) -> Any:
    run = state.run(request.path_params["key"])
    if run is None:
        return _page(state, "no such run", "<p>No such run.</p>", status=404)
    rows = "".join(
        f"<tr><td>{link('/row', row.id, run=run.key, id=row.id, metric=row.metric)}</td><td>{text(row.metric)}</td>"
        f"<td>{text(pages.verdict_of(row))}</td>{pages.score_cell(row)}</tr>"
        for row in run.rows
    )
    body = (
        f"{pages.totals_table(run.totals)}<table id='rows'><thead><tr><th>id</th><th>metric</th><th>verdict</th>"
        f"<th>score</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return _page(state, str(run.path), body)


def row_page(state: ReviewState, request: Any) -> Any:
    """A row: the transcript with key issues at their turns, verdict and reason, the exact
    messages sent to the judge and its raw replies, and this reviewer's own answers."""
    from flowrate.review.runs import pinned_issues

    query = request.query_params
    found = state.find_row(query.get("id", ""), query.get("metric", ""), query.get("run"))
    if found is None:
        return _page(state, "no such row", "<p>No such row.</p>", status=404)
    run, row = found
    case = state.transcripts.get(row.id)
    by_turn, loose = pinned_issues(row, len(case.turns) if case is not None else 0)
    reviewer = _reviewer(state, request)
    own = state.own_answers(row.metric, reviewer).get(row.id) if reviewer else None
    mine = f"<p id='yours'>your answer: {text(own.value)}</p>" if own else ""
    body = (
        f"<p>{text(row.metric)} · judged"
        f" {text(pages.when(row.evaluated_at))} by {text(row.model)}{' (from the cache)' if row.cached else ''}"
        f"{' · the middle of the conversation was left out to fit' if row.truncated else ''}</p>"
        f"{pages.run_line(run)}"
        f"{pages.judge_section(row, loose)}{mine}{pages.transcript(case, by_turn)}"
        f"{pages.request_section(state.request_of(row), row)}"
    )
    return _page(state, row.id, body)


def compare_page(state: ReviewState, request: Any) -> Any:
    """Two runs' rows of the same conversations and metrics, changed verdicts first (the
    largest score change first), then the rest."""
    first, second = state.run(request.query_params.get("a")), state.run(request.query_params.get("b"))
    if first is None or second is None:
        return _page(state, "compare", "<p>Choose two runs.</p>", status=404)
    pairs = []
    for row in first.rows:
        other = second.row(row.id, row.metric)
        if other is not None and first.row(row.id, row.metric) is row:
            changed = (pages.verdict_of(row), row.success) != (pages.verdict_of(other), other.success)
            pairs.append((not changed, -abs((other.score or 0) - (row.score or 0)), row.id, row.metric, row, other))
    pairs.sort(key=lambda pair: pair[:4])
    lines = "".join(
        f"<tr class='{'same' if same else 'changed'}'><td>{text(key)}</td><td>{text(metric)}</td>"
        f"<td>{link('/row', pages.verdict_of(a), run=first.key, id=key, metric=metric)}</td>{pages.score_cell(a)}"
        f"<td>{link('/row', pages.verdict_of(b), run=second.key, id=key, metric=metric)}</td>{pages.score_cell(b)}</tr>"
        for same, _, key, metric, a, b in pairs
    )
    changed = sum(1 for pair in pairs if not pair[0])
    body = (
        f"<p>{text(first.path)} against {text(second.path)}: {len(pairs)} rows in both, {changed} changed.</p>"
        "<table id='pairs'><thead><tr><th>id</th><th>metric</th><th>first</th><th>score</th><th>second</th>"
        f"<th>score</th></tr></thead><tbody>{lines}</tbody></table>"
    )
    return _page(state, "side by side", body)


def agreement_page(state: ReviewState, request: Any) -> Any:
    from flowrate.review.agreement_page import agreement_body

    return _page(state, "agreement", agreement_body(state))


def top_issues_page(state: ReviewState, request: Any) -> Any:
    from flowrate.review.top_issues_page import top_issues_body

    return _page(state, "top issues", top_issues_body(state))


# -- labelling ---------------------------------------------------------------------------------------
NAME_FORM = """<form id="name-form"><label for="name">Your name, as your answers will be stored</label><br>
<input id="name" name="name" maxlength="80" required> <button>start</button></form><p id="saved" role="status"></p>"""
NAME_SCRIPT = """
const state = JSON.parse(document.getElementById("state").textContent);
document.getElementById("name-form").addEventListener("submit", async event => {
  event.preventDefault();
  const response = await fetch(state.base + "/api/reviewer", {method: "POST", credentials: "same-origin",
    headers: {"content-type": "application/json", "x-flowrate-csrf": state.csrf},
    body: JSON.stringify({name: document.getElementById("name").value})});
  if (response.ok) location.reload(); else document.getElementById("saved").textContent = (await response.json()).error;
});
"""


def _ask_name(state: ReviewState) -> Any:
    return _page(
        state, "who is reviewing?", NAME_FORM, NAME_SCRIPT, {"csrf": state.keys.csrf, "base": pages.BASE.get()}
    )


def queues_page(state: ReviewState, request: Any) -> Any:
    """Each metric's queue: its size and how many of it this reviewer has answered."""
    reviewer = _reviewer(state, request)
    if reviewer is None:
        return _ask_name(state)
    lines = []
    for metric in state.metrics():
        queue = state.queue(metric)
        done = state.own_answers(metric, reviewer)
        answered = sum(1 for row in queue if row.id in done)
        lines.append(
            f"<tr><td>{link('/label/' + quote(metric, safe=''), metric)}</td><td>{len(queue)}</td><td>{answered}</td></tr>"
        )
    rule = state.rule
    what = (
        f"{rule.recent} random conversations nobody has labelled, from the last {rule.days} days"
        if rule.recent is not None
        else f"every failing conversation, {rule.passing_share:.0%} of the passing ones (seed {rule.seed}),"
        " and every one whose samples disagree"
    )
    body = (
        f"<p>Reviewer <strong id='reviewer'>{text(reviewer)}</strong>. Each queue holds {text(what)}.</p>"
        "<table id='queues'><thead><tr><th>metric</th><th>conversations</th><th>answered by you</th></tr></thead>"
        f"<tbody>{''.join(lines)}</tbody></table>"
    )
    return _page(state, "label", body)


def label_page(state: ReviewState, request: Any) -> Any:
    """One conversation of a metric's queue (`?at=N`, from 1)."""
    reviewer = _reviewer(state, request)
    if reviewer is None:
        return _ask_name(state)
    metric = request.path_params["metric"]
    queue = state.queue(metric) if metric in state.metrics() else []
    if not queue:
        return _page(state, "label", f"<p>The queue of {text(metric)} is empty.</p>", status=404)
    try:
        at = min(max(int(request.query_params.get("at", "1")), 1), len(queue))
    except ValueError:
        at = 1
    row = queue[at - 1]
    done = state.own_answers(metric, reviewer)

    def address(position: int | None) -> str | None:
        return f"/label/{quote(metric, safe='')}?at={position}" if position is not None else None

    later = [n for n in range(at + 1, len(queue) + 1) if queue[n - 1].id not in done]
    found = state.find_row(row.id, metric)
    own = done.get(row.id)
    item = {
        "row": row,
        "case": state.transcripts.get(row.id),
        "answers": state.answers(row),
        "current": own.value if own else None,
        "comment": own.comment if own else None,
        "show_judge": state.show_judge,
        "reviewer": reviewer,
        "position": at,
        "size": len(queue),
        "previous": address(at - 1 if at > 1 else None),
        "next": address(at + 1 if at < len(queue) else None),
        "skip": address(later[0] if later else None),
        "run": found[0].key if found else "",
        "csrf": state.keys.csrf,
        "base": pages.BASE.get(),
        "comment_limit": COMMENT_LIMIT,
    }
    body, data = label_body(item)
    return _page(state, f"label {metric}", body, SCRIPT, data)


async def answer_action(state: ReviewState, request: Any) -> Any:
    """Store one answer in the history at once; reply with it and, now, the judge."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse

    reviewer = _reviewer(state, request)
    try:
        given = await request.json()
        metric, key, value = str(given["metric"]), str(given["id"]), str(given["value"])
        comment = str(given.get("comment") or "").strip()
    except (ValueError, KeyError, TypeError):
        return JSONResponse({"error": "a JSON object with metric, id and value"}, 400)
    if max(len(metric), len(key), len(value)) > FIELD_LIMIT:
        return JSONResponse({"error": f"metric, id and value of at most {FIELD_LIMIT} characters"}, 400)
    if len(comment) > COMMENT_LIMIT:
        return JSONResponse({"error": f"a comment of at most {COMMENT_LIMIT} characters"}, 400)
    if reviewer is None:
        return JSONResponse({"error": "name the reviewer first"}, 400)
    row = state.queued(metric, key)
    if row is None:
        return JSONResponse({"error": f"{key!r} is not in the queue of {metric!r}"}, 404)
    found = state.find_row(key, metric)
    try:
        review = await run_in_threadpool(state.record, row, reviewer, value, comment, found[0] if found else None)
    except ValueError as error:
        return JSONResponse({"error": str(error)}, 400)
    except Exception as error:  # the history held by another process all along, a full disk: nothing stored
        return JSONResponse({"error": f"not stored, answer again: {pages.strip_control(str(error))}"}, 503)
    case = state.transcripts.get(row.id)
    judge = judge_data(row, len(case.turns) if case is not None else 0)
    return JSONResponse({"value": review.value, "score": review.score, "judge": judge})


async def reviewer_action(state: ReviewState, request: Any) -> Any:
    """Name this browser's reviewer (a cookie), when `--reviewer` did not."""
    from starlette.responses import JSONResponse

    try:
        name = pages.strip_control(str((await request.json())["name"])).strip()
    except (ValueError, KeyError, TypeError):
        return JSONResponse({"error": "a JSON object with name"}, 400)
    if not name or len(name) > REVIEWER_LIMIT:
        return JSONResponse({"error": f"a name of 1 to {REVIEWER_LIMIT} characters"}, 400)
    if state.reviewer:
        return JSONResponse({"error": f"this server labels as {state.reviewer} (--reviewer)"}, 409)
    response = JSONResponse({"name": name})
    response.headers["set-cookie"] = f"flowrate_reviewer_{state.keys.port}={quote(name)}; Path=/; SameSite=Strict"
    return response


# (path, handler(state, request), methods): the app's own pages and actions
ROUTES: list[tuple[str, Callable, list[str]]] = [
    ("/", home, ["GET"]),
    ("/run/{key}", run_page, ["GET"]),
    ("/row", row_page, ["GET"]),
    ("/compare", compare_page, ["GET"]),
    ("/agreement", agreement_page, ["GET"]),
    ("/top-issues", top_issues_page, ["GET"]),
    ("/queues", queues_page, ["GET"]),
    ("/label/{metric:path}", label_page, ["GET"]),
    ("/api/answer", answer_action, ["POST"]),
    ("/api/reviewer", reviewer_action, ["POST"]),
]


def build_app(state: ReviewState) -> Any:
    """The app over `state`: `ROUTES` and the added pages, behind the guard (token, Host,
    cross-site requests)."""
    import inspect

    from starlette.applications import Starlette
    from starlette.routing import Route

    def bound(handler: Callable) -> Callable:
        if inspect.iscoroutinefunction(handler):

            async def endpoint(request: Any) -> Any:
                pages.BASE.set(request.scope.get("root_path", ""))
                return await handler(state, request)

            return endpoint

        def page_endpoint(request: Any) -> Any:
            pages.BASE.set(request.scope.get("root_path", ""))
            return handler(state, request)

        return page_endpoint

    def extra(page: Page) -> Callable:
        return lambda request: _page(state, page.title, page.render(state, dict(request.query_params)))

    def unavailable(request: Any, error: Exception) -> Any:  # the history held by another process, say
        return _page(state, "not now", f"<p>{text(error)}</p><p>Reload in a moment.</p>", status=503)

    routes = [Route(path, bound(handler), methods=methods) for path, handler, methods in ROUTES]
    routes += [Route(page.path, extra(page), methods=["GET"]) for page in EXTRA_PAGES]
    return Guard(Starlette(routes=routes, exception_handlers={FlowrateError: unavailable}), state.keys)
