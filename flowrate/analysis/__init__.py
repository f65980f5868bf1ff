"""The analysis stage, data only: people's labels, agreement of the judge with them, calibration,
comparing two runs, the DuckDB history (with its migrations) and trends over it."""
