"""The `flowrate` command: a skin over the library. Each command gathers its options and makes
one library call; `entry.main` maps every error to its exit status in one place.

Nothing heavy is imported here: `flowrate --help` and `flowrate validate` never load the
judging engine, LiteLLM or rich.
"""

# each registers its commands on `app`, in the order `flowrate --help` lists them
from flowrate.cli import evaluate  # noqa: F401, I001
from flowrate.cli import tools  # noqa: F401
from flowrate.cli import analysis  # noqa: F401
from flowrate.cli import align  # noqa: F401
from flowrate.cli import batch  # noqa: F401
from flowrate.cli import bench  # noqa: F401
from flowrate.cli import top_issues  # noqa: F401
from flowrate.cli import review  # noqa: F401
from flowrate.cli.app import app
from flowrate.cli.entry import main

__all__ = ["app", "main"]
