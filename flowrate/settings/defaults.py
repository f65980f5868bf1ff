"""Option defaults, in one place for the settings model and the command's help text.

A module of its own, with no imports, so that `flowrate --help` shows the defaults without
loading pydantic."""

from __future__ import annotations

DEFAULTS = {
    "model": "gpt-4o",
    "threshold": 0.7,
    "concurrency": 16,
    "max_retries": 5,
    "timeout": 60.0,  # a hosted API; a self-hosted model gets "self_hosted_timeout" (no --timeout given)
    "self_hosted_timeout": 600.0,
    "backoff": 1.0,
    "backoff_max": 60.0,
    "output": "flowrate-results.jsonl",
    "language": "English",
    "samples": 1,
    "metric": ["conversational_flow_rate"],
    "sample_seed": 0,
}
