"""Real Langfuse exports of apps built with the common frameworks (langfuse/langfuse's
`worker/src/__tests__/chatml/framework-traces`, MIT; each one's origin and the versions that
wrote it are in its sidecar, `fixtures/langfuse/NAME.trace.json.source.md`). They are public
material brought in from another repository, so the project does not commit them: data files of
that kind live in the steering repository's `shared/`. A test reads one from
`../shared/fixtures/langfuse-framework-traces/` beside the checkout (`FLOWRATE_LANGFUSE_TRACES`
names another folder) and is skipped, naming the file and its sidecar, where it is not there."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SIDECARS = Path(__file__).parent / "fixtures" / "langfuse"
SHARED = ROOT.parent / "shared" / "fixtures" / "langfuse-framework-traces"


def langfuse_export(name: str) -> Path:
    """The real Langfuse export `name` (`NAME.trace.json`), or the test skipped saying where it goes."""
    folder = Path(os.environ.get("FLOWRATE_LANGFUSE_TRACES") or SHARED)
    path = folder / f"{name}.trace.json"
    if not path.is_file():
        sidecar = SIDECARS / f"{name}.trace.json.source.md"
        pytest.skip(f"the real Langfuse export {path.name} is not in {folder} (its origin: {sidecar.name})")
    return path
