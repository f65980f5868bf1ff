"""The analysis stage: people's labels, agreement of the judge with them, calibration,
comparing two runs, the DuckDB history (with its migrations) and trends over it, all data only;
the analyses that call the judge (judge-bench, align, naming the top issues) are in `judged`."""
