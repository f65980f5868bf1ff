"""The online transport of the judging step: each request a `Judging` gives is one call to the
judge, retried on rate limits and server faults, held by the run's gate, its reply (or failure)
taken back, until the conversation's rows are settled."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from flowrate.errors import JudgeAccessError
from flowrate.judge.backend import JudgeBackend
from flowrate.judge.limits import CallGate, RunStopped
from flowrate.judge.retry import CallStats, RetryPolicy, complete_with_retries
from flowrate.metrics.step import CallFailed, JudgeRequest, Judging, Reply


@dataclass(eq=False)
class OnlineCalls:
    """Calls to `backend`, each retried by `retry` (its waits drawn from `rng`) and held by
    `gate` (None: no run-wide limits)."""

    backend: JudgeBackend
    retry: RetryPolicy
    rng: random.Random = field(default_factory=random.Random)
    gate: CallGate | None = None

    async def judge(self, judging: Judging) -> None:
        """Send `judging`'s requests one at a time, in its order, until none is outstanding. A
        rejected key raises `JudgeAccessError`, a stopping run `RunStopped`."""
        while pending := judging.requests():
            request = pending[0]
            judging.take(request, await self.send(request))

    async def send(self, request: JudgeRequest) -> Reply | CallFailed:
        """`request`'s reply, or the failure its retries ended in, with what its tries took."""
        stats = CallStats()
        try:
            completion = await complete_with_retries(
                self.backend, request.messages, n=request.n, policy=self.retry, rng=self.rng, gate=self.gate,
                estimated_tokens=request.estimated_tokens, stats=stats, response_format=request.schema,
                temperature=request.temperature, max_tokens=request.max_tokens,
            )  # fmt: skip
        except (JudgeAccessError, RunStopped):
            raise
        except Exception as error:
            spent = Reply([], cost_usd=0.0, attempts=stats.attempts, latency_s=stats.latency_s, wait_s=stats.wait_s)
            return CallFailed(error, spent)
        clocks = {"attempts": stats.attempts, "latency_s": stats.latency_s, "wait_s": stats.wait_s}
        return Reply.of(completion, completion.cost_usd, completion.response_format, **clocks)
