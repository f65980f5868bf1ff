"""What every request to `flowrate review` must pass, before any page sees it (an ASGI layer):

- the Host header must name this server (127.0.0.1, localhost or [::1] at its port, the
  loopback `--host` given, or a name `--allowed-host` allows), which stops DNS rebinding: a page
  of another site whose name was pointed at 127.0.0.1 sends its own name;
- every address lies under a random secret path (`/<prefix>/...`, printed with the address);
  anything else is refused as if it had no token;
- the random token: `?token=` in the address once (as Jupyter's), then a cookie (HttpOnly,
  SameSite=Strict) scoped to the secret path, the address then shown without it. Cookies are
  scoped by host and path, never by port: a cookie at `Path=/` would go to every server on
  127.0.0.1. Scoped to the secret path, the browser sends it to no other local server unless
  that server is asked for the secret path itself, which it cannot know;
- a request body is read whole here, at most `BODY_LIMIT_BYTES` (413 beyond);
- a request that changes anything (POST) must come from this server's own pages: the browser's
  `Sec-Fetch-Site` must say same-origin, an `Origin` must be this server's, and the body must
  carry the page's CSRF token in the `X-Flowrate-CSRF` header as JSON, which no cross-site form
  can send.

Every answer also gets a Content-Security-Policy (a page's own: `pages.policy`) that lets only
the page's own stylesheet and script (static files, by nonce) run and loads nothing from anywhere.
"""

from __future__ import annotations

import hmac
import ipaddress
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
BODY_LIMIT_BYTES = 64 * 1024  # an answer with the longest comment allowed is under 30 KB
NO_TOKEN = "flowrate review: a token is needed; open the address flowrate review printed"


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or `localhost`) is this machine only: all of 127.0.0.0/8, ::1."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class Secrets:
    """The server's token (in its address), the secret path every address lies under
    (`prefix`, "/" and URL-safe characters), and the CSRF token its pages carry; `hosts` are the
    names the Host header may give (each with and without the port)."""

    port: int
    extra_hosts: tuple[str, ...] = ()
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    prefix: str = field(default_factory=lambda: "/" + secrets.token_urlsafe(18))

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
        if scope.get("path") == self.keys.prefix:  # the cookie's path ends in "/": go there
            query_string = scope.get("query_string", b"").decode("latin-1")
            target = self.keys.prefix + "/" + (f"?{query_string}" if query_string else "")
            await _refuse(send, 303, "see " + target, [(b"location", target.encode())])
            return
        rest = self._within_prefix(scope.get("path", ""))
        if rest is None:
            await _refuse(send, 403, NO_TOKEN)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.pop("token", None)
        if given is not None and hmac.compare_digest(given.encode(), self.keys.token.encode()):
            await self._set_cookie_and_redirect(rest, query, send)
            return
        if not self._has_token(headers):
            await _refuse(send, 403, NO_TOKEN)
            return
        if scope["method"] not in ("GET", "HEAD") and not self._same_site(headers):
            await _refuse(send, 403, "flowrate review: a cross-site request is refused")
            return
        body = await _bounded_body(headers, receive)
        if body is None:
            await _refuse(send, 413, f"flowrate review: a request body of at most {BODY_LIMIT_BYTES} bytes")
            return
        inner = {**scope, "root_path": scope.get("root_path", "") + self.keys.prefix}
        await self.app(inner, _replay(body, receive), _with_policy(send))

    def _within_prefix(self, path: str) -> str | None:
        """The path after the secret prefix (starting with "/"), or None outside it."""
        prefix = self.keys.prefix
        return path[len(prefix) :] if path.startswith(prefix + "/") else None

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

    async def _set_cookie_and_redirect(self, rest: str, query: dict[str, str], send: Callable) -> None:
        """The cookie, and a redirect to the same address without the token: always under the
        secret prefix, so never to another site (`//evil.example/x` is a path under it)."""
        prefix = self.keys.prefix
        cookie = f"{self.keys.cookie_name}={self.keys.token}; Path={prefix}/; HttpOnly; SameSite=Strict"
        target = prefix + quote(rest, safe="/") + (f"?{urlencode(query)}" if query else "")
        headers = [(b"location", target.encode()), (b"set-cookie", cookie.encode()), (b"cache-control", b"no-store")]
        await _refuse(send, 303, "see " + target, headers)


async def _bounded_body(headers: dict[str, str], receive: Callable) -> bytes | None:
    """The request's whole body, or None when it is longer than `BODY_LIMIT_BYTES` (told by its
    Content-Length, or found while reading)."""
    try:
        if int(headers.get("content-length") or 0) > BODY_LIMIT_BYTES:
            return None
    except ValueError:
        return None
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > BODY_LIMIT_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Callable) -> Callable:
    """A `receive` that gives `body` once, then waits on the real one (for the disconnect)."""
    given = False

    async def receiving() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return receiving


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
