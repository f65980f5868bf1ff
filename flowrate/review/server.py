"""Starting the review app: the runs loaded, the results files imported into the history, the
socket bound (127.0.0.1 unless `--host` with `--allow-remote`), the address printed with its
token, then uvicorn serving until Ctrl-C."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowrate.errors import ConfigError
from flowrate.review.guard import Secrets
from flowrate.review.queue import QueueRule
from flowrate.review.state import ReviewState

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass
class ReviewOptions:
    """`flowrate review`'s options (see the README)."""

    results: list[Path]
    history: Path
    reviewer: str | None = None
    port: int = 0  # 0: a free port
    host: str = "127.0.0.1"
    allow_remote: bool = False
    show_judge: bool = False
    inputs: list[str] = field(default_factory=list)
    cache_dir: str | None = None
    rule: QueueRule = field(default_factory=QueueRule)


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse a host other than loopback unless `--allow-remote` says so."""
    if host not in LOOPBACK_HOSTS and not allow_remote:
        raise ConfigError(
            f"--host {host}: not a loopback address; anyone who can reach it and learns the token can read"
            " the conversations and label them: add --allow-remote to serve it anyway"
        )


def prepare(options: ReviewOptions) -> tuple[ReviewState, list[str]]:
    """The app's state: the results files imported into the history (each row once), the runs
    of the files and of the history, their transcripts and the response cache; and what to say
    about it (rows imported, runs left out)."""
    from flowrate.analysis.history import connect_waiting, import_results
    from flowrate.review.runs import load_runs, load_transcripts, open_cache

    told = []
    connection = connect_waiting(options.history)
    try:
        for path in options.results:
            added = import_results(connection, path)
            told.append(f"{path}: {added} new row(s) added to the history {options.history}")
        history_runs = connection.execute("SELECT run_id, source, started_at FROM runs").fetchall()
    finally:
        connection.close()
    runs, notes = load_runs(options.results, history_runs)
    wanted = {path.resolve() for path in options.results}
    queued = [run for run in runs if run.path.resolve() in wanted] or runs
    queue_rows = sorted((row for run in queued for row in run.rows), key=lambda row: row.evaluated_at)
    state = ReviewState(
        runs=runs,
        queue_rows=queue_rows,
        transcripts=load_transcripts(runs, options.inputs),
        history_path=options.history,
        keys=Secrets(port=0),
        rule=options.rule,
        show_judge=options.show_judge,
        reviewer=options.reviewer,
        cache=open_cache(options.cache_dir),
        notes=notes,
    )
    return state, told + notes


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ConfigError(f"--host {host} --port {port}: cannot listen there: {error.strerror}") from None
    sock.listen(64)
    sock.setblocking(False)
    return sock


def address(host: str, port: int, token: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def serve(options: ReviewOptions, say: Callable[[str], None]) -> None:
    """Run the app until interrupted, saying its address (with the token) through `say`."""
    check_host(options.host, options.allow_remote)
    state, told = prepare(options)
    sock = bind(options.host, options.port)
    port = sock.getsockname()[1]
    extra = (
        () if options.host in LOOPBACK_HOSTS else (options.host if ":" not in options.host else f"[{options.host}]",)
    )
    state.keys = Secrets(port=port, extra_hosts=extra)
    server = make_server(state, sock)
    for line in told:
        say(f"flowrate review: {line}")
    if extra:
        say(
            f"flowrate review: warning: serving on {options.host}, not only this machine: anyone who can reach it"
            " and has the token can read every conversation and label them"
        )
    say(f"flowrate review: answers are stored in {options.history}; Ctrl-C stops the server")
    say(f"flowrate review: open {address(options.host, port, state.keys.token)}")
    server.run(sockets=[sock])


def make_server(state: ReviewState, sock: socket.socket) -> Any:
    """A uvicorn server for the app on `state` (quiet: no access log of addresses with tokens)."""
    import uvicorn

    from flowrate.review.app import build_app

    config = uvicorn.Config(build_app(state), log_level="warning", access_log=False, lifespan="off")
    return uvicorn.Server(config)
