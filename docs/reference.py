"""Writes the CLI reference page from the Typer app's own `--help` texts, as sqlite-utils
generates its CLI reference, so the page never drifts from the code:

    python docs/reference.py            # rewrite docs/cli.md
    python docs/reference.py --check    # exit 1 if docs/cli.md is stale

`tests/cli/test_documentation.py` runs the check.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

PAGE = Path(__file__).resolve().parent / "cli.md"
WIDTH = 100  # the help is wrapped at a fixed width, so the page is the same on every terminal

HEADER = """# CLI reference

Every command's `--help`, generated from the code by `python docs/reference.py`; a test fails
when this page is stale. The narrative for each command is in [Commands](commands.md).
"""


def walk(command, context) -> Iterator[tuple[str, object, object]]:
    """Each command below `command` (itself first), with the click context that names it."""
    yield context.command_path, command, context
    for name in getattr(command, "list_commands", lambda _: [])(context):
        sub = command.get_command(context, name)
        if sub is None or sub.hidden:
            continue
        child = sub.context_class(sub, info_name=name, parent=context, terminal_width=WIDTH, max_content_width=WIDTH)
        yield from walk(sub, child)


def render() -> str:
    """The whole page: a section per command, in the order `flowrate --help` lists them."""
    import typer.main

    from flowrate.cli import app

    root = typer.main.get_command(app)
    context = root.context_class(root, info_name="flowrate", terminal_width=WIDTH, max_content_width=WIDTH)
    sections = [HEADER]
    for path, command, command_context in walk(root, context):
        help_text = command.get_help(command_context).rstrip()
        sections.append(f"## `{path}`\n\n```text\n{help_text}\n```\n")
    return "\n".join(sections)


def main(argv: list[str]) -> int:
    """Rewrite the page, or with `--check` say whether it is current (exit 1 when stale)."""
    page = render()
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text() != page:
            print(f"{PAGE} is stale: run python docs/reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
