"""Every CSV flowrate writes (`labels template`, `top-issues --csv`), read back by python's csv
module as a spreadsheet reads it, with hostile ids: one record a row, one cell a field, no cell
that starts a formula, and every id given back by `csv_uncell`."""

import csv

import orjson
import pytest

from flowrate.results.csv_file import csv_uncell
from tests.analysis.planted_issues import planted_rows

FORMULA = ("=", "+", "-", "@", "\t", "\r")
HOSTILE_IDS = [
    "cr\r=2+5",
    "lf\n=2+5",
    "crlf\r\n=2+5",
    'quote",=2+5',
    "=2+5",
    "+2+5",
    "-2+5",
    "@SUM(2+5)",
    "'=already quoted",
    "\r=2+5",
]


def _hostile_rows():
    rows = planted_rows()
    for row, hostile in zip(rows, HOSTILE_IDS * (len(rows) // len(HOSTILE_IDS) + 1), strict=False):
        row.id = f"{hostile}#{row.id}"
    return rows


def _table(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def _labels_template(run_flowrate, tmp_path):
    result = run_flowrate("labels", "template", "rows.jsonl", "-o", "out.csv")
    assert result.returncode == 0, result.stderr
    table = _table(tmp_path / "out.csv")
    rows = {(row.id, row.metric) for row in _hostile_rows() if row.score is not None}
    assert len(table) == 1 + len(rows)
    assert {(csv_uncell(line[0]), csv_uncell(line[1])) for line in table[1:]} == rows
    return table


def _top_issues(run_flowrate, tmp_path):
    result = run_flowrate("top-issues", "rows.jsonl", "--csv", "out.csv", "--json")
    assert result.returncode == 0, result.stderr
    modes = orjson.loads(result.stdout)["modes"]
    table = _table(tmp_path / "out.csv")
    assert len(table) == 1 + len(modes)
    header = table[0]
    for line, mode in zip(table[1:], modes, strict=True):
        assert len(line) == len(header)
        assert csv_uncell(line[header.index("ids")]) == " ".join(mode["ids"])
        assert csv_uncell(line[header.index("example_1_id")]) == mode["examples"][0]["id"]
    return table


@pytest.mark.parametrize("writer", [_labels_template, _top_issues], ids=["labels-template", "top-issues"])
def test_a_csv_with_hostile_ids_reads_back_one_record_a_row_with_no_formula(run_flowrate, tmp_path, writer):
    rows = _hostile_rows()
    (tmp_path / "rows.jsonl").write_bytes(b"".join(orjson.dumps(row.model_dump(mode="json")) + b"\n" for row in rows))
    table = writer(run_flowrate, tmp_path)
    cells = [cell for line in table for cell in line]
    assert not [cell for cell in cells if cell.startswith(FORMULA)], cells
    assert {len(line) for line in table} == {len(table[0])}
