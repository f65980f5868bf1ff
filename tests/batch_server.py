"""A local fake of OpenAI's Files and Batches endpoints, on 127.0.0.1, for batch mode.

It answers each request line as the scripted judge would (its rules and default step), serves
the online chat endpoint through that judge too (for the lines that fall back online), and
can let a batch take time (`polls_to_finish` retrieves before it is done), fail the lines
whose prompt holds `fail_marker` (they go to the error file with `fail_error`), expire part-way
(only the first `expire_after` lines are answered) and be cancelled as OpenAI's are: a batch
still running goes to `cancelling`, and is `cancelled` at the next retrieve; a finished one
cannot be cancelled (400). Its lines carry log-probabilities as the judge's profile gives them
online (`behave_as("ollama")`: none). Counters tell tests what was created.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from typing import Any

from aiohttp import web

from tests.judge_server import JudgeServer, _completion, _text, looked_at, with_logprobs

FAIL_ERROR = {"code": "server_error", "message": "scripted failure"}


def _error(status: int, message: str) -> web.Response:
    """An error as OpenAI's API answers one."""
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    return web.json_response(body, status=status)


class BatchServer:
    def __init__(self, judge: JudgeServer | None = None):
        self.judge = judge or JudgeServer()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.polls: dict[str, int] = {}
        self.polls_to_finish = 1
        self.fail_marker: str | None = None
        self.fail_error: dict[str, Any] = dict(FAIL_ERROR)
        self.expire_after: int | None = None
        self.uploads = 0
        self.created = 0
        self.cancelled = 0
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self) -> None:
        self.files.clear()
        self.batches.clear()
        self.polls.clear()
        self.polls_to_finish, self.fail_marker, self.expire_after = 1, None, None
        self.fail_error = dict(FAIL_ERROR)
        self.uploads = self.created = self.cancelled = 0

    # -- endpoints -------------------------------------------------------------
    async def _create_file(self, request: web.Request) -> web.Response:
        data, purpose = b"", "batch"
        async for part in await request.multipart():
            if part.name == "file":
                data = await part.read()
            elif part.name == "purpose":
                purpose = (await part.read()).decode()
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = data
        self.uploads += 1
        return web.json_response(
            {
                "id": file_id,
                "object": "file",
                "bytes": len(data),
                "created_at": int(time.time()),
                "filename": "input.jsonl",
                "purpose": purpose,
                "status": "processed",
            }
        )

    async def _create_batch(self, request: web.Request) -> web.Response:
        body = await request.json()
        batch_id = f"batch-{next(self._ids)}"
        lines = [line for line in self.files[body["input_file_id"]].splitlines() if line.strip()]
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "input_file_id": body["input_file_id"],
            "completion_window": body.get("completion_window", "24h"),
            "status": "in_progress",
            "created_at": int(time.time()),
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
        }
        self.polls[batch_id] = 0
        self.created += 1
        return web.json_response(self.batches[batch_id])

    async def _get_batch(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _error(404, f"No batch found with id '{request.match_info['id']}'.")
        self.polls[batch["id"]] += 1
        if batch["status"] == "cancelling":
            batch["status"] = "cancelled"
        elif batch["status"] == "in_progress" and self.polls[batch["id"]] >= self.polls_to_finish:
            self._finish(batch)
        return web.json_response(batch)

    async def _cancel(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _error(404, f"No batch found with id '{request.match_info['id']}'.")
        if batch["status"] not in ("validating", "in_progress", "finalizing"):
            return _error(400, f"Cannot cancel a batch with status '{batch['status']}'.")
        batch["status"] = "cancelling"
        self.cancelled += 1
        return web.json_response(batch)

    async def _content(self, request: web.Request) -> web.Response:
        return web.Response(body=self.files[request.match_info["id"]], content_type="application/octet-stream")

    def _finish(self, batch: dict[str, Any]) -> None:
        lines = [json.loads(line) for line in self.files[batch["input_file_id"]].splitlines() if line.strip()]
        answered = lines if self.expire_after is None else lines[: self.expire_after]
        out, errors = [], []
        for line in answered:
            body = line["body"]
            prompt = "\n".join(_text(message.get("content")) for message in body.get("messages") or [])
            if self.fail_marker and self.fail_marker in prompt:
                errors.append(
                    {
                        "id": "e",
                        "custom_id": line["custom_id"],
                        "response": None,
                        "error": dict(self.fail_error),
                    }
                )
                continue
            step = looked_at(body, self.judge._next_step(prompt))  # a look gets its own reply, as online
            completion = _completion(body, step, prompt)
            if self.judge.profile.logprobs == "yes":  # "ignores": the output carries none, asked or not
                with_logprobs(completion, body, step)
            out.append(
                {
                    "id": "r",
                    "custom_id": line["custom_id"],
                    "response": {"status_code": 200, "request_id": "q", "body": completion},
                    "error": None,
                }
            )
        for name, items in (("output_file_id", out), ("error_file_id", errors)):
            if items:
                file_id = f"file-{next(self._ids)}"
                self.files[file_id] = "".join(json.dumps(item) + "\n" for item in items).encode()
                batch[name] = file_id
        batch["status"] = "completed" if self.expire_after is None else "expired"
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(errors)}

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> BatchServer:
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            app = web.Application(client_max_size=300 * 1024 * 1024)
            app.router.add_post("/v1/files", self._create_file)
            app.router.add_post("/v1/batches", self._create_batch)
            app.router.add_get("/v1/batches/{id}", self._get_batch)
            app.router.add_post("/v1/batches/{id}/cancel", self._cancel)
            app.router.add_get("/v1/files/{id}/content", self._content)
            app.router.add_post("/v1/chat/completions", self.judge._handle)  # the online path, for fallbacks
            runner = web.AppRunner(app, access_log=None)
            self._loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=serve, daemon=True, name="batch-server").start()
        ready.wait(10)
        return self


def main() -> None:
    """Serve from a process of its own (benchmarks): prints the port, runs until killed."""
    server = BatchServer().start()
    print(server.port, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
