"""Fixtures of the CI tests: a pytest project of its own (pytester) judged by the scripted judge."""

import os

import pytest

# scikit-learn (and the numpy and scipy parts it loads) imported here, once: pytester's in-process
# runs forget the modules they imported, and numpy's extensions cannot load twice in one process,
# so a later test grouping top issues failed with "cannot load module more than once per process"
# when tests/ci ran first in a process that had not imported them yet
pytest.importorskip("sklearn.cluster")
pytest.importorskip("sklearn.feature_extraction.text")

from tests.helpers import TEST_KEY


@pytest.fixture
def judged_project(pytester, judge, monkeypatch, tmp_path):
    """A pytester project whose flowrate judge is the scripted one: its key, no retry waits, a
    response cache of this test's own, no stray FLOWRATE_* or GITHUB_*."""
    for name in list(os.environ):
        if name.startswith(("FLOWRATE_", "GITHUB_")) and name != "FLOWRATE_TRANSPORT":
            monkeypatch.delenv(name)  # a run of this suite on GitHub Actions writes no summary of theirs
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("FLOWRATE_API_BASE", judge.base_url)
    monkeypatch.setenv("FLOWRATE_BACKOFF", "0")
    monkeypatch.setenv("FLOWRATE_BACKOFF_MAX", "0")
    monkeypatch.setenv("FLOWRATE_MAX_RETRIES", "1")
    monkeypatch.setenv("FLOWRATE_CACHE_DIR", str(tmp_path / "cache"))
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester
