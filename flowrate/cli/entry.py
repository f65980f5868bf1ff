"""The `flowrate` command: a thin layer that parses options and calls the library.

Nothing heavy is imported at module level: `flowrate --help` and `flowrate validate`
never load the judging engine, LiteLLM or rich.
"""

from __future__ import annotations

from typing import Any

from flowrate.cli.app import app, batch_app, cache_app, history_app, labels_app
from flowrate.errors import Terminated, exit_code_for

app.add_typer(batch_app, name="batch")
app.add_typer(labels_app, name="labels")
app.add_typer(history_app, name="history")
app.add_typer(cache_app, name="cache")


def main() -> None:
    """The console entry point. SIGTERM (how CI runners, `timeout` and Kubernetes stop a job)
    stops flowrate as Ctrl-C does, and Ctrl-C is heard even by a process a shell started in the
    background, which inherits SIGINT ignored."""
    import signal

    def terminate(number: int, frame: Any) -> None:
        raise Terminated()

    signal.signal(signal.SIGTERM, terminate)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        app()
    except KeyboardInterrupt as stopped:  # before a command runs (Typer reading its options): no traceback
        raise SystemExit(int(exit_code_for(stopped))) from None
