"""flowrate's own client for OpenAI's Files and Batches endpoints, against a server on 127.0.0.1 in
the test's own event loop: a failed call is tried again (an upload from the file's start), a
refused one is not, and a download cut part-way is written again from its start."""

import asyncio

import pytest
from aiohttp import web

from flowrate.judge.batch_api import BatchApiError, Provider, RequestFile, request_line
from flowrate.judge.retry import RetryPolicy

CONTENT = b"".join(b'{"custom_id": "c%d", "response": null}\n' % n for n in range(2000))  # ~80 KB
NO_WAITS = RetryPolicy(backoff=0, backoff_max=0)  # retry waits are zero in tests


class FlakyFiles:
    """Answers `flaky` with a 503 first, `gone` with a 404, the first upload with a 502, and cuts
    its first download part-way."""

    def __init__(self):
        self.calls: list[str] = []
        self.uploaded = b""

    async def batch(self, request: web.Request) -> web.Response:
        name = request.match_info["id"]
        self.calls.append(name)
        if name == "flaky" and self.calls.count("flaky") == 1:
            return web.json_response({"error": {"message": "try again later"}}, status=503)
        if name == "down":
            return web.json_response({"error": {"message": "overloaded"}}, status=503)
        if name == "gone":
            return web.json_response({"error": {"message": "No batch found with id 'gone'."}}, status=404)
        counts = {"total": 1, "completed": 1, "failed": 0}
        return web.json_response({"id": name, "status": "completed", "request_counts": counts})

    async def content(self, request: web.Request) -> web.StreamResponse:
        self.calls.append("content")
        answer = web.StreamResponse(headers={"Content-Length": str(len(CONTENT))})
        await answer.prepare(request)
        if self.calls.count("content") == 1:
            await answer.write(CONTENT[:30_000])
            request.transport.close()  # the connection is lost part-way
            return answer
        await answer.write(CONTENT)
        await answer.write_eof()
        return answer

    async def upload(self, request: web.Request) -> web.Response:
        self.calls.append("upload")
        async for part in await request.multipart():
            if part.name == "file":
                self.uploaded = await part.read()
        if self.calls.count("upload") == 1:
            return web.json_response({"error": {"message": "upstream timed out"}}, status=502)
        return web.json_response({"id": "file-1", "object": "file", "purpose": "batch"})

    async def create(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"id": "batch-1", "input_file_id": body["input_file_id"], "status": "validating"})


async def serving(files: FlakyFiles) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_get("/v1/batches/{id}", files.batch)
    app.router.add_get("/v1/files/{id}/content", files.content)
    app.router.add_post("/v1/files", files.upload)
    app.router.add_post("/v1/batches", files.create)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"


def test_a_failed_call_is_tried_again_as_the_retry_policy_says_and_a_refused_one_is_not(tmp_path):
    files = FlakyFiles()

    async def scenario() -> None:
        runner, base = await serving(files)
        try:
            provider = Provider("openai", base, "auto", NO_WAITS)
            info = await provider.retrieve("flaky")
            assert info.status == "completed" and info.request_counts.completed == 1
            assert files.calls.count("flaky") == 2
            with pytest.raises(BatchApiError) as refused:
                await provider.retrieve("gone")
            assert files.calls.count("gone") == 1 and int(refused.value.exit_code) == 2
            with pytest.raises(BatchApiError):
                await Provider("openai", base, "auto", RetryPolicy(max_retries=1, backoff=0, backoff_max=0)).retrieve(
                    "down"
                )
            assert files.calls.count("down") == 2  # the first try and --max-retries 1
            assert f"the batch API at {base} refused to retrieve batch gone (404): No batch found" in str(refused.value)
            with (tmp_path / "results").open("w+b") as into:
                await provider.download("file-9", into)
                into.seek(0)
                assert into.read() == CONTENT + b"\n" and files.calls.count("content") == 2
        finally:
            await runner.cleanup()

    asyncio.run(scenario())


def test_a_request_file_is_uploaded_from_disk_as_written_again_when_the_first_try_fails(tmp_path):
    files = FlakyFiles()
    requests = RequestFile(tmp_path)
    messages = [{"role": "user", "content": "x" * 70_000}]  # more than one 64 KB read of the file
    for n in range(3):
        requests.add(request_line(f"flow-{n}", {"model": "gpt-4o", "messages": messages}))

    async def scenario() -> tuple[str, str]:
        runner, base = await serving(files)
        try:
            return await Provider("openai", base, "auto", NO_WAITS).submit(requests)
        finally:
            await runner.cleanup()

    try:
        assert asyncio.run(scenario()) == ("file-1", "batch-1")
        requests.handle.seek(0)
        assert files.uploaded == requests.handle.read() and len(files.uploaded.splitlines()) == 3
        assert files.calls.count("upload") == 2
        assert requests.ids == ["flow-0", "flow-1", "flow-2"]
    finally:
        requests.close()
    assert list(tmp_path.iterdir()) == []  # the request file was never left on disk by name
