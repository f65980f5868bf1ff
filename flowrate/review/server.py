"""Starting the review app: the runs loaded, the results files imported into the history, the
socket bound (loopback unless `--host` with `--allow-remote`), the address printed with its
secret path and token, then uvicorn serving until Ctrl-C."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowrate.errors import ConfigError
from flowrate.review.guard import Secrets, is_loopback
from flowrate.review.queue import QueueRule
from flowrate.review.state import ReviewState

WILDCARD_HOSTS = ("0.0.0.0", "::")


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
    allowed_hosts: list[str] = field(default_factory=list)  # --allowed-host: Host names accepted
    rubric: str | None = None
    #: finds the transcripts of rows that were redacted by their redacted ids and redacts them as the judge
    #: saw them (those it cannot redact as the run did are withheld); None: shown as read
    redactor: Any = None
    keep_originals: bool = False  #: --keep-originals: the redacted rows' transcripts shown as read

    def __post_init__(self) -> None:
        """Refuse a port out of range, an empty reviewer's name and a results file that is not one;
        the reviewer's name is kept without the spaces around it."""
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port {self.port}: not a port (0 to 65535)")
        if self.reviewer is not None and not self.reviewer.strip():
            raise ConfigError("--reviewer: an empty name")
        self.reviewer = self.reviewer.strip() if self.reviewer else None
        missing = [path for path in self.results if not path.is_file()]
        if missing:
            raise ConfigError(f"{missing[0]}: no such results file")


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse a host other than loopback (127.0.0.0/8, ::1, localhost) unless `--allow-remote` says so."""
    if not is_loopback(host) and not allow_remote:
        raise ConfigError(
            f"--host {host}: not a loopback address; anyone who can reach it and learns the token can read"
            " the conversations and label them: add --allow-remote to serve it anyway"
        )


def prepare(options: ReviewOptions) -> tuple[ReviewState, list[str]]:
    """The app's state: the results files imported into the history (each row once), the runs
    of the files and of the history, their transcripts and the response cache; and what to say
    about it (rows imported, runs left out)."""
    from flowrate.analysis.history import connect_waiting, import_results
    from flowrate.judge.cache import existing_cache
    from flowrate.review.queue import unknown_scales
    from flowrate.review.runs import load_runs, load_transcripts
    from flowrate.rubric.model import load_rubric

    if options.rubric is not None:
        load_rubric(options.rubric)  # a bad rubric file is an error naming it, before anything is written
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
    notes += [
        f"{metric}: no queue, its levels are on a rubric of your own: give it with --rubric FILE"
        for metric in unknown_scales(queue_rows, options.rubric)
    ]
    transcripts = load_transcripts(runs, options.inputs, options.redactor, options.keep_originals)
    notes += [note for note in [transcripts.note()] if note is not None]
    state = ReviewState(
        runs=runs,
        queue_rows=queue_rows,
        transcripts=transcripts,
        history_path=options.history,
        keys=Secrets(port=0),
        rule=options.rule,
        show_judge=options.show_judge,
        reviewer=options.reviewer,
        cache=existing_cache(options.cache_dir),
        notes=notes,
        rubric=options.rubric,
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


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def address(host: str, port: int, keys: Secrets) -> str:
    """The address to open: `host`, the secret path and the token."""
    return f"http://{_shown(host)}:{port}{keys.prefix}/?token={keys.token}"


def accepted_hosts(options: ReviewOptions) -> list[str]:
    """The Host names accepted besides the loopback ones: the `--host` itself (unless a
    wildcard), and `--allowed-host`, by default (with `--allow-remote` and no loopback `--host`)
    this machine's own names and addresses."""
    names = [] if options.host in WILDCARD_HOSTS else [options.host]
    if options.allowed_hosts:
        names += options.allowed_hosts
    elif options.allow_remote and not is_loopback(options.host):
        names += machine_names()
    return [_shown(name) for name in dict.fromkeys(name.lower() for name in names)]


def machine_names() -> list[str]:
    """This machine's host name, its full name and the addresses they resolve to."""
    names = [socket.gethostname(), socket.getfqdn()]
    for name in list(names):
        try:
            names += socket.gethostbyname_ex(name)[2]
        except OSError:
            continue
    return [name for name in names if name and not is_loopback(name)]


def serve(options: ReviewOptions, say: Callable[[str], None]) -> None:
    """Run the app until interrupted, saying its address (with the token) through `say`."""
    check_host(options.host, options.allow_remote)
    state, told = prepare(options)
    sock = bind(options.host, options.port)
    port = sock.getsockname()[1]
    extra = accepted_hosts(options)
    state.keys = Secrets(port=port, extra_hosts=tuple(extra))
    server = make_server(state, sock)
    for line in told:
        say(f"flowrate review: {line}")
    remote = not is_loopback(options.host)
    if remote:
        say(
            f"flowrate review: warning: serving on {options.host}, not only this machine: anyone who can reach it"
            " and has the token can read every conversation and label them"
        )
    say(f"flowrate review: answers are stored in {options.history}; Ctrl-C stops the server")
    shown_host = options.host if options.host not in WILDCARD_HOSTS else (extra or ["127.0.0.1"])[0]
    accepted = f" (Host names accepted: {', '.join(['127.0.0.1', 'localhost', '[::1]', *extra])})" if remote else ""
    say(f"flowrate review: open {address(shown_host, port, state.keys)}{accepted}")
    server.run(sockets=[sock])


def make_server(state: ReviewState, sock: socket.socket) -> Any:
    """A uvicorn server for the app on `state` (quiet: no access log of addresses with tokens)."""
    import uvicorn

    from flowrate.review.app import build_app

    config = uvicorn.Config(build_app(state), log_level="warning", access_log=False, lifespan="off")
    return uvicorn.Server(config)
