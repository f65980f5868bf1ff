"""What the platform readers' tests share: the fixtures (each built from its vendor's published
documentation, named in its `.source.md` sidecar) and reading a file as `flowrate eval` does."""

import shutil
from pathlib import Path

from flowrate.inputs.files import InputSet

FIXTURES = Path(__file__).parent / "fixtures"


def read(path, format=None):
    """Every record of the file at `path`, valid or not, as the eval reads them."""
    inputs = InputSet([str(path)], format=format)
    try:
        return list(inputs.records())
    finally:
        inputs.close()


def conversations(path, format=None):
    """The conversations of the file at `path` by id, failing on any problem."""
    records = read(path, format)
    assert [record.problems for record in records if record.problems] == []
    return {record.case.id: record.case for record in records}


def problems(path, format=None):
    """Every problem line of the file at `path`."""
    return [line for record in read(path, format) for line in record.problems]


def fixture(name, tmp_path):
    """A copy of fixture `name` in `tmp_path`, so problems name it by a short path."""
    return Path(shutil.copy(FIXTURES / name, tmp_path / name))


def exchanges(case):
    """A conversation's turns as (user, reply, tool activity) triples."""
    return [(turn.input, turn.actual_output, turn.tool_activity) for turn in case.turns]
