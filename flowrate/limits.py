"""Keeping a run under a provider's limits: adaptive concurrency and rpm/tpm ceilings."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

BURST_SECONDS = 5.0  # a ceiling lets at most this many seconds' worth through at once


class AdaptiveConcurrency:
    """At most `limit` calls in flight: halved on a rate limit, grown by one after a
    window of successes, never above `maximum`. One burst of 429s halves it once:
    only a call that started after the last cut can cut again."""

    def __init__(self, maximum: int):
        self.maximum = maximum
        self.limit = maximum
        self.in_flight = 0
        self._successes = 0
        self._last_cut = 0.0
        self._changed = asyncio.Condition()

    async def acquire(self) -> float:
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
        return time.monotonic()

    async def release(self, started: float, rate_limited: bool) -> None:
        async with self._changed:
            self.in_flight -= 1
            if rate_limited:
                if started >= self._last_cut:
                    self.limit = max(1, self.limit // 2)
                    self._last_cut = time.monotonic()
                    self._successes = 0
            else:
                self._successes += 1
                if self._successes >= self.limit and self.limit < self.maximum:
                    self.limit += 1
                    self._successes = 0
            self._changed.notify_all()


class Ceiling:
    """A token bucket: `per_minute` units a minute, refilled continuously."""

    def __init__(self, per_minute: float, clock=time.monotonic, sleep=asyncio.sleep):
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * BURST_SECONDS)
        self.tokens = self.capacity
        self._clock = clock
        self._sleep = sleep
        self._updated = clock()
        self._turn = asyncio.Lock()  # first come, first served

    async def take(self, amount: float) -> None:
        amount = min(amount, self.capacity)  # one huge call must not wait forever
        async with self._turn:
            while True:
                now = self._clock()
                self.tokens = min(self.capacity, self.tokens + (now - self._updated) * self.rate)
                self._updated = now
                if self.tokens >= amount:
                    self.tokens -= amount
                    return
                await self._sleep((amount - self.tokens) / self.rate)


class CallGate:
    """What every judge attempt passes through: the ceilings, then a concurrency slot."""

    def __init__(self, concurrency: int, rpm: float | None = None, tpm: float | None = None):
        self.concurrency = AdaptiveConcurrency(concurrency)
        self.requests = Ceiling(rpm) if rpm else None
        self.tokens = Ceiling(tpm) if tpm else None

    @asynccontextmanager
    async def attempt(self, estimated_tokens: int) -> AsyncIterator[None]:
        if self.requests:
            await self.requests.take(1)
        if self.tokens:
            await self.tokens.take(estimated_tokens)
        started = await self.concurrency.acquire()
        rate_limited = False
        try:
            yield
        except Exception as error:
            rate_limited = getattr(error, "status_code", None) == 429
            raise
        finally:
            await self.concurrency.release(started, rate_limited)
