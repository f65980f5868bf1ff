"""Ray Data's HTTP stage as an `--engine ray` run sends through it: each call asked of the run's
desk (`ray_desk`) before it is sent, and its answer told to the desk as it comes back.

Imported on the Ray path only, by the stage's actors too: it imports Ray Data's HTTP stage."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ray.llm._internal.batch.stages.http_request_stage import HttpRequestUDF

# an answer for a call the desk said not to send (the run stopped): the stage gives each row an
# answer, and the driver reads no row once stopped
NOT_SENT = {"error": {"message": "not sent: the run was stopped", "code": 499}}


class TellingHttpUDF(HttpRequestUDF):
    """Ray Data's HTTP stage, each row's call asked of the `desk` before it is sent and its answer
    told to the desk before the stage goes on (the rows' `columns` with the answer)."""

    def __init__(self, *args: Any, desk: Any, columns: tuple[str, ...], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.desk = desk
        self.columns = columns

    # Ray types its base's `udf` as a coroutine; the stage iterates it as HttpRequestUDF's is: an async generator
    async def udf(self, batch: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:  # type: ignore[override,misc]
        """The stage's calls one row at a time (as the stage sends a batch's), each told."""
        for row in batch:
            ask = int(row["ask"])
            if not await self.desk.sending.remote(ask):
                yield {self.IDX_IN_BATCH_COLUMN: row[self.IDX_IN_BATCH_COLUMN], "http_response": NOT_SENT}
                continue
            told = False
            try:
                async for output in super().udf([row]):
                    answered = {name: row[name] for name in self.columns}
                    await self.desk.answered.remote(ask, {**answered, "http_response": output["http_response"]})
                    told = True
                    yield output
            finally:
                if not told:
                    self.desk.answered.remote(ask, None)


def tell_desk(processor: Any, desk: Any, columns: tuple[str, ...]) -> None:
    """Make `processor`'s HTTP stage ask `desk` before each call and tell it each answer, with the
    row's `columns`."""
    stage = processor.get_stage_by_name("HttpRequestStage")
    stage.fn = TellingHttpUDF
    stage.fn_constructor_kwargs.update(desk=desk, columns=columns)
