"""Keeping a run under a provider's limits: adaptive concurrency, rpm/tpm ceilings, and the
run's stop switch (Ctrl-C, or a judge that cannot be reached) that ends every wait at once."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from flowrate.judge.errors import RateLimited

BURST_SECONDS = 5.0  # a ceiling lets at most this many seconds' worth through at once
WINDOW_S = 60.0  # providers count their per-minute limits over any 60-second window
UNREACHABLE_AFTER = 10  # consecutive connection failures, with no success between, that stop a run
REFUSED_AFTER = 5  # calls refused as invalid with the same error, in a run where none succeeded, that stop it


class RunStopped(Exception):
    """The run is stopping: this call was not started, or its wait was cut short."""


class RunControl:
    """The run's stop switch, shared by every wait of every call.

    `interrupt()` (Ctrl-C) and the connection breaker both set it; every backoff and rate wait
    then ends at once. After `UNREACHABLE_AFTER` consecutive connection failures with no success
    in between, the judge is taken to be unreachable and `unreachable` names the endpoint. After
    `REFUSED_AFTER` calls refused as invalid with the same error, none succeeding in the run,
    every call would fail so: `refused` holds that error.
    """

    def __init__(self) -> None:
        self.stopping = asyncio.Event()
        self.interrupted = False
        self.unreachable: str | None = None
        self.refused: str | None = None
        self._failures_in_a_row = 0
        self._succeeded = False
        self._refusal: str | None = None
        self._refusals_in_a_row = 0

    def interrupt(self) -> None:
        self.interrupted = True
        self.stopping.set()

    def connection_failed(self, endpoint: str) -> None:
        self._failures_in_a_row += 1
        if self._failures_in_a_row >= UNREACHABLE_AFTER and self.unreachable is None:
            self.unreachable = endpoint
            self.stopping.set()

    def connection_ok(self) -> None:
        """A call succeeded: the judge is reachable, and takes requests."""
        self._failures_in_a_row = 0
        self._succeeded = True

    def call_refused(self, error: str) -> None:
        """A call the judge refused as invalid (`error`: its type and message). The same refusal
        `REFUSED_AFTER` times in a row, in a run where no call succeeded, stops the run."""
        if self._succeeded:
            return
        self._refusals_in_a_row = self._refusals_in_a_row + 1 if error == self._refusal else 1
        self._refusal = error
        if self._refusals_in_a_row >= REFUSED_AFTER and self.refused is None:
            self.refused = error
            self.stopping.set()

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds`, or raise `RunStopped` as soon as the run is stopping."""
        if self.stopping.is_set():
            raise RunStopped()
        if seconds <= 0:
            return
        try:
            await asyncio.wait_for(self.stopping.wait(), seconds)
        except TimeoutError:
            return
        raise RunStopped()


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
    """`per_minute` units a minute, held over every 60-second window, for any size of take.

    Two rules, both must let a take through:
    - a sliding 60-second window: what was taken in the last 60 s plus this take stays within
      `per_minute`. A single take larger than `per_minute` waits until the window is empty,
      then goes alone (`oversized` counts them);
    - a token bucket holding `BURST_SECONDS` worth, so a run starts smoothly instead of
      spending a whole minute's budget in its first second.
    """

    def __init__(self, per_minute: float, clock=time.monotonic, sleep=asyncio.sleep):
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * BURST_SECONDS)
        self.tokens = self.capacity
        self.oversized = 0
        self._clock = clock
        self._sleep = sleep
        self._updated = clock()
        self._taken: deque[tuple[float, float]] = deque()  # (when, amount) inside the window
        self._in_window = 0.0
        self._turn = asyncio.Lock()  # first come, first served

    async def take(self, amount: float) -> None:
        oversized = amount > self.per_minute
        self.oversized += oversized
        async with self._turn:
            while True:
                now = self._clock()
                self.tokens = min(self.capacity, self.tokens + (now - self._updated) * self.rate)
                self._updated = now
                while self._taken and self._taken[0][0] <= now - WINDOW_S:
                    self._in_window -= self._taken.popleft()[1]
                window_wait = self._window_wait(amount, now, oversized)
                burst = min(amount, self.capacity)
                bucket_wait = 0.0 if self.tokens >= burst else (burst - self.tokens) / self.rate
                if window_wait <= 0 and bucket_wait <= 0:
                    self.tokens -= burst
                    self._taken.append((now, amount))
                    self._in_window += amount
                    return
                await self._sleep(max(window_wait, bucket_wait))

    def _window_wait(self, amount: float, now: float, oversized: bool) -> float:
        """Seconds until the window has room for `amount` (for an oversized take: is empty)."""
        room_needed = self._in_window - (0.0 if oversized else self.per_minute - amount)
        if room_needed <= 1e-9:
            return 0.0
        freed = 0.0
        for when, taken in self._taken:
            freed += taken
            if freed >= room_needed - 1e-9:
                return when + WINDOW_S - now
        return WINDOW_S


class CallGate:
    """What every judge attempt passes through: the ceilings, then a concurrency slot.

    With a `control`, every wait here ends at once when the run stops."""

    def __init__(
        self, concurrency: int, rpm: float | None = None, tpm: float | None = None, control: RunControl | None = None
    ):
        self.control = control
        sleep = control.sleep if control is not None else asyncio.sleep
        self.concurrency = AdaptiveConcurrency(concurrency)
        self.requests = Ceiling(rpm, sleep=sleep) if rpm else None
        self.tokens = Ceiling(tpm, sleep=sleep) if tpm else None

    @asynccontextmanager
    async def attempt(self, estimated_tokens: int) -> AsyncIterator[float]:
        """Wait for the ceilings and a slot; yields the seconds spent waiting."""
        started_wait = time.monotonic()
        if self.requests:
            await self.requests.take(1)
        if self.tokens:
            await self.tokens.take(estimated_tokens)
        started = await self.concurrency.acquire()
        if self.control is not None and self.control.stopping.is_set():
            await self.concurrency.release(started, False)
            raise RunStopped()
        rate_limited = False
        try:
            yield started - started_wait
        except Exception as error:
            rate_limited = isinstance(error, RateLimited)
            raise
        finally:
            await self.concurrency.release(started, rate_limited)
