"""The Ray cluster an `--engine ray` run joins, and how the run lets go of it.

Joining is bounded: Ray retries a GCS that does not answer for good, in C++ code that hears no
signal, so `ray.init` runs in a thread of its own while this one waits (`--ray-join-timeout`;
Ctrl-C and SIGTERM heard meanwhile). A run that names no cluster gets a local one from a keeper: this
module run as a process of its own, in a session of its own (a Ctrl-C at the terminal reaches the
run, not the cluster), which starts the cluster, tells its address, and stops every process of it
once its stdin closes: when the run ends, however it ends (kill -9 included). Without the keeper,
the raylet dies with its parent but its dashboard and runtime-env agents outlive it by a minute,
trying to tell the dead GCS."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from flowrate.errors import ConfigError

START_TIMEOUT_S = 120.0  # a local cluster starts in 5-15 s there
STOP_TIMEOUT_S = 30.0  # the keeper stops its cluster in 1-3 s
READY = "flowrate-ray-keeper: "  # the keeper's line telling the address (Ray may print other lines)


def init(ray: Any, address: str) -> None:
    """`ray.init` as every run calls it: no dashboard, Ray's logs kept off the terminal."""
    quiet = logging.getLogger("ray._private.worker")  # "SIGTERM handler is not set" from a thread: flowrate has its own
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    finally:
        quiet.setLevel(level)


class Connection:
    """This process's hold on Ray for one run; `close` lets go of what `connect` took."""

    def __init__(self, joined: bool = False, keeper: subprocess.Popen | None = None):
        self.joined = joined  # this run called ray.init (else the process had joined already)
        self.keeper = keeper

    def close(self) -> None:
        """Leave the cluster (when this run joined it) and stop the local one (when it started
        one), Ctrl-C and SIGTERM held off meanwhile: a second Ctrl-C does not break Ray's shutdown."""
        held = _hold_signals()
        try:
            if self.joined:
                import gc

                import ray

                # what the run left to the garbage collector (a dataset's iterator, its executor,
                # object refs in cycles) is finalised now, while Ray is up: finalised after the
                # shutdown, it reached Ray's core worker, which ends the process with exit 1 ("The
                # core worker has already been shutdown"), in one CI run of the Ctrl-C tests in three
                gc.collect()
                ray.shutdown()
            if self.keeper is not None:
                stop_keeper(self.keeper)
        finally:
            for number, previous in held.items():
                signal.signal(number, previous)


def before_import(address: str | None) -> None:
    """Token authentication (Ray's default for a cluster `ray.init` starts) for the local cluster
    a run with no `address` starts, set for this process and the keeper alike, before Ray is
    imported: Ray reads `RAY_AUTH_MODE` once, on import."""
    if not (address or os.environ.get("RAY_ADDRESS")):
        os.environ.setdefault("RAY_AUTH_MODE", "token")


def connect(ray: Any, address: str | None, timeout_s: float) -> Connection:
    """Join the Ray cluster at `address` (None: `RAY_ADDRESS`, else a local cluster started for
    the run by a keeper), unless this process has joined one already; `ConfigError` (exit 2) for
    one that cannot be joined within `timeout_s`."""
    if ray.is_initialized():
        return Connection()
    address = address or os.environ.get("RAY_ADDRESS") or None
    keeper = None
    if address is None:
        keeper, address = start_keeper()
    try:
        join(ray, address, "a local cluster" if keeper is not None else address, timeout_s)
    except BaseException:
        if keeper is not None:
            stop_keeper(keeper)
        raise
    return Connection(joined=True, keeper=keeper)


def join(ray: Any, address: str, where: str, timeout_s: float) -> None:
    """`ray.init(address)` in a thread, waited for `timeout_s` here, where signals are heard;
    `where` names the cluster in the error."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            init(ray, address)
        except Exception as error:
            failed.append(error)

    thread = threading.Thread(target=run, name="flowrate-ray-join", daemon=True)
    thread.start()
    with ctrl_c_raises():
        thread.join(timeout_s)
    why = f"no answer within {timeout_s:g} s" if thread.is_alive() else failed[0] if failed else None
    if why is not None:
        raise ConfigError(
            f"--ray-address {where}: cannot join the Ray cluster ({why}); a cluster with token"
            " authentication (Ray's default) also needs RAY_AUTH_MODE=token and its token here"
        )


def start_keeper() -> tuple[subprocess.Popen, str]:
    """Start the keeper and wait for its cluster (`START_TIMEOUT_S`); returns it and the address."""
    keeper = subprocess.Popen(
        [sys.executable, "-m", "flowrate.evaluation.ray_cluster"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        with ctrl_c_raises():
            told = _told(keeper)
    except BaseException:
        stop_keeper(keeper)
        raise
    if "error" in told:
        stop_keeper(keeper)
        raise ConfigError(f"--engine ray: cannot start a local Ray cluster ({told['error']})")
    return keeper, told["address"]


def _told(keeper: subprocess.Popen) -> dict[str, Any]:
    """The keeper's `READY` line, read within `START_TIMEOUT_S` (signals heard meanwhile)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    descriptor, text = keeper.stdout.fileno(), b""  # type: ignore[union-attr]
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([descriptor], [], [], left)
        if not readable:
            break
        chunk = os.read(descriptor, 65536)
        if not chunk:
            return {"error": f"its keeper ended with status {keeper.wait()}"}
        text += chunk
        for line in text.decode(errors="replace").splitlines(keepends=True):
            if line.startswith(READY) and line.endswith("\n"):
                return json.loads(line[len(READY) :])
    return {"error": f"not started within {START_TIMEOUT_S:g} s"}


def stop_keeper(keeper: subprocess.Popen) -> None:
    """Close the keeper's stdin, which stops its cluster, and wait for it (`STOP_TIMEOUT_S`)."""
    try:
        keeper.stdin.close()  # type: ignore[union-attr]
        keeper.wait(STOP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(keeper.pid, signal.SIGKILL)
    finally:
        keeper.stdout.close()  # type: ignore[union-attr]


@contextlib.contextmanager
def ctrl_c_raises() -> Iterator[None]:
    """Ctrl-C raises `KeyboardInterrupt` here, in this (the main) thread: asyncio's own handler
    would only cancel the run once this wait is over."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _hold_signals() -> dict[int, Any]:
    """Ignore Ctrl-C and SIGTERM (from the main thread only); returns the handlers replaced."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {number: signal.signal(number, signal.SIG_IGN) for number in (signal.SIGINT, signal.SIGTERM)}


def keep() -> None:
    """The keeper: start a local cluster, tell its address on stdout, and once stdin closes stop
    it and kill what is left of its session (Ray's agents, a worker that hangs)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import ray

    try:
        try:
            init(ray, "local")
            told = {"address": ray.get_runtime_context().gcs_address}
        except Exception as error:
            told = {"error": f"{type(error).__name__}: {error}"}
        print(READY + json.dumps(told), flush=True)
        sys.stdin.buffer.read()  # until the run ends
        ray.shutdown()
    finally:
        os.killpg(os.getpgrp(), signal.SIGKILL)  # this process leads the group: the last thing it does


if __name__ == "__main__":
    keep()
