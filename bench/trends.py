"""Benchmark 7: `flowrate trends` over a history of a million rows. Target: a few seconds.

The rows are generated inside DuckDB (a year of evaluations, 3 metrics, chat dates a few
days earlier), and a tenth of them labeled; then the trends are computed as the command
computes them, by week on the evaluation date, without and with labels, and by month on
the chat date.

python bench/trends.py [--rows 1000000]
"""

import argparse
import tempfile
import time
from pathlib import Path

from common import ROOT  # noqa: F401  (puts the project on the path)

from flowrate.analysis.history import connect
from flowrate.analysis.trends import trends


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "history.duckdb"
        connection = connect(path)
        started = time.perf_counter()
        connection.execute(
            """INSERT INTO rows SELECT 'c' || (i // 3), ['conversational_flow_rate', 'coherence', 'repetition_check'][i % 3 + 1],
            NULL, 'gpt-4o', 'sha256:x', TIMESTAMP '2026-01-01' + to_seconds(i * 31), DATE '2026-01-01' + CAST(i // 90000 AS INTEGER),
            NULL, NULL, NULL, (i * 7 % 11) / 10.0, 0.7, (i * 7 % 11) >= 7, NULL, 0.001, NULL, 'bench'
            FROM range(?) t(i)""",
            [options.rows],
        )
        connection.execute(
            "INSERT INTO labels SELECT conversation_id, metric, least(1.0, score + 0.1), DATE '2026-06-01', '' FROM rows WHERE hash(conversation_id) % 10 = 0"
        )
        built = time.perf_counter() - started
        labels = connection.execute("SELECT count(*) FROM labels").fetchone()[0]
        connection.close()
        print(
            f"history of {options.rows} rows and {labels} labels built in {built:.1f} s ({path.stat().st_size / 1e6:.0f} MB)"
        )
        for title, kwargs in (
            ("by week, evaluation date", {"by": "week", "date": "evaluated"}),
            ("by week, evaluation date, with labels", {"by": "week", "date": "evaluated", "labels": True}),
            ("by month, chat date", {"by": "month", "date": "chat"}),
        ):
            started = time.perf_counter()
            connection = connect(path)  # as the command does: open the file, then query
            items = trends(connection, **kwargs)
            connection.close()
            print(f"trends {title}: {len(items)} points in {time.perf_counter() - started:.2f} s")


if __name__ == "__main__":
    main()
