"""The desk of an `--engine ray` run: a Ray actor where the HTTP stage's actors ask before each
call whether the run still sends, and tell each answer the moment it comes back.

Ray Data hands the driver a block's rows only once the whole block is answered (a block per call
in flight: 125 conversations a block for 1,000 at -j 8), so a stop lost the answers of every block
not out: 544 calls answered, 125 rows written, and --resume paid for the other 419 again. With
the desk, a stop sends no new call, gives the calls in flight the grace `flowrate eval` gives
them, and the driver reads from the desk each answer Ray Data has not handed it yet
(`DeskClerk.stop`), to write or cache it as Ray Data's row would have been.

Imported on the Ray path only; the desk's process imports nothing more (`ray_http` is the
stage's side)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import ray

FORGET_BATCH = 64  # answers the driver took from Ray Data, told to the desk at once
GRACE_POLL_S = 0.1
DESK_TIMEOUT_S = 30.0  # a desk that does not answer within this is left: its answers are lost


class Desk:
    """The actor: the calls in flight, by their `ask` (a dataset row's number), and the answered
    rows the driver has not taken yet. Its methods are plain, so Ray runs one call at a time, each
    caller's in the order it made them (an asynchronous actor's order is not kept)."""

    def __init__(self) -> None:
        self.stopped = False
        self.in_flight: set[int] = set()
        self.answers: dict[int, dict[str, Any]] = {}

    def sending(self, ask: int) -> bool:
        """Whether the call of `ask` may be sent (not once the run stopped); then it is in flight."""
        if self.stopped:
            return False
        self.in_flight.add(ask)
        return True

    def answered(self, ask: int, row: dict[str, Any] | None) -> None:
        """The call of `ask` is over: answered with `row` (the dataset row and its `http_response`),
        or, None, with no answer (the stage gave up on it)."""
        self.in_flight.discard(ask)
        if row is not None:
            self.answers[ask] = row

    def forget(self, asks: list[int]) -> None:
        """The answers of `asks`, which the driver took from Ray Data."""
        for ask in asks:
            self.answers.pop(ask, None)

    def stop(self) -> None:
        """No call is sent from now on."""
        self.stopped = True

    def calls_in_flight(self) -> int:
        return len(self.in_flight)

    def left(self) -> list[dict[str, Any]]:
        """The answered rows the driver has not taken."""
        return list(self.answers.values())


def open_desk() -> Any:
    """A desk for one run: no CPU of the cluster's taken (the HTTP stage's actors have them)."""
    return ray.remote(num_cpus=0)(Desk).remote()


class DeskClerk:
    """The driver's side of a `desk`: the answers taken from Ray Data told to it in batches, and
    at a stop, the calls in flight waited for and the answers not taken read back."""

    def __init__(self, desk: Any):
        self.desk = desk
        self.taken: list[int] = []

    def took(self, ask: int) -> None:
        """The driver took the answer of `ask` from Ray Data: the desk need not keep it."""
        self.taken.append(ask)
        if len(self.taken) >= FORGET_BATCH:
            self._tell_taken()

    def _tell_taken(self) -> None:
        if self.taken:
            self.desk.forget.remote(self.taken)
            self.taken = []

    def stop(self, grace_s: float, pause: Callable[[float], bool]) -> list[dict[str, Any]]:
        """Send no call more, wait for those in flight (`grace_s` at most, by `pause`, which says
        False to end the wait: a second Ctrl-C) and return the answered rows not taken."""
        ray.get(self.desk.stop.remote(), timeout=DESK_TIMEOUT_S)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and ray.get(self.desk.calls_in_flight.remote(), timeout=DESK_TIMEOUT_S):
            if not pause(GRACE_POLL_S):
                break
        self._tell_taken()  # the desk runs a caller's calls in order: these before `left`
        left: list[dict[str, Any]] = ray.get(self.desk.left.remote(), timeout=DESK_TIMEOUT_S)
        return sorted(left, key=lambda row: int(row["ask"]))
