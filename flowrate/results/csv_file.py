"""The one CSV writer of flowrate (`labels template`, `top-issues --csv`): RFC 4180 quoting, so a
cell holding a comma, a quote, a line feed or a bare carriage return stays one cell of one
record, and no text cell a spreadsheet would read as a formula (`csv_cell`, undone on import
by `csv_uncell`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import IO

# OWASP's rule for CSV injection: a cell that starts with one of these is read as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# ... and a cell that starts with the quote is quoted too, so that `csv_uncell` gives it back exactly.
_QUOTED_START = (*_FORMULA_START, "'")


def write_csv(handle: IO[str], header: list[str], rows: Iterable[list[object]]) -> int:
    """Write `header` and `rows` to `handle` (a text file opened with `newline=""`) as CSV in
    the excel dialect (records end CRLF; a cell with a comma, quote, CR or LF is quoted); every
    text cell through `csv_cell`, numbers as they are. Returns the number of rows written."""
    writer = csv.writer(handle, dialect="excel", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(header)
    count = 0
    for row in rows:
        writer.writerow([csv_cell(cell) if isinstance(cell, str) else cell for cell in row])
        count += 1
    return count


def csv_text(header: list[str], rows: Iterable[list[object]]) -> str:
    """`write_csv` into a string, to be written as it is (`newline=""`, or bytes)."""
    buffer = io.StringIO(newline="")
    write_csv(buffer, header, rows)
    return buffer.getvalue()


def csv_cell(text: str) -> str:
    """A cell a spreadsheet shows as text: one that would start a formula (OWASP: `=`, `+`, `-`,
    `@`, tab, carriage return), or that starts with `'`, gets a leading `'`."""
    text = str(text)
    return "'" + text if text.startswith(_QUOTED_START) else text


def csv_uncell(text: str) -> str:
    """Undo `csv_cell` on import: a leading `'` before a formula character or another `'` is removed."""
    return text[1:] if text.startswith("'") and text[1:].startswith(_QUOTED_START) else text
