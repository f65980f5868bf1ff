"""The pages of `flowrate review`: Jinja2 templates (`templates/`, autoescape on) and their
static stylesheet and scripts (`static/`). Every text from a conversation, a results file or
the judge goes through `escape.page_text` (control and bidi characters shown escaped, line
breaks kept) and autoescaping; data for a page's script through `escape.json_for_script`, and the script only
ever sets it as text, so `</script>`, `<!--<script>` or a `javascript:` "link" in a
conversation shows as those characters. The stylesheet and script are allowed by a per-page
nonce in the Content-Security-Policy; nothing is loaded from the network."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import Any
from urllib.parse import quote, urlencode

from flowrate.reports.escape import json_for_script, page_text


def text(value: Any) -> str:
    """Untrusted text for what a page's script shows (the templates' own output goes through
    `escape.page_text` already, as the environment's finalize): control,
    bidi and line-separator characters shown escaped (`\\x1b`, `\\u202e`), line breaks kept."""
    return page_text(str(value))


def when(value: datetime | float | None) -> str:
    """A time as the pages show it, in UTC; "" for none."""
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


def policy(nonce: str) -> str:
    """The Content-Security-Policy of a page with that nonce: its own stylesheet and script,
    requests to this server only, nothing else from anywhere."""
    return (
        f"default-src 'none'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; connect-src 'self';"
        " form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )


@cache
def templates() -> Any:
    """The app's `Jinja2Templates` on the one page setup (`reports.templating.environment`:
    autoescape on, every printed string through `escape.page_text`), with the filters `when`,
    `verdict`, `json_for_script` and `segment` (one path segment, encoded)."""
    from markupsafe import Markup
    from starlette.templating import Jinja2Templates

    from flowrate.reports.templating import environment

    env = environment("flowrate.review")
    env.filters.update(
        when=when,
        verdict=verdict_of,
        json_for_script=lambda value: Markup(json_for_script(value)),
        segment=lambda value: quote(str(value), safe=""),
    )
    return Jinja2Templates(env=env)


def addresses_under(base: str) -> Callable[..., str]:
    """`href(path, **query)`: an address within the app, under its secret path `base`."""

    def href(path: str, **query: Any) -> str:
        return base + path + (f"?{urlencode(query)}" if query else "")

    return href


def render(
    request: Any, name: str, title: str, navigation: list[tuple[str, str]], status: int = 200, **context: Any
) -> Any:
    """Template `name` as the answer to `request`, titled `title`, with the bar `navigation`
    ((path, label) pairs) and `context`; `data` and `script` (a file of `static/`) when the page
    runs one. The page's nonce is in its Content-Security-Policy."""
    nonce = secrets.token_urlsafe(16)
    base = request.scope.get("root_path", "")
    context = {"data": None, "script": None, **context}
    context |= {"title": title, "nonce": nonce, "base": base, "href": addresses_under(base), "navigation": navigation}
    headers = {"content-security-policy": policy(nonce)}
    return templates().TemplateResponse(request, name, context, status_code=status, headers=headers)
