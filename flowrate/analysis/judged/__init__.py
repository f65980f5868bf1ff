"""The analyses that call the judge: `bench` (`flowrate judge-bench`: candidate judges judge
human-rated sets), `alignment` (`flowrate align`: the held-out conversations judged with the old
rubric and the new) and `mode_naming` (`top-issues --name-with-judge`). Everything else in
`flowrate.analysis` is data only and imports no `flowrate.judge` (`tests/test_layout.py` holds
that); these modules put its records together with judge runs.

A run is made through an `Evaluate` the caller gives (`flowrate.api.evaluate_files`, or the
CLI's with progress on stderr), so this stage never reaches the later one that owns it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from flowrate.results.summary import RunSummary
from flowrate.settings.options import EvalSettings


class Evaluated(Protocol):
    """What an `Evaluate` returns: a finished run's summary (`flowrate.api.Evaluation` is one)."""

    @property
    def summary(self) -> RunSummary: ...


Evaluate = Callable[[list[str], EvalSettings], Evaluated]
"""One evaluation: the conversation files and the run's settings in, the finished run out."""
