"""What every request to `flowrate review` must pass, before any page sees it (an ASGI layer):

- the Host header must name this server (127.0.0.1, localhost or [::1] at its port, or the
  `--host` given), which stops DNS rebinding: a page of another site whose name was pointed at
  127.0.0.1 sends its own name;
- the random token: `?token=` in the address once (as Jupyter's), then a cookie (HttpOnly,
  SameSite=Strict) the browser keeps for this server; the address is then shown without it;
- a request that changes anything (POST) must come from this server's own pages: the browser's
  `Sec-Fetch-Site` must say same-origin, an `Origin` must be this server's, and the body must
  carry the page's CSRF token in the `X-Flowrate-CSRF` header as JSON, which no cross-site form
  can send.

Every answer also gets a Content-Security-Policy that lets only the page's own inline style
and script (by nonce) run and loads nothing from anywhere.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
CSRF_HEADER = "x-flowrate-csrf"


@dataclass
class Secrets:
    """The server's token (in its address) and the CSRF token its pages carry; `hosts` are the
    names the Host header may give (each with and without the port)."""

    port: int
    extra_hosts: tuple[str, ...] = ()
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    @property
    def cookie_name(self) -> str:
        return f"flowrate_review_{self.port}"

    def hosts(self) -> set[str]:
        names = [*LOOPBACK_NAMES, *self.extra_hosts]
        return {name.lower() for name in names} | {f"{name}:{self.port}".lower() for name in names}


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}


async def _refuse(send: Callable, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """The ASGI layer around the app; see the module."""

    def __init__(self, app: ASGIApp, keys: Secrets):
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if headers.get("host", "").lower() not in self.keys.hosts():
            await _refuse(send, 403, "flowrate review: this Host is not this server (DNS rebinding is refused)")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.pop("token", None)
        if given is not None and hmac.compare_digest(given.encode(), self.keys.token.encode()):
            await self._set_cookie_and_redirect(scope, query, send)
            return
        if not self._has_token(headers):
            await _refuse(send, 403, "flowrate review: a token is needed; open the address flowrate review printed")
            return
        if scope["method"] not in ("GET", "HEAD") and not self._same_site(headers):
            await _refuse(send, 403, "flowrate review: a cross-site request is refused")
            return
        await self.app(scope, receive, _with_policy(send))

    def _has_token(self, headers: dict[str, str]) -> bool:
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:
            return False
        morsel = cookie.get(self.keys.cookie_name)
        return morsel is not None and hmac.compare_digest(morsel.value.encode(), self.keys.token.encode())

    def _same_site(self, headers: dict[str, str]) -> bool:
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return False
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in {f"http://{host}" for host in self.keys.hosts()}:
            return False
        csrf = headers.get(CSRF_HEADER, "")
        typed = headers.get("content-type", "").split(";")[0].strip().lower()
        return hmac.compare_digest(csrf.encode(), self.keys.csrf.encode()) and typed == "application/json"

    async def _set_cookie_and_redirect(self, scope: Scope, query: dict[str, str], send: Callable) -> None:
        cookie = f"{self.keys.cookie_name}={self.keys.token}; Path=/; HttpOnly; SameSite=Strict"
        target = quote(scope.get("path", "/"), safe="/") + (f"?{urlencode(query)}" if query else "")
        headers = [(b"location", target.encode()), (b"set-cookie", cookie.encode()), (b"cache-control", b"no-store")]
        await _refuse(send, 303, "see " + target, headers)


def _with_policy(send: Callable) -> Callable:
    """`send` that adds the security headers to the response's start."""

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            headers += [
                (b"x-content-type-options", b"nosniff"),
                (b"referrer-policy", b"no-referrer"),
                (b"x-frame-options", b"DENY"),
                (b"cache-control", b"no-store"),
            ]
            if not any(name.lower() == b"content-security-policy" for name, _ in headers):
                headers.append((b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"))
            message = {**message, "headers": headers}
        await send(message)

    return sending
