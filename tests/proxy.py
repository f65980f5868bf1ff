"""A recording HTTP proxy on 127.0.0.1, for the tests that must see what flowrate sends: in front
of a real server (`upstream`, the real-model stage), or as the forward proxy HTTP_PROXY names
(requests in absolute form, `upstream` empty)."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import Any

PROXY_LIMIT_S = 900  # one exchange at most: a real model's call on 2 busy cores


@dataclass
class Exchange:
    """One request through the proxy and its answer (status None while it is still at the server)."""

    method: str
    path: str
    body: Any
    status: int | None = None
    answer: Any = None

    @property
    def is_completion(self) -> bool:
        return self.method == "POST" and self.path.endswith("/chat/completions")


@dataclass
class CountingProxy:
    """An HTTP proxy on 127.0.0.1 that records every exchange: in front of `upstream` (a server's
    root, http://127.0.0.1:P), or, with `upstream` empty, as a forward proxy."""

    upstream: str = ""
    exchanges: list[Exchange] = field(default_factory=list)
    first_completion: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    @property
    def url(self) -> str:
        """The OpenAI base URL to give flowrate as --api-base."""
        return f"http://127.0.0.1:{self.port}/v1"

    def completions(self) -> list[Exchange]:
        """The chat-completion requests seen so far, in arrival order."""
        return [exchange for exchange in self.exchanges if exchange.is_completion]

    def start(self) -> CountingProxy:
        started = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self._thread.start()
        if not started.wait(30):
            raise RuntimeError("the counting proxy did not start")
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._open())
        started.set()
        self._loop.run_forever()
        self._loop.close()

    async def _open(self) -> None:
        import aiohttp
        from aiohttp import web

        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PROXY_LIMIT_S))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _shutdown(self) -> None:
        await self._runner.cleanup()
        await self._client.close()

    async def _forward(self, request):
        from aiohttp import web

        data = await request.read()
        exchange = Exchange(request.method, request.raw_path, _json_or_text(data))
        self.exchanges.append(exchange)
        if exchange.is_completion:
            self.first_completion.set()
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        target = request.raw_path if request.raw_path.startswith("http") else self.upstream + request.path_qs
        async with self._client.request(request.method, target, data=data or None, headers=headers) as answer:
            payload = await answer.read()
            exchange.status = answer.status
            exchange.answer = _json_or_text(payload)
            return web.Response(
                body=payload,
                status=answer.status,
                content_type=answer.content_type,
            )


def _json_or_text(data: bytes) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")
