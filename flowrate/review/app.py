"""The review app's routes, on Starlette: `ROUTES`, Starlette's own `Route` list (and the static
stylesheet and scripts), and `NAVIGATION`, the bar on every page. Every page is a template of
`templates/`, drawn by `pages.render`; each endpoint reads the app's data from
`request.app.state.review`."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from flowrate.errors import FlowrateError
from flowrate.reports.escape import strip_control
from flowrate.review import pages
from flowrate.review.guard import Guard
from flowrate.review.labelling import judge_data, label_context
from flowrate.review.state import ReviewState

REVIEWER_LIMIT = 80  # characters of a reviewer's name
COMMENT_LIMIT = 4000  # characters of a comment
FIELD_LIMIT = 1000  # characters of an answer's metric, id or value (none is longer in a results file read here)

# (path, title): the navigation bar of every page; "label" goes straight to the queue when there is one
NAVIGATION: list[tuple[str, str]] = [
    ("/", "runs"),
    ("/queues", "label"),
    ("/agreement", "agreement"),
    ("/top-issues", "top issues"),
]


def _state(request: Any) -> ReviewState:
    return request.app.state.review


def _navigation(state: ReviewState) -> list[tuple[str, str]]:
    """`NAVIGATION`, its label link going straight to the queue when there is only one."""
    metrics = state.queues.metrics()
    label = "/label/" + quote(metrics[0], safe="") if len(metrics) == 1 else "/queues"
    return [(label if path == "/queues" else path, title) for path, title in NAVIGATION]


def _page(request: Any, name: str, title: str, status: int = 200, **context: Any) -> Any:
    return pages.render(request, name, title, _navigation(_state(request)), status, **context)


def _message(request: Any, title: str, *lines: str, status: int = 200) -> Any:
    return _page(request, "message.html", title, status, lines=lines)


def _reviewer(state: ReviewState, request: Any) -> str | None:
    if state.reviewer:
        return state.reviewer
    named = request.cookies.get(f"flowrate_reviewer_{state.keys.port}")
    return unquote(named) if named else None


# -- browsing ----------------------------------------------------------------------------------------
def home(request: Any) -> Any:
    """The runs, newest first, with their totals per metric; two runs side by side."""
    state = _state(request)
    return _page(request, "home.html", "flowrate review", runs=state.runs, notes=state.notes)


def run_page(request: Any) -> Any:
    run = _state(request).run(request.path_params["key"])
    if run is None:
        return _message(request, "no such run", "No such run.", status=404)
    return _page(request, "run.html", str(run.path), run=run)


def row_page(request: Any) -> Any:
    """A row: the transcript with key issues at their turns, verdict and reason, the exact
    messages sent to the judge and its raw replies, and this reviewer's own answers."""
    from flowrate.review.runs import pinned_issues

    state, query = _state(request), request.query_params
    found = state.find_row(query.get("id", ""), query.get("metric", ""), query.get("run"))
    if found is None:
        return _message(request, "no such row", "No such row.", status=404)
    run, row = found
    case = state.transcripts.get(row.id)
    by_turn, loose = pinned_issues(row, len(case.turns) if case is not None else 0)
    reviewer = _reviewer(state, request)
    own = state.own_answers(row.metric, reviewer).get(row.id) if reviewer else None
    models = ", ".join(dict.fromkeys(each.model for each in run.rows))
    context: dict[str, Any] = {"run": run, "row": row, "case": case, "by_turn": by_turn, "loose": loose, "own": own}
    context["withheld"] = state.transcripts.withheld.get(row.id)
    return _page(request, "row.html", row.id, models=models, record=state.request_of(row), **context)


def compare_page(request: Any) -> Any:
    """Two runs' rows of the same conversations and metrics, changed verdicts first (the
    largest score change first), then the rest."""
    state = _state(request)
    first, second = state.run(request.query_params.get("a")), state.run(request.query_params.get("b"))
    if first is None or second is None:
        return _message(request, "compare", "Choose two runs.", status=404)
    pairs = []
    for row in first.rows:
        other = second.row(row.id, row.metric)
        if other is not None and first.row(row.id, row.metric) is row:
            same = (pages.verdict_of(row), row.success) == (pages.verdict_of(other), other.success)
            change = -abs((other.score or 0) - (row.score or 0))
            pairs.append(
                {"same": same, "change": change, "id": row.id, "metric": row.metric, "first": row, "second": other}
            )
    pairs.sort(key=lambda pair: (pair["same"], pair["change"], pair["id"], pair["metric"]))
    changed = sum(1 for pair in pairs if not pair["same"])
    return _page(request, "compare.html", "side by side", first=first, second=second, pairs=pairs, changed=changed)


def agreement_page(request: Any) -> Any:
    from flowrate.review.agreement_page import agreement_context

    return _page(request, "agreement.html", "agreement", **agreement_context(_state(request)))


def top_issues_page(request: Any) -> Any:
    from flowrate.review.top_issues_page import top_issues_context

    return _page(request, "top_issues.html", "top issues", **top_issues_context(_state(request)))


# -- labelling ---------------------------------------------------------------------------------------
def _ask_name(request: Any) -> Any:
    data = {"csrf": _state(request).keys.csrf, "base": request.scope.get("root_path", "")}
    return _page(request, "name.html", "who is reviewing?", name_limit=REVIEWER_LIMIT, data=data, script="name.js")


def queues_page(request: Any) -> Any:
    """Each metric's queue: its size and how many of it this reviewer has answered."""
    state = _state(request)
    reviewer = _reviewer(state, request)
    if reviewer is None:
        return _ask_name(request)
    queues = []
    for metric in state.queues.metrics():
        queue = state.queues.queue(metric)
        done = state.own_answers(metric, reviewer)
        queues.append({"metric": metric, "size": len(queue), "answered": sum(1 for row in queue if row.id in done)})
    rule = state.rule
    what = (
        f"{rule.recent} random conversations nobody has labelled, from the last {rule.days} days"
        if rule.recent is not None
        else f"every failing conversation, {rule.passing_share:.0%} of the passing ones (seed {rule.seed}),"
        " every one whose samples disagree, and every one the judge was unsure of (--uncertain-below)"
    )
    return _page(request, "queues.html", "label", reviewer=reviewer, what=what, queues=queues)


def label_page(request: Any) -> Any:
    """One conversation of a metric's queue (`?at=N`, from 1)."""
    state = _state(request)
    reviewer = _reviewer(state, request)
    if reviewer is None:
        return _ask_name(request)
    metric = request.path_params["metric"]
    queue = state.queues.queue(metric) if metric in state.queues.metrics() else []
    if not queue:
        return _message(request, "label", f"The queue of {metric} is empty.", status=404)
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
        "withheld": state.transcripts.withheld.get(row.id),
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
        "base": request.scope.get("root_path", ""),
        "comment_limit": COMMENT_LIMIT,
    }
    return _page(request, "label.html", f"label {metric}", **label_context(item))


async def answer_action(request: Any) -> Any:
    """Store one answer in the history at once; reply with it and, now, the judge."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse

    state = _state(request)
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
    row = state.queues.queued(metric, key)
    if row is None:
        return JSONResponse({"error": f"{key!r} is not in the queue of {metric!r}"}, 404)
    import duckdb

    found = state.find_row(key, metric)
    try:
        review = await run_in_threadpool(state.record, row, reviewer, value, comment, found[0] if found else None)
    except ValueError as error:
        return JSONResponse({"error": str(error)}, 400)
    except (FlowrateError, duckdb.Error, OSError) as error:  # the history held all along, a full disk: nothing stored
        return JSONResponse({"error": f"the history file refused it ({pages.text(error)}); answer again"}, 503)
    case = state.transcripts.get(row.id)
    judge = judge_data(row, len(case.turns) if case is not None else 0)
    return JSONResponse({"value": review.value, "score": review.score, "judge": judge})


async def reviewer_action(request: Any) -> Any:
    """Name this browser's reviewer (a cookie), when `--reviewer` did not."""
    from starlette.responses import JSONResponse

    state = _state(request)
    try:
        name = strip_control(str((await request.json())["name"])).strip()
    except (ValueError, KeyError, TypeError):
        return JSONResponse({"error": "a JSON object with name"}, 400)
    if not name or len(name) > REVIEWER_LIMIT:
        return JSONResponse({"error": f"a name of 1 to {REVIEWER_LIMIT} characters"}, 400)
    if state.reviewer:
        return JSONResponse({"error": f"this server labels as {state.reviewer} (--reviewer)"}, 409)
    response = JSONResponse({"name": name})
    path = request.scope.get("root_path", "") + "/"
    response.headers["set-cookie"] = f"flowrate_reviewer_{state.keys.port}={quote(name)}; Path={path}; SameSite=Strict"
    return response


def _routes() -> list[Any]:
    """`ROUTES`: the app's pages and actions, and its static files under `/static`."""
    from pathlib import Path

    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    return [
        Route("/", home),
        Route("/run/{key}", run_page),
        Route("/row", row_page),
        Route("/compare", compare_page),
        Route("/agreement", agreement_page),
        Route("/top-issues", top_issues_page),
        Route("/queues", queues_page),
        Route("/label/{metric:path}", label_page),
        Route("/api/answer", answer_action, methods=["POST"]),
        Route("/api/reviewer", reviewer_action, methods=["POST"]),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
    ]


def build_app(state: ReviewState) -> Any:
    """The app over `state` (in `app.state.review`): the routes behind the guard (token, Host,
    cross-site requests)."""
    from starlette.applications import Starlette

    def unavailable(request: Any, error: Exception) -> Any:  # the history held by another process, say
        return _message(request, "not now", str(error), "Reload in a moment.", status=503)

    app = Starlette(routes=_routes(), exception_handlers={FlowrateError: unavailable})
    app.state.review = state
    return Guard(app, state.keys)
